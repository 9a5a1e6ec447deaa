"""Start a real `llmchat serve` process on a free loopback port for a test module, and read its /metrics."""
from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from llmchat.server.launch import free_port, spawned_server

START_TIMEOUT_S = 180  # loading the model and compiling kernels on a CPU-emulated adapter under load
# The server suites run against each engine (a module-scoped `server` fixture's params; `--engine NAME`): llmchat's
# kernels, and llama.cpp's under the same server, scheduler and prefix cache where it is installed (make test
# installs it).
ENGINES = ["webgpu", pytest.param("cpu", marks=pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None, reason="the cpu engine is not installed (make test installs it)"))]


@contextmanager
def running_server(model: str | Path, args: Sequence[str] = (), env: Mapping[str, str] | None = None,
                   log: Path | None = None, headers: Mapping[str, str] | None = None) -> Iterator[str]:
    """Yields the server's base URL (http://127.0.0.1:PORT) once /health answers; stops it afterwards."""
    port = free_port()
    cmd = [sys.executable, "-m", "llmchat", "serve", str(model), "--port", str(port), "--log-level", "warning",
           *args]
    with spawned_server(cmd, port, timeout=START_TIMEOUT_S, log=log, env=env, headers=headers) as base:
        yield base


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
