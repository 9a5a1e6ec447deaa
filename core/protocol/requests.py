"""OpenAI's request fields, read and checked once: a chat or text completion body (a JSON object) becomes a
`Request`, what the generation loop and the chat layer take.

The ranges are OpenAI's for OpenAI's fields and the sampler's own (llmchat.runtime.sampler) for the extensions that
vLLM and llama.cpp's server also accept (`top_k`, `min_p`, `repetition_penalty`, `ignore_eos`, `grammar`,
`json_schema`, `chat_template_kwargs`) and WebLLM's `enable_thinking`. The server publishes the same numbers in its
OpenAPI schema (llmchat.server.schemas); the browser runtime has no other check.

Structured output and tools (`response_format`, `tools`, `tool_choice`...) are passed on as given: the chat layer
(llmchat.chat.structured, llmchat.chat.tools) checks them for every caller.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..chat.template import template_variables
from ..errors import FieldError
from ..grammar import Constraint
from ..runtime.generation import GenerationRequest
from ..runtime.sampler import LOGIT_BIAS_RANGE, REPETITION_PENALTY_RANGE, SamplingParams

# At most this many sequences per request (choices times prompts): OpenAI allows n up to 128, which no single
# local GPU serves well; a larger batch belongs in several requests.
MAX_SEQUENCES_PER_REQUEST = 16
MAX_STOP_STRINGS = 16


@dataclass(frozen=True)
class Defaults:
    """What a request that leaves a field out gets. `chat_max_tokens` None lets a chat reply use what the context
    leaves."""

    temperature: float
    chat_max_tokens: int | None
    text_max_tokens: int


# OpenAI's: a draw at temperature 1; the legacy route's budget is 16 tokens.
OPENAI_DEFAULTS = Defaults(temperature=1.0, chat_max_tokens=None, text_max_tokens=16)


@dataclass(frozen=True)
class Range:
    """Inclusive bounds of a number; None leaves that side open."""

    low: float | None = None
    high: float | None = None

    def __contains__(self, value: float) -> bool:
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)

    def describe(self) -> str:
        if self.high is None:
            return f">= {self.low:g}"
        return f"in [{self.low:g}, {self.high:g}]"


# Every numeric field's bounds, by name (the server's schema is built from this table).
RANGES: dict[str, Range] = {
    "temperature": Range(0, 2),
    "top_p": Range(0, 1),
    "top_k": Range(0),
    "min_p": Range(0, 1),
    "repetition_penalty": Range(*REPETITION_PENALTY_RANGE),
    "presence_penalty": Range(-2, 2),
    "frequency_penalty": Range(-2, 2),
    "logit_bias": Range(*LOGIT_BIAS_RANGE),
    "n": Range(1, MAX_SEQUENCES_PER_REQUEST),
    "max_tokens": Range(1),
    "max_completion_tokens": Range(1),
    "top_logprobs": Range(0, 20),
    "logprobs": Range(0, 20),  # the text route's count of alternatives (the chat route's is top_logprobs)
}


@dataclass(frozen=True)
class Request:
    """One completion request, checked. `sampling` is the first choice's; `choice(i)` gives each choice's.

    `max_tokens` None lets a chat reply use the context its prompt leaves. `top_logprobs` None asks for no
    log-probabilities; 0 for the chosen tokens' only. `structure` and `tools` hold only the fields given, as the
    chat layer's keywords."""

    chat: bool
    sampling: SamplingParams
    n: int
    max_tokens: int | None
    max_tokens_param: str  # the field that set max_tokens, for errors naming it
    stop: tuple[str, ...]
    ignore_eos: bool
    top_logprobs: int | None
    stream: bool
    include_usage: bool
    structure: dict[str, Any]  # response_format, grammar, json_schema
    tools: dict[str, Any]  # tools, tool_choice, parallel_tool_calls
    template_kwargs: dict[str, Any] | None

    def choice(self, index: int) -> SamplingParams:
        """Choice `index`'s sampling: with a seed, each choice draws from seed + index, so n choices differ and
        the same request replays the same choices."""
        seed = self.sampling.seed
        return self.sampling if seed is None or index == 0 else replace(self.sampling, seed=seed + index)

    def generation(self, prompt: list[int], max_tokens: int, constraint: Constraint | None,
                   choice: int = 0) -> GenerationRequest:
        """What choice `choice` of this request generates after `prompt`: at most `max_tokens` (the request's, or
        what the context leaves), under `constraint` (its structured output or tools)."""
        return GenerationRequest(prompt, self.choice(choice), max_tokens, self.stop, self.top_logprobs,
                                 self.ignore_eos, constraint)

    def chat_fields(self) -> dict[str, Any]:
        """The keywords of llmchat.chat.structured.prepare_chat (and `LLM.prepare_chat`) this request sets."""
        return {**self.structure, **self.tools, "template_kwargs": self.template_kwargs}


