"""The incremental reply parser shared by every format: it splits generated text into reasoning, content and tool
calls while the text is still arriving.

A format contributes a `CallSyntax`: the marker texts that open a call region (`triggers` anywhere in the content,
`start_triggers` only at the start of the reply), and `scan(region, final)`, which reads the region's text so far
(from the trigger on) and says which calls it holds, how much of each call's argument text is certain, and where
the region ends. The parser does the rest the same way for all formats:

- it holds back only a tail of text that could still be the start of a marker (`<tool_c...`), and a run of
  trailing whitespace until it knows whether more text follows in the same part (content and reasoning are
  trimmed at both ends); everything else goes out at once;
- `<think>...</think>` at the start of the reply (or the whole reply start when the prompt opened `<think>`) is
  reasoning, never content;
- a call is announced (index, id, name) as soon as its name is complete, then its argument text follows as it
  grows, so the concatenated deltas always equal the final result;
- a region that turns out not to be a call (a `<tool_call>` in prose, not followed by JSON) is given back as
  content, marker included.

A reply cut off inside a call (max_tokens) ends in one of two ways, and `close()` says which: if no call of the
region had its name complete yet, the region's text becomes content (as llama.cpp does: nothing was announced as a
call, so nothing is lost); otherwise the announced calls stay tool calls with the argument text they reached (as
OpenAI returns them with finish_reason "length") and `truncated` is set, so a caller can tell the arguments may
not parse.
"""
from __future__ import annotations

import secrets
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, Union

from .jsonscan import NotJSON


@dataclass(frozen=True)
class ToolCallDelta:
    """One streamed piece of a tool call: the first carries id and name, the following ones argument text."""
    index: int
    id: str | None
    name: str | None
    arguments: str


Delta = Union[tuple[str, str], ToolCallDelta]


@dataclass
class CallProgress:
    name: str | None                 # None until the name is complete
    arguments: str = ""              # argument text certain so far (always a prefix of the final text)
    done: bool = False               # the arguments are complete
    id: str | None = None            # an id the model wrote itself (Mistral Nemo), used when present


@dataclass
class RegionScan:
    calls: list[CallProgress] = field(default_factory=list)
    end: int | None = None           # index in the region text just past the region (its closing marker)
    content: str = ""                # content the region carries (the generic format's "response")


class CallSyntax(Protocol):
    triggers: tuple[str, ...]
    start_triggers: tuple[str, ...]

    def keeps(self, trigger: str) -> bool: ...          # whether the trigger text is part of the region's text

    def scan(self, region: str, final: bool) -> RegionScan: ...   # raises NotJSON when it is not a call


THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


def random_call_id(index: int) -> str:
    return "call_" + "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(24))


