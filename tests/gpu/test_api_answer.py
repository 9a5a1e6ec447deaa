"""`LLM.answer`: a request checked as the server checks it (llmchat.protocol.read_request) answered with the
protocol's pieces, through the same generation as `chat` and `generate`; the browser runtime answers this way."""
from __future__ import annotations

import pytest

from chat_turns import FIRST
from gpu_util import adapter_gpu  # noqa: F401 (a fixture)
from model_factory import write_model

from llmchat.api import LLM
from llmchat.errors import FieldError
from llmchat.protocol import Completion, read_request


@pytest.fixture(scope="module")
def llm(adapter_gpu, tmp_path_factory) -> LLM:  # noqa: F811
    path = write_model(tmp_path_factory.mktemp("answer") / "m.gguf", n_layer=2, n_embd=64, n_head=4, n_kv_head=2,
                       seed=5)
    return LLM(str(path), context=256, device=adapter_gpu.device, max_tokens_per_step=16)


def _request(llm: LLM, chat: bool = True, **fields):
    return read_request({"temperature": 0, **fields}, chat=chat, vocab_size=llm.runtime.config.vocab_size)


def test_a_chat_request_answers_as_chat_does_and_completion_shapes_it(llm):
    llm.reset_chat()
    events = list(llm.chat(FIRST, max_tokens=6))
    llm.reset_chat()
    pieces = list(llm.answer(_request(llm, max_tokens=6), messages=FIRST))
    assert [p.token for p in pieces if p.token is not None] == [e.token for e in events if e.token is not None]
    completion = Completion(chat=True, model="m")
    for piece in pieces:
        completion.take(0, piece)
    answer = completion.response()
    assert answer["choices"][0]["message"] == events[-1].message
    assert answer["choices"][0]["finish_reason"] == events[-1].finish_reason
    assert answer["usage"]["prompt_tokens"] == events[-1].usage["prompt_tokens"] > 0
    assert set(pieces[-1].extension["timings"]) >= {"prefill_tok_s", "decode_tok_s", "compile_s"}


def test_a_stop_between_tokens_ends_the_reply_with_the_counts_of_what_was_given_out(llm):
    llm.reset_chat()
    pieces = []
    stream = llm.answer(_request(llm, max_tokens=20, ignore_eos=True), messages=FIRST,
                        should_stop=lambda: sum(p.token is not None for p in pieces) >= 3)
    for piece in stream:
        pieces.append(piece)
    prompt = len(llm.runtime.encode_chat(llm.runtime.prepare_chat(FIRST).prompt))
    assert [p.finish_reason for p in pieces] == [None, None, None, "abort"]
    finish = pieces[-1]
    assert (finish.counts.prompt_tokens, finish.counts.completion_tokens) == (prompt, 3)
    assert finish.text == "" and finish.token is None  # nothing of the token the stop held back
    # The turn's computed positions stay in the conversation: the same question again computes none of them.
    again = list(llm.answer(_request(llm, max_tokens=1), messages=FIRST))
    assert again[-1].counts.cached_tokens >= prompt - 1


def test_a_text_request_completes_token_ids_in_a_slot_of_its_own(llm):
    pieces = list(llm.answer(_request(llm, chat=False, prompt=[1, 2, 3], max_tokens=2, ignore_eos=True),
                             prompt=[1, 2, 3]))
    assert [p.finish_reason for p in pieces] == [None, None, "length"]
    assert (pieces[-1].counts.prompt_tokens, pieces[-1].counts.completion_tokens) == (3, 2)
    assert pieces[-1].message is None  # a text completion has no chat message


@pytest.mark.parametrize("fields, kwargs, param", [
    ({"n": 2}, {"messages": FIRST}, "n"),
    ({}, {}, "messages"),
])
def test_what_an_answer_cannot_make_is_refused_naming_the_field(llm, fields, kwargs, param):
    with pytest.raises(FieldError) as refused:
        llm.answer(_request(llm, **fields), **kwargs)
    assert refused.value.param == param


@pytest.mark.parametrize("prompt", [None, [], ["a"], [True]])
def test_a_text_prompt_must_be_text_or_token_ids(llm, prompt):
    with pytest.raises(FieldError) as refused:
        llm.answer(_request(llm, chat=False), prompt=prompt)
    assert refused.value.param == "prompt"
