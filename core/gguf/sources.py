"""Byte sources: random access to a model file wherever it lives (local disk, HTTP server, memory).

The GGUF parser and the weight loader only ever ask for `read(offset, length)`, so where the bytes come from is
decided once, here. Every failure to get bytes is a `SourceError` that names the source.
"""
from __future__ import annotations

import base64
import contextlib
import os
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import OrderedDict
from http.client import HTTPException
from types import TracebackType
from typing import BinaryIO

from ..errors import SourceError

try:  # Pyodide and some embedded builds may lack mmap; plain reads are the fallback.
    import mmap
except ImportError:  # pragma: no cover - depends on the interpreter build
    mmap = None  # type: ignore[assignment]


class Source:
    """Random-access bytes of known size.

    `read` returns exactly `length` bytes or raises `SourceError`; it may return a memoryview that shares memory
    with the source (valid until the caller drops it, even across `close()`).
    """

    name: str
    size: int

    def read(self, offset: int, length: int) -> bytes | memoryview:
        raise NotImplementedError

    def close(self) -> None:
        """Release what the source holds; reading afterwards is an error."""

    def __enter__(self) -> Source:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, size={self.size})"

    def _check_range(self, offset: int, length: int) -> None:
        """Reject reads outside [0, size): callers get one clear message instead of a short read."""
        if offset < 0 or length < 0 or offset + length > self.size:
            raise SourceError(f"{self.name}: cannot read {length} bytes at offset {offset}: "
                              f"the source has {self.size} bytes")


class BytesSource(Source):
    """Bytes already in memory (a model fetched whole, or a test fixture)."""

    def __init__(self, data: bytes | bytearray | memoryview, name: str = "<memory>") -> None:
        self.name = name
        self._view: memoryview | None = memoryview(data).cast("B")
        self.size = self._view.nbytes

    def read(self, offset: int, length: int) -> memoryview:
        if self._view is None:
            raise SourceError(f"{self.name}: read after close")
        self._check_range(offset, length)
        return self._view[offset:offset + length]

    def close(self) -> None:
        self._view = None


