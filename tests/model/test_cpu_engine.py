"""The cpu engine (llama.cpp's CPU kernels through llama-cpp-python) on the real models, against llama.cpp's own
numbers for the same files (tests/data, taken with llama-cpp-python 0.3.36 on the CPU), held to the golden gates
the WebGPU engine meets (tests/model/test_golden.py): every prompt's ids, argmax and top-32 logits, the greedy
continuations, the perplexity. SmolLM2's Q4_1 runs the very kernels the reference ran, so its logits are the
reference's to a few ulps; Gemma's K-quants run unrepacked here (cpu_engine.py says why), 0.9 logits at most from
the reference's repacked run. Then what llmchat keeps in charge on it: batching through the scheduler, the prefix
cache's forks, a conversation's cache continued and cut, what the engine refuses; the CLI and what `auto` picks.
"""
from __future__ import annotations

import json
import os
import threading

import numpy as np
import pytest

from cli_util import llmchat, ok
from llmchat.api import LLM
from llmchat.errors import InvalidRequestError
from llmchat.runtime.generation import GenerationRequest, TokenEvent
from llmchat.runtime.sampler import SamplingParams
from test_golden import LONG, MODELS, TEXTS

pytest.importorskip("llama_cpp", reason="the cpu engine is not installed (make test installs it)")

pytestmark = pytest.mark.model

EXACT = {"smollm2": 1e-3}  # the reference ran 2 threads; another count sums in another order, a few ulps apart


@pytest.fixture(scope="module")
def llms(request):
    loaded = {}

    def get(name: str) -> LLM:
        if name not in loaded:
            path = request.getfixturevalue(MODELS[name].fixture)
            loaded[name] = LLM(str(path), context=1024, n_slots=9, engine="cpu")
        return loaded[name]
    return get


@pytest.mark.parametrize("name", MODELS)
def test_logits_and_greedy_tokens_meet_llama_cpp_s(llms, name):
    golden, llm = MODELS[name], llms(name)
    assert llm.runtime.engine_choice.engine == "cpu" and llm.runtime.device is None
    agree = short = 0
    for case in golden.reference["prompts"]:
        ids, logits = llm.logits(case["text"])
        assert ids == case["ids"]
        logits = np.asarray(logits)
        top = np.argsort(-logits, kind="stable")[:32]
        assert top[0] == case["top_ids"][0]
        assert len(set(top.tolist()) & set(case["top_ids"])) >= (32 if name in EXACT else 28)
        gap = np.abs(logits[case["top_ids"]] - np.asarray(case["top_logits"])).max()
        assert gap < EXACT.get(name, golden.logit_tolerance), case["text"]
        if len(case["ids"]) <= LONG:
            got = [e.token for e in llm.generate(case["text"], max_tokens=8) if e.token is not None]
            agree += got == case["greedy_ids"][:8]
            short += 1
    assert agree >= (short if name in EXACT else short - 1), agree


@pytest.mark.parametrize("name", MODELS)
def test_perplexity_meets_llama_cpp_s(llms, name):
    golden = MODELS[name]
    want = golden.reference["perplexity"]
    got = llms(name).perplexity(TEXTS["perplexity_text"], window=want["window"])
    assert got["tokens"] == want["scored_tokens"]
    assert abs(got["ppl"] / want["ppl"] - 1) < (1e-4 if name in EXACT else golden.ppl_tolerance), (got, want)


def _greedy(ids: list[int], n: int) -> GenerationRequest:
    return GenerationRequest(ids, SamplingParams(temperature=0.0), n, ignore_eos=True)


def _run_alone(llm: LLM, request: GenerationRequest) -> list[int]:
    return [e.token for e in llm.generate(request.prompt, max_tokens=request.max_tokens, ignore_eos=True)
            if e.token is not None]


@pytest.mark.parametrize("name", MODELS)
def test_eight_batched_sequences_equal_each_alone_and_share_a_prefix(llms, name):
    """Eight prompts, two sharing a 40-token prefix, through the scheduler at once (prompt chunks of 4 beside
    the decoding ones): each continuation is the one it gets alone, steps carried several sequences, and the
    second of the pair started from the first's cache (a fork: llama.cpp's seq_cp)."""
    llm = llms(name)
    tok = llm.tokenizer
    shared = tok.encode("A library keeps books, films and music for its members. " * 4)[:40]
    texts = ["The capital of Italy is", "def fibonacci(n):", "The three primary colours are", "Water boils at",
             "Once upon a time, in a small village,", "My favourite food is"]
    prompts = [shared + tok.encode(" The first question is")] + [tok.encode(t) for t in texts] + \
        [shared + tok.encode(" Another question is")]
    requests = [_greedy(p, 16) for p in prompts]
    alone = [_run_alone(llm, r) for r in requests]
    scheduler = llm.scheduler(max_batch=8, max_queue=8, prefill_chunk=4, cache_entries=1)
    got: list[list[int]] = [[] for _ in prompts]
    done = threading.Semaphore(0)

    def sink(index, event):
        if isinstance(event, TokenEvent):
            got[index].append(event.token)
        else:
            done.release()
    scheduler.start()
    try:
        scheduler.submit(requests[:1], sink)  # the first finishes, and stays in the cache for the last
        assert done.acquire(timeout=120)
        scheduler.submit(requests[1:], lambda i, e: sink(i + 1, e))
        for _ in requests[1:]:
            assert done.acquire(timeout=120)
    finally:
        scheduler.stop()
    assert got == alone
    assert scheduler.metrics.prefix_hit_tokens.value() >= 32  # whole blocks of the shared 40 tokens
    assert scheduler.metrics.steps.value() < sum(len(p) + 16 for p in prompts[1:]) // 4  # steps were shared


