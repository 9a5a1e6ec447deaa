"""How calls look in a reply, one `CallSyntax` per shape (see stream.py for the contract)."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

from .jsonscan import Node, NotJSON, partial_string, scan, skip_ws
from .pycall import python_call_arguments
from .stream import CallProgress, RegionScan

_NAME = re.compile(r"[A-Za-z0-9_.\-]*")


def call_from_object(node: Node, text: str, args_keys: tuple[str, ...] = ("arguments", "parameters")) -> CallProgress:
    """A call written as a JSON object {"name": ..., "arguments": {...}} (keys in any order)."""
    if node.kind != "object":
        raise NotJSON("a call must be a JSON object")
    name_node = node.get("name")
    if name_node is not None and name_node.kind != "string":
        raise NotJSON("a call's name must be a string")
    name = json.loads(name_node.text(text)) if name_node is not None and name_node.end is not None else None
    if name is None and node.end is not None:
        raise NotJSON("a call without a name")
    args = next((node.get(key) for key in args_keys if node.get(key) is not None), None)
    id_node = node.get("id")
    call_id = json.loads(id_node.text(text)) if id_node and id_node.kind == "string" and id_node.end else None
    if args is None:
        return CallProgress(name, "{}" if node.end is not None else "", node.end is not None, call_id)
    return CallProgress(name, args.text(text), args.end is not None, call_id)


def _after(region: str, i: int, close: str, final: bool) -> int | None:
    """Where a region ends once its body ended at i: past `close` (after optional whitespace)."""
    j = skip_ws(region, i)
    if not close:
        return i
    if region.startswith(close, j):
        return j + len(close)
    if close.startswith(region[j:]):
        return len(region) if final else None      # the closing marker may still come; missing at the end: done
    raise NotJSON(f"expected {close!r}")


@dataclass
class TaggedObject:
    """One JSON call object per region: `<tool_call>{...}</tool_call>` (Hermes, Qwen, SmolLM3) or Llama 3's bare
    `{"name": ..., "parameters": ...}` after `<|python_tag|>` or at the reply's start (`close` empty)."""
    triggers: tuple[str, ...]
    start_triggers: tuple[str, ...] = ()
    close: str = ""
    kept: tuple[str, ...] = ()

    def keeps(self, trigger: str) -> bool:
        return trigger in self.kept

    def scan(self, region: str, final: bool) -> RegionScan:
        i = skip_ws(region, 0)
        if i >= len(region):
            return RegionScan()
        node = scan(region, i)
        call = call_from_object(node, region)
        end = None if node.end is None else _after(region, node.end, self.close, final)
        return RegionScan([call], end)


@dataclass
class TaggedList:
    """A JSON list of call objects after a marker: Mistral Nemo's `[TOOL_CALLS][{...}, ...]`, Phi-4-mini's
    `<|tool_call|>[{...}]<|/tool_call|>` (a single object is taken as a list of one)."""
    triggers: tuple[str, ...]
    close: str = ""
    start_triggers: tuple[str, ...] = ()

    def keeps(self, trigger: str) -> bool:
        return False

    def scan(self, region: str, final: bool) -> RegionScan:
        i = skip_ws(region, 0)
        if i >= len(region):
            return RegionScan()
        node = scan(region, i)
        items = [node] if node.kind == "object" else [v for _, v in node.items] if node.kind == "array" else None
        if items is None:
            raise NotJSON("expected a list of calls")
        calls = []
        for item in items:
            call = call_from_object(item, region)
            calls.append(call)
            if call.name is None:
                break
        end = None if node.end is None else _after(region, node.end, self.close, final)
        return RegionScan(calls, end)


