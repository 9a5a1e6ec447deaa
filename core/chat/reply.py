"""One chat reply as OpenAI shapes it: the generated text read by the model's reply parser into content,
reasoning and tool calls, both as stream deltas and as the final message.

The Python API, the server and the browser all build their answers from this, so a reply reads the same
everywhere: reasoning never leaks into content, a tool call never shows as raw markup, and a reply that made
calls finishes with "tool_calls".
"""
from __future__ import annotations

from typing import Any

from .tools import ReplyParser, ToolCallDelta


class Reply:
    def __init__(self, parser: ReplyParser) -> None:
        self._parser = parser
        self._closed = False

    def feed(self, text: str) -> dict[str, Any]:
        """The delta that `text` (the next piece of generated text) adds: any of `content`,
        `reasoning_content` and `tool_calls` (OpenAI's streaming shape); empty while text is held back."""
        return _delta(self._parser.feed(text)) if text else {}

    def close(self, text: str = "") -> dict[str, Any]:
        """The delta of the reply's last piece of text and whatever was held back, at its end."""
        if self._closed:
            return {}
        self._closed = True
        parts = self._parser.feed(text) if text else []
        return _delta(parts + self._parser.close())

    def finish_reason(self, reason: str) -> str:
        """A reply that ended normally after making calls finishes with "tool_calls" (a cut one keeps "length")."""
        return "tool_calls" if reason == "stop" and self._parser.tool_calls else reason

    def message(self) -> dict[str, Any]:
        """The whole reply as an assistant message (after `close`)."""
        parser = self._parser
        message: dict[str, Any] = {"role": "assistant", "content": parser.content or None}
        if parser.reasoning:
            message["reasoning_content"] = parser.reasoning
        if parser.tool_calls:
            message["tool_calls"] = parser.tool_calls
        elif message["content"] is None:
            message["content"] = ""
        return message


def _delta(parts: list) -> dict[str, Any]:
    delta: dict[str, Any] = {}
    for part in parts:
        if isinstance(part, ToolCallDelta):
            call: dict[str, Any] = {"index": part.index}
            if part.id is not None:
                call.update(id=part.id, type="function")
            function: dict[str, Any] = {}
            if part.name is not None:
                function["name"] = part.name
            if part.arguments or part.name is not None:
                function["arguments"] = part.arguments
            call["function"] = function
            delta.setdefault("tool_calls", []).append(call)
        else:
            kind, text = part
            key = "content" if kind == "content" else "reasoning_content"
            if text:
                delta[key] = delta.get(key, "") + text
    return delta
