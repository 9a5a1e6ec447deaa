"""`llmchat serve` at its limits, in a real process with SmolLM2: the API key, a full queue (429 with
Retry-After; tests/gpu/test_server_scheduler.py checks the estimate itself), and clients that leave mid-generation
(their sequence is cancelled and its slot freed). One batch place and one queue place make every state reachable
with three requests."""
from __future__ import annotations

import subprocess
import sys
import time
from contextlib import ExitStack

import httpx
import openai
import pytest

from server_util import ENGINES, metrics, running_server

pytestmark = [pytest.mark.gpu, pytest.mark.model]

KEY = "sk-test-0123456789"
AUTH = {"Authorization": f"Bearer {KEY}"}
LONG = {"model": "smollm2", "prompt": "Once upon a time", "max_tokens": 200, "temperature": 0, "ignore_eos": True}


@pytest.fixture(scope="module", params=ENGINES)
def server(request, smollm2_path, tmp_path_factory):
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    args = ["--ctx", "512", "--max-batch", "1", "--max-queue", "1", "--api-key", KEY, "--engine", request.param]
    with running_server("smollm2", args, log=log) as base:
        yield base


def _wait_for(server: str, condition, what: str, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        values = metrics(server)
        if condition(values):
            return values
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; metrics: {values}")
        time.sleep(0.1)


def test_api_key(server):
    url = f"{server}/v1/completions"
    body = {"model": "smollm2", "prompt": "Hi", "max_tokens": 1}
    missing = httpx.post(url, json=body)
    assert missing.status_code == 401 and missing.headers["www-authenticate"].startswith("Bearer")
    assert missing.json()["error"]["code"] == "invalid_api_key"
    assert httpx.post(url, json=body, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert httpx.get(f"{server}/v1/models").status_code == 401
    with openai.OpenAI(base_url=f"{server}/v1", api_key="wrong", max_retries=0) as bad:
        with pytest.raises(openai.AuthenticationError):
            bad.models.list()
    with openai.OpenAI(base_url=f"{server}/v1", api_key=KEY, max_retries=0) as good:
        assert good.completions.create(**body).usage.completion_tokens == 1
    # Monitoring stays open.
    assert httpx.get(f"{server}/health").status_code == 200 and httpx.get(f"{server}/metrics").status_code == 200


def _start_stream(stack: ExitStack, server: str) -> httpx.Response:
    client = stack.enter_context(httpx.Client(timeout=120))
    return stack.enter_context(client.stream("POST", f"{server}/v1/completions", json={**LONG, "stream": True},
                                             headers=AUTH))


def test_full_queue_is_429_and_leaving_clients_free_their_slots(server):
    baseline = metrics(server)
    with ExitStack() as stack:
        running = _start_stream(stack, server)
        assert running.status_code == 200
        lines = running.iter_lines()  # kept open: leaving an iteration early would close the connection
        assert '"text"' in next(lines)  # a token: it is decoding
        waiting = _start_stream(stack, server)
        assert waiting.status_code == 200
        _wait_for(server, lambda m: m["llmchat_queue_depth"] == 1, "the second request to queue")
        with openai.OpenAI(base_url=f"{server}/v1", api_key=KEY, max_retries=0) as client:
            with pytest.raises(openai.RateLimitError) as info:
                client.completions.create(model="smollm2", prompt="Hi", max_tokens=1)
        assert int(info.value.response.headers["retry-after"]) >= 1
        assert info.value.body["type"] == "rate_limit_error"
        # Leaving the block closes both connections mid-stream.
    after = _wait_for(server, lambda m: m["llmchat_running_sequences"] == 0 and m["llmchat_queue_depth"] == 0,
                      "the abandoned sequences to be cancelled")
    cancelled = 'llmchat_sequences_total{outcome="cancelled"}'
    assert after[cancelled] - baseline.get(cancelled, 0) == 2
    assert after["llmchat_kv_free_blocks"] == baseline["llmchat_kv_free_blocks"]  # cancelled sequences keep nothing
    # The one batch place is free again: a new request is served.
    r = httpx.post(f"{server}/v1/completions", json={**LONG, "max_tokens": 2}, headers=AUTH, timeout=120)
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 2


def test_non_streaming_client_that_leaves_is_cancelled(server):
    cancelled = 'llmchat_sequences_total{outcome="cancelled"}'
    before = metrics(server).get(cancelled, 0)
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{server}/v1/completions", json=LONG, headers=AUTH, timeout=httpx.Timeout(10, read=2))
    _wait_for(server, lambda m: m.get(cancelled, 0) == before + 1 and m["llmchat_running_sequences"] == 0,
              "the request to be cancelled")



def test_a_default_batch_shrinks_to_fit_a_small_gpu_memory_budget_a_chosen_one_is_refused(smollm2_path, tmp_path):
    """Under the phone profile (an f32 KV cache: 90 MiB per 2048-token sequence) a 350 MiB budget holds SmolLM2's
    weights and two sequences, not four: the default batch is halved until it fits, a chosen one is refused."""
    log = tmp_path / "serve.log"
    budget = ["--profile", "phone,gpu_budget=350MiB"]
    with running_server(smollm2_path, budget, log=log) as base:
        assert httpx.get(f"{base}/health", timeout=10).status_code == 200
    text = log.read_text()
    assert ("llmchat: the KV cache's 2 sequences: up to 1 decoded at once (--max-batch; fewer than the default, to "
            "fit the GPU memory budget) and 1 finished one kept for prefix sharing (--cache-entries)") in text, text
    assert "(2048-token context, up to 1 sequence at once)" in text
    refused = subprocess.run([sys.executable, "-m", "llmchat", "serve", str(smollm2_path), "--max-batch", "2", *budget],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "for 4 sequences (fewer fit more: --max-batch, --cache-entries)" in refused.stderr.splitlines()[-1]
