"""Tiny random models of each architecture and quant type: the GPU forward pass against a numpy forward pass."""
from __future__ import annotations

import gguf
import numpy as np
import pytest

from llmchat.api import LLM
from llmchat.runtime.engine import Feed
from llmchat.errors import LLMChatError
from llmchat.gpu.kvlayout import cache_type
from llmchat.gpu.variants import Variants
from gpu_util import adapter_gpu  # noqa: F401 (a fixture)
from model_factory import write_model
from reference_model import ReferenceLlama

Q = gguf.GGMLQuantizationType
PROMPT = [5, 70, 71, 72, 40, 3, 100, 101, 200, 7, 9, 11, 13, 260, 261, 17, 19, 23, 29]


@pytest.fixture(scope="module")
def device(adapter_gpu):  # noqa: F811
    return adapter_gpu.device


# The KV cache type and attention kernel: the adapter's own choice (on lavapipe an f16 cache and the invocation
# kernel), each cache type forced, and the GPU kernel (flash) over an f16 cache. The reference rounds k and v as the
# cache does.
SETUPS = [(None, None), ("f16", None), ("f32", None), ("f16", "flash")]


def _setup_id(s) -> str:
    return f"{s[0] or 'kv-default'}-{s[1] or 'attn-default'}"


def _force(device, monkeypatch, kv_type: str | None, kernel: str | None) -> str:
    """Forces the attention kernel for the test; returns the KV cache type to load with."""
    if kv_type == "f16" and not device.info.f16:
        pytest.skip("the adapter has no shader-f16")
    if kernel is not None:
        monkeypatch.setattr(Variants, "attention_kernel", lambda self, mode="prefill": kernel)
    return cache_type(device.info, kv_type)


@pytest.fixture(params=SETUPS, ids=_setup_id)
def setup(request, device, monkeypatch) -> str:
    return _force(device, monkeypatch, *request.param)


# K-quant rows are whole 256-element super-blocks: those models are 256 wide, with an ffn of 512.
WIDE = {"n_embd": 256, "n_ff": 512}
CASES = [
    ("llama", Q.Q8_0, {}, True),
    ("llama", Q.Q8_0, {"fold_norms": True}, True),  # RMSNorm folded into the projections (the GPU default)
    ("llama", Q.Q4_1, {"ffn_down": Q.Q8_0, "token_embd": Q.F16}, False),
    ("mistral", Q.Q4_0, {"attn_v": Q.Q8_0}, True),  # q, k, v of different types: three dispatches
    ("qwen2", Q.Q5_1, {"ffn_up": Q.Q4_0}, True),  # biases; gate and up apart
    ("llama", Q.F32, {}, False),
    # A Q4_K_M-like mix with a tied Q6_K table (embedding lookups and the output projection); the IQ4 types.
    ("llama", Q.Q4_K, {"attn_v": Q.Q6_K, "ffn_down": Q.Q6_K, "attn_k": Q.Q5_0, "token_embd": Q.Q6_K, **WIDE}, True),
    ("llama", Q.Q5_K, {"attn_q": Q.Q5_1, "token_embd": Q.Q5_K, **WIDE}, True),
    ("llama", Q.IQ4_XS, {"ffn_down": Q.IQ4_NL, "output": Q.IQ4_NL, **WIDE}, False),
]


# Attention does not depend on the weight types: the other setups run with two of the cases (one kv head; two).
FORWARD = [(c, SETUPS[0]) for c in CASES] + [(c, s) for s in SETUPS[1:] for c in (CASES[0], CASES[4])]


@pytest.mark.parametrize("case,forced", FORWARD,
                         ids=[f"{c[0]}-{c[1].name}-{len(c[2])}-{_setup_id(s)}" for c, s in FORWARD])
def test_forward_matches_numpy(tmp_path, device, monkeypatch, case, forced):
    arch, qtype, types, tied = case
    setup = _force(device, monkeypatch, *forced)
    types = dict(types)
    fold = types.pop("fold_norms", None)
    shape = {key: types.pop(key) for key in WIDE if key in types}
    path = write_model(tmp_path / "m.gguf", arch=arch, label=arch, qtype=qtype, types=types, tied=tied,
                       n_kv_head=1 + (arch == "qwen2"), **shape)
    llm = LLM(str(path), device=device, context=128, max_tokens_per_step=8, fold_norms=fold, kv_type=setup)
    assert llm.runtime.engine.kv.dtype == setup
    ref = ReferenceLlama(str(path), setup).forward(PROMPT)
    with llm.runtime.slot() as slot:
        rows = llm.runtime.prefill(slot, PROMPT, all_logits=True)  # 19 tokens: chunks of 8, 8, 3
    got = np.array([list(r) for r in rows])
    assert got.shape == ref.shape
    err = np.abs(got - ref).max() / np.abs(ref).max()
    assert err < 1e-4, err
    # Decoding token by token after a prefill gives the same logits as the all-at-once pass.
    with llm.runtime.slot() as slot:
        llm.runtime.prefill(slot, PROMPT[:10])
        for i in range(10, len(PROMPT)):
            row = np.array(list(llm.runtime.engine.step([Feed(slot, [PROMPT[i]], i)])[0]))
            assert np.abs(row - ref[i]).max() / np.abs(ref).max() < 1e-4


