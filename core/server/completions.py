"""The two completion routes' work: validate and tokenize a request, run its sequences, shape OpenAI's answer.

`prepare_chat` / `prepare_text` turn a validated body into `Prepared` (one GenerationRequest per prompt and
choice) or raise APIError with the status and the field at fault. `Run` submits them to the scheduler and yields
their events on the event loop. `Answer` assembles either the whole response or the stream of chunks, in the chat
or the legacy text-completion flavour.
"""
from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from starlette.concurrency import run_in_threadpool

from .. import __version__
from ..runtime.constraint import Constraint
from ..errors import (ChatTemplateError, FieldError, GrammarError, InvalidRequestError, LLMChatError,
                      UnsupportedSchemaError)
from .errors import APIError, error_body
from ..runtime.generation import FinishEvent, GenerationRequest, TokenEvent
from ..chat.reply import Reply
from ..chat.structured import ChatSetup
from ..runtime.scheduler import ErrorEvent, QueueFullError, Scheduler, SchedulerStoppedError, TooManySequencesError
from .schemas import (MAX_SEQUENCES_PER_REQUEST, MAX_STOP_STRINGS, ChatCompletionRequest, CompletionRequest,
                      _Sampling, unsupported_fields)


@dataclass
class ModelInfo:
    """What the routes need to know about the served model."""

    id: str
    aliases: frozenset[str]  # names a request's `model` may use
    context: int
    vocab_size: int
    encode_prompt: Callable[[str], list[int]]
    prepare_chat: Callable[..., ChatSetup]  # messages and the structure fields -> prompt text, constraint, parser
    encode_chat: Callable[[str], list[int]]  # a rendered chat prompt -> ids
    constraint: Callable[..., Constraint | None]  # response_format, grammar=, json_schema= -> the constraint
    token_bytes: Callable[[int], bytes]
    max_token_bytes: int | None = None  # the longest token's text in bytes; None skips the early length check


@dataclass
class Prepared:
    chat: bool
    body: _Sampling
    requests: list[GenerationRequest]  # prompt p, choice c at index p * n + c
    prompt_lengths: list[int]
    top_logprobs: int | None
    setup: ChatSetup | None = None  # a chat request's reply parsers come from it


# -- preparing ---------------------------------------------------------------------------------------------------


def _common_checks(body: _Sampling, model: ModelInfo) -> None:
    refused = unsupported_fields(body)
    if refused:
        names = ", ".join(f"`{n}`" for n in refused)
        raise APIError(400, f"{names} {'is' if len(refused) == 1 else 'are'} not supported by this server yet; "
                            "remove the field to go on", param=refused[0], code="unsupported_parameter")
    if body.model not in model.aliases:
        raise APIError(404, f"The model `{body.model}` does not exist; this server runs `{model.id}`",
                       param="model", code="model_not_found")
    if len(body.stop_strings()) > MAX_STOP_STRINGS:
        raise APIError(400, f"at most {MAX_STOP_STRINGS} stop strings are supported", param="stop")


def _check_fits(prompt_len: int, max_tokens: int | None, context: int, param: str) -> int:
    """The completion budget: `max_tokens`, or all the context the prompt leaves. Never truncates silently."""
    if max_tokens is None:
        if prompt_len >= context:
            raise APIError(400, f"This model's maximum context length is {context} tokens. However, your prompt "
                                f"has {prompt_len} tokens, which leaves no room for a completion. Please shorten it.",
                           param=param, code="context_length_exceeded")
        return context - prompt_len
    if prompt_len + max_tokens > context:
        raise APIError(400, f"This model's maximum context length is {context} tokens. However, you requested "
                            f"{prompt_len + max_tokens} tokens ({prompt_len} in the prompt, {max_tokens} for the "
                            "completion). Please reduce the prompt or the completion length.",
                       param="max_tokens" if param == "prompt" else param, code="context_length_exceeded")
    return max_tokens


