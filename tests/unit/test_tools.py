"""llmchat.chat.tools: prompts through real chat templates, reply parsing per format, streaming, and refusals.

Templates are the models' own (tests/data/templates, copied from llama.cpp's collection and from the SmolLM2
GGUF), except phi4-mini-documented.jinja, written from the shape Phi-4-mini's model card documents.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmchat.chat.template import ChatTemplate
from llmchat.errors import ChatTemplateError, InvalidRequestError
from llmchat.chat.tools import ToolCallDelta, reasoning_parser, tool_format_for
from llmchat.chat.tools.messages import check_tools
from llmchat.chat.tools.stream import ReplyParser

TEMPLATES = Path(__file__).parents[1] / "data" / "templates"

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                       "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "get_time", "description": "Local time in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
]

# An OpenAI-shaped conversation: question, one call (arguments as a JSON string), its result, the answer, and the
# next question.
CALL_ID = "call_Q1w2E3r4T5y6"
CONVERSATION = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": CALL_ID, "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
    {"role": "tool", "tool_call_id": CALL_ID, "content": '{"temp_c": 21}'},
    {"role": "assistant", "content": "21 °C."},
    {"role": "user", "content": "And in Rome?"},
]


def template(name: str) -> ChatTemplate:
    return ChatTemplate((TEMPLATES / f"{name}.jinja").read_text(), bos_token="<s>", eos_token="</s>")


def dict_shaped(conversation, call_id=CALL_ID, content=""):
    """What a template expects: arguments as a dict, content '' on call messages, the tool's name on results."""
    out = []
    for m in conversation:
        m = dict(m)
        if m.get("tool_calls"):
            m["content"] = content
            m["tool_calls"] = [{"id": call_id, "type": "function", "function": {
                "name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])}}
                for c in m["tool_calls"]]
        if m["role"] == "tool":
            m["tool_call_id"] = call_id
            m["name"] = "get_weather"
        out.append(m)
    return out


def fixed_ids(i: int) -> str:
    return f"call{i}"


def run(parser: ReplyParser, chunks) -> list:
    deltas = []
    for chunk in chunks:
        deltas += parser.feed(chunk)
    return deltas + parser.close()


def parse(name: str, reply: str, *, tools=TOOLS, thinking=False) -> ReplyParser:
    fmt = tool_format_for(template(name))
    parser = ReplyParser(think="<think>" in fmt.template.source, thinking=thinking,
                         syntax=fmt.syntax(check_tools(tools)), ids=fixed_ids)
    run(parser, [reply])
    return parser


def calls(parser: ReplyParser) -> list[tuple[str, dict]]:
    return [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in parser.tool_calls]


# -- which format a template speaks --------------------------------------------------------------------------

@pytest.mark.parametrize("name, fmt", [
    ("Qwen-Qwen3-0.6B", "hermes"), ("Qwen-Qwen2.5-7B-Instruct", "hermes"),
    ("NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "hermes"),
    ("meta-llama-Llama-3.1-8B-Instruct", "llama3"), ("meta-llama-Llama-3.2-3B-Instruct", "llama3"),
    ("meta-llama-Llama-3.3-70B-Instruct", "llama3"),
    ("mistralai-Mistral-Nemo-Instruct-2407", "mistral"), ("Mistral-Small-3.2-24B-Instruct-2506", "mistral-v11"),
    ("phi4-mini-documented", "phi4"), ("HuggingFaceTB-SmolLM3-3B", "smollm3"),
    ("google-gemma-2-2b-it", "gemma"), ("HuggingFaceTB-SmolLM2-135M-Instruct", "generic"),
])
def test_format_is_chosen_from_the_template(name, fmt):
    assert tool_format_for(template(name)).name == fmt


def test_gemma3_builtin_template_is_gemma():
    assert tool_format_for(ChatTemplate.builtin_template("gemma")).name == "gemma"


# -- prompts: what the template itself renders from dict-shaped messages ---------------------------------------

NATIVE = ["Qwen-Qwen3-0.6B", "Qwen-Qwen2.5-7B-Instruct", "NousResearch-Hermes-3-Llama-3.1-8B-tool_use",
          "meta-llama-Llama-3.1-8B-Instruct", "meta-llama-Llama-3.2-3B-Instruct", "meta-llama-Llama-3.3-70B-Instruct"]


@pytest.mark.parametrize("name", NATIVE)
def test_native_prompt_equals_the_template_rendering(name):
    t = template(name)
    prompt = tool_format_for(t).prepare(t, CONVERSATION, tools=TOOLS, tool_choice="none",
                                        template_kwargs={"date_string": "01 Dec 2026"})
    direct = t.render(dict_shaped(CONVERSATION), tools=TOOLS, date_string="01 Dec 2026")
    assert prompt.text == direct
    assert "get_time" in prompt.text and "Paris" in prompt.text and "temp_c" in prompt.text
    assert prompt.grammar is None and prompt.triggers == ()


def test_qwen_prompt_has_the_call_as_the_template_writes_it():
    t = template("Qwen-Qwen2.5-7B-Instruct")
    text = tool_format_for(t).prepare(t, CONVERSATION, tools=TOOLS, tool_choice="none").text
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' in text
    assert "<tool_response>\n{\"temp_c\": 21}\n</tool_response>" in text
    assert text.endswith("<|im_start|>assistant\n")


@pytest.mark.parametrize("name", ["mistralai-Mistral-Nemo-Instruct-2407", "Mistral-Small-3.2-24B-Instruct-2506"])
def test_mistral_ids_take_the_nine_character_shape(name):
    t = template(name)
    text = tool_format_for(t).prepare(t, CONVERSATION, tools=TOOLS, tool_choice="none").text
    from llmchat.chat.tools.native import mistral_call_id
    nine = mistral_call_id(CALL_ID)
    assert len(nine) == 9 and nine.isalnum() and mistral_call_id(CALL_ID) == nine
    assert text == t.render(dict_shaped(CONVERSATION, call_id=nine), tools=TOOLS)
    assert nine in text and CALL_ID not in text
    assert "[TOOL_CALLS]" in text and "[AVAILABLE_TOOLS]" in text


def test_mistral_small_writes_name_call_id_args():
    t = template("Mistral-Small-3.2-24B-Instruct-2506")
    text = tool_format_for(t).prepare(t, CONVERSATION, tools=TOOLS, tool_choice="none").text
    from llmchat.chat.tools.native import mistral_call_id
    assert f'[TOOL_CALLS]get_weather[CALL_ID]{mistral_call_id(CALL_ID)}[ARGS]{{"city": "Paris"}}' in text


def test_phi4_tools_in_the_system_message_and_calls_as_text():
    t = template("phi4-mini-documented")
    text = tool_format_for(t).prepare(t, CONVERSATION, tools=TOOLS, tool_choice="none").text
    functions = json.dumps([tool["function"] for tool in TOOLS])
    assert text.startswith(f"<|system|>You are terse.<|tool|>{functions}<|/tool|><|end|>")
    assert '<|assistant|><|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}]<|/tool_call|><|end|>' in text
    assert '<|tool|>{"temp_c": 21}<|end|>' in text and text.endswith("<|assistant|>")


def test_smollm3_without_a_tool_section_gets_tools_in_the_system_message():
    t = template("HuggingFaceTB-SmolLM3-3B")
    text = tool_format_for(t).prepare(t, CONVERSATION, tools=TOOLS, tool_choice="none").text
    assert "You are terse." in text and '"name": "get_time"' in text
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' in text
    off = tool_format_for(t).prepare(t, CONVERSATION, tools=TOOLS, tool_choice="none",
                                     template_kwargs={"enable_thinking": False})
    assert off.text.endswith("<think>\n\n</think>\n") and not off.thinking


@pytest.mark.parametrize("t", [template("google-gemma-2-2b-it"), ChatTemplate.builtin_template("gemma")],
                         ids=["gemma2", "gemma3-builtin"])
def test_gemma_tools_in_the_first_user_turn_calls_as_python(t):
    # The rendering step of prepare(..., tool_choice="auto") (whose grammar needs llmchat.grammar.json_schema;
    # test_tools_grammar.py checks prepare's text is this one).
    text = tool_format_for(t).render(t, CONVERSATION, check_tools(TOOLS), {})
    first_user = text.split("<start_of_turn>user\n", 1)[1].split("<end_of_turn>")[0]
    assert first_user.startswith("You are terse.") and '"name": "get_time"' in first_user
    assert first_user.endswith("Weather in Paris?")
    assert '<start_of_turn>model\n[get_weather(city="Paris")]<end_of_turn>' in text
    assert ('<start_of_turn>user\n```tool_output\n{"temp_c": 21}\n```<end_of_turn>\n'
            '<start_of_turn>model\n21 °C.<end_of_turn>\n<start_of_turn>user\nAnd in Rome?<end_of_turn>') in text
    none = tool_format_for(t).prepare(t, CONVERSATION, tools=TOOLS, tool_choice="none").text
    assert "get_time" not in none   # 'none': the tools are not described, nothing would read a call


def test_generic_describes_tools_and_writes_history_as_json():
    t = template("HuggingFaceTB-SmolLM2-135M-Instruct")
    text = tool_format_for(t).render(t, CONVERSATION, check_tools(TOOLS), {})
    assert text.startswith("<|im_start|>system\nYou are terse.\n\nYou can use these tools:")
    assert '<|im_start|>assistant\n{"tool_call": {"name": "get_weather", "arguments": {"city": "Paris"}}}' in text
    assert ('<|im_start|>user\n{"tool_response": {"name": "get_weather", "content": "{\\"temp_c\\": 21}"}}'
            in text)


# -- refusals --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("bad, words", [
    ({"role": "tool", "content": "x"}, "messages[1] (tool) needs the string 'tool_call_id'"),
    ({"role": "tool", "tool_call_id": "nope", "content": "x"}, "messages[1] answers tool_call_id 'nope'"),
    ({"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{bad"}}]},
     "messages[1].tool_calls[0].function.arguments is not valid JSON"),
    ({"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "[1]"}}]},
     "messages[1].tool_calls[0].function.arguments must be a JSON object"),
    ({"role": "assistant", "tool_calls": [{"id": "a", "function": {"arguments": "{}"}}]},
     "messages[1].tool_calls[0] needs function.name"),
    ({"role": "user", "tool_calls": []}, "only assistant messages carry 'tool_calls'"),
])
def test_malformed_messages_are_refused_by_name(bad, words):
    t = template("Qwen-Qwen2.5-7B-Instruct")
    with pytest.raises(ChatTemplateError) as err:
        tool_format_for(t).prepare(t, [{"role": "user", "content": "hi"}, bad], tools=TOOLS, tool_choice="none")
    assert words in str(err.value)


