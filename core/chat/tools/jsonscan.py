"""A partial JSON reader for text that is still being generated.

A streamed tool call is JSON whose end has not arrived yet. To stream a call's arguments we need to know, at any
moment, which part of the text so far is the value of `"arguments"`, whether the `"name"` string is complete, and
whether the surrounding object or list has closed. `scan(text, i)` walks one JSON value from `i` and returns a
`Node` tree with the span of every value; a value cut off by the end of the text has `end = None`. Text that can
never become JSON raises `NotJSON`, so the caller can give the text back as plain content.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

_WS = " \t\n\r"
_NUMBER = set("+-0123456789.eE")
_WORDS = ("true", "false", "null")


class NotJSON(ValueError):
    """The text cannot be the beginning of the expected JSON."""


@dataclass
class Node:
    kind: str                     # "object", "array", "string", "number", "word"
    start: int
    end: int | None = None        # one past the last character; None while the value is still open
    items: list[tuple[str | None, Node]] = field(default_factory=list)   # object: (key, value); array: (None, v)

    def get(self, key: str) -> Node | None:
        for name, value in self.items:
            if name == key:
                return value
        return None

    def text(self, source: str) -> str:
        return source[self.start:len(source) if self.end is None else self.end]


def skip_ws(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


def scan(text: str, i: int) -> Node:
    """The JSON value starting at text[i] (no leading whitespace); open nodes where the text ends."""
    if i >= len(text):
        raise IndexError("no value yet")
    c = text[i]
    if c == "{":
        return _container(text, i, "object")
    if c == "[":
        return _container(text, i, "array")
    if c == '"':
        end = _string_end(text, i)
        return Node("string", i, end)
    if c in _NUMBER:
        j = i
        while j < len(text) and text[j] in _NUMBER:
            j += 1
        return Node("number", i, j if j < len(text) else None)
    for word in _WORDS:
        piece = text[i:i + len(word)]
        if word.startswith(piece):
            return Node("word", i, i + len(word) if piece == word else None)
    raise NotJSON(f"unexpected {c!r} at {i}")


def _string_end(text: str, i: int) -> int | None:
    # str.find per quote rather than a Python loop per character: arguments can be long, and an open call is
    # scanned again on every feed.
    j = i + 1
    while True:
        q = text.find('"', j)
        if q < 0:
            return None
        k = q
        while k > i + 1 and text[k - 1] == "\\":
            k -= 1
        if (q - k) % 2 == 0:      # an even run of backslashes: the quote is not escaped
            return q + 1
        j = q + 1


def _container(text: str, i: int, kind: str) -> Node:
    node = Node(kind, i)
    close = "}" if kind == "object" else "]"
    j = skip_ws(text, i + 1)
    if j < len(text) and text[j] == close:
        node.end = j + 1
        return node
    while j < len(text):
        key = None
        if kind == "object":
            if text[j] != '"':
                raise NotJSON(f"expected a key at {j}")
            key_end = _string_end(text, j)
            if key_end is None:
                return node
            key = json.loads(text[j:key_end])
            j = skip_ws(text, key_end)
            if j >= len(text):
                return node
            if text[j] != ":":
                raise NotJSON(f"expected ':' at {j}")
            j = skip_ws(text, j + 1)
            if j >= len(text):
                return node
        value = scan(text, j)
        node.items.append((key, value))
        if value.end is None:
            return node
        j = skip_ws(text, value.end)
        if j >= len(text):
            return node
        if text[j] == close:
            node.end = j + 1
            return node
        if text[j] != ",":
            raise NotJSON(f"expected ',' or {close!r} at {j}")
        j = skip_ws(text, j + 1)
    return node


def partial_string(raw: str) -> str:
    """The decoded text of an open JSON string literal (`"abc\\n...`), up to its last complete character."""
    body = raw[1:]
    if body.endswith('"') and len(raw) > 1 and _string_end(raw, 0) == len(raw):
        return json.loads(raw)
    # Cut a trailing incomplete escape so what remains decodes.
    cut = len(body)
    back = body.rfind("\\")
    if back != -1:
        run = len(body[:back + 1]) - len(body[:back + 1].rstrip("\\"))
        if run % 2 == 1:   # the last backslash starts an escape
            need = 6 if body[back + 1:back + 2] == "u" else 2
            if len(body) - back < need:
                cut = back
    try:
        text = json.loads('"' + body[:cut] + '"')
    except json.JSONDecodeError as exc:
        raise NotJSON(f"bad string: {exc}") from exc
    # A high surrogate escape waits for its low half (the pair decodes to one character).
    return text[:-1] if text and "\ud800" <= text[-1] <= "\udbff" else text
