"""The test entry point `briefcase dev --test` and `briefcase run <platform> --test` start inside the app."""
import os
import sys
from pathlib import Path

import pytest


def run_tests() -> int:
    here = Path(__file__).parent
    # Packaged apps have read-only bundles: keep pytest's cache out of them.
    args = [str(here), "-vv", "--no-header", "--tb=short", "-p", "no:cacheprovider",
            "--rootdir", str(here.parent)]
    return pytest.main(args + sys.argv[1:])


if __name__ == "__main__":
    code = run_tests()
    print(f">>>>>>>>>> EXIT {code} <<<<<<<<<<")
    sys.exit(code)