@pytest.mark.parametrize("tools, choice, words", [
    (TOOLS, "sometimes", "tool_choice must be"),
    (TOOLS, {"type": "function", "function": {"name": "nope"}}, "names 'nope'"),
    (None, "required", "needs at least one tool"),
    ([{"type": "function", "function": {"name": "bad name"}}], "auto", "tools[0].function.name"),
    ([TOOLS[0], TOOLS[0]], "auto", "tools[1]: a second tool named 'get_weather'"),
    ([{"type": "retrieval"}], "auto", "tools[0] must be an object with type 'function'"),
])
def test_bad_tools_and_tool_choice_are_refused(tools, choice, words):
    t = template("Qwen-Qwen2.5-7B-Instruct")
    with pytest.raises(InvalidRequestError) as err:
        tool_format_for(t).prepare(t, [{"role": "user", "content": "hi"}], tools=tools, tool_choice=choice)
    assert words in str(err.value)


def test_llama3_refuses_two_calls_in_one_message_as_its_template_does():
    t = template("meta-llama-Llama-3.1-8B-Instruct")
    two = [dict(CONVERSATION[2])]
    two[0]["tool_calls"] = CONVERSATION[2]["tool_calls"] * 2
    with pytest.raises(ChatTemplateError, match="single tool-calls"):
        tool_format_for(t).prepare(t, CONVERSATION[:2] + two, tools=TOOLS, tool_choice="none")


