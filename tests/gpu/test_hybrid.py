"""The hybrid models through the engine (LFM2's convolution blocks; Qwen3.5's gated DeltaNet layers, a convolution
and a recurrent matrix per head): per-sequence state kept right across batching, chunking, forks, prefix sharing,
truncation and slot reuse (tests/gpu/test_arch_oracle.py checks the logits themselves against llama.cpp).

Batched and chunked runs are compared with one sequence alone, token by token, within 1e-5 of the largest logit:
the same kernels run on the same numbers in another order of tokens per step (measured: a few 1e-7).
"""
from __future__ import annotations

import numpy as np
import pytest

from gpu_util import adapter_gpu  # noqa: F401 (a fixture)
from llmchat.api import LLM
from llmchat.runtime.engine import Feed
from llmchat.errors import LLMChatError, UnsupportedModelError
from llmchat.runtime.generation import FinishEvent, GenerationRequest, TokenEvent
from llmchat.gguf.file import open_gguf
from llmchat.runtime.memory import DEFAULT_ADAPTER, plan_memory
from llmchat.models import config_from_metadata
from llmchat.runtime.sampler import SamplingParams
from llmchat.serving.prefix_cache import PrefixCache
from model_factory import oracle_params, write_model

pytestmark = pytest.mark.gpu

ARCHES = ["lfm2", "qwen35"]
PARAMS = {a: oracle_params(a) for a in ARCHES}
TOL = 1e-5


@pytest.fixture(scope="module", params=ARCHES)
def path(request, tmp_path_factory):
    return write_model(tmp_path_factory.mktemp(request.param) / f"{request.param}.gguf", **PARAMS[request.param])


@pytest.fixture(scope="module")
def llm(path, adapter_gpu):  # noqa: F811
    return LLM(str(path), context=128, n_slots=4, max_tokens_per_step=16, device=adapter_gpu.device)


def prompt(seed: int, n: int) -> list[int]:
    return [int(t) for t in np.random.default_rng(seed).integers(3, 260, n)]


def alone(llm: LLM, tokens: list[int]) -> np.ndarray:
    """Every position's logits, one token per step."""
    slot = llm.runtime.engine.kv.new_slot()
    try:
        return np.array([list(llm.runtime.engine.step([Feed(slot, [t], i)])[0]) for i, t in enumerate(tokens)])
    finally:
        llm.runtime.engine.kv.free_slot(slot)


