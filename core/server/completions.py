"""The two completion routes' work: check and tokenize a request, run its sequences, answer in OpenAI's shapes.

`prepare_chat` / `prepare_text` turn a body into `Prepared` (one GenerationRequest per prompt and choice) or
raise APIError with the status and the field at fault; the fields themselves are read by llmchat.protocol. `Run`
submits the sequences to the scheduler and yields their events on the event loop. `Answer` turns those events
into the protocol's pieces, for the whole response or the stream of chunks.
"""
from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from starlette.concurrency import run_in_threadpool

from ..chat.reply import Reply
from ..chat.structured import ChatSetup
from ..errors import ChatTemplateError, FieldError, GrammarError, LLMChatError
from ..protocol import MAX_SEQUENCES_PER_REQUEST, Completion, Request, read_event, read_request
from ..grammar import Constraint
from ..runtime.generation import FinishEvent, GenerationRequest, TokenEvent
from ..serving.scheduler import ErrorEvent, Scheduler, SchedulerStoppedError
from .errors import APIError
from .schemas import ChatCompletionRequest, CompletionRequest, RequestBody, unsupported_fields


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
    title: str = ""  # what the chat page calls the model (the catalogue's name for a catalogue model)
    engine: dict | None = None  # which engine runs it and why (Runtime.engine_report), for /health


@dataclass
class Prepared:
    request: Request
    generations: list[GenerationRequest]  # prompt p, choice c at index p * n + c
    prompts: int
    setup: ChatSetup | None = None  # a chat request's reply parsers come from it


# -- preparing ---------------------------------------------------------------------------------------------------


def _read(body: RequestBody, model: ModelInfo) -> tuple[Request, dict[str, Any]]:
    """The protocol's request in `body`, and the body's fields as JSON values."""
    refused = unsupported_fields(body)
    if refused:
        names = ", ".join(f"`{n}`" for n in refused)
        raise APIError(400, f"{names} {'is' if len(refused) == 1 else 'are'} not supported by this server yet; "
                            "remove the field to go on", param=refused[0], code="unsupported_parameter")
    if body.model not in model.aliases:
        raise APIError(404, f"The model `{body.model}` does not exist; this server runs `{model.id}`",
                       param="model", code="model_not_found")
    fields = body.model_dump(exclude_none=True)
    return read_request(fields, chat=isinstance(body, ChatCompletionRequest), vocab_size=model.vocab_size), fields


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


def _check_text_length(texts: Sequence[str], model: ModelInfo, param: str, before: int = 0) -> int:
    """Refuse text that cannot fit the context before tokenizing it: no token stands for more than the
    vocabulary's longest piece (or one character, for a character the vocabulary lacks), so the text's UTF-8
    length over that is a lower bound of its token count. Tokenizing is then bounded by about context times that
    many bytes, however long the text a client sends. `before`: bytes already measured of text that goes into the
    same prompt; returns the bytes measured in all."""
    size = before + sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)
    if model.max_token_bytes is None:
        return size
    at_least = size // max(model.max_token_bytes, 4)
    if at_least >= model.context:
        raise APIError(400, f"This model's maximum context length is {model.context} tokens. However, your "
                            f"{param} has {size} bytes of text, at least {at_least} tokens. Please shorten it.",
                       param=param, code="context_length_exceeded")
    return size


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
        raise APIError.of(exc, param=param) from None


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


def generation_error(exc: BaseException, request: Request) -> APIError:
    """What a generation that failed after it started answers with: 503 when the scheduler stopped, 400 naming the
    structured-output field when the reply's grammar failed on the way (grew more ambiguous than a grammar may),
    500 otherwise."""
    if isinstance(exc, GrammarError):
        return APIError(400, f"the reply's grammar failed while the reply was written: {exc}",
                        param=next(iter(request.structure), "tools"))
    if isinstance(exc, SchedulerStoppedError):
        return APIError.of(exc)
    return APIError(500, f"generation failed: {exc}")


def _generations(request: Request, prompts: list[list[int]], budgets: list[int],
                 constraint: Constraint | None) -> list[GenerationRequest]:
    _check_sequence_count(len(prompts), request.n)
    return [request.generation(ids, budget, constraint, choice)
            for ids, budget in zip(prompts, budgets) for choice in range(request.n)]


