"""Building the GBNF of tool calls: markers, whitespace, "any text up to a marker", and the arguments of each
tool from its JSON schema (through `llmchat.grammar.json_schema.SchemaRules`, so tool arguments obey exactly
what `response_format` schemas obey).

Markers that are special tokens of the model's vocabulary must be named as tokens (`<|python_tag|>`, or
`<[id]>` when the text is not `<...>`-shaped, like Mistral's `[TOOL_CALLS]`): a grammar never matches a special
token by its bytes. Which markers are special tokens is the vocabulary's business, so the caller passes them
(`special_tokens`: text -> id); `used_special` then lists those the grammar names, to hand to `Grammar.parse`.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ...errors import UnsupportedSchemaError
from ...grammar.json_schema import SchemaRules
from ...grammar.regex import char_class, literal
from ...grammar.utf8 import MAX_CODE_POINT

# Whitespace where JSON allows it, bounded so a model cannot pad forever (llama.cpp bounds it the same way).
WS_RULE = 'tc-ws ::= | " " | "\\n" [ \\t]{0,20}'


class GrammarBuilder:
    def __init__(self, special_tokens: Mapping[str, int] | None = None) -> None:
        self._special = dict(special_tokens or {})
        self.used_special: dict[str, int] = {}
        self._rules: dict[str, str] = {"tc-ws": WS_RULE}
        self._schemas = SchemaRules()
        self._count = 0

    def marker(self, text: str) -> str:
        if text in self._special:
            self.used_special[text] = self._special[text]
            if text.startswith("<") and text.endswith(">") and ">" not in text[1:-1]:
                return text
            return f"<[{self._special[text]}]>"
        return literal(text)

    def rule(self, name: str, body: str) -> str:
        self._rules[name] = f"{name} ::= {body}"
        return name

    def arguments(self, tool: Mapping[str, Any]) -> str:
        """The rule for the JSON arguments object of one tool."""
        self._count += 1
        schema = tool["function"].get("parameters") or {"type": "object"}
        if isinstance(schema, dict) and "type" not in schema:
            schema = {**schema, "type": "object"}  # arguments are an object, whatever else the schema allows
        try:
            return self._schemas.add(schema, f"tc-args-{self._count}")
        except UnsupportedSchemaError as exc:   # say which tool: the pointers are inside its parameters
            raise UnsupportedSchemaError(f"tool {tool['function']['name']!r} parameters: {exc}", exc.keywords) from exc

    def value(self, schema: Any) -> str:
        self._count += 1
        return self._schemas.add(schema, f"tc-value-{self._count}")

    def until(self, stop: str) -> str:
        """A rule for any text that does not contain `stop`, then `stop` itself."""
        if stop in self._special:
            return self.rule("tc-until-" + str(len(self._rules)), f"[^\\x00]* {self.marker(stop)}")
        base = f"tc-until{len(self._rules)}"
        chars = sorted(set(stop))
        other = char_class(_without(chars))
        for state in range(len(stop)):
            alternatives = [f"{other} {base}-0"]
            for c in chars:
                nxt = _advance(stop, state, c)
                alternatives.append(literal(c) + ("" if nxt == len(stop) else f" {base}-{nxt}"))
            self.rule(f"{base}-{state}", " | ".join(alternatives))
        return f"{base}-0"

    def gbnf(self, root: str) -> str:
        return "\n".join([f"root ::= {root}", *self._rules.values(), self._schemas.gbnf()]) + "\n"


def _without(chars: list[str]) -> list[tuple[int, int]]:
    """Code point ranges of every character except `chars`."""
    ranges, lo = [], 0
    for cp in sorted(ord(c) for c in chars):
        if cp > lo:
            ranges.append((lo, cp - 1))
        lo = cp + 1
    return ranges + [(lo, MAX_CODE_POINT)]


def _advance(stop: str, state: int, c: str) -> int:
    """KMP: how much of `stop` is matched after `c` follows a match of `state` characters."""
    seen = stop[:state] + c
    for k in range(min(len(seen), len(stop)), 0, -1):
        if seen.endswith(stop[:k]):
            return k
    return 0


def json_call(b: GrammarBuilder, tool: Mapping[str, Any], args_key: str = "arguments", extra: str = "") -> str:
    """`{"name": "<tool>", "arguments": <args>}` for one tool, with JSON whitespace between tokens; `extra` is
    GBNF for more members after the arguments."""
    name = literal(json.dumps(tool["function"]["name"]))
    return f'"{{" tc-ws {key("name")} {name} tc-ws "," tc-ws {key(args_key)} {b.arguments(tool)}{extra} tc-ws "}}"'


def key(name: str) -> str:
    """A JSON object key and its colon."""
    return f'{literal(json.dumps(name))} tc-ws ":" tc-ws'


LIST_SEPARATOR = '"," tc-ws'


def one_of(b: GrammarBuilder, name: str, alternatives: list[str]) -> str:
    return b.rule(name, " | ".join(f"( {alt} )" for alt in alternatives))


def repeated(item: str, separator: str, parallel: bool) -> str:
    """One item, or (parallel calls) one or more separated by `separator`."""
    return f"{item} ( {separator} {item} )*" if parallel else item
