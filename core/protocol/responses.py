"""OpenAI's answers: the pieces of a reply become `chat.completion.chunk` / `text_completion` stream chunks, the
whole `chat.completion` / `text_completion` object, and its usage.

Whoever runs the generation (the server's scheduler, `LLM.answer` for the Python API and the browser) reads each of
its events into a `Piece` with `read_event`; `Completion` records them per choice and shapes every object, so a
reply reads the same from the server, from Python and from the JS API.

Usage: `prompt_tokens`, `completion_tokens`, `total_tokens` and `prompt_tokens_details.cached_tokens`, as OpenAI
has them. A stream carries it only when the request set `stream_options.include_usage`, as OpenAI's does: once, in
a closing chunk with no choices (every other chunk then has `usage: null`).

A chunk may carry llmchat's own fields under `llmchat` (the browser runtime's token ids, timings, KV cache report).
A best-effort JSON schema's keywords that were not enforced come as `llmchat.unenforced_schema_keywords` (JSON
pointers): in the whole answer, and in a stream on the chunk that finishes the last choice.
"""
from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..chat.reply import Reply
from ..grammar import Constraint
from ..runtime.generation import FinishEvent, GenerationEvent
from ..version import __version__

SYSTEM_FINGERPRINT = f"llmchat-{__version__}"


