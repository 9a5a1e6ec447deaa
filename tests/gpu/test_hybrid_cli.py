"""Tiny random models beyond the plain transformer (LFM2 and Qwen3.5 with per-sequence state, Gemma 4 with layers
reading another layer's cache) end to end: `llmchat run` and `llmchat chat` in a subprocess, and `llmchat serve`
answering two concurrent requests exactly as it answers them one at a time (each sequence's convolution and
recurrent state its own; Gemma 4's shared-cache layers reading their own sequence's cache)."""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from server_util import running_server
from cli_util import llmchat, ok

from llmchat.api import LLM
from model_factory import write_model
from gpu_util import adapter_gpu  # noqa: F401 (a fixture)

pytestmark = pytest.mark.gpu

ORACLE = Path(__file__).parents[1] / "data" / "oracle"
PROMPTS = ["hello there, hello", "the theory of the thing"]


@pytest.fixture(scope="module", params=["lfm2", "qwen35", "gemma4"])
def model(tmp_path_factory, request) -> str:
    params = json.loads((ORACLE / f"{request.param}.json").read_text())["params"]
    return str(write_model(tmp_path_factory.mktemp(request.param) / f"tiny-{request.param}.gguf", **params))


def greedy(model: str, device, prompt: str, n: int) -> list[int]:
    llm = LLM(model, context=256, device=device)
    return [e.token for e in llm.generate(prompt, max_tokens=n) if e.token is not None]


def test_run_and_chat(model, adapter_gpu):  # noqa: F811
    out = json.loads(ok(llmchat("run", model, "-p", PROMPTS[0], "-n", "8", "--ctx", "256", "--json")))
    assert out["ids"] == greedy(model, adapter_gpu.device, PROMPTS[0], 8) and out["ids"]
    reply = ok(llmchat("chat", model, "-n", "6", "--ctx", "256", stdin="hi\nand again\n"))
    assert reply.strip()


def test_serve_two_concurrent_requests(model, tmp_path):
    with running_server(model, ["--ctx", "256", "--max-batch", "2"], log=tmp_path / "serve.log") as base:
        name = httpx.get(f"{base}/v1/models", timeout=30).json()["data"][0]["id"]

        def complete(prompt: str) -> tuple[str, str]:
            r = httpx.post(f"{base}/v1/completions", timeout=300, json={
                "model": name, "prompt": prompt, "max_tokens": 12, "temperature": 0})
            assert r.status_code == 200, r.text
            choice = r.json()["choices"][0]
            return choice["text"], choice["finish_reason"]

        alone = [complete(p) for p in PROMPTS]
        with ThreadPoolExecutor(2) as pool:
            together = list(pool.map(complete, PROMPTS))
        assert together == alone
        assert all(text for text, _ in alone)