def _check_sequence_count(prompts: int, n: int) -> None:
    if prompts * n > MAX_SEQUENCES_PER_REQUEST:
        raise APIError(400, f"{prompts} prompts times n={n} choices make {prompts * n} "
                            f"sequences; at most {MAX_SEQUENCES_PER_REQUEST} per request", param="n")


def _check_text_length(texts: Sequence[str], model: ModelInfo, param: str) -> None:
    """Refuse text that cannot fit the context before tokenizing it: no token stands for more than the
    vocabulary's longest piece (or one character, for a character the vocabulary lacks), so the text's UTF-8
    length over that is a lower bound of its token count. Tokenizing is then bounded by about context times that
    many bytes, however long the text a client sends."""
    if model.max_token_bytes is None:
        return
    size = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)
    at_least = size // max(model.max_token_bytes, 4)
    if at_least >= model.context:
        raise APIError(400, f"This model's maximum context length is {model.context} tokens. However, your "
                            f"{param} has {size} bytes of text, at least {at_least} tokens. Please shorten it.",
                       param=param, code="context_length_exceeded")


async def _encode(encode: Callable[[Any], Any], what: Any, param: str) -> Any:
    try:
        return await run_in_threadpool(encode, what)
    except UnicodeEncodeError:
        raise APIError(400, f"`{param}` holds text that is not valid Unicode (a lone surrogate code point)",
                       param=param) from None
    except ChatTemplateError as exc:
        if exc.__cause__ is not None and not _is_template_error(exc.__cause__):
            # The template itself tripped (e.g. `'text' + none`): its Python error means nothing to the client.
            raise APIError(400, _unrenderable(what), param=param, code="invalid_messages") from None
        raise APIError(400, str(exc), param=param) from None
    except (FieldError, GrammarError):
        raise  # the caller names the structure field at fault
    except LLMChatError as exc:
        raise APIError(400, str(exc), param=param) from None


def _is_template_error(exc: BaseException) -> bool:
    return any(c.__module__.startswith("jinja2") for c in type(exc).__mro__)


def _unrenderable(messages: Any) -> str:
    """What is likely wrong with messages the model's chat template failed on."""
    for i, m in enumerate(messages if isinstance(messages, list) else []):
        if not isinstance(m.get("content"), str):
            return (f"messages[{i}] ({m.get('role')}) has no text `content`, which this model's chat template "
                    "needs in every message; give it a string `content`")
    return ("this model's chat template cannot render these messages (their roles or order are not what it "
            "expects, e.g. two system messages or no user message); check them against the model's chat format")


def _structure_error(exc: LLMChatError, default_param: str) -> APIError:
    """A malformed structured-output or tool field, or a schema that cannot be enforced: 400 naming it."""
    if isinstance(exc, UnsupportedSchemaError):
        return APIError(400, str(exc), param=default_param, code="unsupported_schema")
    return APIError(400, str(exc), param=getattr(exc, "param", default_param))


def _requests(body: _Sampling, prompts: list[list[int]], budgets: list[int], top_logprobs: int | None,
              model: ModelInfo, constraint: Constraint | None) -> list[GenerationRequest]:
    _check_sequence_count(len(prompts), body.n)
    stops = body.stop_strings()
    try:
        bias = body.token_bias(model.vocab_size)
    except ValueError as exc:
        raise APIError(400, str(exc), param="logit_bias") from None
    out = []
    for ids, budget in zip(prompts, budgets):
        for choice in range(body.n):
            params = body.sampling_params(choice, bias)
            try:
                params.validate()
            except LLMChatError as exc:
                raise APIError(400, str(exc)) from None
            out.append(GenerationRequest(ids, params, budget, stops, top_logprobs, body.ignore_eos, constraint))
    return out


