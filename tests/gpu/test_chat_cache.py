"""A conversation's KV cache saved to a file and restored in another LLM (llmchat/chat_cache.py): the restored
conversation answers exactly as one computed from scratch, later saves write only what changed, and files that
do not fit (another model, another cache type, damaged, hostile) are refused with the current conversation kept."""
from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

from gpu_util import adapter_gpu  # noqa: F401 (a fixture)
from model_factory import write_model
from test_hybrid import PARAMS as HYBRID_PARAMS

from llmchat.runtime import chat_cache
from llmchat.api import LLM
from llmchat.gpu.kvlayout import BLOCK_TOKENS
from llmchat.runtime.chat_cache import HEADER_BYTES, ChatCacheError

FIRST = [{"role": "user", "content": "hello there, how are the bees doing this fine morning?"}]


def reply(llm: LLM, messages: list[dict], max_tokens: int = 6) -> tuple[list[int], dict]:
    events = list(llm.chat(messages, max_tokens=max_tokens))
    return [e.token for e in events if e.token is not None], events[-1].usage


def follow_up(llm: LLM, tokens: list[int], text: str) -> list[dict]:
    return FIRST + [{"role": "assistant", "content": llm.tokenizer.decode(tokens)}, {"role": "user", "content": text}]


@pytest.fixture(scope="module", params=["llama", "lfm2", "qwen35"])
def path(request, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp(request.param)
    if request.param == "llama":  # several blocks of positions, in several layers
        return write_model(folder / "llama.gguf", n_layer=3, n_embd=64, n_head=4, n_kv_head=2, seed=7)
    return write_model(folder / f"{request.param}.gguf", **HYBRID_PARAMS[request.param])


def test_a_restored_conversation_answers_as_one_computed_from_scratch(path, adapter_gpu, tmp_path):  # noqa: F811
    saved = tmp_path / "chat.kv"
    first = LLM(str(path), context=256, device=adapter_gpu.device)
    answer, _ = reply(first, FIRST, max_tokens=1 if first.engine.kv.stateful else 6)
    held = len(first.conversation.tokens)
    result = first.save_chat(saved)
    assert (result.tokens, result.written) == (held, held) and saved.stat().st_size == result.nbytes

    later = LLM(str(path), context=256, device=adapter_gpu.device)
    assert later.restore_chat(saved) == held
    messages = follow_up(later, answer, "and the honey?")
    tokens, usage = reply(later, messages)
    assert usage["cached_tokens"] == held  # nothing of the saved conversation computed again
    fresh = LLM(str(path), context=256, device=adapter_gpu.device)
    assert tokens == reply(fresh, messages)[0]
    # Closer than greedy tokens (a random model is sure of itself): the logits of tokens that follow the restored
    # positions equal those of the whole sequence computed at once.
    assert later.restore_chat(saved) == held
    ids = later.conversation.tokens + [3, 5, 8, 13, 21, 34, 55, 89, 144]
    got = later.prefill(later.conversation.slot, ids[held:], start=held, all_logits=True)
    fresh.reset_chat()
    with fresh.slot() as slot:
        want = fresh.prefill(slot, ids, all_logits=True)[held:]
    np.testing.assert_allclose(np.array(got), np.array(want), rtol=0, atol=2e-3 * float(np.abs(want).max()))


def test_a_later_save_writes_only_what_changed_and_equals_a_whole_save(path, adapter_gpu, tmp_path):  # noqa: F811
    llm = LLM(str(path), context=256, device=adapter_gpu.device)
    stateful = llm.engine.kv.stateful
    answer, _ = reply(llm, FIRST, max_tokens=1 if stateful else 6)
    kept = tmp_path / "kept.kv"
    llm.save_chat(kept)
    steps = [follow_up(llm, answer, "and the honey? " * 3),  # grows the conversation past a block
             [{"role": "user", "content": "hello there"}]]  # an edit: shares only part of it
    for messages in steps:
        held_before = len(llm.conversation.tokens)
        reply(llm, messages)
        result = llm.save_chat(kept)
        whole = tmp_path / "whole.kv"
        whole.unlink(missing_ok=True)
        assert llm.save_chat(whole).written == result.tokens == len(llm.conversation.tokens)
        if messages is steps[0] and not stateful:
            assert result.written < result.tokens - held_before + 16  # the part before the last saved block stays
        assert kept.read_bytes() == whole.read_bytes()


def test_files_that_do_not_fit_are_refused_and_the_conversation_kept(adapter_gpu, tmp_path):  # noqa: F811
    path = write_model(tmp_path / "m.gguf", n_layer=2, n_embd=64, n_head=4, n_kv_head=2, seed=3)
    other = write_model(tmp_path / "other.gguf", n_layer=3, n_embd=64, n_head=4, n_kv_head=2, seed=3)
    llm = LLM(str(path), context=256, device=adapter_gpu.device)
    answer, _ = reply(llm, FIRST)
    good = tmp_path / "good.kv"
    llm.save_chat(good, identity="etag-1")
    data = good.read_bytes()
    held = list(llm.conversation.tokens)

    def damaged(name: str, content: bytes) -> Path:
        (tmp_path / name).write_bytes(content)
        return tmp_path / name

    def header(**change) -> bytes:
        (length,) = struct.unpack_from("<I", data, 8)
        fields = {**json.loads(data[12:12 + length]), **change}
        text = json.dumps(fields).encode()
        return (data[:8] + struct.pack("<I", len(text)) + text).ljust(HEADER_BYTES, b"\0") + data[HEADER_BYTES:]

    with chat_cache.LocalFile(good, writable=False) as file:
        layout = chat_cache.read_layout(file)

    def flipped(offset: int) -> bytes:
        return data[:offset] + bytes([data[offset] ^ 0x10]) + data[offset + 1:]

    def not_finite() -> bytes:
        # NaN in the first block, with the block's checksum made to match (as a hostile file would).
        nan = np.array([np.nan], dtype=np.float16 if layout.dtype == "f16" else np.float32).tobytes()
        block = bytearray(data[layout.blocks_at:layout.blocks_at + layout.block_bytes])
        block[:len(nan)] = nan
        ids = data[HEADER_BYTES:HEADER_BYTES + 4 * min(layout.n, BLOCK_TOKENS)]
        check = struct.pack("<I", zlib.crc32(bytes(block), zlib.crc32(ids)))
        out = bytearray(data)
        out[layout.blocks_at:layout.blocks_at + layout.block_bytes] = block
        out[layout.checks_at:layout.checks_at + 4] = check
        return bytes(out)

    cases = {
        "empty": (damaged("empty.kv", b""), "empty"),
        "not ours": (damaged("text.kv", b"GGUF" + bytes(5000)), "magic"),
        "cut short": (damaged("short.kv", data[:len(data) - 100]), "cut short"),
        "header garbage": (damaged("garbage.kv", data[:12] + b"{not json" + data[21:]), "damaged"),
        "header too long": (damaged("long.kv", data[:8] + struct.pack("<I", 10 ** 6) + data[12:]), "damaged"),
        "n past capacity": (damaged("n.kv", header(n=10 ** 6)), "damaged"),
        "negative size": (damaged("neg.kv", header(block_bytes=-4)), "damaged"),
        "another identity": (good, "another model"),
        "earlier layout": (damaged("v1.kv", b"LLMCKV01" + data[8:]), "earlier llmchat"),
        "a flipped bit in a block": (damaged("bit.kv", flipped(layout.blocks_at + 3)), "block 0 of .* checksum"),
        "a flipped token id": (damaged("id.kv", flipped(HEADER_BYTES + 4 * 2)), "block 0 of .* checksum"),
        "NaN in a block": (damaged("nan.kv", not_finite()), "not finite"),
        "a directory": (tmp_path, "cannot restore a conversation from"),
        "a missing file": (tmp_path / "none.kv", "cannot restore a conversation from"),
    }
    for name, (file, words) in cases.items():
        with pytest.raises(ChatCacheError, match=words):
            llm.restore_chat(file, identity="etag-2" if name == "another identity" else "etag-1")
        assert llm.conversation.tokens == held, name
    with pytest.raises(ChatCacheError, match="cache of"):  # another model: here, blocks of another size
        LLM(str(other), context=256, device=adapter_gpu.device).restore_chat(good, identity="etag-1")
    with pytest.raises(ChatCacheError, match="f16 cache|f32 cache"):
        other_type = "f32" if llm.engine.kv.dtype == "f16" else "f16"
        if other_type == "f16" and not adapter_gpu.device.info.f16:
            pytest.skip("the adapter has no shader-f16 for a cache of the other type")
        LLM(str(path), context=256, device=adapter_gpu.device, kv_type=other_type).restore_chat(good, identity="etag-1")
    with pytest.raises(ChatCacheError, match="over this context"):
        LLM(str(path), context=16, device=adapter_gpu.device).restore_chat(good, identity="etag-1")
    # The kept conversation still answers as a fresh one would, from its cache.
    messages = follow_up(llm, answer, "and then?")
    tokens, usage = reply(llm, messages)
    assert usage["cached_tokens"] == len(held)
    assert tokens == reply(LLM(str(path), context=256, device=adapter_gpu.device), messages)[0]


def test_saving_no_conversation_empties_the_file(adapter_gpu, tmp_path):  # noqa: F811
    path = write_model(tmp_path / "m.gguf", n_layer=2, n_embd=64, n_head=4, n_kv_head=2, seed=3)
    llm = LLM(str(path), context=128, device=adapter_gpu.device)
    reply(llm, FIRST)
    saved = tmp_path / "chat.kv"
    llm.save_chat(saved)
    llm.reset_chat()
    assert llm.save_chat(saved).tokens == 0
    with chat_cache.LocalFile(saved, writable=False) as file:
        assert saved.stat().st_size == chat_cache.read_layout(file).end(0)
    assert LLM(str(path), context=128, device=adapter_gpu.device).restore_chat(saved) == 0


def test_the_prompt_reports_its_progress_leaving_out_what_the_cache_holds(adapter_gpu, tmp_path):  # noqa: F811
    """on_prefill hears, before each step of a prompt, the tokens of it computed so far and in all: the first turn
    in steps of max_tokens_per_step, a follow-up only for what the conversation's cache does not hold."""
    path = write_model(tmp_path / "m.gguf", n_layer=2, n_embd=64, n_head=4, n_kv_head=2, seed=3)
    llm = LLM(str(path), context=256, device=adapter_gpu.device, max_tokens_per_step=16)
    heard: list[tuple[int, int]] = []
    events = list(llm.chat(FIRST, max_tokens=2, on_prefill=lambda done, total: heard.append((done, total))))
    prompt = events[-1].usage["prompt_tokens"]
    assert prompt > 32 and heard == [(done, prompt) for done in range(0, prompt, 16)], (prompt, heard)
    heard.clear()
    events = list(llm.chat(follow_up(llm, [e.token for e in events if e.token is not None], "and the honey?"),
                           max_tokens=1, on_prefill=lambda done, total: heard.append((done, total))))
    usage = events[-1].usage
    new = usage["prompt_tokens"] - usage["cached_tokens"]
    assert usage["cached_tokens"] > 0 and heard == [(done, new) for done in range(0, new, 16)], (usage, heard)
