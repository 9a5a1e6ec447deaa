"""The `llmchat` command run as a user runs it: a subprocess, its output and its one-line errors."""
from __future__ import annotations

import os
import subprocess
import sys


def llmchat(
    *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "llmchat", *args], capture_output=True, text=True, input=stdin,
        env={**os.environ, **(env or {})}, timeout=120,
    )


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
