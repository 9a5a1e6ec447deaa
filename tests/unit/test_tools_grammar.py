"""The grammars of tool calls, through llmchat.grammar: they parse, accept the replies each format expects, and
refuse a call to a tool that was not offered or an argument of the wrong type."""
from __future__ import annotations

import re

import pytest

from llmchat.chat.tools import tool_format_for
from llmchat.chat.tools.messages import check_tools
from test_tools import CONVERSATION, TOOLS, run, template

grammar = pytest.importorskip("llmchat.grammar")
pytest.importorskip("llmchat.grammar.json_schema")

# Special tokens as the models' vocabularies have them (ids are made up: only their being tokens matters here).
SPECIAL = {"<|python_tag|>": 128010, "[TOOL_CALLS]": 5, "[ARGS]": 32, "[CALL_ID]": 33, "<|tool_call|>": 200025,
           "<|/tool_call|>": 200026, "<think>": 151667, "</think>": 151668}
ASK = [{"role": "user", "content": "Weather in Rome?"}]


def symbols(text: str, special: dict[str, int]) -> list[int]:
    """The reply as grammar symbols: special tokens as 256 + id, the rest as UTF-8 bytes."""
    if not special:
        return list(text.encode())
    out: list[int] = []
    pattern = "(" + "|".join(re.escape(s) for s in sorted(special, key=len, reverse=True)) + ")"
    for piece in re.split(pattern, text):
        out += [256 + special[piece]] if piece in special else list(piece.encode())
    return out


def accepts(prompt, reply: str) -> bool:
    g = grammar.Grammar.parse(prompt.grammar, special=prompt.special or None)
    if prompt.lazy:
        starts = [reply.find(t) for t in (*prompt.triggers, *prompt.start_triggers) if t in reply]
        assert starts, "a lazy grammar's reply must contain a trigger"
        reply = reply[min(starts):]
    m = g.matcher()
    return m.advance(symbols(reply, prompt.special)) and m.can_end


CASES = [  # template, special tokens known to the caller, good reply, bad replies (unknown tool, wrong type)
    ("Qwen-Qwen2.5-7B-Instruct", {},
     'Sure.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome", "days": 2}}\n</tool_call>',
     ['<tool_call>\n{"name": "get_stock", "arguments": {"city": "Rome"}}\n</tool_call>',
      '<tool_call>\n{"name": "get_weather", "arguments": {"city": 5}}\n</tool_call>']),
    ("Qwen-Qwen3-0.6B", SPECIAL,
     '<tool_call>\n{"name": "get_time", "arguments": {"city": "Rome"}}\n</tool_call>',
     ['<tool_call>\n{"name": "get_time", "arguments": {"town": "Rome", "city": null}}\n</tool_call>']),
    ("meta-llama-Llama-3.1-8B-Instruct", SPECIAL,
     '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Rome"}}',
     ['<|python_tag|>{"name": "weather", "parameters": {"city": "Rome"}}',
      '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Rome", "days": "two"}}']),
    ("meta-llama-Llama-3.2-3B-Instruct", SPECIAL, '{"name": "get_weather", "parameters": {"city": "Rome"}}',
     ['{"name": "get_weather", "parameters": {"days": 1}}']),
    ("mistralai-Mistral-Nemo-Instruct-2407", SPECIAL,
     '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Rome"}, "id": "a1b2c3d4e"}, '
     '{"name": "get_time", "arguments": {"city": "Rome"}}]',
     ['[TOOL_CALLS][{"name": "get_date", "arguments": {}}]']),
    ("Mistral-Small-3.2-24B-Instruct-2506", SPECIAL,
     'OK[TOOL_CALLS]get_weather[ARGS]{"city": "Rome"}[TOOL_CALLS]get_time[CALL_ID]x1y2z3w4v[ARGS]{"city": "Rome"}',
     ['[TOOL_CALLS]get_date[ARGS]{}', '[TOOL_CALLS]get_time[ARGS]{"city": ["Rome"]}']),
    ("phi4-mini-documented", SPECIAL,
     '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Rome"}}]<|/tool_call|>',
     ['<|tool_call|>[{"name": "get_weather", "arguments": {"city": true}}]<|/tool_call|>']),
    ("HuggingFaceTB-SmolLM3-3B", {},
     '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>',
     ['<tool_call>\n{"name": "get_weather", "arguments": {"city": 1.5}}\n</tool_call>']),
    ("google-gemma-2-2b-it", {}, '[get_weather(city="Rome", days=2), get_time(city="Rome")]',
     ['[get_date(city="Rome")]', '[get_weather(days=2)]', '[get_weather(city=2)]']),
    ("HuggingFaceTB-SmolLM2-135M-Instruct", {},
     '{"tool_call": {"name": "get_weather", "arguments": {"city": "Rome"}}}',
     ['{"tool_call": {"name": "get_moon", "arguments": {}}}', 'Plain text.',
      '{"tool_call": {"name": "get_time", "arguments": {"city": {}}}}']),
]


@pytest.mark.parametrize("name, special, good, bad", CASES, ids=[c[0] for c in CASES])
def test_grammars_accept_calls_and_refuse_bad_ones(name, special, good, bad):
    t = template(name)
    fmt = tool_format_for(t)
    auto = fmt.prepare(t, ASK, tools=TOOLS, special_tokens=special)
    assert auto.grammar and accepts(auto, good)
    required = fmt.prepare(t, ASK, tools=TOOLS, tool_choice="required", special_tokens=special)
    starts = [good.find(m) for m in (*auto.triggers, *auto.start_triggers) if m in good]
    calls_only = good[min(starts, default=0):]
    assert accepts(required, calls_only)
    for reply in bad:
        assert not accepts(required, reply), reply
        # Lazily, a reply without a trigger is never constrained (and the parser leaves it as content).
        if any(m in reply for m in (*auto.triggers, *auto.start_triggers)):
            assert not accepts(auto, reply), reply


