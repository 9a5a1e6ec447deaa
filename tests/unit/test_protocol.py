"""llmchat.protocol on its own: a request body read into a checked request (ranges, logit_bias, the
enable_thinking rule, per-choice seeds) and a reply's pieces shaped into OpenAI's chunks, responses and usage."""
from __future__ import annotations

import pytest

from llmchat.errors import FieldError
from llmchat.protocol import (MAX_STOP_STRINGS, OPENAI_DEFAULTS, RANGES, Completion, Counts, Defaults, Piece,
                              read_request, template_kwargs, token_bias)
from llmchat.runtime.sampler import LOGIT_BIAS_RANGE, REPETITION_PENALTY_RANGE, SamplingParams

VOCAB = 100


def chat(**fields):
    return read_request(fields, chat=True, vocab_size=VOCAB)


def text(**fields):
    return read_request(fields, chat=False, vocab_size=VOCAB)


# -- ranges ------------------------------------------------------------------------------------------------------


def test_the_sampler_sets_the_ranges_it_has():
    assert (RANGES["repetition_penalty"].low, RANGES["repetition_penalty"].high) == REPETITION_PENALTY_RANGE
    assert (RANGES["logit_bias"].low, RANGES["logit_bias"].high) == LOGIT_BIAS_RANGE
    low, high = REPETITION_PENALTY_RANGE
    for value in (low, high):  # what the protocol accepts, the sampler runs
        chat(repetition_penalty=value).sampling.validate()


@pytest.mark.parametrize("name,value", [
    ("temperature", -0.1), ("temperature", 2.5), ("top_p", 1.5), ("min_p", -1), ("top_k", -1),
    ("repetition_penalty", 0.0), ("repetition_penalty", 1e3 + 1), ("presence_penalty", 2.5),
    ("frequency_penalty", -3), ("n", 0), ("n", 17), ("max_tokens", 0), ("max_completion_tokens", 0),
])
def test_a_number_out_of_range_is_refused_by_name(name, value):
    with pytest.raises(FieldError, match=f"`{name}` must be") as caught:
        chat(**{name: value})
    assert caught.value.param == name


@pytest.mark.parametrize("name,value", [
    ("temperature", "1"), ("temperature", True), ("temperature", float("nan")), ("top_k", 1.0), ("seed", "5"),
    ("n", True), ("stream", "yes"), ("ignore_eos", 1), ("max_tokens", 2.0),
])
def test_a_value_of_the_wrong_type_is_refused_by_name(name, value):
    with pytest.raises(FieldError) as caught:
        chat(**{name: value})
    assert caught.value.param == name


def test_null_means_the_default():
    request = chat(temperature=None, top_p=None, max_tokens=None, stop=None, n=None)
    assert request.sampling.temperature == OPENAI_DEFAULTS.temperature and request.max_tokens is None
    assert request.n == 1 and request.stop == ()


def test_defaults_are_openais_unless_the_caller_names_its_own():
    assert chat().sampling.temperature == 1.0 and chat().max_tokens is None
    assert text().max_tokens == OPENAI_DEFAULTS.text_max_tokens == 16
    greedy = Defaults(temperature=0.0, chat_max_tokens=256, text_max_tokens=256)
    request = read_request({}, chat=True, vocab_size=VOCAB, defaults=greedy)
    assert request.sampling == SamplingParams(temperature=0.0) and request.max_tokens == 256


def test_max_completion_tokens_wins_over_max_tokens():
    request = chat(max_tokens=5, max_completion_tokens=7)
    assert (request.max_tokens, request.max_tokens_param) == (7, "max_completion_tokens")
    assert chat(max_tokens=5).max_tokens_param == "max_tokens"


def test_log_probabilities_per_route():
    assert chat().top_logprobs is None and chat(logprobs=True).top_logprobs == 0
    assert chat(logprobs=True, top_logprobs=3).top_logprobs == 3
    with pytest.raises(FieldError, match="needs `logprobs`"):
        chat(top_logprobs=2)
    assert text(logprobs=2).top_logprobs == 2 and text().top_logprobs is None
    with pytest.raises(FieldError, match="logprobs"):
        text(logprobs=21)


def test_stop_strings():
    assert chat(stop="\n").stop == ("\n",) and chat(stop=["a", "b"]).stop == ("a", "b")
    with pytest.raises(FieldError, match=f"at most {MAX_STOP_STRINGS}"):
        chat(stop=["x"] * (MAX_STOP_STRINGS + 1))
    with pytest.raises(FieldError, match="string or a list of strings"):
        chat(stop=["a", 1])