class FileSource(Source):
    """A local file, memory-mapped so that reads are zero-copy and only touched pages come from disk."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.name = os.fspath(path)
        try:
            self._file: BinaryIO | None = open(path, "rb")  # noqa: SIM115 - closed below or in close()
        except FileNotFoundError:
            raise SourceError(f"{self.name}: no such file") from None
        except IsADirectoryError:
            raise SourceError(f"{self.name}: is a directory, not a file") from None
        except OSError as e:
            raise SourceError(f"{self.name}: cannot open: {e.strerror or e}") from None
        self._lock = threading.Lock()
        self._map: mmap.mmap | None = None
        self._view: memoryview | None = None
        self._closed = False
        try:
            self.size = os.fstat(self._file.fileno()).st_size
            # mmap refuses empty files, and not every platform offers it; both fall back to plain reads.
            if self.size > 0 and mmap is not None:
                try:
                    self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
                    self._view = memoryview(self._map)
                except (OSError, ValueError):
                    self._map = None
        except OSError as e:
            self._file.close()
            raise SourceError(f"{self.name}: cannot read: {e.strerror or e}") from None
        if self._map is not None:  # the mapping keeps its own handle on the file
            self._file.close()
            self._file = None

    def read(self, offset: int, length: int) -> bytes | memoryview:
        if self._closed:
            raise SourceError(f"{self.name}: read after close")
        self._check_range(offset, length)
        if self._view is not None:
            return self._view[offset:offset + length]
        if self._file is None:  # without a mapping the file stays open until close()
            raise SourceError(f"{self.name}: the file is not open")
        with self._lock:  # seek + read must not interleave between threads
            try:
                self._file.seek(offset)
                data = self._file.read(length)
            except OSError as e:
                raise SourceError(f"{self.name}: read failed at offset {offset}: {e.strerror or e}") from None
        if len(data) != length:
            raise SourceError(f"{self.name}: file shrank while reading (wanted {length} bytes at offset {offset})")
        return data

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._view is not None:
            self._view.release()
            self._view = None
        if self._map is not None:
            # If a caller still holds a view of a tensor, the mapping goes away when the last view does.
            with contextlib.suppress(BufferError):
                self._map.close()
            self._map = None
        if self._file is not None:
            self._file.close()
            self._file = None


class _TransientError(Exception):
    """An HTTP failure worth retrying (timeouts, resets, 5xx, 429, short bodies)."""


_RETRYABLE_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})


class HTTPSource(Source):
    """A file on an HTTP(S) server, read with Range requests so only the parts we touch are downloaded.

    Reads up to `block_size` bytes go through a small LRU cache of aligned blocks, so parsing a header field by
    field costs one request per block rather than one per field. Larger reads (tensor data) bypass the cache.
    Transient failures are retried `retries` times with exponential backoff starting at `backoff` seconds.
    """

    def __init__(self, url: str, *, block_size: int = 1 << 20, cache_blocks: int = 8, timeout: float = 30.0,
                 retries: int = 4, backoff: float = 0.5) -> None:
        if block_size <= 0 or cache_blocks <= 0 or retries < 0 or backoff < 0:
            raise ValueError("block_size and cache_blocks must be positive; retries and backoff non-negative")
        # Credentials in the URL (`https://user:password@host/...`) become HTTP basic auth, sent to that host only
        # (never along a redirect), and appear in no message: `url` and `name` are the URL without them.
        self.url, self._authorization = split_credentials(url)
        self.name = self.url
        self.block_size = block_size
        self.cache_blocks = cache_blocks
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.request_count = 0  # HTTP requests sent, retries included: lets callers see what reading cost
        self._blocks: OrderedDict[int, bytes] = OrderedDict()
        self._lock = threading.Lock()
        self._closed = False
        self.size = -1  # unknown until the first answer tells us
        # One ranged GET both learns the size (from Content-Range) and warms the cache with the file's start,
        # which is where every reader begins; a HEAD first would be a round trip for nothing.
        first, self.size = self._fetch(0, block_size - 1, probing=True)
        if first:
            self._remember(0, first)

    def read(self, offset: int, length: int) -> bytes:
        if self._closed:
            raise SourceError(f"{self.name}: read after close")
        self._check_range(offset, length)
        if length == 0:
            return b""
        if length > self.block_size:
            return self._fetch(offset, offset + length - 1)[0]
        with self._lock:
            first, last = offset // self.block_size, (offset + length - 1) // self.block_size
            missing = [b for b in range(first, last + 1) if b not in self._blocks]
            if missing:  # at most two blocks; adjacent ones come in one request
                start = missing[0] * self.block_size
                end = min((missing[-1] + 1) * self.block_size, self.size) - 1
                data = self._fetch(start, end)[0]
                for b in missing:
                    lo = b * self.block_size - start
                    self._remember(b, data[lo:lo + self.block_size])
            parts = []
            for b in range(first, last + 1):
                self._blocks.move_to_end(b)
                block_start = b * self.block_size
                lo = max(offset, block_start) - block_start
                hi = min(offset + length, block_start + self.block_size) - block_start
                parts.append(self._blocks[b][lo:hi])
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def close(self) -> None:
        self._closed = True
        self._blocks.clear()

    def _remember(self, block: int, data: bytes) -> None:
        self._blocks[block] = data
        self._blocks.move_to_end(block)
        while len(self._blocks) > self.cache_blocks:
            self._blocks.popitem(last=False)

    def _fetch(self, start: int, end: int, probing: bool = False) -> tuple[bytes, int]:
        """GET bytes [start, end] (inclusive, as HTTP counts them); returns (body, total size of the file)."""
        failures = 0
        while True:
            try:
                return self._fetch_once(start, end, probing)
            except _TransientError as e:
                failures += 1
                if failures > self.retries:
                    raise SourceError(f"{self.name}: {e} (gave up after {failures} attempts)") from None
                time.sleep(self.backoff * 2 ** (failures - 1))

    def _fetch_once(self, start: int, end: int, probing: bool) -> tuple[bytes, int]:
        request = urllib.request.Request(self.url, headers={
            "Range": f"bytes={start}-{end}",
            # A compressed body would make byte ranges meaningless.
            "Accept-Encoding": "identity",
            "User-Agent": "llmchat",
        })
        if self._authorization:
            request.add_unredirected_header("Authorization", self._authorization)
        self.request_count += 1
        try:
            response = urllib.request.urlopen(request, timeout=self.timeout)
        except urllib.error.HTTPError as e:
            e.close()
            if probing and e.code == 416:  # nothing satisfies bytes=0-: the file is empty
                total = _content_range_total(e.headers.get("Content-Range", ""))
                if total == 0:
                    return b"", 0
            if e.code in _RETRYABLE_STATUS:
                raise _TransientError(f"HTTP {e.code} {e.reason}") from None
            raise SourceError(f"{self.name}: HTTP {e.code} {e.reason}") from None
        except (urllib.error.URLError, OSError, HTTPException) as e:
            reason = getattr(e, "reason", None) or e
            raise _TransientError(f"request failed: {reason}") from None
        with response:
            if response.status == 200:
                raise SourceError(
                    f"{self.name}: the server ignores HTTP Range requests (it answered 200 with the whole file "
                    f"instead of 206 with bytes {start}-{end}); llmchat needs Range support to read a model in "
                    f"parts: serve it from a server that supports Range, or download it and open the local file")
            if response.status != 206:
                raise SourceError(f"{self.name}: unexpected HTTP {response.status} to a Range request")
            got_start, got_end, total = _parse_content_range(response.headers.get("Content-Range", ""))
            if total is None:
                raise SourceError(f"{self.name}: the server did not say how large the file is "
                                  f"(Content-Range: {response.headers.get('Content-Range')!r})")
            if self.size >= 0 and total != self.size:
                raise SourceError(f"{self.name}: the file changed on the server "
                                  f"(was {self.size} bytes, now {total})")
            want_end = min(end, total - 1)
            if got_start != start or got_end != want_end:
                raise SourceError(f"{self.name}: asked for bytes {start}-{want_end}, "
                                  f"the server sent {got_start}-{got_end}")
            want = want_end - start + 1
            try:
                body = response.read(want)
            except (OSError, HTTPException) as e:
                raise _TransientError(f"download interrupted: {e}") from None
            if len(body) != want:
                raise _TransientError(f"short read: got {len(body)} of {want} bytes at offset {start}")
            return body, total


def _parse_content_range(value: str) -> tuple[int, int, int | None]:
    """Parse 'bytes a-b/total' (total may be '*'); a malformed header yields impossible values."""
    try:
        unit, _, rest = value.strip().partition(" ")
        span, _, total = rest.partition("/")
        first, _, last = span.partition("-")
        if unit.lower() != "bytes":
            raise ValueError(value)
        return int(first), int(last), (None if total.strip() == "*" else int(total))
    except ValueError:
        return -1, -1, None


def _content_range_total(value: str) -> int | None:
    """The total of an unsatisfied-range header ('bytes */total')."""
    _, _, total = value.partition("/")
    try:
        return int(total)
    except ValueError:
        return None


def split_credentials(url: str) -> tuple[str, str | None]:
    """An http(s) URL without its `user:password@` (checked to name a host and port that can be looked up) and
    the basic-auth header value they make, if any. Errors never repeat the credentials."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    public = urllib.parse.urlunsplit(parts._replace(netloc=host_and_port(parts)))
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number
        host.encode("idna")
        valid = parts.scheme.lower() in ("http", "https") and host.strip(".") != ""
    except (ValueError, UnicodeError):
        valid = False
    if not valid:
        raise SourceError(f"{public}: not an http(s) URL with a valid host name")
    if parts.username is None and parts.password is None:
        return public, None
    pair = f"{urllib.parse.unquote(parts.username or '')}:{urllib.parse.unquote(parts.password or '')}"
    return public, "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")


def host_and_port(parts: urllib.parse.SplitResult) -> str:
    """The part of a URL's netloc after any credentials."""
    return parts.netloc.rpartition("@")[2]


def is_url(target: str) -> bool:
    """True for http(s) URLs; anything else (including Windows drive letters) is a path."""
    return urllib.parse.urlsplit(target).scheme.lower() in ("http", "https")


def open_source(target: str | os.PathLike[str]) -> Source:
    """Open a local path, a file:// URL or an http(s):// URL."""
    text = os.fspath(target)
    parts = urllib.parse.urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme in ("http", "https"):
        return HTTPSource(text)
    if scheme == "file":
        return FileSource(urllib.request.url2pathname(parts.path))
    return FileSource(text)
