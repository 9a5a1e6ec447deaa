"""The prefix cache's limit through a real `llmchat serve` (a tiny random model): --cache-entries finished
sequences are kept for prefix sharing, and no more; the least recently used goes first."""
from __future__ import annotations

import httpx
import pytest

from model_factory import write_model
from server_util import running_server

pytestmark = pytest.mark.gpu

# Two prompts with nothing in common, each several whole 16-token blocks long (the tiny vocabulary spells them
# about a byte a token).
A = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima"
B = "zulu yankee xray whiskey victor uniform tango sierra romeo quebec papa oscar"


def _cached(base: str, prompt: str) -> int:
    reply = httpx.post(f"{base}/v1/completions", json={"model": "tiny", "prompt": prompt, "max_tokens": 1,
                                                       "temperature": 0}, timeout=120)
    assert reply.status_code == 200, reply.text
    return reply.json()["usage"]["prompt_tokens_details"]["cached_tokens"]


@pytest.mark.parametrize("entries", [1, 2])
def test_cache_entries_bounds_the_prefixes_kept(tmp_path, entries):
    model = write_model(tmp_path / "tiny.gguf")
    args = ["--ctx", "256", "--max-batch", "1", "--cache-entries", str(entries)]
    with running_server(model, args, log=tmp_path / "serve.log") as base:
        assert _cached(base, A) == 0
        assert _cached(base, A + " mike") >= 48  # A was kept: its whole blocks are shared
        assert _cached(base, B) == 0
        # One entry: B's sequence took A's place. Two: A is still there beside it.
        again = _cached(base, A + " november")
        assert (again == 0) if entries == 1 else (again >= 48), again