# -- replies, per format -------------------------------------------------------------------------------------

HERMES_REPLY = ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome", "days": 2}}\n</tool_call>\n'
                '<tool_call>\n{"name": "get_time", "arguments": {"city": "Rome"}}\n</tool_call>')


def test_hermes_parallel_calls_with_content_before():
    p = parse("Qwen-Qwen2.5-7B-Instruct", "Checking both.\n" + HERMES_REPLY)
    assert p.content == "Checking both."
    assert calls(p) == [("get_weather", {"city": "Rome", "days": 2}), ("get_time", {"city": "Rome"})]
    assert [c["id"] for c in p.tool_calls] == ["call0", "call1"]
    assert p.tool_calls[0]["function"]["arguments"] == '{"city": "Rome", "days": 2}'


def test_qwen3_reasoning_then_call():
    p = parse("Qwen-Qwen3-0.6B", "<think>\nThe user wants Rome.\n</think>\n\n" + HERMES_REPLY.split("\n<tool")[0])
    assert p.reasoning == "The user wants Rome." and p.content == ""
    assert calls(p) == [("get_weather", {"city": "Rome", "days": 2})]


def test_plain_answer_is_content_and_a_tag_in_prose_stays_content():
    p = parse("Qwen-Qwen2.5-7B-Instruct", "Use <tool_call> tags like this: <tool_call> is a tag.")
    assert p.content == "Use <tool_call> tags like this: <tool_call> is a tag." and p.tool_calls == []


