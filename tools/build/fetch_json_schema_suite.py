"""Unpack the JSON-Schema-Test-Suite's draft 2020-12 cases (`json/tests/draft2020-12/`, the optional ones and the
format ones included) from the jsonschema source distribution on PyPI into `$LLMCHAT_HOME/json-schema-test-suite`
(default ~/.cache/llmchat/json-schema-test-suite), where tools/reference/json_schema_suite.py and
tests/unit/test_json_schema_suite.py look for them.

    .venv/bin/python tools/build/fetch_json_schema_suite.py [--sdist jsonschema-4.25.1.tar.gz] [--if-missing]

Without --sdist, your pip downloads the source distribution (`pip download --no-deps --no-binary :all:`), so your
index, proxy and cache apply. About 1 MB is written.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from llmchat.paths import llmchat_home

VERSION = "4.25.1"
PREFIX = f"jsonschema-{VERSION}/json/tests/draft2020-12/"
COMPLETE = ".complete"  # written last: names the version whose files are all there


def suite_dir() -> Path:
    return llmchat_home() / "json-schema-test-suite"


def download(dest: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                    f"jsonschema=={VERSION}", "--dest", str(dest)], check=True)
    found = sorted(dest.glob(f"jsonschema-{VERSION}.tar.gz"))
    if not found:
        raise SystemExit(f"pip did not leave jsonschema-{VERSION}.tar.gz in {dest}")
    return found[0]


def unpack(sdist: Path, target: Path) -> list[str]:
    names = []
    with tarfile.open(sdist) as archive:
        for member in archive:
            if not (member.name.startswith(PREFIX) and member.isfile() and member.name.endswith(".json")):
                continue
            leaf = member.name[len(PREFIX):]
            if ".." in leaf.split("/"):
                continue
            source = archive.extractfile(member)
            assert source is not None
            out = target / leaf
            out.parent.mkdir(parents=True, exist_ok=True)
            part = out.with_name(out.name + ".part")
            part.write_bytes(source.read())
            part.replace(out)
            names.append(leaf)
    return names


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sdist", type=Path, help="an already downloaded jsonschema source archive")
    parser.add_argument("--if-missing", action="store_true", help="do nothing when this version is already unpacked")
    args = parser.parse_args()
    stamp = suite_dir() / COMPLETE
    if args.if_missing and stamp.is_file() and stamp.read_text().strip() == VERSION:
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        sdist = args.sdist or download(Path(tmp))
        names = unpack(sdist, suite_dir())
    stamp.write_text(VERSION + "\n")
    print(f"{suite_dir()}: {len(names)} files of the JSON-Schema-Test-Suite (draft 2020-12)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
