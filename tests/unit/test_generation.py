"""The generation loop's rules (llmchat.runtime.generation.Generation), on logits rows made by hand: no GPU needed.

The Python API and the server's scheduler both drive this one Generation, so these rules hold for both.
"""
from __future__ import annotations

import pytest

from llmchat.errors import ContextOverflowError, InvalidRequestError
from llmchat.runtime.generation import FinishEvent, Generation, GenerationRequest, TokenEvent, candidates_for
from llmchat.gguf.file import open_gguf
from llmchat.gpu.ops import TopK
from llmchat.runtime.sampler import SamplingParams
from llmchat.tokenizer.tokenizer import Tokenizer
from model_factory import write_model


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory) -> Tokenizer:
    path = write_model(tmp_path_factory.mktemp("tiny") / "tiny.gguf")
    with open_gguf(str(path)) as g:
        return Tokenizer.from_metadata(g.metadata)


def row_for(tokenizer: Tokenizer, token: int) -> list[float]:
    """A logits row whose arg-max is `token`."""
    row = [0.0] * tokenizer.vocab_size
    row[token] = 10.0
    return row


def sequence(tokenizer, max_tokens=8, stop=(), context=64, ignore_eos=False, **sampling) -> Generation:
    request = GenerationRequest([5, 6, 7], SamplingParams(**sampling), max_tokens, tuple(stop), ignore_eos=ignore_eos)
    seq = Generation(request, tokenizer, tokenizer.vocab_size, context)
    seq.start(slot=0)
    seq.pos = len(seq.tokens)  # as if the prompt had been fed
    return seq


def feed(seq: Generation, tokenizer: Tokenizer, tokens: list[int]) -> list:
    events = []
    for t in tokens:
        events += seq.sample(row_for(tokenizer, t))
        seq.pos = len(seq.tokens)
        if seq.finish_reason:
            break
    return events


def test_a_reply_cut_inside_a_character_ends_with_the_replacement_character(tokenizer):
    """max_tokens stops after the first byte of 'é': the finish carries U+FFFD, not nothing."""
    first_byte = tokenizer.encode("é")[0]
    seq = sequence(tokenizer, max_tokens=1)
    events = feed(seq, tokenizer, [first_byte])
    assert isinstance(events[0], TokenEvent) and events[0].text == ""
    assert isinstance(events[-1], FinishEvent) and events[-1].reason == "length" and events[-1].text == "\ufffd"


def test_end_of_generation_token_finishes_without_text(tokenizer):
    eos = next(iter(tokenizer.eog_ids))
    seq = sequence(tokenizer)
    events = feed(seq, tokenizer, tokenizer.encode("hi") + [eos])
    assert [type(e) for e in events] == [TokenEvent, TokenEvent, FinishEvent]
    assert events[-1].reason == "stop" and events[-1].completion_tokens == 3
    assert eos not in seq.tokens


def test_ignore_eos_keeps_going(tokenizer):
    eos = next(iter(tokenizer.eog_ids))
    seq = sequence(tokenizer, max_tokens=2, ignore_eos=True)
    events = feed(seq, tokenizer, [eos, eos])
    assert events[-1].reason == "length" and seq.generated == 2


def test_stop_string_ends_the_text_before_it(tokenizer):
    seq = sequence(tokenizer, stop=["ll"])
    events = feed(seq, tokenizer, tokenizer.encode("hello"))
    text = "".join(e.text for e in events)
    assert text == "he" and events[-1].reason == "stop"


def test_text_held_back_for_a_stop_that_never_comes_is_released_at_the_end(tokenizer):
    seq = sequence(tokenizer, max_tokens=3, stop=["abz"])
    events = feed(seq, tokenizer, tokenizer.encode("xab"))
    assert "".join(e.text for e in events) == "xab" and events[-1].reason == "length"


def test_the_context_ends_a_sequence_with_length(tokenizer):
    seq = sequence(tokenizer, max_tokens=8, context=11)  # 3 prompt tokens + 8 fits exactly
    events = feed(seq, tokenizer, tokenizer.encode("abcdefghijk"))
    assert events[-1].reason == "length" and seq.generated == 8


def test_candidates_from_the_gpu_are_sampled_like_the_full_row(tokenizer):
    seq = sequence(tokenizer, max_tokens=1)
    token = tokenizer.encode("q")[0]
    events = seq.sample(TopK(max=10.0, sum_exp=1.5, values=(10.0, 1.0), indices=(token, 3)))
    assert events[0].token == token


@pytest.mark.parametrize("request_args,error", [
    (([], SamplingParams(), 4), InvalidRequestError),
    (([10 ** 6], SamplingParams(), 4), InvalidRequestError),
    (([1], SamplingParams(), 0), InvalidRequestError),
    (([1] * 60, SamplingParams(), 5), ContextOverflowError),
    (([1], SamplingParams(temperature=-1), 4), InvalidRequestError),
])
def test_bad_requests_are_refused_before_any_step(tokenizer, request_args, error):
    with pytest.raises(error):
        Generation(GenerationRequest(*request_args), tokenizer, tokenizer.vocab_size, 64)


def test_one_top_k_serves_the_whole_step(tokenizer):
    greedy = sequence(tokenizer)
    sampled = sequence(tokenizer, temperature=0.7, top_k=5)
    penalised = sequence(tokenizer, repetition_penalty=1.3)
    assert candidates_for([]) == 1 and candidates_for([greedy]) == 1
    assert candidates_for([greedy, sampled]) == 8  # the next power of two
    assert candidates_for([sampled, penalised]) == 0  # someone needs the whole row
