"""OpenAI's chat and text completion protocol, free of any web framework: a request body becomes a checked
`Request` (requests.py) and its choices' GenerationRequests, and the generation's events become the pieces of a
reply and OpenAI's chunks, responses and usage (responses.py). The server (llmchat.server), the Python API
(`LLM.answer`) and the browser runtime (llmchat.browser.runtime) all speak it through this package.
"""
from .requests import (MAX_SEQUENCES_PER_REQUEST, MAX_STOP_STRINGS, OPENAI_DEFAULTS, RANGES, Defaults, Range, Request,
                       read_request, stop_strings, template_kwargs, token_bias)
from .responses import Completion, Counts, Piece, read_event

__all__ = ["MAX_SEQUENCES_PER_REQUEST", "MAX_STOP_STRINGS", "OPENAI_DEFAULTS", "RANGES", "Completion", "Counts",
           "Defaults", "Piece", "Range", "Request", "read_event", "read_request", "stop_strings", "template_kwargs",
           "token_bias"]
