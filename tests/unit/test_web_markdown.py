"""web/markdown.js's parser under Node: blocks, inline spans, and what it refuses to make (non-http links, images,
raw HTML). The DOM it builds is tested in the browser (tests/browser/test_browser_chat_ui.py)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

TESTS = Path(__file__).parents[1] / "node" / "markdown_test.mjs"


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_markdown_parser_cases_pass_under_node() -> None:
    result = subprocess.run(["node", "--test", str(TESTS)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "# fail 0" in result.stdout and "# pass 8" in result.stdout, result.stdout[-2000:]
