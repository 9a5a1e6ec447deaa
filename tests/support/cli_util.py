"""The `llmchat` command run as a user runs it: a subprocess, its output and its one-line errors."""
from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time


def llmchat(
    *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "llmchat", *args], capture_output=True, text=True, input=stdin,
        env={**os.environ, **(env or {})}, timeout=120,
    )


def hears_ctrl_c() -> None:
    """`preexec_fn` for a child a test will interrupt. A shell starts a background job with SIGINT ignored, the
    child inherits that, and Python leaves an ignored SIGINT ignored: the test's Ctrl-C would never arrive and the
    test would wait for ever. The child gets the default disposition back (Python then installs its own handler)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    """The single `llmchat: error: ...` line a failing command must print (and nothing like a traceback)."""
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("llmchat: error: "), result.stderr
    return lines[0]


def read_terminal(fd: int, until: bytes | None = None, timeout: float = 120) -> bytes:
    """What a program writes to the terminal whose controlling side is `fd` (a pty), up to and including `until`,
    or (None) until every program with the other side open has closed it. AssertionError on a timeout, or when
    the output ends without `until`."""
    out = b""
    deadline = time.monotonic() + timeout
    while until is None or until not in out:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, f"nothing more within {timeout} s; so far: {out.decode(errors='replace')[-3000:]}"
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the other side is closed
            chunk = b""
        if not chunk:
            assert until is None, f"the output ended without {until!r}: {out.decode(errors='replace')[-3000:]}"
            break
        out += chunk
    return out
