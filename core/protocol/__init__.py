"""OpenAI's chat and text completion protocol, free of any web framework: a request body becomes a checked
`Request` (requests.py), and the pieces of a reply become OpenAI's chunks, responses and usage (responses.py).
The server (llmchat.server) and the browser runtime (llmchat.browser.runtime) both speak it through this package.
"""
from .requests import (MAX_SEQUENCES_PER_REQUEST, MAX_STOP_STRINGS, OPENAI_DEFAULTS, RANGES, Defaults, Range, Request,
                       read_request, stop_strings, template_kwargs, token_bias)
from .responses import Completion, Counts, Piece

__all__ = ["MAX_SEQUENCES_PER_REQUEST", "MAX_STOP_STRINGS", "OPENAI_DEFAULTS", "RANGES", "Completion", "Counts",
           "Defaults", "Piece", "Range", "Request", "read_request", "stop_strings", "template_kwargs", "token_bias"]
