"""Models from the Hugging Face Hub, natively: downloads through huggingface_hub, and its cache.

huggingface_hub does the hard parts the way every other tool on the machine does them: one shared cache (a file some
other program already fetched is not fetched again), resumed transfers, ETag and size checks, `HF_TOKEN` for gated
models, `HF_ENDPOINT` for mirrors, `HF_HUB_OFFLINE`, and a progress bar on stderr. It is imported only when a hub
reference is used, so the core imports without it (Pyodide has none: there the browser fetches
`hub_ref.file_url`).

Which file a reference means is decided by `hub_ref.choose_files` over the repository's file list: the hub's when
it answers, the cached copy of it when it does not (offline, or the hub is down), so a model pulled once keeps
working without the network.

Cache layout (huggingface_hub's, documented): `$HF_HUB_CACHE/models--ORG--REPO/` holds `refs/<branch>` (a commit
hash), `snapshots/<commit>/<path>` (links to blobs) and `blobs/<etag>`.
"""
from __future__ import annotations

import re
import sys
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ..errors import GatedModelError, LLMChatError, ModelNotFoundError, SourceError
from ..gguf.sources import host_and_port
from .refs import DEFAULT_REVISION, HubRef, choose_files, hub_endpoint, named_files

_COMMIT = re.compile(r"[0-9a-f]{40}")
ATTEMPTS = 4  # a download cut this many times in a row is given up


def _hub():
    try:
        import huggingface_hub
    except ImportError:
        raise LLMChatError("Hugging Face references need the huggingface_hub package: pip install huggingface_hub"
                           ) from None
    return huggingface_hub


def cache_dir() -> Path | None:
    """huggingface_hub's cache (HF_HUB_CACHE, HF_HOME...), or None when huggingface_hub is not installed."""
    try:
        from huggingface_hub import constants
    except ImportError:
        return None
    return Path(constants.HF_HUB_CACHE)


def pull(ref: HubRef, out: IO[str] | None = None) -> Path:
    """Make sure the file(s) `ref` means are in the Hugging Face cache; return the path of the model (the first
    shard of a split model: the others lie beside it, where the GGUF reader looks for them)."""
    hub = _hub()
    out = sys.stderr if out is None else out
    endpoint = hub_endpoint()
    files = named_files(ref) if ref.file is not None else _choose(ref, hub, endpoint, out)
    if ref.file is None:
        _say(out, f"{ref} is {', '.join(files)} in {ref.repo}")
    return [_download(hub, ref, name, endpoint, out) for name in files][0]


def _download(hub, ref: HubRef, name: str, endpoint: str, out: IO[str]) -> Path:
    """One file into the cache. A transfer the network cut is started again: huggingface_hub goes on from the bytes
    it kept (releases before 2.0 keep them across calls, 2.x resumes within the call; 0.26, 1.0 and 2.4 tested)."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return Path(hub.hf_hub_download(repo_id=ref.repo, filename=name, revision=ref.revision,
                                            endpoint=endpoint))
        except Exception as exc:
            error = _translate(exc, ref, endpoint, name)
            if attempt == ATTEMPTS or not _interrupted(exc):
                raise error from exc
            _say(out, f"{error}; trying again ({attempt} of {ATTEMPTS - 1})")
    raise AssertionError("unreachable")


def _interrupted(exc: Exception) -> bool:
    """Whether a download failed in transfer (worth going on with), not with an answer from the hub."""
    return isinstance(exc, ConnectionError) or _from_http_library(exc)


def _from_http_library(exc: Exception) -> bool:
    return type(exc).__module__.split(".")[0] in ("httpx", "httpx2", "httpcore", "httpcore2", "requests", "urllib3")


def _choose(ref: HubRef, hub, endpoint: str, out: IO[str]) -> list[str]:
    """The files a short reference means, from the hub's file list or, failing that, from the cached one."""
    try:
        info = hub.HfApi(endpoint=endpoint).model_info(ref.repo, revision=ref.revision)
        listing = [sibling.rfilename for sibling in info.siblings or ()]
    except Exception as exc:
        error = _translate(exc, ref, endpoint)
        if isinstance(error, ModelNotFoundError | GatedModelError):
            raise error from exc  # the hub answered: there is no such model (or no access), whatever is cached
        cached = cached_files(ref)
        if cached is None:
            raise error from exc
        _say(out, f"could not list {ref.repo} on {_public(endpoint)} ({error}); choosing among the cached files")
        return choose_files(ref, cached, where=f"the cached copy of {ref.repo}")
    return choose_files(ref, listing)


