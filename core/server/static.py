"""Files over HTTP the way the browser runtime fetches them: the web demo, and model files in Range requests.

The browser side reads a GGUF header first and then its tensors in chunks, resumes interrupted downloads and
checks for changes, so model files need byte ranges (`206 Partial Content`, `Content-Range`, suffix ranges,
`416` when nothing of a range is in the file, several ranges as `multipart/byteranges`), a validator (`ETag`,
`Last-Modified`, `If-None-Match`, `If-Range`) and `Accept-Ranges`. Pyodide, WebAssembly streaming compilation and
service workers look at MIME types, hence the explicit table below rather than the platform's guesses.

Paths come from the URL, so they are checked before touching the disk: no `..`, no hidden files, no backslashes
or NUL bytes, and the resolved file (symbolic links followed) must lie under its root.
"""
from __future__ import annotations

import hashlib
import html
import mimetypes
import os
import re
import secrets
from collections.abc import Iterator
from email.utils import format_datetime, parsedate_to_datetime
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import quote

import anyio
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

CHUNK = 1 << 20
_RANGE = re.compile(r"([0-9]*)-([0-9]*)")
MAX_RANGES = 16  # more parts than this in one request is not a download pattern; the whole file is sent instead
_MAX_DIGITS = 19  # a longer number is past any file's end (and int() refuses numbers of over 4300 digits)

MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".map": "application/json",
    ".webmanifest": "application/manifest+json",
    ".wasm": "application/wasm",
    ".whl": "application/zip",
    ".zip": "application/zip",
    ".tar": "application/x-tar",
    ".gz": "application/gzip",
    ".gguf": "application/octet-stream",
    ".bin": "application/octet-stream",
    ".data": "application/octet-stream",
    ".py": "text/x-python; charset=utf-8",
    ".wgsl": "text/wgsl; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
    ".md": "text/markdown; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".woff2": "font/woff2",
}


def media_type(path: Path) -> str:
    known = MEDIA_TYPES.get(path.suffix.lower())
    if known:
        return known
    guessed, _ = mimetypes.guess_type(path.name)
    return guessed or "application/octet-stream"


def safe_path(root: Path, relative: str) -> Path | None:
    """The regular file `relative` names under `root`, or None if it is not one or tries to leave `root`."""
    path = _inside(root, relative)
    return path if path is not None and path.is_file() else None


def folder_page(root: Path, relative: str, url: str) -> str | None:
    """A page titled `url` (the folder's own, ending in "/": its links are relative to it) linking to the files
    and folders of the folder `relative` names under `root` ("" for the root itself), hidden ones left out; None
    if it is not a folder there or tries to leave `root`. For a folder of pages without an index.html."""
    folder = root.resolve() if relative.strip("/") == "" else _inside(root, relative.rstrip("/"))
    if folder is None or not folder.is_dir():
        return None
    names = sorted(f"{p.name}/" if p.is_dir() else p.name for p in folder.iterdir()
                   if not p.name.startswith(".") and p.name != "__pycache__")
    title = html.escape(url)
    links = "\n".join(f'<li><a href="{quote(n)}">{html.escape(n)}</a></li>' for n in names)
    return f"<!doctype html><meta charset=utf-8><title>{title}</title><h1>{title}</h1>\n<ul>\n{links}\n</ul>\n"


def _inside(root: Path, relative: str) -> Path | None:
    """What `relative` names under `root`, symbolic links followed, or None if it tries to leave `root`."""
    if not relative or "\x00" in relative or "\\" in relative or relative.startswith("/"):
        return None
    parts = relative.split("/")
    if any(p.startswith(".") for p in parts if p):  # "..", ".", hidden files and folders
        return None
    try:
        base = root.resolve()
        candidate = (base / relative).resolve()
        if not candidate.is_relative_to(base) or not candidate.exists():
            return None
    except (OSError, RuntimeError, ValueError):  # a symlink loop, a name too long (exists raises that one)
        return None
    return candidate


def parse_ranges(header: str, size: int) -> list[tuple[int, int]] | None:
    """Byte ranges (first, last inclusive) of a `Range` header that fall in a file of `size` bytes.

    None means the header is to be ignored (not a bytes range, malformed, or too many parts): the whole file is
    sent with 200. An empty list means well-formed but unsatisfiable: 416. Overlapping and adjacent ranges are
    merged (in file order), so a response never carries more bytes than the file has.
    """
    unit, _, spec = header.partition("=")
    if unit.strip().lower() != "bytes" or not spec.strip():
        return None
    parts = spec.split(",")
    if len(parts) > MAX_RANGES:
        return None
    ranges = []
    for part in parts:
        m = _RANGE.fullmatch(part.strip())
        if m is None or not (m[1] or m[2]):
            return None
        first, last = m[1], m[2]
        if not first:  # suffix: the last N bytes
            n = _number(last)
            if n > 0 and size > 0:
                ranges.append((max(0, size - n), size - 1))
            continue
        a = _number(first)
        if last and _number(last) < a:
            return None
        b = _number(last) if last else size - 1
        if a < size:
            ranges.append((a, min(b, size - 1)))
    return _merged(ranges)


