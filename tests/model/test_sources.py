"""Byte sources: local files, memory, and HTTP Range against a real server on 127.0.0.1 (a handler written here
that honours Range and can misbehave on demand, and Python's stock handler, which ignores Range)."""
from __future__ import annotations

import functools
import os
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from gguf_factory import default_tensors, write_gguf, write_split_gguf

from llmchat.gguf import sources
from llmchat.errors import SourceError
from llmchat.gguf.file import open_gguf
from llmchat.gguf.sources import BytesSource, FileSource, HTTPSource, open_source

DATA = bytes(range(256)) * 12289  # a bit over 3 MiB, no two nearby offsets alike


# ---- local files and memory ----


def test_file_source_reads_exact_ranges(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    path.write_bytes(DATA)
    with FileSource(path) as s:
        assert (s.name, s.size) == (str(path), len(DATA))
        for offset, length in [(0, 0), (0, 10), (1000, 4096), (len(DATA) - 7, 7), (0, len(DATA))]:
            assert bytes(s.read(offset, length)) == DATA[offset:offset + length]


@pytest.mark.parametrize("offset, length", [(-1, 4), (0, -1), (len(DATA) - 3, 4), (len(DATA) + 1, 0)])
def test_file_source_rejects_reads_outside_the_file(tmp_path: Path, offset: int, length: int) -> None:
    path = tmp_path / "f.bin"
    path.write_bytes(DATA)
    with FileSource(path) as s, pytest.raises(SourceError, match=f"{path}: cannot read {length} bytes"):
        s.read(offset, length)


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.gguf"
    path.write_bytes(b"")
    with FileSource(path) as s:
        assert s.size == 0
        assert bytes(s.read(0, 0)) == b""
        with pytest.raises(SourceError, match="empty.gguf"):
            s.read(0, 1)


def test_missing_file_directory_and_read_after_close(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="nope.bin: no such file"):
        FileSource(tmp_path / "nope.bin")
    with pytest.raises(SourceError, match="is a directory"):
        FileSource(tmp_path)
    path = tmp_path / "f.bin"
    path.write_bytes(b"abc")
    s = FileSource(path)
    s.close()
    with pytest.raises(SourceError, match="read after close"):
        s.read(0, 1)


def test_views_outlive_close(tmp_path: Path) -> None:
    # A caller may still hold a tensor's bytes when the model is closed: the view must stay valid, not crash.
    path = tmp_path / "f.bin"
    path.write_bytes(DATA)
    s = FileSource(path)
    view = s.read(100, 50)
    s.close()
    assert bytes(view) == DATA[100:150]


def test_file_source_without_mmap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Interpreters built without mmap (some embedded and browser builds) fall back to seek + read.
    monkeypatch.setattr(sources, "mmap", None)
    path = tmp_path / "f.bin"
    path.write_bytes(DATA)
    with FileSource(path) as s:
        data = s.read(70_000, 1234)
        assert type(data) is bytes and data == DATA[70_000:71_234]  # a copy: no mapping to view
        with pytest.raises(SourceError, match="cannot read 2 bytes"):
            s.read(len(DATA) - 1, 2)
    with open_gguf(write_gguf(tmp_path / "m.gguf")) as f:
        spec = default_tensors()[0]
        assert bytes(f.tensor_bytes(spec.name)) == spec.data


def test_bytes_source() -> None:
    with BytesSource(DATA, name="mem") as s:
        assert bytes(s.read(5, 3)) == DATA[5:8]
        with pytest.raises(SourceError, match="mem: cannot read"):
            s.read(len(DATA), 1)


def test_open_source_dispatch(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    path.write_bytes(b"xyz")
    with open_source(str(path)) as a, open_source(path.as_uri()) as b:
        assert isinstance(a, FileSource) and isinstance(b, FileSource)
        assert bytes(b.read(0, 3)) == b"xyz"


# ---- HTTP ----


class RangeHandler(BaseHTTPRequestHandler):
    """Serves files from `server.root` with single-range support; `server.faults` scripts misbehaviour."""

    server: LocalServer

    def log_message(self, format: str, *args: object) -> None:  # keep test output clean
        pass

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def do_GET(self) -> None:
        self._serve(body=True)

    def _serve(self, body: bool) -> None:
        self.server.log.append((self.path, self.headers.get("Range")))
        fault = self.server.faults.pop(0) if self.server.faults else None
        if isinstance(fault, int):
            self.send_error(fault)
            return
        path = self.server.root / self.path.split("?")[0].lstrip("/")
        if not path.is_file():
            self.send_error(404)
            return
        size = path.stat().st_size
        match = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if match is None:
            start, end, status = 0, size - 1, 200
        else:
            start = int(match[1])
            end = min(int(match[2]) if match[2] else size - 1, size - 1)
            if start >= size:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status = 206
        total = size + (1 if fault == "grow" else 0)
        self.send_response(status)
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{total}")
        self.send_header("Content-Length", str(end - start + 1))
        self.end_headers()
        if body:
            with open(path, "rb") as f:
                f.seek(start)
                chunk = f.read(end - start + 1)
            self.wfile.write(chunk[:len(chunk) // 2] if fault == "short" else chunk)
            if fault == "short":
                self.close_connection = True


class LocalServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root: Path, handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.root = root
        self.log: list[tuple[str, str | None]] = []
        self.faults: list[int | str] = []  # consumed one per request: an HTTP status, "short" or "grow"

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/{name}"


def _serve(server: LocalServer) -> Iterator[LocalServer]:
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LocalServer]:
    (tmp_path / "data.bin").write_bytes(DATA)
    yield from _serve(LocalServer(tmp_path, RangeHandler))


def _http(url: str, **kw: object) -> HTTPSource:
    return HTTPSource(url, backoff=0, **kw)  # type: ignore[arg-type]


def test_http_size_and_reads(server: LocalServer) -> None:
    with _http(server.url("data.bin"), block_size=65536) as s:
        assert s.size == len(DATA)
        for offset, length in [(0, 1), (65530, 12), (len(DATA) - 5, 5), (123_456, 65536), (7, 200_000), (0, 0)]:
            assert bytes(s.read(offset, length)) == DATA[offset:offset + length], (offset, length)
        with pytest.raises(SourceError, match="data.bin: cannot read"):
            s.read(len(DATA) - 1, 2)


def test_http_small_reads_come_from_the_read_ahead_cache(server: LocalServer) -> None:
    with _http(server.url("data.bin"), block_size=65536) as s:
        assert s.request_count == 1  # the size probe also fetched the first block
        for offset in range(0, 65536 - 16, 16):  # 4095 small reads in the first block
            assert bytes(s.read(offset, 16)) == DATA[offset:offset + 16]
        assert s.request_count == 1
        s.read(65536 * 3 - 2, 4)  # straddles blocks 2 and 3: both fetched in one request
        assert s.request_count == 2
        assert server.log[-1][1] == f"bytes={65536 * 2}-{65536 * 4 - 1}"
        s.read(65536 * 3, 100)
        assert s.request_count == 2
        s.read(1000, 3 * 65536)  # larger than a block: fetched directly, exactly
        assert server.log[-1][1] == f"bytes=1000-{1000 + 3 * 65536 - 1}"


def test_http_server_that_ignores_range(tmp_path: Path) -> None:
    (tmp_path / "data.bin").write_bytes(DATA)
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.log_message = lambda *a: None  # type: ignore[attr-defined]
    for server in _serve(LocalServer(tmp_path, handler)):  # type: ignore[arg-type]
        url = server.url("data.bin")
        with pytest.raises(SourceError, match=f"{url}: the server ignores HTTP Range requests"):
            HTTPSource(url)
        with pytest.raises(SourceError, match="ignores HTTP Range"):
            open_gguf(url)


def test_http_not_found_is_not_retried(server: LocalServer) -> None:
    url = server.url("missing.gguf")
    with pytest.raises(SourceError, match=f"{url}: HTTP 404"):
        _http(url)
    assert len(server.log) == 1


def test_http_transient_errors_are_retried(server: LocalServer) -> None:
    server.faults = [503, "short", 502]
    with _http(server.url("data.bin"), block_size=65536) as s:
        assert s.request_count == 4
        assert bytes(s.read(10, 10)) == DATA[10:20]


def test_http_retries_are_bounded(server: LocalServer) -> None:
    server.faults = [503] * 10
    url = server.url("data.bin")
    with pytest.raises(SourceError, match=f"{url}: HTTP 503 .*gave up after 3 attempts"):
        _http(url, retries=2)
    assert len(server.log) == 3


def test_http_connection_refused(server: LocalServer) -> None:
    url = server.url("data.bin")
    server.shutdown()
    server.server_close()
    with pytest.raises(SourceError, match=f"{url}: request failed"):
        _http(url, retries=1)


def test_http_file_changed_on_server(server: LocalServer) -> None:
    with _http(server.url("data.bin"), block_size=65536) as s:
        server.faults = ["grow"]
        with pytest.raises(SourceError, match="changed on the server"):
            s.read(2 * 65536, 10)


def test_http_empty_file(server: LocalServer) -> None:
    (server.root / "empty.bin").write_bytes(b"")
    with _http(server.url("empty.bin")) as s:
        assert s.size == 0
        assert s.read(0, 0) == b""


def test_open_source_http(server: LocalServer) -> None:
    with open_source(server.url("data.bin")) as s:
        assert isinstance(s, HTTPSource) and s.size == len(DATA)


def test_gguf_over_http(server: LocalServer) -> None:
    path = write_gguf(server.root / "m.gguf")
    with open_gguf(server.url("m.gguf")) as remote, open_gguf(path) as local:
        assert remote.metadata == local.metadata
        assert remote.tensors == local.tensors
        for name in local.tensors:
            assert bytes(remote.tensor_bytes(name)) == bytes(local.tensor_bytes(name))
        assert remote.sources[0].request_count == 1  # small file: the probe brought all of it


def test_split_gguf_over_http(server: LocalServer) -> None:
    specs = default_tensors()
    paths = write_split_gguf(server.root / "model.gguf", specs, tensors_per_shard=2)
    with open_gguf(server.url(paths[1].name) + "?download=1") as f:
        assert [s.name for s in f.sources] == [server.url(p.name) + "?download=1" for p in paths]
        assert all(isinstance(s, HTTPSource) for s in f.sources)
        for spec in specs:
            assert bytes(f.tensor_bytes(spec.name)) == spec.data
    server.root.joinpath(paths[2].name).unlink()
    with pytest.raises(SourceError, match=r"shard 3 of 3 is missing.*HTTP 404"):
        open_gguf(server.url(paths[0].name))


@pytest.mark.model
def test_real_model_over_http_reads_only_its_header(server: LocalServer, smollm2_path: Path) -> None:
    os.symlink(smollm2_path, server.root / "smollm2.gguf")
    with open_gguf(server.url("smollm2.gguf")) as remote, open_gguf(smollm2_path) as local:
        assert remote.tensors == local.tensors
        assert remote.metadata == local.metadata
        header_requests = remote.sources[0].request_count
        assert header_requests <= 3  # ~1.8 MB of header in 1 MiB blocks
        name = "output_norm.weight"
        assert bytes(remote.tensor_bytes(name)) == bytes(local.tensor_bytes(name))
        assert remote.sources[0].request_count == header_requests + 1