class ReplyParser:
    """Feed the reply's text (special tokens as their text); read deltas as they come, and the totals after close.

    `think`: `<think>` at the reply's start opens reasoning. `thinking`: the prompt already opened `<think>`, so the
    reply starts as reasoning. `syntax`: how calls look (None: no calls are parsed, all is content or reasoning).
    `ids` makes the id of call number i (default: `call_` + 24 random letters and digits).
    """

    def __init__(self, *, think: bool = False, thinking: bool = False, syntax: CallSyntax | None = None,
                 ids: Callable[[int], str] | None = None) -> None:
        self._think = think or thinking
        self._syntax = syntax
        self._ids = ids or random_call_id
        self._mode = "reasoning" if thinking else "content"
        self._at_start = True                       # nothing but whitespace seen in this content part
        self._buf = ""
        self._region = ""                           # text of the open call region
        self._region_trigger = ""                   # the marker that opened it (for giving it back as content)
        self._region_content = 0                    # characters of region content already emitted
        self._base = 0                              # index of the region's first call
        self._calls: list[dict] = []                # announced calls: id, name, arguments
        self._fresh = {"content": True, "reasoning": True}
        self._held = {"content": "", "reasoning": ""}
        self._closed = False
        self.content = ""
        self.reasoning = ""
        self.truncated = False                      # close() found a call cut off after its name was announced

    @property
    def tool_calls(self) -> list[dict]:
        return [{"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                for c in self._calls]

    def feed(self, text: str) -> list[Delta]:
        if self._closed:
            raise RuntimeError("feed() after close()")
        self._buf += text
        out: list[Delta] = []
        self._run(out, final=False)
        return out

    def close(self) -> list[Delta]:
        if self._closed:
            return []
        out: list[Delta] = []
        self._run(out, final=True)
        self._closed = True
        if self._mode == "region":
            self._finish_cut_region(out)
        elif self._buf:
            self._emit(out, self._mode, self._buf)
            self._buf = ""
        return out

    # -- the state machine ---------------------------------------------------------------------------------

    def _run(self, out: list[Delta], final: bool) -> None:
        while True:
            if self._mode == "reasoning":
                if not self._reasoning_step(out):
                    return
            elif self._mode == "content":
                if not self._content_step(out, final):
                    return
            elif not self._region_step(out, final):
                return

    def _reasoning_step(self, out: list[Delta]) -> bool:
        at = self._buf.find(THINK_CLOSE)
        if at >= 0:
            self._emit(out, "reasoning", self._buf[:at])
            self._held["reasoning"] = ""
            self._buf = self._buf[at + len(THINK_CLOSE):]
            self._mode, self._at_start = "content", True
            self._fresh["content"] = True
            return True
        keep = _partial_tail(self._buf, (THINK_CLOSE,))
        self._emit(out, "reasoning", self._buf[:len(self._buf) - keep])
        self._buf = self._buf[len(self._buf) - keep:]
        return False

    def _content_step(self, out: list[Delta], final: bool) -> bool:
        syntax = self._syntax
        anywhere = syntax.triggers if syntax else ()
        if self._at_start:
            stripped = self._buf.lstrip()
            if not stripped:
                return False
            starts = (syntax.start_triggers if syntax else ()) + ((THINK_OPEN,) if self._think else ())
            for marker in starts + anywhere:
                if stripped.startswith(marker):
                    self._buf = stripped
                    return self._open(out, marker, 0)
            if not final and any(m.startswith(stripped) for m in starts):
                return False                          # could still become a start marker
            self._at_start = False
        best = None
        for marker in anywhere:
            at = self._buf.find(marker)
            if at >= 0 and (best is None or at < best[0]):
                best = (at, marker)
        if best is not None:
            self._emit(out, "content", self._buf[:best[0]])
            return self._open(out, best[1], best[0])
        keep = 0 if final else _partial_tail(self._buf, anywhere)
        self._emit(out, "content", self._buf[:len(self._buf) - keep])
        self._buf = self._buf[len(self._buf) - keep:]
        return False

    def _open(self, out: list[Delta], marker: str, at: int) -> bool:
        rest = self._buf[at + len(marker):]
        if marker == THINK_OPEN:
            self._buf, self._mode = rest, "reasoning"
            return True
        self._region_trigger = marker
        self._region = (marker + rest) if self._syntax.keeps(marker) else rest
        self._region_content = 0
        self._buf, self._mode, self._at_start = "", "region", False
        return True

    def _region_step(self, out: list[Delta], final: bool) -> bool:
        self._region += self._buf
        self._buf = ""
        try:
            scan = self._syntax.scan(self._region, final)
        except NotJSON:
            announced = len(self._calls) - self._base
            if announced:                             # cannot take back what was streamed: the rest is content
                self.truncated = True
            keep = self._syntax.keeps(self._region_trigger)
            body = self._region[len(self._region_trigger):] if keep else self._region
            self._emit(out, "content", self._region_trigger)
            self._buf, self._mode = body, "content"
            return True
        self._stream_calls(out, scan)
        if scan.content[self._region_content:]:
            self._emit(out, "content", scan.content[self._region_content:])
            self._region_content = len(scan.content)
        if scan.end is None:
            return False
        self._buf = self._region[scan.end:]
        self._base = len(self._calls)
        self._region, self._mode = "", "content"
        return True

    def _stream_calls(self, out: list[Delta], scan: RegionScan) -> None:
        for offset, call in enumerate(scan.calls):
            index = self._base + offset
            if call.name is None:
                break
            if index == len(self._calls):
                call_id = call.id or self._ids(index)
                self._calls.append({"id": call_id, "name": call.name, "arguments": call.arguments})
                out.append(ToolCallDelta(index, call_id, call.name, call.arguments))
                continue
            sent = self._calls[index]["arguments"]
            if len(call.arguments) > len(sent) and call.arguments.startswith(sent):
                self._calls[index]["arguments"] = call.arguments
                out.append(ToolCallDelta(index, None, None, call.arguments[len(sent):]))

    def _finish_cut_region(self, out: list[Delta]) -> None:
        try:
            scan = self._syntax.scan(self._region, True)
        except NotJSON:
            scan = RegionScan()
        self._stream_calls(out, scan)
        if len(self._calls) > self._base:
            self.truncated = scan.end is None
        else:
            keep = self._syntax.keeps(self._region_trigger)
            self._emit(out, "content", self._region if keep else self._region_trigger + self._region)
        self._region = ""

    def _emit(self, out: list[Delta], kind: str, text: str) -> None:
        """Append text to `kind`, trimming whitespace at the part's start and holding a trailing run back."""
        if not text:
            return
        if self._fresh[kind]:
            text = text.lstrip()
            if not text:
                return
            self._fresh[kind] = False
        text = self._held[kind] + text
        body = text.rstrip()
        self._held[kind] = text[len(body):]
        if body:
            if out and isinstance(out[-1], tuple) and out[-1][0] == kind:
                out[-1] = (kind, out[-1][1] + body)
            else:
                out.append((kind, body))
            if kind == "content":
                self.content += body
            else:
                self.reasoning += body


def _partial_tail(text: str, markers: tuple[str, ...]) -> int:
    """Length of the longest tail of `text` that is a proper prefix of one of `markers`."""
    best = 0
    for marker in markers:
        for n in range(min(len(marker) - 1, len(text)), best, -1):
            if marker.startswith(text[-n:]):
                best = n
                break
    return best
