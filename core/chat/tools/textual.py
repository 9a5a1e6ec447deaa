"""Formats whose templates do not render tool calls themselves, so this module writes the tools, the calls and
the results into the messages as text: Phi-4-mini, SmolLM3 (when its template has no tool section), Gemma (text
function calling) and the generic JSON format for every other template."""
from __future__ import annotations

import json
from typing import Any

from .base import ToolFormat
from .gbnf import LIST_SEPARATOR, GrammarBuilder, json_call, key, literal, one_of, repeated
from .messages import convert_messages
from .native import Hermes
from .syntax import GenericJSON, PythonCalls, TaggedList


def _functions(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [tool["function"] for tool in tools]


def _with_system(messages: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    """`text` appended to the leading system message, or a new system message carrying it."""
    if messages and messages[0]["role"] == "system":
        first = dict(messages[0])
        first["content"] = (first["content"] + "\n\n" + text) if first["content"] else text
        return [first, *messages[1:]]
    return [{"role": "system", "content": text}, *messages]


def _calls_as_text(messages: list[dict[str, Any]], write) -> list[dict[str, Any]]:
    """Assistant messages with `tool_calls` turned into text content written by `write(calls)`."""
    out = []
    for message in messages:
        if message.get("tool_calls"):
            calls = [call["function"] for call in message["tool_calls"]]
            content = message.get("content") or ""
            message = {"role": "assistant", "content": (content + "\n" if content else "") + write(calls)}
        out.append(message)
    return out


class SmolLM3(Hermes):
    """SmolLM3: Hermes-style `<tool_call>` JSON with `<think>` reasoning (`enable_thinking` switches it off). Its
    template's tool section takes the tools as `xml_tools`; a template without one (the copy llama.cpp ships)
    gets them in the system message, worded like the original, with earlier calls written as `<tool_call>` text."""
    name = "smollm3"

    def render(self, template, messages, tools, extra):
        converted = convert_messages(messages)
        if "xml_tools" in template.source:
            return template.render(converted, add_generation_prompt=True, xml_tools=_functions(tools) or None,
                                   **extra)
        if tools:
            converted = _with_system(converted, self._describe(tools))
        converted = _calls_as_text(converted, lambda calls: "\n".join(
            f'{self.open}\n{json.dumps({"name": c["name"], "arguments": c["arguments"]})}\n{self.close}'
            for c in calls))
        return template.render(converted, add_generation_prompt=True, **extra)

    def _describe(self, tools):
        listing = "\n".join(json.dumps(f) for f in _functions(tools))
        return ("You may call one or more of these functions to help with the user's request. Their signatures "
                f"are inside <tools></tools>:\n<tools>\n{listing}\n</tools>\n\nTo call one, write a JSON object "
                f"with its name and arguments inside {self.open}{self.close} tags:\n{self.open}\n"
                f'{{"name": <function-name>, "arguments": <args-json-object>}}\n{self.close}')


class Phi4(ToolFormat):
    """Phi-4-mini: the tools as a JSON string in the system message's `tools` field (the template writes it
    between `<|tool|>` and `<|/tool|>`); calls `<|tool_call|>[{"name": ..., "arguments": {...}}]<|/tool_call|>`.
    Written from the model card's documented shape: its template is not available here."""
    name = "phi4"
    open, close = "<|tool_call|>", "<|/tool_call|>"

    def render(self, template, messages, tools, extra):
        converted = convert_messages(messages)
        if tools:
            if not converted or converted[0]["role"] != "system":
                converted = [{"role": "system", "content": "You are a helpful assistant with some tools."},
                             *converted]
            converted[0] = {**converted[0], "tools": json.dumps(_functions(tools), ensure_ascii=False)}
        converted = _calls_as_text(converted, lambda calls: self.open + json.dumps(
            [{"name": c["name"], "arguments": c["arguments"]} for c in calls], ensure_ascii=False) + self.close)
        return template.render(converted, add_generation_prompt=True, tools=tools or None, **extra)

    def syntax(self, tools):
        return TaggedList(triggers=(self.open,), close=self.close)

    def calls_grammar(self, b, tools, parallel):
        call = one_of(b, "tc-call", [json_call(b, tool) for tool in tools])
        return (f'{b.marker(self.open)} "[" tc-ws {repeated(call, LIST_SEPARATOR, parallel)}'
                f' tc-ws "]" {b.marker(self.close)}')


def _py(value: Any) -> str:
    """A JSON value written as a Python literal (how Gemma's calls spell arguments)."""
    if value is True or value is False or value is None:
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_py(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {_py(v)}" for k, v in value.items()) + "}"
    return json.dumps(value, ensure_ascii=False)


def python_calls(calls: list[dict[str, Any]]) -> str:
    return "[" + ", ".join(f"{c['name']}(" + ", ".join(f"{k}={_py(v)}" for k, v in c["arguments"].items()) + ")"
                           for c in calls) + "]"


class Gemma(ToolFormat):
    """Gemma (2, 3): no tool tokens, so tools are described in the first user turn (Gemma has no system turn;
    a system message joins them there) and a call is a Python list of calls, `[get_weather(city="Paris")]`.
    Results go back as a user turn with a ```tool_output block per result. Chosen over ```tool_code blocks: the
    list is what the grammar can pin down without a code fence around it, and several calls fit in one list.
    Argument values are constrained to JSON (the parser also reads Python's True/False/None)."""
    name = "gemma"
    describe_when_none = False

    def render(self, template, messages, tools, extra):
        converted = _calls_as_text(convert_messages(messages), python_calls)
        preamble = []
        while converted and converted[0]["role"] == "system":
            preamble.append(converted.pop(0)["content"])
        if tools:
            preamble.append(self._describe(tools))
        merged: list[dict[str, Any]] = []
        for message in converted:
            if message["role"] == "tool":
                message = {"role": "user", "content": f"```tool_output\n{message['content']}\n```"}
            if merged and merged[-1]["role"] == message["role"] == "user":
                merged[-1] = {"role": "user", "content": merged[-1]["content"] + "\n" + message["content"]}
            else:
                merged.append(message)
        if preamble:
            if merged and merged[0]["role"] == "user":
                merged[0] = {**merged[0], "content": "\n\n".join(preamble) + "\n\n" + merged[0]["content"]}
            else:
                merged.insert(0, {"role": "user", "content": "\n\n".join(preamble)})
        return template.render(merged, add_generation_prompt=True, **extra)

    @staticmethod
    def _describe(tools):
        listing = json.dumps(_functions(tools), indent=2, ensure_ascii=False)
        return ("You can call functions. To call one or more, reply with nothing but a Python list of calls, "
                "for example [function_a(x=1, y=\"text\"), function_b(z=True)]. Otherwise answer normally. "
                f"Results come back in ```tool_output blocks.\nThe functions:\n{listing}")

    def syntax(self, tools):
        return PythonCalls(triggers=tuple(f"[{tool['function']['name']}(" for tool in tools))

    def calls_grammar(self, b, tools, parallel):
        alternatives = []
        for tool in tools:
            schema = tool["function"].get("parameters") or {}
            props = schema.get("properties") or {}
            required = set(schema.get("required") or ())
            items = [(f"{literal(key + '=')} {b.value(sub)}", key in required) for key, sub in props.items()]
            args = _keyword_list(b, items, tool["function"]["name"])
            alternatives.append(f"{literal(tool['function']['name'] + '(')} {args} \")\"")
        call = one_of(b, "tc-call", alternatives)
        separator = '"," " "?'
        return f'"[" {repeated(call, separator, parallel)} "]"'


def _keyword_list(b: GrammarBuilder, items: list[tuple[str, bool]], tool: str) -> str:
    """Keyword arguments in schema order, the required ones always there, commas only between those written."""
    if not items:
        return '""'
    safe = "".join(c if c.isalnum() else "-" for c in tool)
    # rest-i: what may follow once something was written, from item i on; first-i: the first written is >= i.
    for i in range(len(items), -1, -1):
        if i == len(items):
            b.rule(f"tc-kw-{safe}-rest-{i}", '""')
            b.rule(f"tc-kw-{safe}-first-{i}", '""')
            continue
        item, needed = items[i]
        with_item = f'", " {item} tc-kw-{safe}-rest-{i + 1}'
        b.rule(f"tc-kw-{safe}-rest-{i}", with_item if needed else f"( {with_item} ) | tc-kw-{safe}-rest-{i + 1}")
        first = f"{item} tc-kw-{safe}-rest-{i + 1}"
        b.rule(f"tc-kw-{safe}-first-{i}", first if needed else f"( {first} ) | tc-kw-{safe}-first-{i + 1}")
    return f"tc-kw-{safe}-first-0"


class Generic(ToolFormat):
    """Templates without tool support (SmolLM2's ChatML, ...): the tools and the reply's shape are described in a
    system message, and every reply is one JSON object: {"tool_call": {"name", "arguments"}} (or {"tool_calls":
    [...]} when parallel calls are allowed) or {"response": "..."}; the grammar always applies, so it is never
    lazy. Earlier calls are written as that JSON, results as user messages {"tool_response": {...}}."""
    name = "generic"
    describe_when_none = False
    constrain_none = True
    lazy_capable = False

    def render(self, template, messages, tools, extra):
        converted = _calls_as_text(convert_messages(messages), lambda calls: json.dumps(
            {"tool_call": {"name": calls[0]["name"], "arguments": calls[0]["arguments"]}} if len(calls) == 1 else
            {"tool_calls": [{"name": c["name"], "arguments": c["arguments"]} for c in calls]}, ensure_ascii=False))
        converted = [{"role": "user", "content": json.dumps(
            {"tool_response": {"name": m["name"], "content": m["content"]}}, ensure_ascii=False)}
            if m["role"] == "tool" else m for m in converted]
        if tools:
            converted = _with_system(converted, self._describe(tools))
        return template.render(converted, add_generation_prompt=True, **extra)

    @staticmethod
    def _describe(tools):
        listing = json.dumps(_functions(tools), indent=2, ensure_ascii=False)
        return ("You can use these tools:\n" + listing + "\n\nReply with one JSON object and nothing else: "
                '{"tool_call": {"name": "<tool name>", "arguments": {...}}} to call a tool, '
                '{"tool_calls": [...]} to call several at once, or {"response": "<your answer>"} to answer '
                "the user directly.")

    def syntax(self, tools):
        return GenericJSON()

    def calls_grammar(self, b, tools, parallel):
        shapes = []
        if tools:  # none under tool_choice 'none': the reply is a response
            call = one_of(b, "tc-call", [json_call(b, tool) for tool in tools])
            shapes.append(f'"{{" tc-ws {key("tool_call")} {call} tc-ws "}}"')
            if parallel:
                shapes.append(f'"{{" tc-ws {key("tool_calls")} "[" tc-ws {call} ( tc-ws "," tc-ws {call} )* tc-ws "]" tc-ws "}}"')
        if self._allow_response:
            shapes.append(f'"{{" tc-ws {key("response")} {b.value({"type": "string"})} tc-ws "}}"')
        return one_of(b, "tc-reply", shapes)

    _allow_response = True

    def prepare(self, template, messages, *, tools=None, tool_choice="auto", **kwargs):
        # 'required' and a named tool leave out the response shape: the reply must be a call.
        fmt = self
        if tool_choice not in (None, "auto", "none"):
            fmt = Generic(self.template)
            fmt._allow_response = False
        return ToolFormat.prepare(fmt, template, messages, tools=tools, tool_choice=tool_choice, **kwargs)
