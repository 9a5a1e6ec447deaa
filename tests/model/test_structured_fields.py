"""A request's structure fields read once for every caller (llmchat.chat.structured): each spelling of structured
output gives its grammar, malformed ones a FieldError naming the field, and a conversation with earlier tool
calls renders them the model's way even when no tools are offered now. No GPU: SmolLM2's vocabulary only."""
from __future__ import annotations

from pathlib import Path

import pytest

from llmchat.chat.template import ChatTemplate
from llmchat.errors import FieldError, GrammarError, UnsupportedSchemaError
from llmchat.gguf.file import open_gguf
from llmchat.chat.structured import prepare_chat, structured_constraint
from llmchat.tokenizer.tokenizer import Tokenizer

pytestmark = pytest.mark.model
QWEN3 = Path(__file__).parents[1] / "data" / "templates" / "Qwen-Qwen3-0.6B.jinja"


@pytest.fixture(scope="module")
def tokenizer(smollm2_path) -> Tokenizer:
    with open_gguf(str(smollm2_path)) as g:
        return Tokenizer.from_metadata(g.metadata)


def accepts(grammar, text: str) -> bool:
    m = grammar.matcher()
    return m.advance(text.encode()) and m.can_end


SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


@pytest.mark.parametrize(("fields", "good", "bad"), [
    ({"response_format": {"type": "json_object"}}, '{"a": [1]}', "[1]"),
    ({"response_format": {"type": "json_object", "schema": '{"type": "object", "properties": {"n": '
                                                            '{"type": "integer"}}, "required": ["n"]}'}},
     '{"n": 3}', '{"n": "3"}'),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA, "strict": True}}},
     '{"n": 3}', "{}"),
    ({"response_format": {"type": "grammar", "grammar": 'root ::= "a"+'}}, "aaa", "b"),
    ({"response_format": {"type": "regex", "regex": "[0-9]{2}"}}, "42", "4"),
    ({"grammar": 'root ::= "x" | "y"'}, "y", "z"),
    ({"json_schema": SCHEMA}, '{"n": -1}', '{"n": 1.5}'),
])
def test_every_spelling_gives_its_grammar(tokenizer, fields, good, bad):
    constraint = structured_constraint(tokenizer, **fields)
    assert accepts(constraint.grammar, good) and not accepts(constraint.grammar, bad)
    assert constraint.unenforced == ()


def test_text_and_nothing_give_no_grammar(tokenizer):
    assert structured_constraint(tokenizer) is None
    assert structured_constraint(tokenizer, {"type": "text"}) is None


@pytest.mark.parametrize(("fields", "param", "error"), [
    ({"response_format": "json"}, "response_format", FieldError),
    ({"response_format": {"type": "xml"}}, "response_format.type", FieldError),
    ({"response_format": {"type": "json_object", "extra": 1}}, "response_format", FieldError),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}, "response_format", FieldError),
    ({"response_format": {"type": "json_object", "schema": "{oops"}}, "response_format.schema", FieldError),
    ({"response_format": {"type": "grammar", "grammar": ""}}, "response_format.grammar", FieldError),
    ({"response_format": {"type": "json_object"}, "grammar": 'root ::= "a"'}, "grammar", FieldError),
    ({"grammar": "root ::= ("}, "grammar", GrammarError),
    ({"json_schema": {"type": "string", "format": "email"}}, "json_schema", UnsupportedSchemaError),
    ({"response_format": {"type": "json_schema", "json_schema": {"schema": {"uniqueItems": True}}}},
     "response_format", UnsupportedSchemaError),
    ({"response_format": {"type": "json_schema", "json_schema": {"schema": {}, "strict": "no"}}},
     "response_format.json_schema.strict", FieldError),
])
def test_malformed_fields_name_themselves(tokenizer, fields, param, error):
    with pytest.raises(error) as caught:
        structured_constraint(tokenizer, **fields)
    assert caught.value.param == param


def test_earlier_tool_calls_render_the_models_way_without_tools_now(tokenizer):
    messages = [{"role": "user", "content": "weather?"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "w", "arguments": '{"city": "Paris"}'}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "18C"}]
    prompt = prepare_chat(ChatTemplate(QWEN3.read_text()), tokenizer, messages).prompt
    assert '{"name": "w", "arguments": {"city": "Paris"}}' in prompt
    assert "<tool_response>\n18C\n</tool_response>" in prompt


def test_best_effort_enforces_what_it_can_and_names_the_rest(tokenizer):
    schema = {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"},
                                                        "uniqueItems": True},
                                               "id": {"$ref": "https://example.com/id.json"}},
              "required": ["tags"], "additionalProperties": False}
    fields = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema, "strict": False}}
    constraint = structured_constraint(tokenizer, fields)
    assert constraint.unenforced == ("/properties/tags/uniqueItems", "/properties/id/$ref")
    assert accepts(constraint.grammar, '{"tags": ["a", "a"], "id": [1]}')    # what was left out
    assert not accepts(constraint.grammar, '{"tags": [1]}') and not accepts(constraint.grammar, '{"id": 1}')
