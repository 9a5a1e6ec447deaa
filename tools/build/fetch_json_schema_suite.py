"""Unpack the JSON-Schema-Test-Suite's draft 2020-12 cases (`json/tests/draft2020-12/`, the optional ones and the
format ones included) from the jsonschema source distribution on PyPI into `$LLMCHAT_HOME/json-schema-test-suite`
(default ~/.cache/llmchat/json-schema-test-suite), where tools/reference/json_schema_suite.py and
tests/unit/test_json_schema_suite.py look for them.

    .venv/bin/python tools/build/fetch_json_schema_suite.py [--sdist jsonschema-4.25.1.tar.gz] [--if-missing]

Without --sdist, your pip downloads the source distribution (tools/build/pypi_sdist.py). About 1 MB is written.
"""
from __future__ import annotations

import sys
import tarfile
from pathlib import Path

from llmchat.paths import llmchat_home
from pypi_sdist import fetch

VERSION = "4.25.1"
PREFIX = f"jsonschema-{VERSION}/json/tests/draft2020-12/"


def suite_dir() -> Path:
    return llmchat_home() / "json-schema-test-suite"


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
    names = fetch(__doc__.splitlines()[0], f"jsonschema=={VERSION}", f"jsonschema-{VERSION}.tar.gz", suite_dir(),
                  unpack)
    if names is not None:
        print(f"{suite_dir()}: {len(names)} files of the JSON-Schema-Test-Suite (draft 2020-12)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
