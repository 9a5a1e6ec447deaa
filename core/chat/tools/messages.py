"""OpenAI-shaped requests checked and turned into what chat templates expect.

OpenAI sends an assistant's calls with `arguments` as a JSON string and a tool result with only `tool_call_id`;
templates want `arguments` as a mapping (they `tojson` it) and sometimes the tool's `name`. Malformed messages and
tools are refused here with the message named, before any template sees them.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..template import validate_messages
from ...errors import ChatTemplateError, FieldError

_TOOL_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


def check_tools(tools: Any) -> list[dict[str, Any]]:
    """The `tools` list: function tools with unique, plain names and an object schema."""
    if isinstance(tools, (str, bytes)) or not isinstance(tools, Sequence):
        raise FieldError("tools must be a list of {'type': 'function', 'function': {...}} objects", "tools")
    seen: set[str] = set()
    out = []
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(tool, Mapping) or tool.get("type", "function") != "function":
            raise FieldError(f"{where} must be an object with type 'function'", "tools")
        function = tool.get("function")
        if not isinstance(function, Mapping):
            raise FieldError(f"{where} needs a 'function' object with a 'name'", "tools")
        name = function.get("name")
        if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
            raise FieldError(f"{where}.function.name must be 1-64 letters, digits, '_', '.' or '-'", "tools")
        if name in seen:
            raise FieldError(f"{where}: a second tool named {name!r}", "tools")
        seen.add(name)
        parameters = function.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(parameters, Mapping):
            raise FieldError(f"{where}.function.parameters must be a JSON schema object", "tools")
        description = function.get("description")
        if description is not None and not isinstance(description, str):
            raise FieldError(f"{where}.function.description must be a string", "tools")
        out.append({"type": "function", "function": {**function, "parameters": dict(parameters)}})
    return out


def check_tool_choice(tool_choice: Any, tools: list[dict[str, Any]]) -> str | dict[str, Any]:
    """'auto', 'none', 'required', or the one tool named by {'type': 'function', 'function': {'name': ...}}."""
    if tool_choice is None:
        return "auto"
    if tool_choice in ("auto", "none", "required"):
        if tool_choice == "required" and not tools:
            raise FieldError("tool_choice 'required' needs at least one tool in 'tools'", "tool_choice")
        return tool_choice
    if isinstance(tool_choice, Mapping) and tool_choice.get("type") == "function":
        name = (tool_choice.get("function") or {}).get("name")
        for tool in tools:
            if tool["function"]["name"] == name:
                return tool
        raise FieldError(f"tool_choice names {name!r}, which is not one of the tools given", "tool_choice")
    raise FieldError("tool_choice must be 'auto', 'none', 'required' or "
                     "{'type': 'function', 'function': {'name': ...}}", "tool_choice")


def convert_messages(messages: Any, *, call_id: Callable[[str], str] = lambda i: i) -> list[dict[str, Any]]:
    """Messages with each call's `arguments` as a dict, content '' on call-only assistant messages, and `name`
    on tool results (from the call their `tool_call_id` answers). `call_id` maps ids to the form a template
    insists on (Mistral's nine letters and digits)."""
    checked = validate_messages(messages)
    names: dict[str, str] = {}
    out = []
    for i, message in enumerate(checked):
        where = f"messages[{i}]"
        message = dict(message)
        if message.get("tool_calls") is not None:
            calls = []
            for j, call in enumerate(message["tool_calls"]):
                calls.append(_convert_call(f"{where}.tool_calls[{j}]", call, names, call_id))
            message["tool_calls"] = calls
            if message.get("content") is None:
                message["content"] = ""
        if message["role"] == "tool":
            ref = message.get("tool_call_id")
            if not isinstance(ref, str):
                raise ChatTemplateError(f"{where} (tool) needs the string 'tool_call_id' of the call it answers")
            if ref not in names:
                raise ChatTemplateError(f"{where} answers tool_call_id {ref!r}, which no earlier assistant "
                                        f"message called")
            message["name"] = message.get("name") or names[ref]
            message["tool_call_id"] = call_id(ref)
        out.append(message)
    return out


def _convert_call(where: str, call: Mapping[str, Any], names: dict[str, str],
                  call_id: Callable[[str], str]) -> dict[str, Any]:
    if call.get("type", "function") != "function":
        raise ChatTemplateError(f"{where} has type {call.get('type')!r}; only 'function' calls exist")
    function = call.get("function")
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        raise ChatTemplateError(f"{where} needs function.name")
    arguments = function.get("arguments", "{}")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise ChatTemplateError(f"{where}.function.arguments is not valid JSON: {exc}") from exc
    if not isinstance(arguments, Mapping):
        raise ChatTemplateError(f"{where}.function.arguments must be a JSON object")
    ident = call.get("id")
    if ident is not None and not isinstance(ident, str):
        raise ChatTemplateError(f"{where}.id must be a string")
    if ident is not None:
        names[ident] = function["name"]
    converted = {"type": "function", "function": {"name": function["name"], "arguments": dict(arguments)}}
    if ident is not None:
        converted["id"] = call_id(ident)
    return converted