def test_batched_sequences_match_alone(tmp_path, device, setup):
    path = write_model(tmp_path / "m.gguf", qtype=Q.Q8_0)
    llm = LLM(str(path), device=device, context=64, n_slots=3, max_tokens_per_step=16, kv_type=setup)
    ref = ReferenceLlama(str(path), setup)
    prompts = [PROMPT[:5], PROMPT[3:12], PROMPT[7:9]]
    slots = [llm.runtime.engine.kv.new_slot() for _ in prompts]
    # One step prefills all three sequences together (mixed lengths), the next decodes them together.
    rows = llm.runtime.engine.step([Feed(s, p, 0) for s, p in zip(slots, prompts)])
    nxt = [17, 18, 19]
    rows2 = llm.runtime.engine.step([Feed(s, [t], len(p)) for s, p, t in zip(slots, prompts, nxt)])
    for p, r1, r2, t in zip(prompts, rows, rows2, nxt):
        want = ref.forward(p + [t])
        scale = np.abs(want).max()
        assert np.abs(np.array(list(r1)) - want[-2]).max() / scale < 1e-4
        assert np.abs(np.array(list(r2)) - want[-1]).max() / scale < 1e-4


def test_feeds_without_logits(tmp_path, device):
    """A feed may only fill the cache (a prompt chunk before the last): it gets no output, the others in its step
    get theirs in order, and what it cached is what later steps attend to."""
    path = write_model(tmp_path / "m.gguf", qtype=Q.Q8_0)
    llm = LLM(str(path), device=device, context=64, n_slots=2, max_tokens_per_step=16)
    ref = ReferenceLlama(str(path), llm.runtime.engine.kv.dtype)
    a, b = llm.runtime.engine.kv.new_slot(), llm.runtime.engine.kv.new_slot()

    def close(row, tokens):
        want = ref.forward(tokens)[-1]
        return np.abs(np.array(list(row)) - want).max() / np.abs(want).max() < 1e-4

    rows = llm.runtime.engine.step([Feed(a, PROMPT[:6], 0, logits=False), Feed(b, PROMPT[:4], 0)])
    assert rows[0] is None and close(rows[1], PROMPT[:4])
    tops = llm.runtime.engine.step([Feed(b, [PROMPT[4]], 4, logits=False), Feed(a, PROMPT[6:9], 6)], top_k=4)
    assert tops[0] is None
    assert tops[1].indices[0] == int(np.argmax(ref.forward(PROMPT[:9])[-1]))
    assert llm.runtime.engine.step([Feed(a, [PROMPT[9]], 9, logits=False)]) == [None]
    assert close(llm.runtime.engine.step([Feed(a, [PROMPT[10]], 10)])[0], PROMPT[:11])
    assert close(llm.runtime.engine.step([Feed(b, [PROMPT[5]], 5)])[0], PROMPT[:6])
    with pytest.raises(LLMChatError, match="every token and for none"):
        llm.runtime.engine.step([Feed(a, [PROMPT[11]], 11, all_logits=True, logits=False)])


def test_generate_streams_and_stops(tmp_path, device):
    path = write_model(tmp_path / "m.gguf", qtype=Q.Q8_0)
    llm = LLM(str(path), device=device, context=64)
    events = list(llm.generate("hello", max_tokens=12))
    assert events[-1].finish_reason in ("stop", "length")
    assert events[-1].usage["completion_tokens"] <= 12
    greedy = [e.token for e in events if e.token is not None]
    # Greedy decoding equals the argmax of the numpy reference, step by step.
    ids = llm.runtime.encode_prompt("hello")
    ref = ReferenceLlama(str(path))
    for tok in greedy[:4]:
        assert tok == int(np.argmax(ref.forward(ids)[-1]))
        ids.append(tok)


