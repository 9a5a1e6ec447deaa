"""`llmchat serve` with SmolLM2 in a real process on loopback, driven by the official openai client.

The tests share one server, and run in file order on purpose for speed only: the 300-token system prompt that
the prefix-cache test computes is then reused from the cache by the batching test's chat requests. Each test is
correct on its own. Generations stay short (the CI adapter is a CPU emulation at a few tokens per second).
"""
from __future__ import annotations

import asyncio
import json

import httpx
import openai
import pytest

from llmchat.gguf.file import open_gguf
from llmchat.tokenizer.tokenizer import Tokenizer
from server_util import ENGINES, metrics, running_server

pytestmark = [pytest.mark.gpu, pytest.mark.model]

MODEL = "smollm2"
CTX = 1024
SYSTEM = "You are the help desk of the Lakeside Library. Follow these rules when you answer.\n" + "\n".join(
    f"Rule {i}: {text}" for i, text in enumerate([
        "Greet the reader politely and keep answers short.",
        "The library opens at nine in the morning and closes at eight in the evening.",
        "On Sundays the library opens at noon and closes at five.",
        "Members may borrow up to twelve books at a time for three weeks.",
        "Films and music may be borrowed for one week only.",
        "Late returns cost ten cents a day for books and one dollar a day for films.",
        "Children under twelve need a parent to sign their membership form.",
        "The reading room on the second floor is for quiet study only.",
        "Group study rooms can be booked online up to seven days ahead.",
        "Printing costs fifteen cents a page in black and white and fifty cents in colour.",
        "Lost cards are replaced for two dollars at the front desk.",
        "Wireless internet is free; the network name is printed on the entrance door.",
        "Food is not allowed in the stacks, but drinks with lids are fine.",
        "The local history archive can be visited by appointment on weekdays.",
        "Volunteers help with homework every Tuesday and Thursday afternoon.",
        "Never invent a rule that is not written here; say that you do not know instead.",
    ], 1))
CHAT_QUESTIONS = ["When does the library open on Sunday?", "How many books can I borrow?",
                  "What does colour printing cost?", "Can I eat in the stacks?"]
TEXT_PROMPTS = ["The capital of Italy is", "Once upon a time, in a small village,", "def fibonacci(n):",
                "The three primary colours are"]


@pytest.fixture(scope="module", params=ENGINES)
def server(request, smollm2_path, tmp_path_factory):
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    args = ["--ctx", str(CTX), "--max-batch", "8", "--max-queue", "16", "--engine", request.param]
    with running_server(MODEL, args, log=log) as base:
        yield base


@pytest.fixture(scope="module")
def client(server):
    with openai.OpenAI(base_url=f"{server}/v1", api_key="unused", max_retries=0, timeout=300) as c:
        yield c


@pytest.fixture(scope="module")
def tokenizer(smollm2_path):
    with open_gguf(str(smollm2_path)) as g:
        return Tokenizer.from_metadata(g.metadata)


def _chat(question: str) -> list[dict]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]


def test_models_and_health(server, client, request):
    assert [m.id for m in client.models.list().data] == [MODEL]
    assert client.models.retrieve(MODEL).id == MODEL
    health = httpx.get(f"{server}/health").json()
    assert health["status"] == "ok" and health["engine"]["engine"] == request.node.callspec.params["server"]
    assert health["engine"]["why"] == "asked for" and health["engine"]["description"].startswith(
        f"{health['engine']['engine']} engine (")