@dataclass
class NameArgs:
    """Mistral Small 3.2 (v11 tokenizer): `[TOOL_CALLS]name[ARGS]{...}`, or `name[CALL_ID]id[ARGS]{...}` as the
    template writes history; one region per call."""
    triggers: tuple[str, ...] = ("[TOOL_CALLS]",)
    start_triggers: tuple[str, ...] = ()

    def keeps(self, trigger: str) -> bool:
        return False

    def scan(self, region: str, final: bool) -> RegionScan:
        at = region.find("[ARGS]")
        if at < 0:
            # Still in the name (or the id): plausible while it is a name's characters and not absurdly long.
            if _NAME.fullmatch(region.split("[", 1)[0]) is None or len(region) > 256:
                raise NotJSON("not a [TOOL_CALLS] call")
            return RegionScan()
        name, _, call_id = region[:at].partition("[CALL_ID]")
        if not name or _NAME.fullmatch(name) is None:
            raise NotJSON("a [TOOL_CALLS] call needs a name")
        i = skip_ws(region, at + len("[ARGS]"))
        if i >= len(region):
            return RegionScan([CallProgress(name, id=call_id or None)])
        node = scan(region, i)
        return RegionScan([CallProgress(name, node.text(region), node.end is not None, call_id or None)], node.end)


@dataclass
class PythonCalls:
    """Gemma's text-based calls: a Python list of calls `[get_weather(city="Paris"), ...]`. A call is announced when
    its `(` is reached and its arguments (as a JSON object) arrive whole when its `)` closes: keyword arguments
    are not JSON, so there is no prefix of the final argument text to stream earlier."""
    triggers: tuple[str, ...]
    start_triggers: tuple[str, ...] = ()

    def keeps(self, trigger: str) -> bool:
        return True

    def scan(self, region: str, final: bool) -> RegionScan:
        if not region.startswith("["):
            raise NotJSON("expected '['")
        calls: list[CallProgress] = []
        i = skip_ws(region, 1)
        while i < len(region):
            m = _NAME.match(region, i)
            j = m.end()
            if j >= len(region):
                return RegionScan(calls)
            if region[j] != "(" or j == i:
                raise NotJSON("expected a call")
            name = region[i:j]
            close = _paren_end(region, j)
            if close is None:
                calls.append(CallProgress(name))
                return RegionScan(calls)
            calls.append(CallProgress(name, json.dumps(python_call_arguments(region[i:close])), True))
            k = skip_ws(region, close)
            if k >= len(region):
                return RegionScan(calls)
            if region[k] == "]":
                return RegionScan(calls, k + 1)
            if region[k] != ",":
                raise NotJSON("expected ',' or ']'")
            i = skip_ws(region, k + 1)
        return RegionScan(calls)


def _paren_end(text: str, i: int) -> int | None:
    """Index past the `)` matching text[i] == '(' (Python strings and nesting respected), None if not yet."""
    depth, j, quote = 0, i, None
    while j < len(text):
        c = text[j]
        if quote:
            if c == "\\":
                j += 1
            elif c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return None


@dataclass
class GenericJSON:
    """The generic format: the whole reply is one JSON object, {"tool_call": {...}}, {"tool_calls": [...]} or
    {"response": "..."}; the response string streams as content while it is decoded."""
    triggers: tuple[str, ...] = ()
    start_triggers: tuple[str, ...] = ("{",)

    def keeps(self, trigger: str) -> bool:
        return True

    def scan(self, region: str, final: bool) -> RegionScan:
        node = scan(region, 0)
        if node.kind != "object":
            raise NotJSON("expected an object")
        result = RegionScan(end=node.end)
        for key, value in node.items:
            if key == "response":
                if value.kind != "string":
                    raise NotJSON("response must be a string")
                result.content = partial_string(value.text(region))
            elif key == "tool_call":
                result.calls.append(call_from_object(value, region))
            elif key == "tool_calls":
                if value.kind != "array":
                    raise NotJSON("tool_calls must be a list")
                for _, item in value.items:
                    call = call_from_object(item, region)
                    result.calls.append(call)
                    if call.name is None:
                        break
            else:
                raise NotJSON(f"unexpected key {key!r}")
        return result