def close(got, want, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err <= TOL, f"{what}: {err:.2e}"


def test_three_sequences_batched_equal_each_alone(llm):
    batched_equal_alone(llm)


def batched_equal_alone(llm: LLM) -> None:
    """Three sequences side by side, each step's logits equal to each sequence's alone."""
    prompts = [prompt(1, 23), prompt(2, 9), prompt(3, 30)]
    want = [alone(llm, p) for p in prompts]
    kv = llm.runtime.engine.kv
    slots = [kv.new_slot() for _ in prompts]
    try:
        done = [0, 0, 0]
        # Uneven chunks side by side (4 + 5 + 7 tokens per step), then decode-sized steps, until all are in.
        while any(d < len(p) for d, p in zip(done, prompts)):
            feeds, which = [], []
            for i, (chunk, p) in enumerate(zip((4, 5, 7), prompts)):
                if done[i] < len(p):
                    take = chunk if done[i] < 12 else 1
                    feeds.append(Feed(slots[i], p[done[i]:done[i] + take], done[i], all_logits=True))
                    which.append(i)
            for i, f, out in zip(which, feeds, llm.runtime.engine.step(feeds)):
                rows = np.array(out).reshape(len(f.tokens), -1)
                close(rows, want[i][f.start:f.start + len(f.tokens)], f"sequence {i} at {f.start}")
                done[i] += len(f.tokens)
    finally:
        for s in slots:
            kv.free_slot(s)


def test_chunked_prefill_equals_token_by_token(llm):
    tokens = prompt(4, 40)
    want = alone(llm, tokens)
    with llm.runtime.slot() as slot:
        got = llm.runtime.prefill(slot, tokens, all_logits=True)  # chunks of 16
    close([list(r) for r in got], want, "chunked")


def test_a_step_must_continue_where_the_state_stands(llm):
    tokens = prompt(5, 10)
    with llm.runtime.slot() as slot:
        llm.runtime.prefill(slot, tokens)
        assert llm.runtime.engine.kv.state_position(slot) == 10
        with pytest.raises(LLMChatError, match="cannot be rewound"):
            llm.runtime.engine.step([Feed(slot, [7], 6)])
        # Restarting from 0 is always allowed; the slot's old state is not read.
        got = llm.runtime.prefill(slot, tokens[:5], all_logits=True)
    close([list(r) for r in got], alone(llm, tokens[:5]), "restarted slot")


def test_truncation_recomputes_from_the_start(llm):
    kv = llm.runtime.engine.kv
    with llm.runtime.slot() as slot:
        llm.runtime.prefill(slot, prompt(6, 20))
        assert kv.truncate(slot, 20) == 20  # nothing cut: kept
        assert kv.truncate(slot, 12) == 0  # the state cannot go back to 12
        assert kv.state_position(slot) == 0


@pytest.mark.parametrize("at", [32, 37])
def test_fork_copies_the_state(llm, at):
    """At a block boundary the child shares the parent's blocks; past one it also gets a copy of the partly filled
    last block."""
    tokens = prompt(7, 45)
    want = alone(llm, tokens)
    kv = llm.runtime.engine.kv
    with llm.runtime.slot() as parent:
        llm.runtime.prefill(parent, tokens[:at])
        assert not kv.can_fork(parent, 16)  # the state stands at `at`
        with pytest.raises(LLMChatError, match="cannot be forked"):
            kv.fork(parent, 16)
        child = kv.fork(parent, at)
        try:
            # The parent moves on with other tokens: the child's state and last block are its own copies.
            llm.runtime.prefill(parent, prompt(8, 8), start=at)
            got = llm.runtime.prefill(child, tokens[at:], start=at, all_logits=True)
        finally:
            kv.free_slot(child)
    close([list(r) for r in got], want[at:], "forked child")


def test_prefix_cache_shares_only_where_a_state_stands(llm):
    kv = llm.runtime.engine.kv
    cache = PrefixCache(kv, max_entries=2)
    tokens = prompt(9, 50)
    other = tokens[:20] + prompt(11, 10)  # shares 20 tokens, but its state stands at 30
    for held, cached in ((tokens[:32], 32), (tokens[:37], 37), (other, 0)):
        slot = kv.new_slot()
        llm.runtime.prefill(slot, held)
        cache.insert(slot, held)
        lease = cache.lease(tokens)
        assert lease.cached == cached
        got = llm.runtime.prefill(lease.slot, tokens[cached:], start=cached, all_logits=True)
        close([list(r) for r in got], alone(llm, tokens)[cached:], f"after a {len(held)}-token entry")
        kv.free_slot(lease.slot)
        cache.clear()
    assert kv.free_slots == kv.n_slots and kv.free_blocks == kv.n_blocks


def test_chat_keeps_or_recomputes_the_conversation(path, adapter_gpu):  # noqa: F811
    """A chat that extends the conversation continues from its state; an edited one starts over, and both give
    what a fresh model gives."""
    def reply(llm, messages, max_tokens=6):
        events = list(llm.chat(messages, max_tokens=max_tokens))
        return [e.token for e in events if e.token is not None], events[-1].usage["cached_tokens"]

    first = [{"role": "user", "content": "hello there"}]
    llm = LLM(str(path), context=128, device=adapter_gpu.device)
    # One token: the conversation's state then stands at the end of the prompt, which the next one extends.
    answer, _ = reply(llm, first, max_tokens=1)
    state_at = len(llm.conversation.tokens)
    follow = first + [{"role": "assistant", "content": llm.tokenizer.decode(answer)},
                      {"role": "user", "content": "and then"}]
    edited = [{"role": "user", "content": "hello world"}]
    cached = []
    for messages in (follow, edited):
        fresh = LLM(str(path), context=128, device=adapter_gpu.device)
        tokens, n = reply(llm, messages)
        assert tokens == reply(fresh, messages)[0]
        cached.append(n)
    assert cached[0] == state_at > 0
    assert cached[1] == 0  # shares a few tokens with the last conversation, but the state stands past them


def test_scheduler_batches_hybrid_sequences(llm):
    prompts = [prompt(10 + i, 5 + 9 * i) for i in range(4)]
    expected = [[e.token for e in llm.generate(p, max_tokens=8, ignore_eos=True) if e.token is not None]
                for p in prompts]
    got: dict[int, list[int]] = {i: [] for i in range(len(prompts))}
    ends = {}
    import threading
    done = threading.Event()

    def sink(i, event):
        if isinstance(event, TokenEvent):
            got[i].append(event.token)
        else:
            ends[i] = event
            if len(ends) == len(prompts):
                done.set()

    scheduler = llm.scheduler(max_batch=3, prefill_chunk=4)
    scheduler.start()
    try:
        scheduler.submit([GenerationRequest(p, SamplingParams(), 8, ignore_eos=True) for p in prompts], sink)
        assert done.wait(60)
    finally:
        scheduler.stop()
    assert all(isinstance(e, FinishEvent) for e in ends.values())
    assert [got[i] for i in range(len(prompts))] == expected


def test_memory_plan_counts_the_state(path):
    with open_gguf(str(path)) as f:
        arch = f.metadata["general.architecture"]
        plan = plan_memory(f, DEFAULT_ADAPTER, context=128, n_slots=3)
    c = PARAMS[arch]
    if arch == "lfm2":  # 3 taps: the last 2 inputs of every channel
        n_stateful, per_layer = sum(c["conv_layers"]), (3 - 1) * c["n_embd"]
        head = c["n_embd"] // c["n_head"]
    else:  # the model factory's defaults: 2 key and 4 value heads of 16, 4 taps; every 4th layer attention
        n_stateful, per_layer = c["n_layer"] - c["n_layer"] // 4, 4 * 16 * 16 + (4 - 1) * (2 * 2 + 4) * 16
        head = c["head_dim"]
    assert plan.state == n_stateful * 3 * per_layer * 4
    assert plan.total == plan.weights + plan.kv_cache + plan.activations + plan.state
    assert plan.kv_cache == 2 * (c["n_layer"] - n_stateful) * 128 * 3 * c["n_kv_head"] * head * 4


def test_what_llmchat_cannot_run_is_refused(tmp_path):
    path = write_model(tmp_path / "lfm2.gguf", **PARAMS["lfm2"])
    with open_gguf(str(path)) as f:
        md = dict(f.metadata)
    config_from_metadata(md)
    with pytest.raises(UnsupportedModelError, match="bidirectional"):
        config_from_metadata(md | {"lfm2.attention.causal": False})
    with pytest.raises(UnsupportedModelError, match="'lfm2moe' is not supported"):
        config_from_metadata(md | {"general.architecture": "lfm2moe"})


def test_scheduler_reuses_a_finished_conversation(llm):
    """A prompt that goes on from a finished sequence forks it (state, blocks and the partly filled last block) in
    the server's scheduler, and gives what it gives computed in full."""
    import threading
    first = prompt(20, 21)
    scheduler = llm.scheduler(max_batch=2, prefill_chunk=4)
    scheduler.start()

    def run(tokens):
        events, done = [], threading.Event()

        def sink(_, event):
            events.append(event)
            if not isinstance(event, TokenEvent):
                done.set()
        scheduler.submit([GenerationRequest(tokens, SamplingParams(), 5, ignore_eos=True)], sink)
        assert done.wait(60)
        return [e.token for e in events if isinstance(e, TokenEvent)], events[-1]

    try:
        reply, _ = run(first)
        follow = first + reply + prompt(21, 6)
        got, end = run(follow)
    finally:
        scheduler.stop()
    assert isinstance(end, FinishEvent) and end.cached_tokens == len(first) + len(reply) - 1
    assert got == [e.token for e in llm.generate(follow, max_tokens=5, ignore_eos=True) if e.token is not None]


def test_what_llmchat_cannot_run_of_qwen35_is_refused(tmp_path):
    path = write_model(tmp_path / "qwen35.gguf", **PARAMS["qwen35"])
    with open_gguf(str(path)) as f:
        md = dict(f.metadata)
    config_from_metadata(md)
    with pytest.raises(UnsupportedModelError, match="leaves no trunk"):  # prediction blocks alone
        config_from_metadata(md | {"qwen35.nextn_predict_layers": md["qwen35.block_count"]})
    config_from_metadata(md | {"qwen35.rope.dimension_sections": [2, 1, 1, 0]})  # cycles every 4 pairs, all text
    with pytest.raises(UnsupportedModelError, match="fourth"):  # pairs 3 to 7 of 8 fall to the fourth section
        config_from_metadata(md | {"qwen35.rope.dimension_sections": [1, 1, 1, 5]})
    with pytest.raises(UnsupportedModelError, match="'qwen35moe' is not supported"):
        config_from_metadata(md | {"general.architecture": "qwen35moe"})