def test_llama3_json_and_python_tag():
    p = parse("meta-llama-Llama-3.1-8B-Instruct", '{"name": "get_weather", "parameters": {"city": "Rome"}}')
    assert calls(p) == [("get_weather", {"city": "Rome"})] and p.content == ""
    p = parse("meta-llama-Llama-3.1-8B-Instruct",
              'Let me look.<|python_tag|>{"name": "get_time", "parameters": {"city": "Oslo"}}')
    assert p.content == "Let me look." and calls(p) == [("get_time", {"city": "Oslo"})]
    p = parse("meta-llama-Llama-3.2-3B-Instruct", 'The JSON {"name": "x"} is an example.')
    assert p.tool_calls == [] and p.content == 'The JSON {"name": "x"} is an example.'


def test_mistral_nemo_list_with_model_ids():
    p = parse("mistralai-Mistral-Nemo-Instruct-2407",
              '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Rome"}, "id": "a1b2c3d4e"}, '
              '{"name": "get_time", "arguments": {"city": "Rome"}}]')
    assert calls(p) == [("get_weather", {"city": "Rome"}), ("get_time", {"city": "Rome"})]
    assert [c["id"] for c in p.tool_calls] == ["a1b2c3d4e", "call1"]


def test_mistral_small_name_args_calls():
    p = parse("Mistral-Small-3.2-24B-Instruct-2506",
              'Sure.[TOOL_CALLS]get_weather[ARGS]{"city": "Rome"}[TOOL_CALLS]get_time[CALL_ID]x1y2z3w4v'
              '[ARGS]{"city": "Rome"}')
    assert p.content == "Sure."
    assert calls(p) == [("get_weather", {"city": "Rome"}), ("get_time", {"city": "Rome"})]
    assert p.tool_calls[1]["id"] == "x1y2z3w4v"


def test_phi4_calls():
    p = parse("phi4-mini-documented",
              '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Rome"}}, '
              '{"name": "get_time", "arguments": {"city": "Rome"}}]<|/tool_call|>')
    assert calls(p) == [("get_weather", {"city": "Rome"}), ("get_time", {"city": "Rome"})] and p.content == ""


def test_smollm3_reasoning_and_call():
    p = parse("HuggingFaceTB-SmolLM3-3B", "<think>\nRome, then.\n</think>\n" + HERMES_REPLY)
    assert p.reasoning == "Rome, then." and len(p.tool_calls) == 2


def test_gemma_python_calls():
    p = parse("google-gemma-2-2b-it", 'I will check.\n[get_weather(city="Rome", days=2), get_time(city=\'Rome\')]')
    assert p.content == "I will check."
    assert calls(p) == [("get_weather", {"city": "Rome", "days": 2}), ("get_time", {"city": "Rome"})]
    p = parse("google-gemma-2-2b-it", "[get_weather(city=\"Oslo\", days=None, flag=true, tags=['a', \"b\"])]")
    assert calls(p) == [("get_weather", {"city": "Oslo", "days": None, "flag": True, "tags": ["a", "b"]})]
    p = parse("google-gemma-2-2b-it", "Lists look like [1, 2] and [get_weather is a name].")
    assert p.tool_calls == [] and p.content == "Lists look like [1, 2] and [get_weather is a name]."


def test_gemma_refuses_code_in_arguments():
    p = parse("google-gemma-2-2b-it", '[get_weather(city=__import__("os").getcwd())]')
    assert p.tool_calls == [] and "__import__" in p.content


def test_generic_call_calls_and_response():
    name = "HuggingFaceTB-SmolLM2-135M-Instruct"
    p = parse(name, '{"tool_call": {"name": "get_weather", "arguments": {"city": "Rome"}}}')
    assert calls(p) == [("get_weather", {"city": "Rome"})] and p.content == ""
    p = parse(name, '{"tool_calls": [{"name": "get_time", "arguments": {"city": "A"}}, '
                    '{"name": "get_time", "arguments": {"city": "B"}}]}')
    assert [a["city"] for _, a in calls(p)] == ["A", "B"]
    p = parse(name, '{"response": "It is \\"sunny\\"\\nin Rome \\u00e9"}')
    assert p.content == 'It is "sunny"\nin Rome é' and p.tool_calls == []