async def prepare_chat(body: ChatCompletionRequest, model: ModelInfo) -> Prepared:
    _common_checks(body, model)
    if body.top_logprobs is not None and not body.logprobs:
        raise APIError(400, "`top_logprobs` needs `logprobs` set to true", param="top_logprobs")
    messages = [m.model_dump(exclude_none=True) for m in body.messages]
    _check_text_length([t for m in body.messages for t in _texts(m.content)], model, "messages")
    kwargs = dict(body.chat_template_kwargs or {})
    if body.enable_thinking is not None:
        kwargs.setdefault("enable_thinking", body.enable_thinking)
    fields = dict(response_format=body.response_format, grammar=body.grammar, json_schema=body.json_schema,
                  tools=body.tools, tool_choice=body.tool_choice, parallel_tool_calls=body.parallel_tool_calls,
                  template_kwargs=kwargs or None)
    try:
        setup = await _encode(lambda m: model.prepare_chat(m, **fields), messages, "messages")
    except (FieldError, GrammarError) as exc:
        raise _structure_error(exc, "tools" if body.tools and body.response_format is None else "response_format"
                               ) from None
    ids = await _encode(model.encode_chat, setup.prompt, "messages")
    if not ids:
        raise APIError(400, "the messages render to an empty prompt", param="messages")
    max_tokens = body.max_completion_tokens if body.max_completion_tokens is not None else body.max_tokens
    param = "max_completion_tokens" if body.max_completion_tokens is not None else "max_tokens"
    budget = _check_fits(len(ids), max_tokens, model.context, param if max_tokens is not None else "messages")
    top = (body.top_logprobs or 0) if body.logprobs else None
    return Prepared(True, body, _requests(body, [ids], [budget], top, model, setup.constraint), [len(ids)], top,
                    setup)


async def prepare_text(body: CompletionRequest, model: ModelInfo) -> Prepared:
    _common_checks(body, model)
    try:
        constraint = await run_in_threadpool(model.constraint, body.response_format, grammar=body.grammar,
                                             json_schema=body.json_schema)
    except (FieldError, GrammarError) as exc:
        raise _structure_error(exc, "response_format") from None
    prompt = body.prompt
    if isinstance(prompt, str) or (prompt and isinstance(prompt[0], int)):
        prompt = [prompt]
    if not prompt:
        raise APIError(400, "`prompt` is empty", param="prompt")
    _check_sequence_count(len(prompt), body.n)  # before any tokenizing
    for p in prompt:
        if isinstance(p, str):
            _check_text_length([p], model, "prompt")
    prompts: list[list[int]] = []
    for p in prompt:
        if isinstance(p, str):
            ids = await _encode(model.encode_prompt, p, "prompt")
        else:
            ids = list(p)
            bad = next((t for t in ids if not 0 <= t < model.vocab_size), None)
            if bad is not None:
                raise APIError(400, f"token id {bad} in `prompt` is outside the vocabulary (0..{model.vocab_size - 1})",
                               param="prompt")
        if not ids:
            raise APIError(400, "`prompt` is empty (it encodes to no tokens)", param="prompt")
        prompts.append(ids)
    budgets = [_check_fits(len(ids), body.max_tokens, model.context, "prompt") for ids in prompts]
    return Prepared(False, body, _requests(body, prompts, budgets, body.logprobs, model, constraint),
                    [len(p) for p in prompts], body.logprobs)


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [part.text for part in content or () if isinstance(getattr(part, "text", None), str)]


# -- running -----------------------------------------------------------------------------------------------------


