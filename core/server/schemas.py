"""Request bodies of the OpenAI-compatible routes, as pydantic models: they make the OpenAPI schema and refuse
malformed JSON before a route runs. What the fields mean and their ranges are llmchat.protocol's, which reads the
body again into the request the routes run (and reads the browser runtime's requests the same way).

Every field OpenAI documents is declared. Those we implement are typed and range-checked; those we do not
(audio, predictions...) are declared as `Any` so that `unsupported_fields` can refuse them by name with a 400 — a
request is never half-served with a field silently ignored. Fields that are in no API are refused too
(`extra="forbid"`), since a misspelt `max_token` would otherwise fall back to a default unnoticed.

Structured output and tools (`response_format`, `tools`, `tool_choice`...) are typed loosely here and checked
by the core (llmchat.chat.structured, llmchat.chat.tools), which every other caller shares.

Extensions that vLLM and llama.cpp's server also accept: `top_k`, `min_p`, `repetition_penalty`, `ignore_eos`,
`grammar` and `json_schema` (llama.cpp's structured output), `chat_template_kwargs` (e.g. {"enable_thinking":
false}); WebLLM's top-level `enable_thinking`.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..protocol import OPENAI_DEFAULTS, RANGES


def _bounded(name: str, default: Any, description: str | None = None) -> Any:
    """A numeric field with llmchat.protocol's range for `name`."""
    bounds = RANGES[name]
    return Field(default, ge=bounds.low, le=bounds.high, description=description)


def _not_yet() -> Any:
    return Field(None, description="Not supported yet: a request that sets it is refused with 400 naming it.")


class _Strict(BaseModel):
    # strict: as OpenAI does, "4" is not a number, 1.0 not an integer and "yes" not a boolean (an int is a float).
    model_config = ConfigDict(extra="forbid", strict=True)


class StreamOptions(_Strict):
    include_usage: bool = False


class ContentPart(BaseModel):
    """One part of a message's content. Only text parts can be used (text-only models); other types are
    accepted here so that the chat layer can refuse them with a message naming the part."""

    model_config = ConfigDict(extra="allow", strict=True)
    type: str
    text: str | None = None


class ChatMessage(_Strict):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | Annotated[list[ContentPart], Field(min_length=1)] | None = None
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    refusal: str | None = None

    @model_validator(mode="after")
    def _tool_reply_names_its_call(self) -> ChatMessage:
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a message with role `tool` needs `tool_call_id`, the id of the call it answers")
        return self


class RequestBody(_Strict):
    """Fields both completion routes share."""

    model: str
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: int | None = _bounded("max_tokens", None)
    temperature: float | None = _bounded("temperature", None, f"0 is greedy; default {OPENAI_DEFAULTS.temperature:g}")
    top_p: float | None = _bounded("top_p", None)
    n: int = _bounded("n", 1)
    seed: int | None = None
    stop: str | list[str] | None = None
    presence_penalty: float = _bounded("presence_penalty", 0.0)
    frequency_penalty: float = _bounded("frequency_penalty", 0.0)
    user: str | None = None
    # Extensions (vLLM and llama.cpp spell them the same way).
    top_k: int = _bounded("top_k", 0, "keep the k most likely tokens; 0 disables it")
    min_p: float = _bounded("min_p", 0.0)
    repetition_penalty: float = _bounded("repetition_penalty", 1.0)
    ignore_eos: bool = False
    logit_bias: dict[str, float] | None = Field(
        None, description="token id (as a string) -> a number in [{low:g}, {high:g}] added to its logit".format(
            low=RANGES["logit_bias"].low, high=RANGES["logit_bias"].high))
    response_format: dict[str, Any] | None = Field(
        None, description='{"type": "text" | "json_object" | "json_schema" | "grammar" | "regex", ...}')
    grammar: str | None = Field(None, description="GBNF grammar the reply must match (llama.cpp's dialect)")
    json_schema: dict[str, Any] | bool | None = Field(None, description="JSON schema the reply must match")
    # OpenAI fields we do not implement: refused by name when given.
    service_tier: Any = _not_yet()
    store: Any = _not_yet()
    metadata: Any = _not_yet()


class ChatCompletionRequest(RequestBody):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = _bounded("max_completion_tokens", None)
    logprobs: bool = False
    top_logprobs: int | None = _bounded("top_logprobs", None)
    tools: list[dict[str, Any]] | None = Field(None, description='[{"type": "function", "function": {"name", '
                                               '"description", "parameters"}}]')
    tool_choice: str | dict[str, Any] | None = Field(
        None, description='"auto", "none", "required" or {"type": "function", "function": {"name": ...}}')
    parallel_tool_calls: bool | None = None
    chat_template_kwargs: dict[str, Any] | None = Field(
        None, description='extra variables for the chat template, e.g. {"enable_thinking": false}')
    enable_thinking: bool | None = Field(None, description="WebLLM's switch; the same as chat_template_kwargs'")
    prompt_cache_key: str | None = Field(
        None, description="OpenAI's cache hint; accepted: this server shares any cached prefix without one")
    # Not implemented yet.
    functions: Any = _not_yet()
    function_call: Any = _not_yet()
    audio: Any = _not_yet()
    modalities: Any = _not_yet()
    prediction: Any = _not_yet()
    reasoning_effort: Any = _not_yet()
    web_search_options: Any = _not_yet()


class CompletionRequest(RequestBody):
    prompt: str | list[str] | list[int] | list[list[int]]
    logprobs: int | None = _bounded("logprobs", None)
    max_tokens: int | None = _bounded("max_tokens", OPENAI_DEFAULTS.text_max_tokens)
    # Not implemented yet.
    echo: Any = _not_yet()
    suffix: Any = _not_yet()
    best_of: Any = _not_yet()


# Values of unimplemented fields that ask for nothing beyond the default, so they can be accepted as they are.
_HARMLESS: dict[str, tuple[Any, ...]] = {
    "service_tier": ("auto", "default"),
    "store": (False,),
    "functions": ([],),
    "modalities": (["text"],),
    "echo": (False,),
    "best_of": (1,),
}


def unsupported_fields(request: RequestBody) -> list[str]:
    """Names of fields given with a value this server cannot honour yet."""
    names = []
    for name in request.model_fields_set:
        info = type(request).model_fields[name]
        value = getattr(request, name)
        if info.annotation is Any and value is not None and value not in _HARMLESS.get(name, ()):
            names.append(name)
    return sorted(names)