def test_shared_system_prompt_is_computed_once(server, client, tokenizer):
    assert len(tokenizer.encode(SYSTEM)) >= 300

    def usage(question: str):
        # prompt_cache_key (OpenAI's hint) is accepted; the prefix cache needs no key to share the prompt.
        stream = client.chat.completions.create(model=MODEL, messages=_chat(question), max_tokens=2,
                                                temperature=0, stream=True, stream_options={"include_usage": True},
                                                prompt_cache_key="library-help")
        return [chunk.usage for chunk in stream if chunk.usage][-1]

    before = metrics(server)["llmchat_prefix_cache_hit_tokens_total"]
    cold = usage("Where can I print?")
    mid = metrics(server)["llmchat_prefix_cache_hit_tokens_total"]
    warm = usage("Is there free wireless internet?")
    after = metrics(server)["llmchat_prefix_cache_hit_tokens_total"]
    assert cold.prompt_tokens >= 300 and cold.prompt_tokens_details.cached_tokens < 300
    assert mid - before < 300  # the first request computed its prompt
    # ... the second reused it in whole 16-token blocks, all but the system prompt's last part-filled one, and
    # computed only the rest.
    shared = warm.prompt_tokens_details.cached_tokens
    assert shared % 16 == 0 and shared > len(tokenizer.encode(SYSTEM)) - 16 and after - mid == shared


async def _one(client: openai.AsyncOpenAI, kind: str, prompt: str, stream: bool) -> tuple[str, str]:
    common = dict(model=MODEL, max_tokens=8, temperature=0)
    if kind == "chat":
        if not stream:
            r = await client.chat.completions.create(messages=_chat(prompt), **common)
            return r.choices[0].message.content, r.choices[0].finish_reason
        text, finish = "", None
        async for chunk in await client.chat.completions.create(messages=_chat(prompt), stream=True, **common):
            for c in chunk.choices:
                text += c.delta.content or ""
                finish = c.finish_reason or finish
        return text, finish
    if not stream:
        r = await client.completions.create(prompt=prompt, **common)
        return r.choices[0].text, r.choices[0].finish_reason
    text, finish = "", None
    async for chunk in await client.completions.create(prompt=prompt, stream=True, **common):
        for c in chunk.choices:
            text += c.text
            finish = c.finish_reason or finish
    return text, finish


def test_concurrent_streams_equal_sequential_runs(server):
    jobs = [("chat", q, i % 2 == 0) for i, q in enumerate(CHAT_QUESTIONS)] + \
           [("text", p, i % 2 == 1) for i, p in enumerate(TEXT_PROMPTS)]

    async def together() -> list[tuple[str, str]]:
        async with openai.AsyncOpenAI(base_url=f"{server}/v1", api_key="unused", max_retries=0, timeout=600) as c:
            return await asyncio.gather(*(_one(c, *job) for job in jobs))

    async def one_by_one() -> list[tuple[str, str]]:
        async with openai.AsyncOpenAI(base_url=f"{server}/v1", api_key="unused", max_retries=0, timeout=600) as c:
            return [await _one(c, kind, prompt, not stream) for kind, prompt, stream in jobs]

    steps_before = metrics(server)
    batched = asyncio.run(together())
    steps_after = metrics(server)
    alone = asyncio.run(one_by_one())
    assert batched == alone
    assert all(text for text, _ in alone) and {f for _, f in alone} <= {"stop", "length"}
    # The concurrent round really decoded several sequences per step.
    wide = [steps_after[k] - steps_before.get(k, 0) for k in ('llmchat_batch_size_count',
                                                                'llmchat_batch_size_bucket{le="4"}')]
    assert wide[0] - wide[1] > 0, "no step carried more than 4 sequences"


def test_sampling_fields(client):
    messages = [{"role": "user", "content": "Write a word."}]
    a = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=4, temperature=0.9, top_p=0.95,
                                       seed=7, n=2)
    b = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=4, temperature=0.9, top_p=0.95,
                                       seed=7, n=2)
    assert [c.message.content for c in a.choices] == [c.message.content for c in b.choices]
    assert [c.index for c in a.choices] == [0, 1]
    assert 2 <= a.usage.completion_tokens <= 8
    assert a.usage.total_tokens == a.usage.prompt_tokens + a.usage.completion_tokens
    # Choice i of a seeded request draws from seed + i: the third of n=3 is the reply seed + 2 gives alone.
    sampled = dict(model=MODEL, prompt="Once upon a time", max_tokens=6, temperature=1.0)
    three = client.completions.create(**sampled, seed=11, n=3)
    assert [c.text for c in three.choices][2] == client.completions.create(**sampled, seed=13).choices[0].text
    # Penalties need the whole row of logits: a different path through the scheduler, same API.
    p = client.completions.create(model=MODEL, prompt="One, two, three,", max_tokens=4, temperature=0,
                                  presence_penalty=1.5, frequency_penalty=0.5, user="tests")
    assert p.choices[0].finish_reason in ("stop", "length") and p.usage.completion_tokens <= 4


