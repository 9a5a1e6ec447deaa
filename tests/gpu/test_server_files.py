"""`llmchat serve` as a file server: the web folder with the right MIME types, model files with HTTP Range,
path traversal refused, CORS. A real process on loopback serving a tiny random model (no generation here)."""
from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
from email.parser import BytesParser
from email.policy import HTTP
from pathlib import Path

import httpx
import pytest

from model_factory import write_model
from server_util import running_server

pytestmark = pytest.mark.gpu

ORIGIN = "http://app.example.test"
WEB_FILES = {
    "index.html": ("<!doctype html><title>demo</title>", "text/html; charset=utf-8"),
    "app.mjs": ("export const x = 1;", "text/javascript; charset=utf-8"),
    "worker.js": ("self.onmessage = () => {};", "text/javascript; charset=utf-8"),
    "engine.wasm": (b"\0asm\1\0\0\0", "application/wasm"),
    "llmchat-0.1.0-py3-none-any.whl": (b"PK\3\4", "application/zip"),
    "pyodide-lock.json": ("{}", "application/json"),
    "manifest.webmanifest": ('{"name": "llmchat"}', "application/manifest+json"),
    "docs/index.html": ("<p>docs</p>", "text/html; charset=utf-8"),
}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("site")
    web = root / "web"
    for name, (content, _) in WEB_FILES.items():
        path = web / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    (web / ".env").write_text("SECRET=1")
    (web / "__pycache__").mkdir()
    (web / "__pycache__" / "x.pyc").write_bytes(b"pyc")
    home = root / "home"
    (home / "models").mkdir(parents=True)
    (home / "models" / "other.gguf").write_bytes(bytes(range(256)) * 40)
    (root / "secret.txt").write_text("root:x:0:0")
    os.symlink(root / "secret.txt", home / "models" / "escape.gguf")
    model = write_model(root / "tiny.gguf")
    return root, web, home, model


@pytest.fixture(scope="module")
def server(site):
    root, web, home, model = site
    args = ["--web-dir", str(web), "--ctx", "64", "--max-batch", "1", "--cors-origin", ORIGIN]
    with running_server(model, args, env={"LLMCHAT_HOME": str(home)}, log=root / "serve.log") as base:
        yield base


@pytest.mark.parametrize("name", sorted(WEB_FILES))
def test_web_files_and_media_types(server, name):
    content, media = WEB_FILES[name]
    r = httpx.get(f"{server}/{name}")
    assert r.status_code == 200 and r.headers["content-type"] == media
    assert r.content == (content if isinstance(content, bytes) else content.encode())


def test_folders_serve_their_index(server):
    assert httpx.get(f"{server}/").text == WEB_FILES["index.html"][0]
    assert httpx.get(f"{server}/docs/").text == WEB_FILES["docs/index.html"][0]
    assert httpx.get(f"{server}/docs").text == WEB_FILES["docs/index.html"][0]


def test_the_chat_page_hears_of_its_server(server, site):
    """server.json tells web/index.html where this server's API is and which model it serves (as a file too)."""
    model = site[3]
    r = httpx.get(f"{server}/server.json")
    assert r.status_code == 200 and r.headers["cache-control"] == "no-cache"
    # Not a catalogue model: it is called what its file calls itself (general.name).
    assert r.json() == {"api": "/v1", "api_key": False, "model": {
        "id": model.stem, "name": "tiny random model", "context": 64, "file": f"/models/{model.name}"}}


def test_hidden_and_cache_files_are_not_served(server):
    for path in ("/.env", "/__pycache__/x.pyc", "/missing.js", "/v1/nothing"):
        r = httpx.get(server + path)
        assert r.status_code == 404 and r.json()["error"]["message"], path


def _raw_get(server: str, path: str) -> tuple[int, bytes]:
    """GET with the path sent exactly as written (httpx would normalise the dots away)."""
    host, port = server.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


@pytest.mark.parametrize("path", [
    "/models/../../../../etc/passwd", "/models/%2e%2e/%2e%2e/%2e%2e/etc/passwd", "/models/..%2f..%2fsecret.txt",
    "/models/..%2Fsecret.txt", "/models//etc/passwd", "/models/%2Fetc%2Fpasswd", "/models/escape.gguf",
    "/../secret.txt", "/%2e%2e/secret.txt", "/..%2fsecret.txt", "/docs/../../secret.txt", "/models/..\\secret.txt",
    "/models/other.gguf%00.txt",
])
def test_path_traversal_is_refused(server, path):
    status, body = _raw_get(server, path)
    assert status in (400, 404) and b"root:" not in body


def test_served_model_file_with_ranges(server, site):
    model = site[3]
    data = model.read_bytes()
    url = f"{server}/models/{model.name}"
    r = httpx.get(url, headers={"Range": "bytes=0-3"})
    assert r.status_code == 206 and r.content == b"GGUF"
    assert r.headers["content-range"] == f"bytes 0-3/{len(data)}" and r.headers["content-length"] == "4"
    assert r.headers["accept-ranges"] == "bytes" and r.headers["etag"].startswith('"')
    r = httpx.get(url, headers={"Range": "bytes=-100"})  # suffix: the last 100 bytes
    assert r.status_code == 206 and r.content == data[-100:]
    assert r.headers["content-range"] == f"bytes {len(data) - 100}-{len(data) - 1}/{len(data)}"
    r = httpx.get(url, headers={"Range": "bytes=1000-"})
    assert r.status_code == 206 and r.content == data[1000:]
    r = httpx.get(url)
    assert r.status_code == 200 and r.content == data and r.headers["content-length"] == str(len(data))