# -- reasoning without tools -------------------------------------------------------------------------------------

def test_reasoning_parser_follows_the_prompt():
    t = template("Qwen-Qwen3-0.6B")
    messages = [{"role": "user", "content": "hi"}]
    on = t.render(messages)
    p = reasoning_parser(t, on)
    run(p, ["<thi", "nk>\nhmm", "m\n</th", "ink>\n\nHello", " there"])
    assert (p.reasoning, p.content) == ("hmmm", "Hello there")
    off = t.render(messages, enable_thinking=False)
    assert off.endswith("<think>\n\n</think>\n\n")
    p = reasoning_parser(t, off)
    run(p, ["Hello"])
    assert (p.reasoning, p.content) == ("", "Hello")


def test_deepseek_style_prompt_opened_think():
    t = template("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B")
    prompt = t.render([{"role": "user", "content": "hi"}], enable_thinking=True)
    assert prompt.endswith("<think>\n")
    p = reasoning_parser(t, prompt)
    deltas = run(p, ["Let me see", ".\n</think>\n\n", "Hi!"])
    assert (p.reasoning, p.content) == ("Let me see.", "Hi!")
    assert deltas[0] == ("reasoning", "Let me see")


def test_no_think_template_leaves_think_tags_as_content():
    t = template("Qwen-Qwen2.5-7B-Instruct")
    p = reasoning_parser(t, t.render([{"role": "user", "content": "hi"}]))
    run(p, ["<think>x</think>y"])
    assert p.content == "<think>x</think>y"


# -- streaming ----------------------------------------------------------------------------------------------------

def test_content_is_not_held_back_unless_it_may_start_a_marker():
    fmt = tool_format_for(template("Qwen-Qwen2.5-7B-Instruct"))
    p = ReplyParser(syntax=fmt.syntax(check_tools(TOOLS)))
    assert p.feed("Hello") == [("content", "Hello")]
    assert p.feed(" wor") == [("content", " wor")]
    assert p.feed("ld <tool") == [("content", "ld")]          # " <tool" may be a call (and trailing space waits)
    assert p.feed("box>") == [("content", " <toolbox>")]


def test_arguments_stream_before_the_call_ends():
    fmt = tool_format_for(template("Qwen-Qwen2.5-7B-Instruct"))
    p = ReplyParser(syntax=fmt.syntax(check_tools(TOOLS)), ids=fixed_ids)
    assert p.feed('<tool_call>\n{"name": "get_wea') == []
    assert p.feed('ther", "arguments": {"ci') == [ToolCallDelta(0, "call0", "get_weather", '{"ci')]
    assert p.feed('ty": "Ro') == [ToolCallDelta(0, None, None, 'ty": "Ro')]
    assert p.feed('me"}}\n</tool_call>') == [ToolCallDelta(0, None, None, 'me"}')]
    assert p.close() == []


STREAM_CASES = [
    ("Qwen-Qwen3-0.6B", "<think>\nFirst, Rome.\n</think>\n\nOn it.\n" + HERMES_REPLY + "\nDone.", False),
    ("Qwen-Qwen3-0.6B", "Still thinking </think> Answer <tool_call>x", True),
    ("meta-llama-Llama-3.1-8B-Instruct", 'Hm.<|python_tag|>{"name": "get_weather", "parameters": {"city": "Rome"}}',
     False),
    ("mistralai-Mistral-Nemo-Instruct-2407",
     '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Ro\\"me"}}, {"name": "get_time", '
     '"arguments": {"city": "Rome"}}]', False),
    ("Mistral-Small-3.2-24B-Instruct-2506", 'A[TOOL_CALLS]get_weather[ARGS]{"city": "Rome"}[TOOL_CALLS]get_time'
     '[ARGS]{"city": "[Rome]"}', False),
    ("phi4-mini-documented", '<|tool_call|>[{"name": "get_time", "arguments": {"city": "Rome"}}]<|/tool_call|>',
     False),
    ("google-gemma-2-2b-it", 'x [get_weather(city="R(o)me", days=2), get_time(city="]")]', False),
    ("HuggingFaceTB-SmolLM2-135M-Instruct", '{"response": "Caf\\u00e9 \\\\ \\"ok\\" \\ud83d\\ude00 done"}', False),
    ("HuggingFaceTB-SmolLM2-135M-Instruct", '{"tool_calls": [{"name": "get_time", "arguments": {"city": "A"}}]}',
     False),
]


