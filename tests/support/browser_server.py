"""A small HTTP server for the browser tests: web/ at `/`, model files at `/models/`, HTTP Range, and faults on demand.

It plays the part `llmchat serve` plays in production (static web/ and Range-served models), plus what tests need:
a log of requests, a switch that drops the connection part-way through a model download, and a fake
OpenAI-compatible `/v1/chat/completions` that streams a fixed reply (for the remote mode of the JS API).
"""
from __future__ import annotations

import json
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

TYPES = {".js": "text/javascript", ".mjs": "text/javascript", ".html": "text/html; charset=utf-8",
         ".css": "text/css", ".json": "application/json", ".wasm": "application/wasm", ".svg": "image/svg+xml",
         ".webmanifest": "application/manifest+json", ".png": "image/png", ".zip": "application/zip",
         ".whl": "application/zip", ".gguf": "application/octet-stream"}
_RANGE = re.compile(r"bytes=(\d+)-(\d*)$")


@dataclass
class Faults:
    """Faults the next requests meet; each fires once."""

    drop_model_at: int | None = None  # close the connection once the model body reaches this byte offset
    stall_model_at: int | None = None  # stop sending (connection kept open) once the model body reaches this offset
    stall_seconds: float = 0.0  # how long the stall lasts before the connection is closed


@dataclass
class Log:
    requests: list[tuple[str, str | None]] = field(default_factory=list)  # (path, Range header)
    model_bytes: int = 0  # body bytes sent of files under /models/ (a cut response counts what it sent)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, path: str, range_header: str | None) -> None:
        with self.lock:
            self.requests.append((path, range_header))

    def sent(self, n: int) -> None:
        with self.lock:
            self.model_bytes += n

    def model_ranges(self) -> list[tuple[int, int]]:
        """(first, last) byte of each request for a model file that named both (llmchat's HTTP reader always does)."""
        return [(int(a), int(b)) for _, r in self.model_requests() if r
                for a, b in [r.removeprefix("bytes=").split("-")] if b]

    def model_requests(self) -> list[tuple[str, str | None]]:
        with self.lock:
            return [r for r in self.requests if r[0].startswith("/models/")]

    def clear(self) -> None:
        with self.lock:
            self.requests.clear()


class WebServer:
    def __init__(self, web: Path, models: Path, remote_reply: str = "Hello from the server."):
        self.web, self.models = web.resolve(), models.resolve()
        self.faults = Faults()
        self.log = Log()
        self.remote_reply = remote_reply
        self.remote_bodies: list[dict] = []  # what the fake /v1 endpoint was sent, in order
        self.pages: dict[str, str] = {}  # extra HTML pages by path, for tests that need a page of their own
        self.redirects: dict[str, str] = {}  # path → Location of a 302 (two that point at each other loop)
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> WebServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet: the log above is what tests read
                pass

            def do_GET(self) -> None:
                path = unquote(urlsplit(self.path).path)
                server.log.add(path, self.headers.get("Range"))
                if path in server.redirects:
                    self._send(302, "text/plain", b"", {"Location": server.redirects[path]})
                elif path in server.pages:
                    self._send(200, TYPES[".html"], server.pages[path].encode())
                elif path.startswith("/models/"):
                    self._file(server.models, path[len("/models/"):], model=True)
                else:
                    self._file(server.web, path.lstrip("/") or "index.html", model=False)

            def do_POST(self) -> None:
                path = urlsplit(self.path).path
                server.log.add(path, None)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                server.remote_bodies.append(body)
                if path != "/v1/chat/completions":
                    return self._status(404)
                words = server.remote_reply.split(" ")
                if not body.get("stream"):
                    payload = json.dumps({"id": "remote-1", "object": "chat.completion", "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": server.remote_reply},
                         "finish_reason": "stop"}]}).encode()
                    return self._send(200, "application/json", payload)
                events = []
                for i, word in enumerate(words):
                    delta = {"content": (" " if i else "") + word, **({"role": "assistant"} if i == 0 else {})}
                    events.append({"id": "remote-1", "object": "chat.completion.chunk",
                                   "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
                events.append({"id": "remote-1", "object": "chat.completion.chunk",
                               "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
                payload = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
                self._send(200, "text/event-stream", payload.encode())

            def _status(self, code: int) -> None:
                self._send(code, "text/plain", f"{code}\n".encode())

            def _send(self, code: int, ctype: str, body: bytes, headers: dict | None = None) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-cache")
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def _file(self, root: Path, rel: str, model: bool) -> None:
                target = (root / rel).resolve()
                if root not in target.parents or not target.is_file():
                    return self._status(404)
                size = target.stat().st_size
                ctype = TYPES.get(target.suffix, "application/octet-stream")
                match = _RANGE.match(self.headers.get("Range", ""))
                stat = target.stat()
                etag = f'"{stat.st_size:x}-{int(stat.st_mtime):x}"'
                if not match:
                    return self._send(200, ctype, target.read_bytes(), {"Accept-Ranges": "bytes", "ETag": etag})
                start = int(match.group(1))
                end = min(int(match.group(2)) if match.group(2) else size - 1, size - 1)
                if start >= size:
                    return self._send(416, "text/plain", b"", {"Content-Range": f"bytes */{size}"})
                self.send_response(206)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(end - start + 1))
                self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
                self.send_header("Accept-Ranges", "bytes")
                self.send_header("ETag", etag)
                self.end_headers()
                drop = server.faults.drop_model_at if model else None
                stall = server.faults.stall_model_at if model else None
                if stall is not None and start <= stall <= end:
                    server.faults.stall_model_at = None
                    drop = stall
                with open(target, "rb") as f:
                    f.seek(start)
                    pos = start
                    while pos <= end:
                        n = min(1 << 20, end + 1 - pos)
                        if drop is not None and pos <= drop < pos + n:
                            server.faults.drop_model_at = None
                            self.wfile.write(f.read(drop - pos))
                            if model:
                                server.log.sent(drop - pos)
                            self.wfile.flush()
                            if stall is not None:
                                time.sleep(server.faults.stall_seconds)
                            self.close_connection = True
                            self.connection.shutdown(socket.SHUT_RDWR)
                            return
                        self.wfile.write(f.read(n))
                        if model:
                            server.log.sent(n)
                        pos += n

        return Handler