class Run:
    """A request's sequences in the scheduler, their events delivered on this event loop."""

    def __init__(self, scheduler: Scheduler, prepared: Prepared) -> None:
        loop = asyncio.get_running_loop()
        self._events: asyncio.Queue = asyncio.Queue()

        def sink(index: int, event) -> None:  # runs on the scheduler thread
            loop.call_soon_threadsafe(self._events.put_nowait, (index, event))

        try:
            self._tickets = scheduler.submit(prepared.requests, sink)
        except QueueFullError as exc:
            raise APIError(429, str(exc), code="rate_limit_exceeded",
                           headers={"Retry-After": str(exc.retry_after)}) from None
        except SchedulerStoppedError as exc:
            raise APIError(503, str(exc)) from None
        except TooManySequencesError as exc:
            raise APIError(400, str(exc), param="n") from None
        except InvalidRequestError as exc:
            raise APIError(400, str(exc)) from None
        self._open = len(prepared.requests)

    @property
    def done(self) -> bool:
        return self._open == 0

    async def next(self, timeout: float | None = None) -> tuple[int, TokenEvent | FinishEvent] | None:
        """The next event of any of the sequences; None if `timeout` seconds pass first. A failed sequence
        cancels the others and raises its error."""
        try:
            index, event = await asyncio.wait_for(self._events.get(), timeout)
        except TimeoutError:
            return None
        if isinstance(event, ErrorEvent):
            self.cancel()
            self._open = 0
            raise event.error
        if isinstance(event, FinishEvent):
            self._open -= 1
        return index, event

    async def events(self) -> AsyncIterator[tuple[int, TokenEvent | FinishEvent]]:
        while not self.done:
            item = await self.next()
            if item is not None:
                yield item

    def cancel(self) -> None:
        for ticket in self._tickets:
            ticket.cancel()


# -- answering ---------------------------------------------------------------------------------------------------


@dataclass
class _Choice:
    text: list[str] = field(default_factory=list)
    logprobs: list[Any] = field(default_factory=list)
    offset: int = 0
    finish_reason: str | None = None
    completion_tokens: int = 0
    cached_tokens: int = 0
    reply: Reply | None = None  # chat: the text read into content, reasoning and tool calls


