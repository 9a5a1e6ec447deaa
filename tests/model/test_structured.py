"""Constrained replies from a real model (SmolLM2 on lavapipe) through the Python API: every reply held to a JSON
schema parses and validates, greedy and sampled; one cut by max_tokens says "length"; GBNF, regex and
`logit_bias` hold under the grammar; tools and reasoning come back in OpenAI's shapes."""
from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from llmchat.api import LLM
from llmchat.errors import GrammarError, UnsupportedSchemaError
from gpu_util import adapter_gpu  # noqa: F401 (a fixture)

pytestmark = [pytest.mark.gpu, pytest.mark.model]

SCHEMAS = sorted((Path(__file__).parents[1] / "data" / "schemas").glob("*.json"))
# Every schema's grammar is checked against the corpus without a model (test_json_schema.py); the model's replies,
# 5-20 s each on a CPU emulator, are taken greedily for a third of the corpus and sampled for a sixth of it, no
# schema twice.
GREEDY, SAMPLED = SCHEMAS[::3], SCHEMAS[1::6]


@pytest.fixture(scope="module")
def llm(smollm2_path, adapter_gpu) -> LLM:  # noqa: F811
    return LLM(str(smollm2_path), context=1024, device=adapter_gpu.device)


def ask(llm: LLM, content: str, max_tokens: int, **fields) -> tuple[str, str, list]:
    events = list(llm.chat([{"role": "user", "content": content}], max_tokens=max_tokens, **fields))
    return events[-1].message["content"], events[-1].finish_reason, events


def schema_request(schema: dict) -> dict:
    return {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema, "strict": True}}


def check_reply(text: str, finish: str, schema: dict) -> None:
    if finish == "length":  # cut: incomplete by design, and said so
        return
    assert finish == "stop", finish
    jsonschema.validate(json.loads(text), schema)


def test_the_schema_corpus_is_there():
    assert len(SCHEMAS) >= 20


@pytest.mark.parametrize("path", GREEDY, ids=lambda p: p.stem)
def test_greedy_replies_validate_against_their_schema(llm, path):
    schema = json.loads(path.read_text())
    text, finish, _ = ask(llm, f"Give an example {path.stem.replace('_', ' ')} as JSON.", 160,
                          response_format=schema_request(schema))
    check_reply(text, finish, schema)


@pytest.mark.parametrize("path", SAMPLED, ids=lambda p: p.stem)
def test_sampled_replies_validate_against_their_schema(llm, path):
    schema = json.loads(path.read_text())
    text, finish, _ = ask(llm, "Fill this in with made-up data.", 160, response_format=schema_request(schema),
                          temperature=1.0, top_p=0.95, seed=7)
    check_reply(text, finish, schema)


def test_a_reply_cut_by_max_tokens_finishes_with_length(llm):
    schema = {"type": "object", "properties": {"story": {"type": "string", "minLength": 200}}, "required": ["story"]}
    text, finish, _ = ask(llm, "Tell a story as JSON.", 8, response_format=schema_request(schema))
    assert finish == "length"
    assert text.startswith("{")


def test_json_object_gives_an_object(llm):
    text, finish, _ = ask(llm, "List three colours as JSON.", 120, response_format={"type": "json_object"})
    if finish == "stop":
        assert isinstance(json.loads(text), dict)


def test_grammar_and_regex_hold(llm):
    text, finish, _ = ask(llm, "Is the sky blue?", 10, grammar='root ::= ("yes" | "no") "."')
    assert text in ("yes.", "no.") and finish == "stop"
    text, finish, _ = ask(llm, "When was Paris founded?", 20, response_format={"type": "regex", "regex": r"[0-9]{3,4} (BC|AD)"})
    assert re.fullmatch(r"[0-9]{3,4} (BC|AD)", text) and finish == "stop"


def test_logit_bias_acts_inside_the_grammar(llm):
    grammar = 'root ::= "yes" | "no"'
    free, _, _ = ask(llm, "Is the sky blue?", 4, grammar=grammar)
    tokenizer = llm.tokenizer
    prefixes = {t: -100 for t in range(tokenizer.vocab_size)
                if (piece := tokenizer.token_bytes(t)) and free.encode().startswith(piece)}
    other, finish, _ = ask(llm, "Is the sky blue?", 4, grammar=grammar, logit_bias=prefixes)
    assert finish == "stop" and {free, other} == {"yes", "no"}


def test_generate_takes_the_same_constraints(llm):
    events = list(llm.generate("The three primary colours are", max_tokens=40,
                               json_schema={"type": "array", "items": {"type": "string", "enum": ["red", "green", "blue", "yellow"]},
                                            "minItems": 3, "maxItems": 3}))
    text = "".join(e.text for e in events)
    if events[-1].finish_reason == "stop":
        assert len(json.loads(text)) == 3


def test_bad_constraints_fail_before_generating(llm):
    with pytest.raises(UnsupportedSchemaError) as caught:
        list(llm.chat([{"role": "user", "content": "x"}], max_tokens=4,
                      response_format=schema_request({"type": "integer", "multipleOf": 3})))
    assert any("multipleOf" in k for k in caught.value.keywords)
    with pytest.raises(GrammarError, match="undefined|not defined|unknown"):
        list(llm.chat([{"role": "user", "content": "x"}], max_tokens=4, grammar="root ::= missing"))


def test_a_required_tool_call_comes_back_as_tool_calls(llm):
    tools = [{"type": "function", "function": {
        "name": "get_weather", "description": "The current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 40}},
                       "required": ["city"], "additionalProperties": False}}}]
    events = list(llm.chat([{"role": "user", "content": "What is the weather in Paris?"}], max_tokens=80,
                           tools=tools, tool_choice="required"))
    last = events[-1]
    assert last.finish_reason == "tool_calls", last.message
    calls = last.message["tool_calls"]
    assert calls[0]["function"]["name"] == "get_weather" and calls[0]["id"]
    assert isinstance(json.loads(calls[0]["function"]["arguments"])["city"], str)
    streamed = [c for e in events for c in e.tool_calls]
    assert "".join(c["function"].get("arguments", "") for c in streamed) == calls[0]["function"]["arguments"]
    assert not "".join(e.text for e in events)  # no call markup in the content