def test_a_conversation_continues_and_is_cut_where_it_changed(llms):
    """The chat's cache is kept from turn to turn (only the new tokens are computed) and cut back when a turn
    edits the history (KVCache.truncate, llama.cpp's seq_rm): each reply equals one computed from nothing."""
    llm = llms("smollm2")
    fresh = LLM(str(llm.runtime.path), context=1024, engine="cpu")
    first = [{"role": "user", "content": "Name a colour."}]

    def reply(model: LLM, messages):
        events = list(model.chat(messages, max_tokens=8))
        return events[-1].message["content"], events[-1].usage["cached_tokens"]
    text, cached = reply(llm, first)
    assert cached == 0
    second = first + [{"role": "assistant", "content": text}, {"role": "user", "content": "And another one?"}]
    text2, cached2 = reply(llm, second)
    assert cached2 > 10
    edited = first + [{"role": "assistant", "content": text}, {"role": "user", "content": "Name a fruit."}]
    text3, cached3 = reply(llm, edited)
    assert 10 < cached3 < cached2 + 8
    for messages, want in ((second, text2), (edited, text3)):
        fresh.reset_chat()
        assert reply(fresh, messages)[0] == want


def test_what_the_cpu_engine_refuses_says_so(llms, tmp_path):
    llm = llms("smollm2")
    with pytest.raises(InvalidRequestError, match="webgpu engine"):
        llm.save_chat(tmp_path / "chat.bin")
    with pytest.raises(InvalidRequestError, match="profile, int8_dot belong to the webgpu engine"):
        LLM(str(llm.runtime.path), engine="cpu", profile="phone", int8_dot=True)
    with pytest.raises(InvalidRequestError, match="threads must be a positive number"):
        LLM(str(llm.runtime.path), engine="cpu", threads=0)
    with pytest.raises(InvalidRequestError, match="the kernel sweep"):
        llm.runtime.sweep_kernels()


def test_the_cli_runs_it_and_says_what_ran(smollm2_path):
    case = MODELS["smollm2"].reference["prompts"][0]
    result = json.loads(ok(llmchat("run", str(smollm2_path), "--engine", "cpu", "--threads", "1", "-p",
                                   case["text"], "-n", "8", "--json")))
    assert result["ids"] == case["greedy_ids"][:8]
    assert result["engine"]["engine"] == "cpu" and result["adapter"] is None
    assert result["engine"]["description"] == "cpu engine (llama.cpp, 1 CPU thread): asked for"
    bench = json.loads(ok(llmchat("bench", str(smollm2_path), "--engine", "cpu", "-n", "4", "--repeat", "1",
                                  "--json")))
    assert bench["engine"]["engine"] == "cpu" and bench["decode_tok_s"] > 0 and bench["threads"] >= 1
    run = llmchat("run", str(smollm2_path), "--engine", "cpu", "-p", case["text"], "-n", "2")
    assert "llmchat: cpu engine (llama.cpp, " in ok(run) + run.stderr


def test_auto_runs_the_cpu_engine_where_the_only_adapter_is_an_emulation(smollm2_path):
    """The suite's adapter decides what `auto` must do: the cpu engine on a CPU emulation (these machines'
    lavapipe), WebGPU on a hardware adapter."""
    from llmchat.gpu import open_device
    device = open_device()
    software = device.info.software
    device.close()
    env = {k: v for k, v in os.environ.items() if k != "LLMCHAT_ENGINE"}
    result = json.loads(ok(llmchat("run", str(smollm2_path), "-p", "Hi", "-n", "1", "--json",
                                   env={**env, "LLMCHAT_ENGINE": "auto"})))
    if software:
        assert result["engine"]["engine"] == "cpu"
        assert "emulates a GPU on the CPU: llama.cpp's CPU kernels are faster there" in result["engine"]["why"]
    else:
        assert result["engine"] == {**result["engine"], "engine": "webgpu"}
        assert result["engine"]["why"].startswith("a hardware adapter")
    bad = llmchat("run", str(smollm2_path), "-p", "Hi", env={"LLMCHAT_ENGINE": "tpu"})
    assert bad.returncode != 0 and "$LLMCHAT_ENGINE must be one of auto, webgpu, cpu, not 'tpu'" in bad.stderr