def test_generic_auto_also_allows_a_plain_response_and_required_does_not():
    t = template("HuggingFaceTB-SmolLM2-135M-Instruct")
    auto = tool_format_for(t).prepare(t, ASK, tools=TOOLS)
    assert not auto.lazy and accepts(auto, '{"response": "Hi \\"there\\""}')
    required = tool_format_for(t).prepare(t, ASK, tools=TOOLS, tool_choice="required")
    assert not accepts(required, '{"response": "Hi"}')
    assert accepts(required, '{"tool_calls": [{"name": "get_time", "arguments": {"city": "A"}}, '
                             '{"name": "get_time", "arguments": {"city": "B"}}]}')
    single = tool_format_for(t).prepare(t, ASK, tools=TOOLS, tool_choice="required", parallel_tool_calls=False)
    assert not accepts(single, '{"tool_calls": [{"name": "get_time", "arguments": {"city": "A"}}]}')


def test_required_is_eager_and_a_named_tool_is_the_only_one():
    t = template("Qwen-Qwen2.5-7B-Instruct")
    fmt = tool_format_for(t)
    required = fmt.prepare(t, ASK, tools=TOOLS, tool_choice="required")
    assert not required.lazy and required.triggers == ()
    call = '<tool_call>\n{"name": "get_time", "arguments": {"city": "Rome"}}\n</tool_call>'
    assert accepts(required, call) and not accepts(required, "No call. " + call)
    named = fmt.prepare(t, ASK, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_weather"}})
    assert not accepts(named, call)
    assert accepts(named, '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>')


def test_parallel_false_allows_one_call():
    t = template("Qwen-Qwen2.5-7B-Instruct")
    one = '<tool_call>\n{"name": "get_time", "arguments": {"city": "Rome"}}\n</tool_call>'
    fmt = tool_format_for(t)
    assert accepts(fmt.prepare(t, ASK, tools=TOOLS), one + "\n" + one)
    assert not accepts(fmt.prepare(t, ASK, tools=TOOLS, parallel_tool_calls=False), one + "\n" + one)


def test_required_with_reasoning_lets_the_model_think_first():
    t = template("Qwen-Qwen3-0.6B")
    call = '<tool_call>\n{"name": "get_time", "arguments": {"city": "Rome"}}\n</tool_call>'
    for special in ({}, SPECIAL):
        prompt = tool_format_for(t).prepare(t, ASK, tools=TOOLS, tool_choice="required", special_tokens=special)
        assert accepts(prompt, "<think>\nRome </thin it is.\n</think>\n\n" + call)
        assert accepts(prompt, call)
        assert not accepts(prompt, "Hello " + call)


def test_tool_choice_none_has_no_grammar_and_reads_calls_as_content():
    t = template("Qwen-Qwen2.5-7B-Instruct")
    prompt = tool_format_for(t).prepare(t, ASK, tools=TOOLS, tool_choice="none")
    assert prompt.grammar is None and "get_weather" in prompt.text
    p = prompt.parser()
    p.feed('<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>')
    p.close()
    assert p.tool_calls == [] and p.content.startswith("<tool_call>")


def test_prompt_parser_streams_a_call():
    t = template("Qwen-Qwen3-0.6B")
    prompt = tool_format_for(t).prepare(t, ASK, tools=TOOLS)
    assert prompt.lazy and prompt.triggers == ("<tool_call>",) and not prompt.thinking
    p = prompt.parser()
    p.feed("<think>ok</think>")
    p.feed('<tool_call>\n{"name": "get_time", "arguments": {"city": "Rome"}}\n</tool_call>')
    p.close()
    assert p.reasoning == "ok" and p.tool_calls[0]["function"]["name"] == "get_time"
    assert p.tool_calls[0]["id"].startswith("call_")


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_prepare_renders_what_the_format_renders(name):
    t = template(name)
    fmt = tool_format_for(t)
    assert fmt.prepare(t, CONVERSATION, tools=TOOLS).text == fmt.render(t, CONVERSATION, check_tools(TOOLS), {})


def test_a_tool_schema_the_grammar_cannot_enforce_is_refused():
    from llmchat.errors import UnsupportedSchemaError
    t = template("Qwen-Qwen2.5-7B-Instruct")
    odd = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"x": {"type": "string", "contentSchema": {"type": "object"}}}}}}]
    with pytest.raises(UnsupportedSchemaError) as err:
        tool_format_for(t).prepare(t, ASK, tools=odd)
    assert err.value.keywords == ["/properties/x/contentSchema"] and "tool 'f'" in str(err.value)


def test_generic_under_tool_choice_none_answers_in_its_response_shape():
    # History written as JSON calls and results: a model free to write anything goes on with such JSON (SmolLM2
    # invented a {"tool_response": ...} and rambled), so the reply keeps the format's answer shape, without calls.
    t = template("HuggingFaceTB-SmolLM2-135M-Instruct")
    prompt = tool_format_for(t).prepare(t, CONVERSATION, tools=TOOLS, tool_choice="none")
    assert "You can use these tools" not in prompt.text and prompt.grammar and not prompt.lazy
    assert accepts(prompt, '{"response": "21 \u00b0C in Paris."}')
    assert not accepts(prompt, '{"tool_call": {"name": "get_weather", "arguments": {"city": "Rome"}}}')
    assert not accepts(prompt, '{"tool_response": {"name": "get_weather", "content": "x"}}')
    p = prompt.parser()
    run(p, ['{"response": "21 ', '\u00b0C."}'])
    assert (p.content, p.tool_calls) == ("21 °C.", [])