def _translate(exc: Exception, ref: HubRef, endpoint: str, name: str | None = None) -> LLMChatError:
    """One actionable llmchat error for what huggingface_hub (or the network under it) raised; other exceptions
    are bugs and propagate unchanged."""
    from huggingface_hub import utils as hf

    # HF_ENDPOINT may carry `user:password@` for a mirror: messages name the host alone.
    credentials = urllib.parse.urlsplit(endpoint).netloc.rpartition("@")[0]
    endpoint = _public(endpoint)

    def first_line(e: BaseException) -> str:
        line = _line_of(e)
        return line.replace(credentials + "@", "").replace(credentials, "***") if credentials else line

    what = f"{ref.repo}/{name}" if name else ref.repo
    page = f"{endpoint}/{ref.repo}"
    if isinstance(exc, hf.GatedRepoError) or (isinstance(exc, hf.HfHubHTTPError) and _status(exc) == 403):
        return GatedModelError(
            f"{what}: the hub refused access (HTTP {_status(exc)}): {ref.repo} is gated. Open {page} while "
            f"logged in and accept its licence, then create a read token at {endpoint}/settings/tokens and set "
            f"HF_TOKEN to it (if HF_TOKEN is already set, that token's account has not been granted access yet)")
    if isinstance(exc, hf.RepositoryNotFoundError):
        return ModelNotFoundError(f"{ref.repo} was not found on {endpoint} (HTTP {_status(exc)}); a private "
                                  "repository answers the same way: then set HF_TOKEN to a token that can read it")
    if isinstance(exc, hf.RevisionNotFoundError):
        return ModelNotFoundError(f"{ref.repo} has no revision {ref.revision!r} on {endpoint}")
    if isinstance(exc, hf.LocalEntryNotFoundError):  # before EntryNotFoundError, which it subclasses
        reason = exc.__cause__ or exc.__context__ or exc
        return SourceError(f"{what}: cannot reach {endpoint} ({first_line(reason)}) and the file is not in the "
                           f"Hugging Face cache ({cache_dir()})")
    if isinstance(exc, hf.EntryNotFoundError):
        return ModelNotFoundError(f"{ref.repo}@{ref.revision} has no file {name or ''} on {endpoint}".rstrip())
    if isinstance(exc, hf.HfHubHTTPError):
        if _status(exc) == 401:
            return GatedModelError(f"{what}: the hub asks for a token (HTTP 401): set HF_TOKEN to a token from "
                                   f"{endpoint}/settings/tokens that can read {ref.repo}")
        return SourceError(f"{what}: {endpoint} answered {first_line(exc)}")
    if isinstance(exc, OSError) or _from_http_library(exc):
        return SourceError(f"{what}: download from {endpoint} failed: {first_line(exc)}")
    if isinstance(exc, ValueError):  # json's decode errors among them: an answer that is not the hub's API
        return SourceError(f"{what}: {endpoint} did not answer as a Hugging Face hub does ({first_line(exc)}); "
                           "if HF_ENDPOINT is set, check that it points to a hub (or a mirror of one)")
    raise exc


def _status(exc: Exception) -> int | None:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def _line_of(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def _public(url: str) -> str:
    """`url` without any credentials in it."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(netloc=host_and_port(parts)))


# --- the cache ----------------------------------------------------------------------------------------------------


def _repo_dir(root: Path, repo: str) -> Path:
    return root / ("models--" + repo.replace("/", "--"))


def _snapshot(ref: HubRef) -> Path | None:
    """The cached snapshot directory of `ref.revision`, or None if the revision was never fetched."""
    root = cache_dir()
    if root is None:
        return None
    storage = _repo_dir(root, ref.repo)
    commit = ref.revision if _COMMIT.fullmatch(ref.revision) else None
    if commit is None:
        try:
            commit = (storage / "refs" / ref.revision).read_text().strip()
        except OSError:
            return None
    snapshot = storage / "snapshots" / commit
    return snapshot if snapshot.is_dir() else None


def cached_files(ref: HubRef) -> list[str] | None:
    """The repository paths present in the cached snapshot of `ref.revision` (complete files only)."""
    snapshot = _snapshot(ref)
    if snapshot is None:
        return None
    return sorted(p.relative_to(snapshot).as_posix() for p in snapshot.rglob("*") if p.is_file())


def remove(ref: HubRef) -> list[Path]:
    """Delete the cached file(s) `ref` means: their snapshot links, and each blob no other snapshot still uses.
    Returns the removed snapshot paths; ModelNotFoundError when they are not cached."""
    cached = cached_files(ref)
    root = cache_dir()
    if cached is None or root is None:
        raise ModelNotFoundError(f"{ref} is not in the Hugging Face cache ({root}); `llmchat list` shows what is")
    try:
        files = choose_files(ref, cached, where=f"the cached copy of {ref.repo}")
    except ModelNotFoundError as exc:
        raise ModelNotFoundError(f"{ref} is not in the Hugging Face cache: {exc}") from None
    snapshot = _snapshot(ref)
    if snapshot is None:
        raise ModelNotFoundError(f"{ref} is not in the Hugging Face cache ({root})")
    storage = _repo_dir(root, ref.repo)
    removed = []
    for name in files:
        pointer = snapshot / name
        blob = pointer.resolve()
        pointer.unlink()
        removed.append(pointer)
        if blob != pointer and blob.parent == storage / "blobs" and not _still_used(storage, blob):
            blob.unlink(missing_ok=True)
    return removed


def _still_used(storage: Path, blob: Path) -> bool:
    return any(p.is_symlink() and p.resolve() == blob for p in (storage / "snapshots").rglob("*"))


@dataclass(frozen=True)
class CachedFile:
    """A GGUF file in the Hugging Face cache, with the reference that names it."""

    ref: HubRef
    path: Path


def cached_ggufs() -> Iterator[CachedFile]:
    """Every GGUF file in the Hugging Face cache, named by the branch that points at its snapshot if one does
    (main first), else by its commit."""
    root = cache_dir()
    if root is None or not root.is_dir():
        return
    for storage in sorted(root.glob("models--*--*")):
        repo = storage.name[len("models--"):].replace("--", "/")
        names: dict[str, str] = {}
        for ref_file in sorted((storage / "refs").rglob("*")) if (storage / "refs").is_dir() else ():
            if ref_file.is_file():
                branch = ref_file.relative_to(storage / "refs").as_posix()
                commit = ref_file.read_text().strip()
                if commit not in names or branch == DEFAULT_REVISION:
                    names[commit] = branch
        for snapshot in sorted((storage / "snapshots").glob("*")):
            revision = names.get(snapshot.name, snapshot.name)
            for path in sorted(snapshot.rglob("*.gguf")):
                if path.is_file():
                    yield CachedFile(HubRef(repo, revision, path.relative_to(snapshot).as_posix()), path)


def _say(out: IO[str], message: str) -> None:
    print(f"llmchat: {message}", file=out, flush=True)
