"""A conversation's KV cache saved to a file and restored in another LLM (llmchat/runtime/chat_cache.py): the restored
conversation answers exactly as one computed from scratch, and later saves write only what changed. Files that do
not fit are tests/hostile/test_hostile_saved_chats.py's."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from chat_turns import FIRST, follow_up, reply
from gpu_util import adapter_gpu  # noqa: F401 (a fixture)
from model_factory import write_model
from test_hybrid import PARAMS as HYBRID_PARAMS

from llmchat.api import LLM
from llmchat.runtime import chat_cache

@pytest.fixture(scope="module", params=["llama", "lfm2", "qwen35"])
def path(request, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp(request.param)
    if request.param == "llama":  # several blocks of positions, in several layers
        return write_model(folder / "llama.gguf", n_layer=3, n_embd=64, n_head=4, n_kv_head=2, seed=7)
    return write_model(folder / f"{request.param}.gguf", **HYBRID_PARAMS[request.param])


def test_a_restored_conversation_answers_as_one_computed_from_scratch(path, adapter_gpu, tmp_path):  # noqa: F811
    saved = tmp_path / "chat.kv"
    first = LLM(str(path), context=256, device=adapter_gpu.device)
    answer, _ = reply(first, FIRST, max_tokens=1 if first.runtime.engine.kv.stateful else 6)
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
    got = later.runtime.prefill(later.conversation.slot, ids[held:], start=held, all_logits=True)
    fresh.reset_chat()
    with fresh.runtime.slot() as slot:
        want = fresh.runtime.prefill(slot, ids, all_logits=True)[held:]
    np.testing.assert_allclose(np.array(got), np.array(want), rtol=0, atol=2e-3 * float(np.abs(want).max()))


def test_a_later_save_writes_only_what_changed_and_equals_a_whole_save(path, adapter_gpu, tmp_path):  # noqa: F811
    llm = LLM(str(path), context=256, device=adapter_gpu.device)
    stateful = llm.runtime.engine.kv.stateful
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


def test_on_prefill_returning_false_stops_the_reply_before_the_next_step(adapter_gpu, tmp_path):  # noqa: F811
    """A Stop while the prompt is read: no further step runs, no token comes, the reply finishes with "abort", and
    the conversation keeps the positions computed so far (the same question again computes only the rest)."""
    path = write_model(tmp_path / "m.gguf", n_layer=2, n_embd=64, n_head=4, n_kv_head=2, seed=3)
    llm = LLM(str(path), context=256, device=adapter_gpu.device, max_tokens_per_step=16)
    heard: list[int] = []

    def stop_after_two_steps(done: int, total: int) -> bool:
        heard.append(done)
        return len(heard) < 3

    steps = llm.runtime.engine.stats["steps"]
    events = list(llm.chat(FIRST, max_tokens=4, on_prefill=stop_after_two_steps))
    assert heard == [0, 16, 32] and llm.runtime.engine.stats["steps"] - steps == 2  # the third step never ran
    assert [e.token for e in events if e.token is not None] == []
    assert events[-1].finish_reason == "abort" and events[-1].usage["completion_tokens"] == 0
    again = list(llm.chat(FIRST, max_tokens=1))
    assert again[-1].usage["cached_tokens"] == 32  # the two steps' positions were kept