def _totals(deltas):
    content = "".join(d[1] for d in deltas if isinstance(d, tuple) and d[0] == "content")
    reasoning = "".join(d[1] for d in deltas if isinstance(d, tuple) and d[0] == "reasoning")
    calls: dict[int, dict] = {}
    for d in deltas:
        if isinstance(d, ToolCallDelta):
            if d.index not in calls:
                assert d.id and d.name, "the first delta of a call carries its id and name"
                calls[d.index] = {"id": d.id, "type": "function", "function": {"name": d.name, "arguments": ""}}
            else:
                assert d.id is None and d.name is None
            calls[d.index]["function"]["arguments"] += d.arguments
    return content, reasoning, [calls[i] for i in sorted(calls)]


@pytest.mark.parametrize("name, reply, thinking", STREAM_CASES)
def test_any_chunking_gives_the_same_result(name, reply, thinking):
    hypothesis = pytest.importorskip("hypothesis")
    from hypothesis import strategies as st

    fmt = tool_format_for(template(name))
    syntax = fmt.syntax(check_tools(TOOLS))
    think = "<think>" in fmt.template.source

    def whole():
        p = ReplyParser(think=think, thinking=thinking, syntax=syntax, ids=fixed_ids)
        run(p, [reply])
        return p

    expected = whole()
    assert expected.content or expected.tool_calls or expected.reasoning

    @hypothesis.settings(max_examples=60, deadline=None)
    @hypothesis.given(st.lists(st.integers(1, len(reply)), max_size=12))
    def check(cuts):
        points = sorted(set(cuts))
        chunks = [reply[a:b] for a, b in zip([0, *points], [*points, len(reply)])]
        p = ReplyParser(think=think, thinking=thinking, syntax=syntax, ids=fixed_ids)
        deltas = run(p, chunks)
        assert (p.content, p.reasoning, p.tool_calls, p.truncated) == (
            expected.content, expected.reasoning, expected.tool_calls, expected.truncated)
        assert _totals(deltas) == (p.content, p.reasoning, p.tool_calls)

    check()
    single = ReplyParser(think=think, thinking=thinking, syntax=syntax, ids=fixed_ids)
    assert _totals(run(single, list(reply))) == (expected.content, expected.reasoning, expected.tool_calls)


# -- replies cut off (max_tokens) --------------------------------------------------------------------------------

def test_cut_before_the_name_is_complete_becomes_content():
    p = parse("Qwen-Qwen2.5-7B-Instruct", 'Let me check.\n<tool_call>\n{"name": "get_we')
    assert p.tool_calls == [] and not p.truncated
    assert p.content == 'Let me check.\n<tool_call>\n{"name": "get_we'


def test_cut_after_the_name_keeps_the_call_and_says_truncated():
    fmt = tool_format_for(template("Qwen-Qwen2.5-7B-Instruct"))
    p = ReplyParser(syntax=fmt.syntax(check_tools(TOOLS)), ids=fixed_ids)
    deltas = run(p, ['<tool_call>\n{"name": "get_weather", "arguments": {"city": "Ro'])
    assert p.truncated and p.tool_calls[0]["function"] == {"name": "get_weather", "arguments": '{"city": "Ro'}
    assert _totals(deltas)[2] == p.tool_calls


def test_complete_list_without_its_closing_marker_is_not_truncated():
    p = parse("phi4-mini-documented", '<|tool_call|>[{"name": "get_time", "arguments": {"city": "Rome"}}]')
    assert calls(p) == [("get_time", {"city": "Rome"})] and not p.truncated


@pytest.mark.parametrize("name, reply, thinking", STREAM_CASES)
def test_every_cut_point_streams_consistently(name, reply, thinking):
    """A reply stopped anywhere (max_tokens): character by character gives what the whole prefix gives, and the
    deltas add up to the totals, truncated calls included."""
    fmt = tool_format_for(template(name))
    syntax = fmt.syntax(check_tools(TOOLS))
    think = "<think>" in fmt.template.source
    for cut in range(len(reply) + 1):
        whole = ReplyParser(think=think, thinking=thinking, syntax=syntax, ids=fixed_ids)
        run(whole, [reply[:cut]])
        streamed = ReplyParser(think=think, thinking=thinking, syntax=syntax, ids=fixed_ids)
        deltas = run(streamed, list(reply[:cut]))
        result = (streamed.content, streamed.reasoning, streamed.tool_calls, streamed.truncated)
        assert result == (whole.content, whole.reasoning, whole.tool_calls, whole.truncated), cut
        assert _totals(deltas) == result[:3], cut
