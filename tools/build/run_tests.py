"""Run the test suite in two passes: every test but the browser's spread over worker processes (pytest-xdist), then
the browser tests in one process of their own. The browser tests cannot share a process with the others: once
pytest-playwright has started, its event loop stays marked as running, and a later asyncio.run in that process
fails (tests/conftest.py). Extra arguments go to both passes; the exit status is the first failing pass's, and a
selection that matches no test in either pass fails as pytest does."""
from __future__ import annotations

import argparse
import subprocess
import sys

NO_TESTS = 5  # pytest's exit status when the selection is empty


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", default="auto", help="worker processes for the first pass (xdist's -n)")
    args, pytest_args = parser.parse_known_args()
    passes = [["-n", args.jobs, "--dist", "worksteal", "-m", "not browser"], ["-m", "browser"]]
    codes = [subprocess.call([sys.executable, "-m", "pytest", *p, *pytest_args]) for p in passes]
    failed = [c for c in codes if c not in (0, NO_TESTS)]
    if failed:
        return failed[0]
    return NO_TESTS if all(c == NO_TESTS for c in codes) else 0


if __name__ == "__main__":
    sys.exit(main())
