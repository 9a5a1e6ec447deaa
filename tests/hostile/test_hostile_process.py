"""`llmchat serve` in a real process against hostile clients: oversized and chunked bodies, foreign Host headers,
silent connections, keys on every route, and a SIGTERM with streams in flight."""
from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest

from llmchat.server.launch import free_port
from model_factory import write_model
from server_util import running_server

pytestmark = pytest.mark.gpu

KEY = "sk-hostile-0123"
AUTH = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile-serve")
    model = write_model(root / "tiny.gguf")
    args = ["--ctx", "64", "--max-batch", "2", "--max-body", "65536", "--header-timeout", "2",
            "--api-key", KEY, "--api-key-all", "--allowed-host", "llm.example.test"]
    with running_server(model, args, log=root / "serve.log", headers=AUTH) as base:
        yield base



def test_body_too_large_by_content_length(server):
    r = httpx.post(f"{server}/v1/completions", content=b"x" * 70000, headers={**AUTH, "content-type": "application/json"})
    assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"


def test_body_too_large_while_chunked(server):
    def body():
        yield b'{"model": "tiny", "prompt": "'
        for _ in range(100):
            yield b"a" * 1024
        yield b'"}'

    r = httpx.post(f"{server}/v1/completions", content=body(), headers={**AUTH, "content-type": "application/json"})
    assert r.status_code == 413 and r.json()["error"]["type"] == "invalid_request_error"


def test_foreign_host_is_refused(server):
    port = server.rsplit(":", 1)[1]
    r = httpx.get(f"{server}/v1/models", headers={**AUTH, "Host": f"rebound.example:{port}"})
    assert r.status_code == 403 and "--allowed-host" in r.json()["error"]["message"]
    assert httpx.get(f"{server}/v1/models", headers={**AUTH, "Host": f"localhost:{port}"}).status_code == 200
    assert httpx.get(f"{server}/v1/models", headers={**AUTH, "Host": f"llm.example.test:{port}"}).status_code == 200


def test_key_guards_every_route_and_the_scheme_is_case_insensitive(server):
    for path in ("/", "/health", "/metrics", "/models/tiny.gguf", "/v1/models"):
        r = httpx.get(server + path)
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key", path
        assert httpx.get(server + path, headers={"Authorization": f"bearer {KEY}"}).status_code in (200, 404), path
    assert httpx.get(f"{server}/health", headers={"Authorization": f"BEARER  {KEY}"}).status_code == 200


def test_silent_connection_is_closed(server):
    """Both are closed by the server (its 2 s header deadline), not by the client: the sockets' own timeout is only
    a guard against a hang, and would raise instead of reading the end of the stream."""
    host, port = server.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=60) as silent, \
            socket.create_connection((host, int(port)), timeout=60) as slow:
        slow.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\n")  # never ends its headers
        assert silent.recv(1) == b"" and slow.recv(1) == b""


def _stream(base: str, body: dict, lines: list, started: threading.Event) -> None:
    with httpx.Client(timeout=60) as client, client.stream("POST", f"{base}/v1/completions", json=body) as r:
        lines.append(r.status_code)
        for line in r.iter_lines():
            if line:
                lines.append(line)
                started.set()


@pytest.mark.model
def test_sigterm_lets_running_requests_finish_then_ends_the_rest(smollm2_path, tmp_path):
    """A short stream finishes within the grace period; a long one ends with an error event and [DONE]; a
    non-streaming one, queued behind them, gets 503; new connections are refused; the process exits. The grace
    period (15 s) leaves the short stream's 4 tokens time on a loaded CPU emulator (~1 token/s), the long one's 480
    tokens none. The streams take the server's two places (the CPU default of --max-batch) before the third request
    is sent: sent together, the third could take the short stream's place and hold it for its 480 tokens."""
    port = free_port()
    log = tmp_path / "serve.log"
    cmd = [sys.executable, "-m", "llmchat", "serve", "smollm2", "--port", str(port), "--ctx", "512",
           "--log-level", "warning", "--shutdown-grace", "15", "--max-batch", "2"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(base, proc, log)
        body = {"model": "smollm2", "prompt": "Once upon a time", "temperature": 0, "ignore_eos": True,
                "stream": True}
        short, long_, started_short, started_long = [], [], threading.Event(), threading.Event()
        threads = [threading.Thread(target=_stream, args=(base, {**body, "max_tokens": 4}, short, started_short)),
                   threading.Thread(target=_stream, args=(base, {**body, "max_tokens": 480}, long_, started_long))]
        plain: list = []

        def non_streaming():
            r = httpx.post(f"{base}/v1/completions", json={**body, "stream": False, "max_tokens": 480}, timeout=60)
            plain.append((r.status_code, r.json()))

        for t in threads:
            t.start()
        assert started_long.wait(60) and started_short.wait(60)
        threads.append(threading.Thread(target=non_streaming))
        threads[-1].start()
        _wait_metric(base, "llmchat_queue_depth", 1)
        proc.send_signal(signal.SIGTERM)
        _wait_refused(base)
        assert long_[-1] != "data: [DONE]", "the long stream ended before new connections were refused"
        for t in threads:
            t.join(30)
        assert short[0] == 200 and short[-1] == "data: [DONE]"
        assert json.loads(short[-2][6:])["choices"][0]["finish_reason"] == "length"
        assert long_[0] == 200 and long_[-1] == "data: [DONE]"
        error = json.loads(long_[-2][6:])["error"]
        assert error["type"] == "server_error" and "shutting down" in error["message"]
        assert plain[0][0] == 503 and "shutting down" in plain[0][1]["error"]["message"]
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _wait_metric(base: str, name: str, value: float) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if f"\n{name} {value:g}\n" in httpx.get(f"{base}/metrics", timeout=5).text:
            return
        time.sleep(0.05)
    raise AssertionError(f"{name} did not reach {value:g} within 30 s")


def _wait_refused(base: str) -> None:
    """Until a new connection is refused: the server closes its listening socket at the signal, a moment later."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{base}/health", timeout=5)
        except httpx.ConnectError:
            return
        time.sleep(0.05)
    raise AssertionError("new connections were still accepted 10 s after SIGTERM")


def _wait_ready(base: str, proc: subprocess.Popen, log) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-2000:]
        try:
            if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    raise AssertionError("the server did not start")