def test_a_stream_carries_the_usage_only_when_asked_in_openai_s_shape(client):
    ask = dict(model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=2, temperature=0, stream=True)
    assert all(chunk.usage is None for chunk in client.chat.completions.create(**ask))
    *chunks, closing = client.chat.completions.create(**ask, stream_options={"include_usage": True})
    assert all(chunk.usage is None for chunk in chunks) and closing.choices == []
    assert closing.usage.completion_tokens == 2 and closing.usage.prompt_tokens_details.cached_tokens >= 0
    assert not closing.usage.model_extra  # nothing beside OpenAI's fields (cached_tokens is in the details)


def test_stop_strings_and_length(client):
    full = client.completions.create(model=MODEL, prompt="Counting: 1, 2, 3, 4,", max_tokens=8, temperature=0)
    text = full.choices[0].text
    assert full.choices[0].finish_reason == "length" and full.usage.completion_tokens == 8
    cut = text.strip()[2:4]  # something a few characters into the output
    stopped = client.completions.create(model=MODEL, prompt="Counting: 1, 2, 3, 4,", max_tokens=8, temperature=0,
                                        stop=[cut, "never appears"])
    assert stopped.choices[0].finish_reason == "stop"
    assert stopped.choices[0].text == text[:text.index(cut)]


def test_logprobs(client):
    r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=3,
                                       temperature=0, logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens - (r.choices[0].finish_reason == "stop")
    for entry in content:
        assert len(entry.top_logprobs) == 3
        assert entry.top_logprobs[0].token == entry.token  # greedy takes the most likely token
        assert entry.logprob == pytest.approx(entry.top_logprobs[0].logprob)
        assert [t.logprob for t in entry.top_logprobs] == sorted((t.logprob for t in entry.top_logprobs), reverse=True)
        assert bytes(entry.bytes).decode("utf-8", "replace") == entry.token
    t = client.completions.create(model=MODEL, prompt="The sky is", max_tokens=3, temperature=0, logprobs=2)
    lp = t.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset)
    assert "".join(lp.tokens).startswith(t.choices[0].text) and all(v <= 0 for v in lp.token_logprobs)


