"""Start a real `llmchat serve` process on a free loopback port for a test module, and read its /metrics."""
from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx

START_TIMEOUT_S = 180  # loading the model and compiling kernels on a CPU-emulated adapter under load


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running_server(model: str | Path, args: Sequence[str] = (), env: Mapping[str, str] | None = None,
                   log: Path | None = None) -> Iterator[str]:
    """Yields the server's base URL (http://127.0.0.1:PORT) once /health answers; stops it afterwards."""
    port = free_port()
    cmd = [sys.executable, "-m", "llmchat", "serve", str(model), "--port", str(port), "--log-level", "warning",
           *args]
    out = open(log, "wb") if log else subprocess.DEVNULL
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                detail = log.read_text(errors="replace")[-2000:] if log else ""
                raise RuntimeError(f"llmchat serve exited with {proc.returncode} before answering\n{detail}")
            try:
                if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"llmchat serve did not answer /health within {START_TIMEOUT_S} s")
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


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$")


def metrics(base: str, **headers: str) -> dict[str, float]:
    """/metrics as {"name{labels}": value}."""
    text = httpx.get(f"{base}/metrics", headers=headers, timeout=10).text
    values = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m:
            values[m[1] + (m[2] or "")] = float(m[3])
    return values
