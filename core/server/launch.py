"""Run an HTTP server as a child process on a loopback port, for as long as a `with` block lasts.

Used by the server tests (a real `llmchat serve`) and by tools/bench/load_bench.py (ours or llama.cpp's server).
"""
from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def spawned_server(cmd: Sequence[str], port: int, *, ready_path: str = "/health", timeout: float = 180,
                   log: Path | None = None, env: Mapping[str, str] | None = None,
                   headers: Mapping[str, str] | None = None,
                   started: Callable[[subprocess.Popen], None] | None = None) -> Iterator[str]:
    """Start `cmd` (which listens on `port`), yield its base URL once `ready_path` answers 200, stop it after.

    `log` receives its output (discarded when None); `headers` go with the readiness check; `started` is handed
    the process (to watch its memory, say); an exit or no answer within `timeout` seconds raises RuntimeError with
    the end of the log.
    """
    out = open(log, "wb") if log else subprocess.DEVNULL
    proc = subprocess.Popen(list(cmd), stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
    if started is not None:
        started(proc)
    base = f"http://127.0.0.1:{port}"

    def failure(what: str) -> RuntimeError:
        tail = log.read_text(errors="replace")[-2000:] if log else ""
        return RuntimeError(f"{cmd[0]} {what}\n{tail}")

    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise failure(f"exited with {proc.returncode} before answering")
            try:
                request = urllib.request.Request(base + ready_path, headers=dict(headers or {}))
                with urllib.request.urlopen(request, timeout=2) as response:
                    if response.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise failure(f"did not answer {ready_path} within {timeout} s")
            time.sleep(0.25)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if log:
            out.close()
