"""Formats whose templates take `tools` and render calls themselves: Hermes/Qwen, Llama 3.1-3.3, Mistral."""
from __future__ import annotations

import hashlib
import re
import secrets
import string
from collections.abc import Mapping, Sequence
from typing import Any

from ..template import ChatTemplate
from .base import ToolFormat
from .gbnf import LIST_SEPARATOR, json_call, literal, one_of, repeated
from .messages import convert_messages
from .syntax import NameArgs, TaggedList, TaggedObject


class Hermes(ToolFormat):
    """Hermes 2 Pro / 3, Qwen 2.5, Qwen 3: `<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`, one
    block per call, several in a row for parallel calls; tools listed by the template inside `<tools>`."""
    name = "hermes"
    open, close = "<tool_call>", "</tool_call>"

    def syntax(self, tools):
        return TaggedObject(triggers=(self.open,), close=self.close)

    def calls_grammar(self, b, tools, parallel):
        call = one_of(b, "tc-call", [json_call(b, tool) for tool in tools])
        block = b.rule("tc-block", f'{b.marker(self.open)} tc-ws {call} tc-ws {b.marker(self.close)}')
        return repeated(block, "tc-ws", parallel)


class Llama3(ToolFormat):
    """Llama 3.1-3.3 JSON calls: `{"name": ..., "parameters": {...}}` as the whole reply, or after
    `<|python_tag|>`. One call per reply (the templates refuse several calls in one message)."""
    name = "llama3"
    python_tag = "<|python_tag|>"

    def syntax(self, tools):
        return TaggedObject(triggers=(self.python_tag,), start_triggers=('{"name"', '{ "name"'),
                            kept=('{"name"', '{ "name"'))

    def calls_grammar(self, b, tools, parallel):
        call = one_of(b, "tc-call", [json_call(b, tool, "parameters") for tool in tools])
        return f"( {b.marker(self.python_tag)} )? {call}"


def mistral_id(index: int) -> str:
    """Mistral's templates insist on ids of exactly nine letters and digits."""
    return "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(9))


_NINE = re.compile(r"[A-Za-z0-9]{9}")


def mistral_call_id(ident: str) -> str:
    """An OpenAI id (`call_...`) in Mistral's shape, the same every time for the same id."""
    if _NINE.fullmatch(ident):
        return ident
    digest = hashlib.sha256(ident.encode()).digest()
    alphabet = string.ascii_letters + string.digits
    return "".join(alphabet[b % len(alphabet)] for b in digest[:9])


class Mistral(ToolFormat):
    """Mistral Nemo (v3-tekken): `[TOOL_CALLS][{"name": ..., "arguments": {...}, "id": "abcdefghi"}, ...]`.
    Ids in requests are mapped to the nine-character shape the template requires (stable per id)."""
    name = "mistral"
    tag = "[TOOL_CALLS]"
    ids = staticmethod(mistral_id)

    def render(self, template: ChatTemplate, messages: Sequence[Mapping[str, Any]], tools: list[dict[str, Any]],
               extra: dict[str, Any]) -> str:
        return template.render(convert_messages(messages, call_id=mistral_call_id), add_generation_prompt=True,
                               tools=tools or None, **extra)

    def syntax(self, tools):
        return TaggedList(triggers=(self.tag,))

    def calls_grammar(self, b, tools, parallel):
        id_field = ' ( tc-ws "," tc-ws "\\"id\\"" tc-ws ":" tc-ws "\\"" [A-Za-z0-9]{9} "\\"" )?'
        call = one_of(b, "tc-call", [json_call(b, tool, extra=id_field) for tool in tools])
        return f'{b.marker(self.tag)} "[" tc-ws {repeated(call, LIST_SEPARATOR, parallel)} tc-ws "]"'


class MistralV11(Mistral):
    """Mistral Small 3.2 (v11 tokenizer): `[TOOL_CALLS]name[ARGS]{...}` per call (history also carries
    `[CALL_ID]id` between name and `[ARGS]`, which a reply may repeat)."""
    name = "mistral-v11"

    def syntax(self, tools):
        return NameArgs()

    def calls_grammar(self, b, tools, parallel):
        alternatives = [f'{b.marker(self.tag)} {literal(tool["function"]["name"])} ( {b.marker("[CALL_ID]")} [A-Za-z0-9]{{9}} )? '
                        f'{b.marker("[ARGS]")} {b.arguments(tool)}' for tool in tools]
        call = one_of(b, "tc-call", alternatives)
        return repeated(call, "", parallel)

