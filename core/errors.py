"""One exception family for everything llmchat refuses, so callers can catch `LLMChatError` at the boundary.

Messages name the thing at fault (a file, a tensor, a limit) and, where there is one, what to do about it. Each
class also says what it means to a caller across a boundary, once, here: `status`, the HTTP status the server
answers with; `code`, the stable code pages receive (the browser's `error.code`, listed in docs/browser.md);
`api_code`, OpenAI's own `error.code` where OpenAI has one (None: the error body's code is left empty); `param`,
the request field at fault where one is. Subclasses inherit what they do not change. Errors defined beside the code
that raises them (the scheduler's, the saved conversations') say theirs there.
"""


class LLMChatError(Exception):
    """Base of every error llmchat raises on purpose."""

    status = 400
    code = "error"
    api_code: str | None = None
    param: str | None = None

    def http_headers(self) -> dict[str, str]:
        """Headers an HTTP answer to this error carries (Retry-After, say)."""
        return {}


def error_class(name: str) -> type[LLMChatError] | None:
    """The LLMChatError class called `name` among those loaded (the browser knows a Python error by its class
    name only)."""
    todo = [LLMChatError]
    while todo:
        cls = todo.pop()
        if cls.__name__ == name:
            return cls
        todo.extend(cls.__subclasses__())
    return None


class GGUFError(LLMChatError):
    """A GGUF file (or shard set) is malformed, truncated or uses something we do not support."""

    code = "bad-model"


class ModelMetadataError(GGUFError):
    """A model's metadata is missing a value, holds one that is not finite or out of range, or disagrees with the
    shapes of its tensors. The message names the key, the value found and what the tensors say."""


class SourceError(LLMChatError):
    """Bytes could not be read: missing file, HTTP failure, a server that ignores Range, a missing shard."""

    status, code = 502, "network"


class GatedModelError(SourceError):
    """The model hub refused a file (401/403): a gated model whose licence was not accepted, or a missing token."""


class ModelNotFoundError(LLMChatError):
    """A model name is neither a path, a URL, a hub reference that exists, nor in the catalogue."""

    status, code = 404, "not-found"


class UnsupportedModelError(LLMChatError):
    """The GGUF is valid but describes an architecture or tensor layout we cannot run."""

    code = "unsupported"


class TokenizerError(LLMChatError):
    """The vocabulary in the GGUF cannot be turned into a tokenizer, or input cannot be encoded."""

    code = "tokenizer"


class ChatTemplateError(LLMChatError):
    """The model's chat template failed to render."""

    code = "chat-template"


class GPUError(LLMChatError):
    """Base of WebGPU failures."""

    status, code = 500, "gpu"


class NoAdapterError(GPUError):
    """No WebGPU adapter is available (no driver, or WebGPU disabled)."""

    status, code = 503, "no-webgpu"


class ShaderError(GPUError):
    """A WGSL kernel failed to compile or validate; carries the compiler's message."""

    code = "shader"


class DeviceLostError(GPUError):
    """The GPU device was lost (driver reset, out of memory, tab backgrounded too long)."""

    status, code = 503, "device-lost"


class ModelTooLargeError(GPUError):
    """The model or its KV cache does not fit the adapter's limits or memory.

    Raised by the memory plan (llmchat.runtime.memory), it also carries the numbers for a program to show: `profile` (the
    device profile's name, "" for none), `budget` (bytes, 0 when unknown), `needs` (the plan's bytes: weights,
    kv_cache, activations, total, ...) and `largest_context` (tokens that would fit; 0 when none does)."""

    code = "too-large"

    def __init__(self, message: str, *, profile: str = "", budget: int = 0, needs: dict | None = None,
                 largest_context: int | None = None):
        super().__init__(message)
        self.profile, self.budget, self.needs, self.largest_context = profile, budget, needs or {}, largest_context


class MissingDependencyError(LLMChatError, ImportError):
    """An optional part of llmchat needs a package that is not installed; the message names the extra that brings it."""

    status, code = 500, "missing-dependency"


class InvalidRequestError(LLMChatError, ValueError):
    """A request parameter is out of range (sampling settings, token ids, sizes); the message names it."""

    code = "invalid-request"


class FieldError(InvalidRequestError):
    """A request field is malformed; `param` names it (OpenAI's error `param`)."""

    def __init__(self, message: str, param: str):
        super().__init__(message)
        self.param = param


class ContextOverflowError(InvalidRequestError):
    """A prompt plus requested tokens do not fit the context window (we never truncate silently)."""

    code, api_code = "context-overflow", "context_length_exceeded"


class GrammarError(InvalidRequestError):
    """A grammar, regex or JSON schema that constrains a reply cannot be used: it does not parse, names an undefined
    rule, or can match nothing. The message says where."""

    code = "grammar"


class NoDocumentError(GrammarError):
    """A JSON schema, or a part of one that a document must match, that no document satisfies: `false`, bounds that
    admit no value, allOf parts with no type in common. The message says where."""


class UnsupportedSchemaError(GrammarError):
    """A JSON schema uses keywords that constrain a document in ways no grammar here enforces. `keywords` names
    them (JSON-pointer paths), so the caller can remove them rather than have them silently ignored."""

    code, api_code = "unsupported-schema", "unsupported_schema"

    def __init__(self, message: str, keywords: list[str]):
        super().__init__(message)
        self.keywords = keywords


class ContextLengthWarning(UserWarning):
    """A context longer than the model was trained for (its `context_length`) was asked for. It is used as asked,
    as llama.cpp does; text beyond the trained length is usually worse."""