def test_stream_options():
    assert chat(stream=True, stream_options={"include_usage": True}).include_usage
    assert not chat(stream=True).include_usage
    with pytest.raises(FieldError) as caught:
        chat(stream_options={"include_usage": "yes"})
    assert caught.value.param == "stream_options.include_usage"


def test_each_choice_draws_from_its_own_seed():
    request = chat(seed=5, temperature=0.5, n=3)
    assert [request.choice(i).seed for i in range(3)] == [5, 6, 7]
    assert {request.choice(i).temperature for i in range(3)} == {0.5}
    assert chat().choice(2).seed is None


def test_structure_and_tool_fields_go_to_the_chat_layer_as_given():
    tools = [{"type": "function", "function": {"name": "f"}}]
    request = chat(response_format={"type": "json_object"}, tools=tools, tool_choice="auto", json_schema=False)
    assert request.chat_fields() == {"response_format": {"type": "json_object"}, "json_schema": False,
                                     "tools": tools, "tool_choice": "auto", "template_kwargs": None}
    assert text(grammar="root ::= [a-z]+", tools=tools).chat_fields() == {"grammar": "root ::= [a-z]+",
                                                                           "template_kwargs": None}


# -- logit_bias --------------------------------------------------------------------------------------------------


def test_logit_bias_keys_become_token_ids():
    assert token_bias({"3": 5, "99": -100.0}, VOCAB) == {3: 5, 99: -100.0}
    assert token_bias({}, VOCAB) is None and token_bias(None, VOCAB) is None
    assert chat(logit_bias={"7": 1.5}).sampling.logit_bias == {7: 1.5}


@pytest.mark.parametrize("bias,words", [
    ({"100": 1}, "'100' is not a token id of this model (0..99)"),
    ({"-1": 1}, "is not a token id"),
    ({"x": 1}, "'x' is not a token id"),
    ({"²": 1}, "is not a token id"),  # a Unicode digit is no token id
    ({"9" * 5000: 1}, "'" + "9" * 40 + "' is not a token id"),  # more digits than Python's int() takes
    ({"0" * 5000 + "3": 1}, "is not a token id"),
    ({"3": 101}, "in [-100, 100]; token 3 has 101"),
    ({"3": True}, "token 3 has True"),
    ({"3": "1"}, "token 3 has '1'"),
    (["3"], "must be an object"),
])
def test_logit_bias_refusals_name_the_entry(bias, words):
    with pytest.raises(FieldError, match="logit_bias") as caught:
        token_bias(bias, VOCAB)
    assert words in str(caught.value) and caught.value.param == "logit_bias"


# -- enable_thinking ---------------------------------------------------------------------------------------------


def test_enable_thinking_fills_in_what_chat_template_kwargs_leave():
    assert template_kwargs(None, None) is None and template_kwargs({}, None) is None
    assert template_kwargs(None, False) == {"enable_thinking": False}
    assert template_kwargs({"enable_thinking": True}, False) == {"enable_thinking": True}  # the kwargs win
    assert template_kwargs({"x": 1}, False) == {"x": 1, "enable_thinking": False}
    assert chat(enable_thinking=False).template_kwargs == {"enable_thinking": False}
    assert text(enable_thinking=False).template_kwargs is None  # a raw prompt has no template


@pytest.mark.parametrize("kwargs,thinking,param", [
    (["x"], None, "chat_template_kwargs"), ({1: True}, None, "chat_template_kwargs"),
    (None, "no", "enable_thinking"),
])
def test_malformed_template_switches_are_refused(kwargs, thinking, param):
    with pytest.raises(FieldError) as caught:
        template_kwargs(kwargs, thinking)
    assert caught.value.param == param


# -- chunks, responses, usage ------------------------------------------------------------------------------------


def spell(token: int) -> bytes:
    return {1: b"Hi", 2: b" there", 3: b"!"}[token]