async def prepare_chat(body: ChatCompletionRequest, model: ModelInfo) -> Prepared:
    request, fields = _read(body, model)
    messages = fields["messages"]
    texts = [t for m in body.messages for t in _texts(m.content)]
    size = _check_text_length(texts, model, "messages")
    if fields.get("tools"):  # described in the prompt, and compiled into the reply's grammar: both cost their size
        _check_text_length([json.dumps(fields["tools"], separators=(",", ":"))], model, "tools", before=size)
    chat_fields = request.chat_fields()
    try:
        setup = await _encode(lambda m: model.prepare_chat(m, **chat_fields), messages, "messages")
    except (FieldError, GrammarError) as exc:  # a structured-output or tool field: named, unless it names itself
        raise APIError.of(exc, param="tools" if body.tools and body.response_format is None else "response_format"
                          ) from None
    # What the template made of them (a template may add much text of its own) is bounded too before tokenizing.
    _check_text_length([setup.prompt], model, "messages")
    ids = await _encode(model.encode_chat, setup.prompt, "messages")
    if not ids:
        raise APIError(400, "the messages render to an empty prompt", param="messages")
    budget = _check_fits(len(ids), request.max_tokens, model.context,
                         request.max_tokens_param if request.max_tokens is not None else "messages")
    return Prepared(request, _generations(request, [ids], [budget], setup.constraint), 1, setup)


async def prepare_text(body: CompletionRequest, model: ModelInfo) -> Prepared:
    request, _ = _read(body, model)
    try:
        constraint = await run_in_threadpool(lambda: model.constraint(**request.structure))
    except (FieldError, GrammarError) as exc:
        raise APIError.of(exc, param="response_format") from None
    prompt = body.prompt
    if isinstance(prompt, str) or (prompt and isinstance(prompt[0], int)):
        prompt = [prompt]
    if not prompt:
        raise APIError(400, "`prompt` is empty", param="prompt")
    _check_sequence_count(len(prompt), request.n)  # before any tokenizing
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
    budgets = [_check_fits(len(ids), request.max_tokens, model.context, "prompt") for ids in prompts]
    return Prepared(request, _generations(request, prompts, budgets, constraint), len(prompts))


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

        self._tickets = scheduler.submit(prepared.generations, sink)  # a refusal is answered as its class says
        self._open = len(prepared.generations)

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


class Answer:
    """One request's answer: the sequences' events read into llmchat.protocol's pieces (read_event: a chat reply
    through its reply parser), whole or as stream chunks."""

    def __init__(self, prepared: Prepared, model: ModelInfo) -> None:
        self.request = request = prepared.request
        self.completion = Completion(chat=request.chat, model=model.id, prompts=prepared.prompts, n=request.n,
                                     top_logprobs=request.top_logprobs, include_usage=request.include_usage,
                                     token_bytes=model.token_bytes)
        setup = prepared.setup
        self.replies = [None if setup is None else Reply(setup.parser()) for _ in prepared.generations]
        self.constraints = [g.constraint for g in prepared.generations]

    def take(self, index: int, event: TokenEvent | FinishEvent) -> dict[str, Any] | None:
        """Record an event; returns its stream chunk, if it has one."""
        return self.completion.take(index, read_event(event, self.replies[index], self.constraints[index]))

    def response(self) -> dict[str, Any]:
        return self.completion.response()

    async def stream(self, run: Run) -> AsyncIterator[bytes]:
        """The SSE body: a chunk per piece of text (or per token when log-probabilities were asked for), each
        choice's finish reason, the usage, then `[DONE]`. An error after the headers went out becomes an `error`
        event, since the status can no longer change."""
        for chunk in self.completion.opening():
            yield sse(chunk)
        try:
            async for index, event in run.events():
                chunk = self.take(index, event)
                if chunk is not None:
                    yield sse(chunk)
        except Exception as exc:  # noqa: BLE001 - whatever it was, the client must hear of it
            yield sse(generation_error(exc, self.request).body())
        else:
            for chunk in self.completion.closing():
                yield sse(chunk)
        yield b"data: [DONE]\n\n"


def sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"