def test_chat_reuses_the_conversation_cache(tmp_path, device):
    """A second turn computes only its new tokens, and answers exactly as a fresh conversation would."""
    path = write_model(tmp_path / "m.gguf", qtype=Q.Q8_0)
    llm = LLM(str(path), device=device, context=256)
    messages = [{"role": "user", "content": "hello there"}]
    first = []
    for event in llm.chat(messages, max_tokens=6):  # stop reading at the finish, as the browser worker does
        first.append(event)
        if event.finish_reason is not None:
            break
    assert first[-1].usage["cached_tokens"] == 0
    reply = "".join(e.text for e in first)
    messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": "the hell"}]
    second = list(llm.chat(messages, max_tokens=6))
    prompt_tokens = second[-1].usage["prompt_tokens"]
    assert 0 < second[-1].usage["cached_tokens"] < prompt_tokens
    fresh = list(llm.generate(messages, max_tokens=6))
    assert [e.token for e in second] == [e.token for e in fresh]
    # Editing history (a different first message) shares nothing and still answers like a fresh run.
    edited = [{"role": "user", "content": "hi"}] + messages[1:]
    third = list(llm.chat(edited, max_tokens=6))
    assert [e.token for e in third] == [e.token for e in llm.generate(edited, max_tokens=6)]


def test_text_held_back_for_a_stop_string_is_released_at_end_of_generation(tmp_path, device):
    path = write_model(tmp_path / "m.gguf", qtype=Q.Q8_0)
    llm = LLM(str(path), device=device, context=64)

    def run(seed, **kw):
        # A random model is very sure of itself; a high temperature makes the tokens vary.
        return list(llm.generate("hello", max_tokens=6, temperature=100.0, top_k=40, seed=seed, **kw))

    # A seeded run whose 4th token differs from the first three and whose 3rd piece is not empty.
    for seed in range(50):
        events = [e for e in run(seed) if e.token is not None]
        tokens, pieces = [e.token for e in events], [e.text for e in events]
        if len(tokens) == 6 and pieces[2] and tokens[3] not in tokens[:3]:
            break
    else:
        pytest.fail("no suitable seed")
    # Token 3 now ends generation; piece 2 could begin the stop string, so it is held back until then.
    llm.tokenizer.eog_ids = frozenset({tokens[3]})
    out = run(seed, stop=[pieces[2] + "\x00 never"])
    assert "".join(e.text for e in out) == "".join(pieces[:3])
    assert out[-1].finish_reason == "stop"


def test_gated_units_apart_match_numpy(tmp_path, device, monkeypatch):
    """Where the adapter keeps gate and up apart (SwiftShader: Variants.fuse_gated), the feed-forward runs as two
    plain matmuls and glu.wgsl, with the same logits as the reference and no gated matmul kernel in its steps."""
    monkeypatch.setattr(Variants, "fuse_gated", property(lambda self: False))
    path = write_model(tmp_path / "m.gguf", qtype=Q.Q8_0)
    llm = LLM(str(path), device=device, context=64, max_tokens_per_step=8, fold_norms=True)
    assert all(len(b.ffn_gate_up) == 2 for b in llm.runtime.model.blk)
    ref = ReferenceLlama(str(path), llm.runtime.engine.kv.dtype).forward(PROMPT)
    with llm.runtime.slot() as slot:
        got = np.array([list(r) for r in llm.runtime.prefill(slot, PROMPT, all_logits=True)])
    assert np.abs(got - ref).max() / np.abs(ref).max() < 1e-4
    kernels = {d.kernel.name for d in llm.runtime.engine.decode_program(8).dispatches}
    matmuls = [name for name in kernels if name.startswith("matmul")]
    assert matmuls and not any("[MODE=2]" in name for name in matmuls), matmuls
    assert any(name.startswith("glu") for name in kernels), kernels


def test_a_prepared_program_is_recorded_once_and_built_when_asked(tmp_path, device, monkeypatch):
    """Engine.prepare records a step's program (its kernels start compiling) and program() later builds that same
    recording: nothing is recorded twice (the browser's replies after a prepared prompt step are checked against
    the native engine's in test_browser_shared.py)."""
    path = write_model(tmp_path / "m.gguf", qtype=Q.Q8_0)
    llm = LLM(str(path), device=device, context=256)
    engine, recorded = llm.runtime.engine, []
    record = engine._record
    monkeypatch.setattr(engine, "_record", lambda *key: recorded.append(key) or record(*key))
    engine.prepare(8, 1, 1, 128)
    engine.prepare(8, 1, 1, 128)
    assert recorded == [(8, 1, 1, 128)]
    program = engine.program(8, 1, 1, 128)
    assert recorded == [(8, 1, 1, 128)] and engine.program(8, 1, 1, 128) is program
    engine.prepare(8, 1, 1, 128)  # already built: nothing to do
    assert recorded == [(8, 1, 1, 128)]