def test_a_chat_stream_opens_with_the_role_and_carries_no_usage_unasked():
    c = Completion(chat=True, model="tiny")
    [opening] = c.opening()
    assert opening["object"] == "chat.completion.chunk" and opening["id"].startswith("chatcmpl-")
    assert opening["choices"] == [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                                   "finish_reason": None}]
    assert "usage" not in opening and opening["system_fingerprint"].startswith("llmchat-")
    first = c.take(0, Piece("Hi", token=1, extension={"token": 1}))
    assert first["choices"][0]["delta"] == {"content": "Hi"} and first["llmchat"] == {"token": 1}
    assert c.take(0, Piece("", token=2)) is None  # held back: nothing to send
    reasoning = c.take(0, Piece("", parts={"reasoning_content": "hm"}))
    assert reasoning["choices"][0]["delta"] == {"reasoning_content": "hm"}
    message = {"role": "assistant", "content": "Hi there"}
    last = c.take(0, Piece(" there", finish_reason="length", counts=Counts(10, 2, 4), message=message))
    assert last["choices"][0]["finish_reason"] == "length" and "llmchat" not in last
    usage = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12,
             "prompt_tokens_details": {"cached_tokens": 4}}  # OpenAI's fields, and only those
    assert "usage" not in last and c.done and c.closing() == []  # without stream_options.include_usage, as OpenAI
    whole = c.response()
    assert whole["object"] == "chat.completion" and whole["id"] == opening["id"] and whole["usage"] == usage
    assert whole["choices"] == [{"index": 0, "message": message, "logprobs": None, "finish_reason": "length"}]


def test_with_include_usage_the_usage_comes_in_a_chunk_of_its_own():
    c = Completion(chat=True, model="tiny", n=2, include_usage=True)
    assert all(chunk["usage"] is None for chunk in c.opening())
    for index in (0, 1):
        chunk = c.take(index, Piece("a", finish_reason="stop", counts=Counts(5, 1, 5 - index)))
        assert chunk["usage"] is None
    [closing] = c.closing()
    assert closing["choices"] == []
    # The prompt counts once; cached are the positions both choices found cached.
    assert closing["usage"]["prompt_tokens"] == 5 and closing["usage"]["completion_tokens"] == 2
    assert closing["usage"]["prompt_tokens_details"] == {"cached_tokens": 4}


def test_the_usage_waits_for_the_last_choice():
    c = Completion(chat=False, model="tiny", prompts=2, n=1, include_usage=True)
    assert c.take(1, Piece("x", finish_reason="stop", counts=Counts(3, 1)))["usage"] is None
    assert c.take(0, Piece("y", finish_reason="stop", counts=Counts(4, 1)))["usage"] is None
    assert c.closing()[0]["usage"]["prompt_tokens"] == 7
    assert [choice["text"] for choice in c.response()["choices"]] == ["y", "x"]


def test_text_completion_chunks_and_log_probabilities():
    c = Completion(chat=False, model="tiny", top_logprobs=1, token_bytes=spell)
    assert c.opening() == [] and c.id.startswith("cmpl-")
    chunk = c.take(0, Piece("Hi", token=1, logprob=-0.5, top=[(1, -0.5)]))
    assert chunk["object"] == "text_completion"
    assert chunk["choices"] == [{"index": 0, "text": "Hi", "finish_reason": None, "logprobs": {
        "tokens": ["Hi"], "token_logprobs": [-0.5], "top_logprobs": [{"Hi": -0.5}], "text_offset": [0]}}]
    c.take(0, Piece(" there", token=2, logprob=-1.0, top=[(2, -1.0)]))
    c.take(0, Piece("", finish_reason="stop", counts=Counts(1, 2)))
    [choice] = c.response()["choices"]
    assert choice["text"] == "Hi there" and choice["logprobs"]["text_offset"] == [0, 2]


def test_chat_log_probabilities_spell_tokens_as_text_and_bytes():
    c = Completion(chat=True, model="tiny", top_logprobs=1, token_bytes=spell)
    chunk = c.take(0, Piece("!", token=3, logprob=-0.25, top=[(3, -0.25)]))
    entry = {"token": "!", "logprob": -0.25, "bytes": [33], "top_logprobs": [
        {"token": "!", "bytes": [33], "logprob": -0.25}]}
    assert chunk["choices"][0]["logprobs"] == {"content": [entry]}
    c.take(0, Piece("", finish_reason="stop", counts=Counts(1, 1)))
    assert c.response()["choices"][0]["logprobs"] == {"content": [entry]}


def test_log_probabilities_need_a_way_to_spell_tokens():
    with pytest.raises(ValueError, match="token_bytes"):
        Completion(chat=True, model="tiny", top_logprobs=0)
