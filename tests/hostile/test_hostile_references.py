"""Hostile model references: a URL with credentials, URLs that name no host, a local file that is not a GGUF, a hub
endpoint that answers HTML or carries credentials. Each ends in one `llmchat: error:` line, exit status 2, no
traceback, and no password in anything printed (the real CLI against a local hub, tests/support/hub_cli.py)."""
from __future__ import annotations

import base64
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from cli_util import ok
from hub_cli import env_for, error_line, llmchat
from hub_cli import files, home, hub  # noqa: F401 (fixtures)

pytest.importorskip("huggingface_hub")


def test_pull_url_errors(hub, home) -> None:
    env = env_for(hub, home)
    assert "takes the URL of a .gguf file" in error_line(llmchat("pull", f"{hub.url}/org/tiny-GGUF/resolve/main/README.md", env=env))
    assert "HTTP 404" in error_line(llmchat("pull", f"{hub.url}/org/tiny-GGUF/resolve/main/none.gguf", env=env))
    for url in ("http://../x.gguf", "http://host:port/x.gguf", "https:///x.gguf"):
        assert "not an http(s) URL with a valid host name" in error_line(llmchat("pull", url, env=env))
    (home / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
    assert "not a GGUF file" in error_line(llmchat("pull", str(home / "passwd"), env=env))


def test_pull_url_credentials_are_basic_auth_for_that_host_only(hub, home, files) -> None:
    env = env_for(hub, home)
    host = hub.url.removeprefix("http://")
    url = f"http://me:s%40cret@{host}/org/tiny-GGUF/resolve/main/tiny-Q8_0.gguf"  # the hub redirects to its CDN
    pulled = llmchat("pull", url, env=env)
    path = Path(ok(pulled).strip())
    assert path.read_bytes() == files["tiny-Q8_0.gguf"]
    assert path == home / "llmchat" / "models" / "url" / host.replace(":", "_") / "org/tiny-GGUF/resolve/main/tiny-Q8_0.gguf"
    assert "cret" not in pulled.stdout + pulled.stderr
    assert {r.authorization for r in hub.log("hub")} == {"Basic " + base64.b64encode(b"me:s@cret").decode()}
    assert {r.authorization for r in hub.log("cdn")} == {None}
    failed = error_line(llmchat("pull", url.replace("tiny-Q8_0", "none"), env=env))
    assert "HTTP 404" in failed and "cret" not in failed and "me:" not in failed


def test_a_hub_endpoint_that_answers_html_is_one_error_line(home) -> None:
    class Portal(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"<html><body>Sign in to the network</body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Portal)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        env = env_for(None, home, HF_ENDPOINT=f"http://127.0.0.1:{server.server_port}")
        assert "did not answer as a Hugging Face hub does" in error_line(llmchat("pull", "hf.co/org/repo", env=env))
    finally:
        server.shutdown()


def test_a_hub_endpoint_with_credentials_never_prints_them(hub, home) -> None:
    host = hub.url.removeprefix("http://")
    env = env_for(hub, home, HF_ENDPOINT=f"http://mirror-user:s3cr3t-word@{host}")
    for reference in ("hf.co/org/none-GGUF", "hf://org/tiny-GGUF/none.gguf"):
        failed = llmchat("pull", reference, env=env)
        line = error_line(failed)
        assert host in line, line
        assert "s3cr3t" not in failed.stdout + failed.stderr and "mirror-user" not in failed.stdout + failed.stderr