class Answer:
    """Builds OpenAI's response objects for one request, whole or as stream chunks."""

    def __init__(self, prepared: Prepared, model: ModelInfo) -> None:
        self.p = prepared
        self.model = model
        self.chat = prepared.chat
        self.id = ("chatcmpl-" if self.chat else "cmpl-") + uuid.uuid4().hex
        self.created = int(time.time())
        setup = prepared.setup
        self.choices = [_Choice(reply=None if setup is None else Reply(setup.parser())) for _ in prepared.requests]

    # events -> state
    def take(self, index: int, event: TokenEvent | FinishEvent) -> dict[str, Any]:
        """Record an event; returns the choice fields a stream chunk carries for it."""
        c = self.choices[index]
        c.text.append(event.text)
        delta: dict[str, Any] = {"text": event.text, "logprobs": None, "finish_reason": None}
        if c.reply is not None:  # the message's parts: content, reasoning_content, tool_calls
            parts = c.reply.feed(event.text) if isinstance(event, TokenEvent) else c.reply.close(event.text)
            delta["text"] = parts.pop("content", "")
            delta["parts"] = parts
        if isinstance(event, TokenEvent):
            if self.p.top_logprobs is not None:
                entry = self._logprob_entry(c, event)
                c.logprobs.append(entry)
                delta["logprobs"] = entry
        else:
            reason = event.reason if c.reply is None else c.reply.finish_reason(event.reason)
            c.finish_reason = delta["finish_reason"] = reason
            c.completion_tokens, c.cached_tokens = event.completion_tokens, event.cached_tokens
        return delta

    def _token(self, token: int) -> tuple[str, list[int]]:
        raw = self.model.token_bytes(token)
        return raw.decode("utf-8", errors="replace"), list(raw)

    def _logprob_entry(self, c: _Choice, event: TokenEvent) -> Any:
        text, raw = self._token(event.token)
        if self.chat:
            top = [dict(zip(("token", "bytes"), self._token(t)), logprob=lp) for t, lp in event.top or []]
            return {"token": text, "logprob": event.logprob, "bytes": raw, "top_logprobs": top}
        entry = (text, event.logprob, {self._token(t)[0]: lp for t, lp in event.top or []}, c.offset)
        c.offset += len(text)
        return entry

    def usage(self) -> dict[str, Any]:
        n = self.p.body.n
        completion = sum(c.completion_tokens for c in self.choices)
        prompt = sum(self.p.prompt_lengths)
        # Per prompt, the positions every one of its choices found cached.
        cached = sum(min(c.cached_tokens for c in self.choices[i * n:(i + 1) * n])
                     for i in range(len(self.p.prompt_lengths)))
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": cached}}

    # whole response
    def response(self) -> dict[str, Any]:
        choices = []
        for i, c in enumerate(self.choices):
            text = "".join(c.text)
            if self.chat:
                logprobs = {"content": c.logprobs} if self.p.top_logprobs is not None else None
                message = c.reply.message() if c.reply is not None else {"role": "assistant", "content": text}
                choices.append({"index": i, "message": message,
                                "logprobs": logprobs, "finish_reason": c.finish_reason})
            else:
                choices.append({"index": i, "text": text, "logprobs": self._text_logprobs(c.logprobs),
                                "finish_reason": c.finish_reason})
        return {"id": self.id, "object": "chat.completion" if self.chat else "text_completion",
                "created": self.created, "model": self.model.id, "system_fingerprint": f"llmchat-{__version__}",
                "choices": choices, "usage": self.usage()}

    def _text_logprobs(self, entries: Sequence[tuple]) -> dict[str, Any] | None:
        if self.p.top_logprobs is None:
            return None
        return {"tokens": [e[0] for e in entries], "token_logprobs": [e[1] for e in entries],
                "top_logprobs": [e[2] for e in entries], "text_offset": [e[3] for e in entries]}

    # stream
    def chunk(self, index: int, delta: dict[str, Any] | None, *, role: bool = False) -> bytes:
        with_usage = self._include_usage()
        if delta is None:  # the closing usage chunk
            choices: list[dict[str, Any]] = []
        elif self.chat:
            content: dict[str, Any] = {"role": "assistant", "content": ""} if role else {}
            if delta.get("text"):
                content["content"] = delta["text"]
            content.update(delta.get("parts") or {})
            logprobs = {"content": [delta["logprobs"]]} if delta.get("logprobs") else None
            choices = [{"index": index, "delta": content, "logprobs": logprobs,
                        "finish_reason": delta.get("finish_reason")}]
        else:
            logprobs = self._text_logprobs([delta["logprobs"]]) if delta.get("logprobs") else None
            choices = [{"index": index, "text": delta.get("text", ""), "logprobs": logprobs,
                        "finish_reason": delta.get("finish_reason")}]
        obj: dict[str, Any] = {"id": self.id, "object": "chat.completion.chunk" if self.chat else "text_completion",
                               "created": self.created, "model": self.model.id,
                               "system_fingerprint": f"llmchat-{__version__}", "choices": choices}
        if with_usage:
            obj["usage"] = self.usage() if delta is None else None
        return sse(obj)

    def _include_usage(self) -> bool:
        options = self.p.body.stream_options
        return bool(options and options.include_usage)

    async def stream(self, run: Run) -> AsyncIterator[bytes]:
        """The SSE body: a chunk per piece of text (or per token when log-probabilities were asked for), each
        choice's finish reason, optionally the usage, then `[DONE]`. An error after the headers went out becomes
        an `error` event, since the status can no longer change."""
        if self.chat:
            for i in range(len(self.choices)):
                yield self.chunk(i, {}, role=True)
        try:
            async for index, event in run.events():
                delta = self.take(index, event)
                if delta["text"] or delta["logprobs"] or delta["finish_reason"] or delta.get("parts"):
                    yield self.chunk(index, delta)
        except Exception as exc:  # noqa: BLE001 - whatever it was, the client must hear of it
            status = 503 if isinstance(exc, SchedulerStoppedError) else 500
            yield sse(error_body(status, str(exc) or type(exc).__name__))
        else:
            if self._include_usage():
                yield self.chunk(0, None)
        yield b"data: [DONE]\n\n"


def sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"