def test_unsatisfiable_range_is_416(server, site):
    size = site[3].stat().st_size
    r = httpx.get(f"{server}/models/{site[3].name}", headers={"Range": f"bytes={size}-"})
    assert r.status_code == 416 and r.headers["content-range"] == f"bytes */{size}" and r.content == b""


def test_multiple_ranges_are_multipart(server, site):
    data = (site[2] / "models" / "other.gguf").read_bytes()
    r = httpx.get(f"{server}/models/other.gguf", headers={"Range": "bytes=0-9,-5"})
    assert r.status_code == 206 and r.headers["content-type"].startswith("multipart/byteranges; boundary=")
    assert int(r.headers["content-length"]) == len(r.content)
    message = BytesParser(policy=HTTP).parsebytes(
        b"Content-Type: " + r.headers["content-type"].encode() + b"\r\n\r\n" + r.content)
    parts = [(p["Content-Range"], p.get_payload(decode=True)) for p in message.iter_parts()]
    assert parts == [(f"bytes 0-9/{len(data)}", data[:10]), (f"bytes {len(data) - 5}-{len(data) - 1}/{len(data)}",
                                                               data[-5:])]


def test_conditional_requests_and_head(server, site):
    url = f"{server}/models/other.gguf"
    full = httpx.get(url)
    etag = full.headers["etag"]
    assert httpx.get(url, headers={"If-None-Match": etag}).status_code == 304
    # If-Range with the current validator honours the range; with a stale one the whole file comes back.
    assert httpx.get(url, headers={"Range": "bytes=0-0", "If-Range": etag}).status_code == 206
    stale = httpx.get(url, headers={"Range": "bytes=0-0", "If-Range": '"stale"'})
    assert stale.status_code == 200 and stale.content == full.content
    head = httpx.head(url, headers={"Range": "bytes=0-9"})
    assert head.status_code == 206 and head.headers["content-length"] == "10" and head.content == b""
    assert httpx.head(f"{server}/models/missing.gguf").status_code == 404


def test_cors(server, site):
    url = f"{server}/models/{site[3].name}"
    r = httpx.get(url, headers={"Origin": ORIGIN, "Range": "bytes=0-3"})
    assert r.headers["access-control-allow-origin"] == ORIGIN
    assert "content-range" in r.headers["access-control-expose-headers"].lower()
    assert "access-control-allow-origin" not in httpx.get(url, headers={"Origin": "http://evil.test"}).headers
    pre = httpx.options(f"{server}/v1/chat/completions", headers={
        "Origin": ORIGIN, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type"})
    assert pre.status_code == 200 and pre.headers["access-control-allow-origin"] == ORIGIN
    assert "POST" in pre.headers["access-control-allow-methods"]


def test_pages_and_a_runtime_folder_of_their_own(site, tmp_path):
    """--pages DIR at /pages/ (paths checked as under /), and LLMCHAT_WEB_DIST: /dist/ from another folder, with no
    start-up warning when it holds a runtime."""
    root, web, home, model = site
    pages, dist = tmp_path / "pages", tmp_path / "runtime"
    (pages / "sub").mkdir(parents=True)
    (pages / "demo.html").write_text("<p>demo</p>")
    (pages / "sub" / "index.html").write_text("<p>sub</p>")
    (pages / ".hidden").write_text("secret")
    (dist / "pyodide").mkdir(parents=True)
    (dist / "manifest.json").write_text('{"build": "x"}')
    (dist / "pyodide" / "pyodide-lock.json").write_text("{}")
    log = tmp_path / "serve.log"
    args = ["--web-dir", str(web), "--pages", str(pages), "--ctx", "64", "--max-batch", "1"]
    with running_server(model, args, env={"LLMCHAT_HOME": str(home), "LLMCHAT_WEB_DIST": str(dist)},
                        log=log) as base:
        assert httpx.get(f"{base}/pages/demo.html").text == "<p>demo</p>"
        assert httpx.get(f"{base}/pages/sub/").text == "<p>sub</p>"
        listing = httpx.get(f"{base}/pages/")  # a folder without an index.html lists what it holds
        assert listing.status_code == 200 and listing.headers["content-type"].startswith("text/html")
        assert '<a href="demo.html">demo.html</a>' in listing.text and '<a href="sub/">sub/</a>' in listing.text
        assert ".hidden" not in listing.text
        assert httpx.get(f"{base}/dist/manifest.json").json() == {"build": "x"}
        assert httpx.get(f"{base}/index.html").text == WEB_FILES["index.html"][0]  # the web folder still at /
        for path in ("/pages/../secret.txt", "/pages/%2e%2e/secret.txt", "/dist/../secret.txt", "/pages/.hidden"):
            status, body = _raw_get(base, path)
            assert status in (400, 404) and b"root:" not in body, path
    text = log.read_text()
    assert "browser runtime is not installed" not in text
    assert f"llmchat: your pages at {base}/pages/: {base}/pages/demo.html\n" in text  # where to open them


def test_a_port_in_use_is_refused_before_loading(site):
    """A port another program listens on: one error line naming --port, status 2, and no model loaded first."""
    root, web, home, model = site
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "llmchat", "serve", str(model), "--port", str(port)],
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr == (f"llmchat: error: port {port} on 127.0.0.1 is in use by another program (another "
                           "llmchat serve?): choose another with --port\n")


def test_a_missing_page_folder_is_refused_before_loading(site, tmp_path):
    root, web, home, model = site
    done = subprocess.run([sys.executable, "-m", "llmchat", "serve", str(model), "--pages", str(tmp_path / "no")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "--pages" in done.stderr and "is not a folder" in done.stderr