@dataclass(frozen=True)
class Counts:
    """A finished choice's token counts."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0


@dataclass
class Piece:
    """One choice's next step: its text (a chat reply's content), the chat delta's other parts
    (`reasoning_content`, `tool_calls`), the token that produced it, and at the end the finish reason, the counts
    and (chat) the whole message."""

    text: str = ""
    parts: dict[str, Any] = field(default_factory=dict)
    token: int | None = None
    logprob: float | None = None
    top: Sequence[tuple[int, float]] | None = None
    finish_reason: str | None = None
    counts: Counts | None = None
    message: dict[str, Any] | None = None
    extension: dict[str, Any] | None = None  # llmchat's fields for this piece's chunk
    unenforced: tuple[str, ...] = ()  # at the finish: a best-effort schema's keywords the grammar left out


def read_event(event: GenerationEvent, reply: Reply | None = None, constraint: Constraint | None = None) -> Piece:
    """A choice's next generation event as its piece: a chat reply's text read by its `reply` parser into the
    delta's parts (content, reasoning, tool calls) and, at the finish, its finish reason and whole message; a text
    completion's (`reply` None) as it came. The finish names what the choice's `constraint` left unenforced."""
    if isinstance(event, FinishEvent):
        piece = Piece(event.text, finish_reason=event.reason,
                      counts=Counts(event.prompt_tokens, event.completion_tokens, event.cached_tokens),
                      unenforced=constraint.unenforced if constraint is not None else ())
    else:
        piece = Piece(event.text, token=event.token, logprob=event.logprob, top=event.top)
    if reply is not None:  # the message's parts: content, reasoning_content, tool_calls
        if piece.finish_reason is None:
            parts = reply.feed(event.text)
        else:
            parts = reply.close(event.text)
            piece.finish_reason, piece.message = reply.finish_reason(event.reason), reply.message()
        piece.text, piece.parts = parts.pop("content", ""), parts
    return piece


@dataclass
class _Choice:
    text: list[str] = field(default_factory=list)
    logprobs: list[Any] = field(default_factory=list)
    offset: int = 0  # the text route's character offset of the next token
    finish_reason: str | None = None
    counts: Counts | None = None
    message: dict[str, Any] | None = None


class Completion:
    """One request's answer, its choices numbered prompt by prompt (prompt p, choice c at p * n + c).

    `top_logprobs` None leaves log-probabilities out; otherwise `token_bytes` spells the tokens in them."""

    def __init__(self, *, chat: bool, model: str, prompts: int = 1, n: int = 1, top_logprobs: int | None = None,
                 include_usage: bool = False, token_bytes: Callable[[int], bytes] | None = None) -> None:
        if top_logprobs is not None and token_bytes is None:
            raise ValueError("log-probabilities need token_bytes to spell their tokens")
        self.chat, self.model, self.n = chat, model, n
        self.top_logprobs, self.include_usage, self._token_bytes = top_logprobs, include_usage, token_bytes
        self.id = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        self.created = int(time.time())
        self.choices = [_Choice() for _ in range(prompts * n)]
        self._open = len(self.choices)
        self.unenforced: tuple[str, ...] = ()  # a best-effort schema's keywords the grammar left out

    # -- stream ---------------------------------------------------------------------------------------------------
    def opening(self) -> list[dict[str, Any]]:
        """The chunks a stream starts with: a chat reply's role, per choice."""
        if not self.chat:
            return []
        return [self._chunk([{"index": i, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                              "finish_reason": None}]) for i in range(len(self.choices))]

    def take(self, index: int, piece: Piece) -> dict[str, Any] | None:
        """Record choice `index`'s next piece; returns its stream chunk, or None when it adds nothing to send
        (text held back for a stop string, say)."""
        c = self.choices[index]
        c.text.append(piece.text)
        entry = None
        if piece.token is not None and self.top_logprobs is not None:
            entry = self._logprob_entry(c, piece)
            c.logprobs.append(entry)
        if piece.finish_reason is not None:
            c.finish_reason, c.counts, c.message = piece.finish_reason, piece.counts, piece.message
            self.unenforced = piece.unenforced or self.unenforced  # the same constraint for every choice
            self._open -= 1
        if not (piece.text or piece.parts or entry or piece.finish_reason or piece.extension):
            return None
        if self.chat:
            delta = {"content": piece.text} if piece.text else {}
            delta.update(piece.parts)
            choice = {"index": index, "delta": delta, "logprobs": {"content": [entry]} if entry else None,
                      "finish_reason": piece.finish_reason}
        else:
            choice = {"index": index, "text": piece.text, "logprobs": self._text_logprobs([entry]) if entry else None,
                      "finish_reason": piece.finish_reason}
        chunk = self._chunk([choice])
        extension = {**(piece.extension or {}), **(self._ours() if piece.finish_reason and self.done else {})}
        if extension:
            chunk["llmchat"] = extension
        return chunk

    def _ours(self) -> dict[str, Any]:
        """llmchat's fields of the whole answer."""
        return {"unenforced_schema_keywords": list(self.unenforced)} if self.unenforced else {}

    def closing(self) -> list[dict[str, Any]]:
        """The chunks a finished stream ends with: the usage, when the request asked for a chunk of its own."""
        return [self._chunk([], usage=self.usage())] if self.include_usage else []

    @property
    def done(self) -> bool:
        """Whether every choice has finished."""
        return self._open == 0

    # -- whole ----------------------------------------------------------------------------------------------------
    def response(self) -> dict[str, Any]:
        """The whole answer, once every choice has finished."""
        choices = []
        for i, c in enumerate(self.choices):
            text = "".join(c.text)
            if self.chat:
                logprobs = {"content": c.logprobs} if self.top_logprobs is not None else None
                choices.append({"index": i, "message": c.message or {"role": "assistant", "content": text},
                                "logprobs": logprobs, "finish_reason": c.finish_reason})
            else:
                choices.append({"index": i, "text": text, "logprobs": self._text_logprobs(c.logprobs),
                                "finish_reason": c.finish_reason})
        return {"id": self.id, "object": "chat.completion" if self.chat else "text_completion",
                "created": self.created, "model": self.model, "system_fingerprint": SYSTEM_FINGERPRINT,
                "choices": choices, "usage": self.usage(), **({"llmchat": self._ours()} if self._ours() else {})}

    def usage(self) -> dict[str, Any]:
        """Token counts of the finished choices. A prompt counts once however many choices it had, and its cached
        positions are those every one of its choices found cached."""
        finished = [c.counts for c in self.choices]
        prompt = cached = 0
        for p in range(0, len(finished), self.n):
            counts = [k for k in finished[p:p + self.n] if k is not None]
            if counts:
                prompt += counts[0].prompt_tokens
                cached += min(k.cached_tokens for k in counts)
        completion = sum(k.completion_tokens for k in finished if k is not None)
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": cached}}

    # -- parts ----------------------------------------------------------------------------------------------------
    def _chunk(self, choices: list[dict[str, Any]], usage: dict[str, Any] | None = None) -> dict[str, Any]:
        chunk: dict[str, Any] = {"id": self.id, "object": "chat.completion.chunk" if self.chat else "text_completion",
                                 "created": self.created, "model": self.model,
                                 "system_fingerprint": SYSTEM_FINGERPRINT, "choices": choices}
        if self.include_usage:
            chunk["usage"] = usage
        return chunk

    def _spell(self, token: int) -> tuple[str, list[int]]:
        raw = self._token_bytes(token)
        return raw.decode("utf-8", errors="replace"), list(raw)

    def _logprob_entry(self, c: _Choice, piece: Piece) -> Any:
        text, raw = self._spell(piece.token)
        if self.chat:
            top = [dict(zip(("token", "bytes"), self._spell(t)), logprob=lp) for t, lp in piece.top or ()]
            return {"token": text, "logprob": piece.logprob, "bytes": raw, "top_logprobs": top}
        entry = (text, piece.logprob, {self._spell(t)[0]: lp for t, lp in piece.top or ()}, c.offset)
        c.offset += len(text)
        return entry

    def _text_logprobs(self, entries: Sequence[tuple]) -> dict[str, Any] | None:
        if self.top_logprobs is None:
            return None
        return {"tokens": [e[0] for e in entries], "token_logprobs": [e[1] for e in entries],
                "top_logprobs": [e[2] for e in entries], "text_offset": [e[3] for e in entries]}
