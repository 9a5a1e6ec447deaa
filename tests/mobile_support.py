"""Shared by the app's tests: the app's sources on the import path, and a local model server with HTTP Range that
can cut its connection once mid-file (the way a phone's network drops)."""
from __future__ import annotations

import http.server
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "mobile" / "src"))


class RangeServer:
    """Serves `files` ({name: path}) with single-range GETs. `cut_at` (bytes): the first response whose range covers
    that offset sends its headers for the full range and then closes after the bytes before it. `served` counts body
    bytes sent, `ranges` records each request's range."""

    def __init__(self, files: dict[str, Path], cut_at: int | None = None):
        self.files, self.cut_at, self.served, self.ranges = files, cut_at, 0, []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                path = server.files.get(self.path.lstrip("/"))
                if path is None:
                    self.send_error(404)
                    return
                size = path.stat().st_size
                spec = self.headers.get("Range", "")
                first, _, last = spec.removeprefix("bytes=").partition("-")
                start, end = int(first), min(int(last) if last else size - 1, size - 1)
                server.ranges.append((start, end))
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
                self.send_header("Content-Length", str(end - start + 1))
                self.end_headers()
                with path.open("rb") as f:
                    f.seek(start)
                    body = f.read(end - start + 1)
                if server.cut_at is not None and start < server.cut_at <= end:
                    body, server.cut_at = body[:server.cut_at - start], None
                    self.wfile.write(body)
                    server.served += len(body)
                    self.close_connection = True
                    self.wfile.flush()
                    self.connection.shutdown(2)
                    return
                self.wfile.write(body)
                server.served += len(body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> RangeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
