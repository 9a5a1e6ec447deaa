"""Downloading a catalogue model into the app's store: resumable across app kills, checked by sha256.

Bytes come through the core's `HTTPSource` (Range requests, retries that resume a cut connection at the chunk that
broke, a file that changes on the server is noticed). The core's `llmchat pull URL` deletes its partial file on
failure, which suits a terminal; a phone app is killed at any moment, so here the bytes go to `<file>.partial`,
appended chunk by chunk, and the next download starts where that file ends. The sha256 covers the kept bytes too
(they are re-read on resume), and the file gets its final name only after the hash matched.
"""
from __future__ import annotations

import errno
import hashlib
import os
import threading
from collections.abc import Callable
from pathlib import Path

from llmchat.hub.catalogue import CatalogueEntry
from llmchat.errors import SourceError
from llmchat.gguf.sources import HTTPSource

from .errors import ChecksumMismatchError, DownloadInterruptedError, StorageFullError
from .store import ModelStore, human

CHUNK = 1 << 20  # a kill loses at most one chunk; the progress bar moves every chunk
Progress = Callable[[int, int], None]  # (bytes on disk, total)


def _hash_file(path: Path, hasher) -> None:
    with path.open("rb") as f:
        while block := f.read(CHUNK):
            hasher.update(block)


def download(store: ModelStore, entry: CatalogueEntry, *, progress: Progress | None = None,
             cancel: threading.Event | None = None, url: str | None = None, retries: int = 4) -> Path:
    """Fetch `entry` into `store` (going on from a partial file) and return its path once its sha256 matched.

    Raises DownloadInterruptedError (cancelled, or the network gave up: bytes kept), StorageFullError (the disk
    filled: bytes kept, the message says how much more is needed), ChecksumMismatchError (file discarded)."""
    target, partial = store.path(entry), store.partial_path(entry)
    if target.is_file() and target.stat().st_size == entry.size:
        return target
    url = url or store.url(entry)
    have = partial.stat().st_size if partial.is_file() else 0
    if have > entry.size:  # not this model's bytes: start over rather than hash garbage
        partial.unlink()
        have = 0
    hasher = hashlib.sha256()
    if have:
        _hash_file(partial, hasher)
    if progress:
        progress(have, entry.size)
    try:
        source = HTTPSource(url, block_size=1 << 16, cache_blocks=1, retries=retries)
    except SourceError as e:
        raise DownloadInterruptedError(f"{entry.name}: {e}; {human(have)} kept, the download resumes") from e
    with source:
        if source.size != entry.size:
            raise SourceError(f"{url} serves {source.size} bytes; the catalogue's {entry.name} has {entry.size}")
        with partial.open("ab", buffering=0) as sink:
            while have < entry.size:
                if cancel is not None and cancel.is_set():
                    raise DownloadInterruptedError(f"{entry.name}: download paused at {human(have)} of "
                                                   f"{human(entry.size)}; it resumes from there")
                try:
                    block = source.read(have, min(CHUNK, entry.size - have))
                except SourceError as e:
                    raise DownloadInterruptedError(f"{entry.name}: {e}; {human(have)} of {human(entry.size)} "
                                                   "kept, the download resumes from there") from e
                try:
                    written = 0
                    while written < len(block):  # unbuffered: a short write is seen, not lost in a buffer
                        written += sink.write(block[written:])
                except OSError as e:
                    if e.errno not in (errno.ENOSPC, errno.EDQUOT):
                        raise
                    if os.fstat(sink.fileno()).st_size > have:  # keep exactly the bytes the hash has seen
                        sink.truncate(have)
                    raise StorageFullError(
                        f"storage is full: {entry.name} needs {human(entry.size - have)} more "
                        f"({human(have)} of {human(entry.size)} kept for resuming); free some space and "
                        "download again", needed=entry.size - have) from e
                hasher.update(block)
                have += len(block)
                if progress:
                    progress(have, entry.size)
            os.fsync(sink.fileno())
    digest = hasher.hexdigest()
    if entry.sha256 is not None and digest != entry.sha256:
        partial.unlink()
        raise ChecksumMismatchError(f"{entry.name}: the download's sha256 is {digest}, the catalogue says "
                                    f"{entry.sha256}; the file was discarded (the server sent different bytes)")
    os.replace(partial, target)
    return target