def _number(digits: str) -> int:
    return int(digits) if len(digits) <= _MAX_DIGITS else 1 << 63


def _merged(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _etag(st: os.stat_result) -> str:
    digest = hashlib.blake2s(f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}".encode(), digest_size=8).hexdigest()
    return f'"{digest}"'


class FileResponse(Response):
    """A file, whole or in ranges, honouring the request's conditional and Range headers."""

    def __init__(self, path: Path, request_headers: Headers, method: str, *,
                 extra_headers: dict[str, str] | None = None) -> None:
        super().__init__(None)
        self.path = path
        self.head = method == "HEAD"
        st = path.stat()
        self.size = st.st_size
        etag = _etag(st)
        modified = datetime.fromtimestamp(st.st_mtime, timezone.utc)
        self.content_type = media_type(path)
        headers = {"Accept-Ranges": "bytes", "ETag": etag, "Last-Modified": format_datetime(modified, usegmt=True),
                   "X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache", **(extra_headers or {})}
        self.ranges: list[tuple[int, int]] | None = None
        self.boundary = ""
        if _not_modified(request_headers, etag, modified):
            self.status_code = 304
            self._set(headers)
            return
        header = request_headers.get("range")
        if header and _if_range_holds(request_headers.get("if-range"), etag, modified):
            self.ranges = parse_ranges(header, self.size)
        if self.ranges == []:
            self.status_code = 416
            headers["Content-Range"] = f"bytes */{self.size}"
            headers["Content-Length"] = "0"
        elif self.ranges is None:
            self.status_code = 200
            headers["Content-Type"] = self.content_type
            headers["Content-Length"] = str(self.size)
        elif len(self.ranges) == 1:
            a, b = self.ranges[0]
            self.status_code = 206
            headers["Content-Type"] = self.content_type
            headers["Content-Range"] = f"bytes {a}-{b}/{self.size}"
            headers["Content-Length"] = str(b - a + 1)
        else:
            self.status_code = 206
            self.boundary = secrets.token_hex(12)
            headers["Content-Type"] = f"multipart/byteranges; boundary={self.boundary}"
            headers["Content-Length"] = str(sum(len(p) + (b - a + 1) for p, (a, b) in self._parts()) +
                                            len(self._closing()))
        self._set(headers)

    def _set(self, headers: dict[str, str]) -> None:
        self.raw_headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]

    def _parts(self) -> list[tuple[bytes, tuple[int, int]]]:
        return [(f"\r\n--{self.boundary}\r\nContent-Type: {self.content_type}\r\n"
                 f"Content-Range: bytes {a}-{b}/{self.size}\r\n\r\n".encode("latin-1"), (a, b))
                for a, b in self.ranges or []]

    def _closing(self) -> bytes:
        return f"\r\n--{self.boundary}--\r\n".encode("latin-1")

    def _pieces(self) -> Iterator[bytes | tuple[int, int]]:
        """What the body is made of: literal bytes, and (first, last) spans of the file."""
        if self.status_code in (304, 416):
            return
        if self.ranges is None:
            yield (0, self.size - 1)
        elif len(self.ranges) == 1:
            yield self.ranges[0]
        else:
            for head, span in self._parts():
                yield head
                yield span
            yield self._closing()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        if self.head:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        with open(self.path, "rb") as f:
            for piece in self._pieces():
                if isinstance(piece, bytes):
                    await send({"type": "http.response.body", "body": piece, "more_body": True})
                    continue
                a, b = piece
                while a <= b:
                    data = await anyio.to_thread.run_sync(_read_at, f, a, min(CHUNK, b - a + 1))
                    if not data:  # the file shrank under us: end here rather than loop
                        break
                    a += len(data)
                    await send({"type": "http.response.body", "body": data, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _read_at(f, offset: int, n: int) -> bytes:
    f.seek(offset)
    return f.read(n)


def _http_date(value: str) -> datetime | None:
    try:
        return parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None


def _not_modified(headers: Headers, etag: str, modified: datetime) -> bool:
    match = headers.get("if-none-match")
    if match is not None:
        tags = [t.strip().removeprefix("W/") for t in match.split(",")]
        return "*" in tags or etag in tags
    since = headers.get("if-modified-since")
    if since:
        when = _http_date(since)
        return when is not None and when.tzinfo is not None and int(modified.timestamp()) <= when.timestamp()
    return False


def _if_range_holds(value: str | None, etag: str, modified: datetime) -> bool:
    """Whether a Range may be honoured: no If-Range, or it names the current version (strong match)."""
    if value is None:
        return True
    value = value.strip()
    if value.startswith('"'):
        return value == etag
    when = _http_date(value)
    return when is not None and when.tzinfo is not None and int(modified.timestamp()) == int(when.timestamp())