def read_request(body: Mapping[str, Any], *, chat: bool, vocab_size: int,
                 defaults: Defaults = OPENAI_DEFAULTS) -> Request:
    """The checked request in `body`, a chat completion's or (`chat` false) a text completion's; FieldError naming
    the first field at fault. Fields this reads nothing from (messages, prompt, model...) are the caller's."""
    field = _Fields(body)
    if chat:
        given = field.integer("max_completion_tokens")
        max_tokens = given if given is not None else field.integer("max_tokens", defaults.chat_max_tokens)
        param = "max_completion_tokens" if given is not None else "max_tokens"
        logprobs = field.boolean("logprobs", False)
        top = field.integer("top_logprobs")
        if top is not None and not logprobs:
            raise FieldError("`top_logprobs` needs `logprobs` set to true", "top_logprobs")
        top_logprobs = (top or 0) if logprobs else None
    else:
        max_tokens, param = field.integer("max_tokens", defaults.text_max_tokens), "max_tokens"
        top_logprobs = field.integer("logprobs")
    sampling = SamplingParams(
        temperature=field.number("temperature", defaults.temperature), top_k=field.integer("top_k", 0),
        top_p=field.number("top_p", 1.0), min_p=field.number("min_p", 0.0),
        repetition_penalty=field.number("repetition_penalty", 1.0),
        presence_penalty=field.number("presence_penalty", 0.0),
        frequency_penalty=field.number("frequency_penalty", 0.0),
        logit_bias=token_bias(body.get("logit_bias"), vocab_size), seed=field.integer("seed", unbounded=True))
    options = body.get("stream_options")
    if options is not None and not isinstance(options, Mapping):
        raise FieldError("`stream_options` must be an object", "stream_options")
    include_usage = _Fields(options or {}, "stream_options.").boolean("include_usage", False)
    structure = {k: body[k] for k in ("response_format", "grammar", "json_schema") if body.get(k) is not None}
    tools = {k: body[k] for k in ("tools", "tool_choice", "parallel_tool_calls") if body.get(k) is not None}
    kwargs = template_kwargs(body.get("chat_template_kwargs"), body.get("enable_thinking")) if chat else None
    return Request(chat=chat, sampling=sampling, n=field.integer("n", 1), max_tokens=max_tokens,
                   max_tokens_param=param, stop=stop_strings(body.get("stop")),
                   ignore_eos=field.boolean("ignore_eos", False), top_logprobs=top_logprobs,
                   stream=field.boolean("stream", False), include_usage=include_usage, structure=structure,
                   tools=tools if chat else {}, template_kwargs=kwargs)


def token_bias(logit_bias: Any, vocab_size: int) -> dict[int, float] | None:
    """OpenAI's `logit_bias` (token ids as strings, since JSON keys are strings) with integer ids; FieldError
    naming a key that is not a token id of this model or a value out of range."""
    if logit_bias is None:
        return None
    if not isinstance(logit_bias, Mapping):
        raise FieldError("`logit_bias` must be an object of token ids (as strings) to numbers", "logit_bias")
    bounds = RANGES["logit_bias"]
    bias = {}
    for key, value in logit_bias.items():
        if (not isinstance(key, str) or not key.isascii() or not key.isdigit() or len(key) > len(str(vocab_size))
                or not int(key) < vocab_size):  # the length first: Python refuses int() of 4,300+ digits
            raise FieldError(f"logit_bias key {str(key)[:40]!r} is not a token id of this model "
                             f"(0..{vocab_size - 1})", "logit_bias")
        if not _is_number(value) or value not in bounds:
            raise FieldError(f"logit_bias values must be numbers {bounds.describe()}; token {key} has {value!r}",
                             "logit_bias")
        bias[int(key)] = value
    return bias or None


def template_kwargs(chat_template_kwargs: Any, enable_thinking: Any) -> dict[str, Any] | None:
    """The chat template's extra variables: `chat_template_kwargs` (vLLM's), with WebLLM's top-level
    `enable_thinking` filling in that one variable when the kwargs do not set it."""
    kwargs = template_variables(chat_template_kwargs)
    if enable_thinking is not None and not isinstance(enable_thinking, bool):
        raise FieldError("`enable_thinking` must be true or false", "enable_thinking")
    if enable_thinking is not None:
        kwargs.setdefault("enable_thinking", enable_thinking)
    return kwargs or None


def stop_strings(stop: Any) -> tuple[str, ...]:
    """`stop` (a string or a list of them) as a tuple; at most MAX_STOP_STRINGS."""
    stops = [stop] if isinstance(stop, str) else stop if isinstance(stop, list) else None
    if stop is not None and (stops is None or not all(isinstance(s, str) for s in stops)):
        raise FieldError("`stop` must be a string or a list of strings", "stop")
    if stops and len(stops) > MAX_STOP_STRINGS:
        raise FieldError(f"at most {MAX_STOP_STRINGS} stop strings are supported", "stop")
    return tuple(stops or ())


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class _Fields:
    """Typed reads of a body's fields with their ranges; `null` and an absent field both give the default."""

    def __init__(self, body: Mapping[str, Any], prefix: str = "") -> None:
        self.body, self.prefix = body, prefix

    def number(self, name: str, default: float) -> float:
        value = self.body.get(name)
        if value is None:
            return default
        if not _is_number(value):
            raise FieldError(f"`{self.prefix}{name}` must be a number", self.prefix + name)
        return self._bounded(name, value)

    def integer(self, name: str, default: int | None = None, *, unbounded: bool = False) -> int | None:
        value = self.body.get(name)
        if value is None:
            return default
        if not isinstance(value, int) or isinstance(value, bool):
            raise FieldError(f"`{self.prefix}{name}` must be an integer", self.prefix + name)
        return value if unbounded else self._bounded(name, value)

    def boolean(self, name: str, default: bool) -> bool:
        value = self.body.get(name)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise FieldError(f"`{self.prefix}{name}` must be true or false", self.prefix + name)
        return value

    def _bounded(self, name: str, value: float) -> Any:
        bounds = RANGES[name]
        if value not in bounds:
            raise FieldError(f"`{self.prefix}{name}` must be {bounds.describe()}; it is {value!r}", self.prefix + name)
        return value