def _error(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    body = response.json()["error"]
    assert set(body) == {"message", "type", "param", "code"} and body["message"]
    return body


@pytest.mark.parametrize("body,param,words", [
    ({"model": MODEL, "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]}, "tools",
     "needs a 'function'"),
    ({"model": MODEL, "messages": [{"role": "user", "content": "x"}],
      "response_format": {"type": "json_schema", "json_schema": {}}}, "response_format", 'needs a "schema"'),
    ({"model": MODEL, "messages": [{"role": "user", "content": "x"}], "logit_bias": {"1": 500}}, "logit_bias",
     "[-100, 100]"),
    ({"model": MODEL, "messages": [{"role": "user", "content": "x"}], "audio": {"voice": "x"}}, "audio",
     "not supported"),
    ({"model": MODEL, "messages": [{"role": "user", "content": "x"}], "max_tokenz": 3}, "max_tokenz", "knows"),
    ({"model": MODEL, "messages": [{"role": "user", "content": "x"}], "temperature": "hot"}, "temperature", ""),
    ({"model": MODEL, "messages": [{"role": "user", "content": "x"}], "temperature": 3}, "temperature", ""),
    ({"model": MODEL, "messages": []}, "messages", ""),
    ({"model": MODEL}, "messages", "required"),
    ({"model": MODEL, "messages": [{"role": "robot", "content": "x"}]}, "messages.0.role", ""),
    ({"model": MODEL, "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "messages", "text"),
    ({"model": MODEL, "messages": [{"role": "user", "content": "x"}], "top_logprobs": 2}, "top_logprobs",
     "logprobs"),
    ({"model": MODEL, "messages": [{"role": "user", "content": "x"}], "n": 100}, "n", ""),
])
def test_chat_request_errors(server, body, param, words):
    error = _error(httpx.post(f"{server}/v1/chat/completions", json=body), 400)
    assert error["param"] == param and words in error["message"]


@pytest.mark.parametrize("body,param", [
    ({"model": MODEL, "prompt": ""}, "prompt"),
    ({"model": MODEL, "prompt": []}, "prompt"),
    ({"model": MODEL, "prompt": [1, 2, 10 ** 9]}, "prompt"),
    ({"model": MODEL, "prompt": "x", "echo": True}, "echo"),
    ({"model": MODEL, "prompt": "x", "best_of": 3}, "best_of"),
    ({"model": MODEL, "prompt": "x", "max_tokens": 0}, "max_tokens"),
    ({"model": MODEL, "prompt": "x", "stop": ["a"] * 17}, "stop"),
])
def test_completion_request_errors(server, body, param):
    assert _error(httpx.post(f"{server}/v1/completions", json=body), 400)["param"] == param


def test_malformed_json(server):
    r = httpx.post(f"{server}/v1/chat/completions", content=b'{"model": "smollm2", "messages": [',
                   headers={"content-type": "application/json"})
    assert "JSON" in _error(r, 400)["message"]


def test_unknown_model_is_404(client):
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="gpt-17", messages=[{"role": "user", "content": "x"}])
    assert info.value.body["code"] == "model_not_found"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-17")


def test_context_overflow_names_the_numbers(client, server):
    with pytest.raises(openai.BadRequestError) as info:
        client.completions.create(model=MODEL, prompt="Hello there", max_tokens=CTX)
    message = info.value.body["message"]
    assert info.value.body["code"] == "context_length_exceeded"
    assert str(CTX) in message and str(CTX + 2) in message and "2 in the prompt" in message
    long = " ".join(["word"] * (CTX + 10))
    r = httpx.post(f"{server}/v1/chat/completions",
                   json={"model": MODEL, "messages": [{"role": "user", "content": long}]})
    assert "context length" in _error(r, 400)["message"]


def test_metrics_text(server):
    # A request answered 200 and one answered 400 of its own, so the counts below hold whichever worker runs it.
    route = f"{server}/v1/chat/completions"
    assert httpx.post(route, json={"model": MODEL, "messages": _chat("Hi"), "max_tokens": 1}, timeout=300).is_success
    assert httpx.post(route, json={"model": MODEL, "messages": []}).status_code == 400
    text = httpx.get(f"{server}/metrics").text
    for name in ("llmchat_requests_total", "llmchat_prompt_tokens_total", "llmchat_generation_tokens_total",
                 "llmchat_queue_depth", "llmchat_batch_size_bucket", "llmchat_prefix_cache_hit_tokens_total",
                 "llmchat_time_to_first_token_seconds_bucket", "llmchat_time_per_output_token_seconds_bucket"):
        assert name in text
    values = metrics(server)
    assert values['llmchat_requests_total{route="/v1/chat/completions",code="200"}'] > 0
    assert values['llmchat_requests_total{route="/v1/chat/completions",code="400"}'] > 0
    assert values["llmchat_generation_tokens_total"] > 0 and values["llmchat_queue_depth"] == 0
    assert values["llmchat_time_to_first_token_seconds_count"] > 0
    assert json.loads(httpx.get(f"{server}/health").text)["model"] == MODEL
