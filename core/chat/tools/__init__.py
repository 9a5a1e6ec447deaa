"""Tool calling and reasoning, driven by the model's own chat template.

`tool_format_for(template)` picks the conventions the template was written for (its markers tell); the format's
`prepare(...)` renders the prompt with the tools, and returns the GBNF grammar that keeps calls well-formed and a
parser factory that turns the streamed reply into content, reasoning and OpenAI-shaped tool calls. Formats:

- hermes: Hermes 2 Pro/3, Qwen 2.5, Qwen 3 -- `<tool_call>{"name", "arguments"}</tool_call>`, one block per call;
- llama3: Llama 3.1-3.3 -- `{"name", "parameters"}` as the reply, optionally after `<|python_tag|>`; one call;
- mistral: Mistral Nemo -- `[TOOL_CALLS][{...}, ...]`; mistral-v11: Small 3.2 -- `[TOOL_CALLS]name[ARGS]{...}`;
- phi4: Phi-4-mini -- `<|tool_call|>[...]<|/tool_call|>`, tools in the system message's `tools` field;
- smollm3: SmolLM3 -- Hermes-style calls with `<think>` reasoning;
- gemma: Gemma 2/3 text function calling -- tools described in the first user turn, calls `[f(a=1)]`;
- generic: any other template -- tools described in a system message, every reply one JSON object
  ({"tool_call": ...} / {"tool_calls": [...]} / {"response": "..."}).

`marker_tokens(tokenizer)` gives the markers that are control tokens of the vocabulary, for `prepare`'s
`special_tokens` (a grammar names those as tokens). `reasoning_parser(template, prompt)` splits `<think>` reasoning from content when no tools are in play.
"""
from .base import ToolFormat, ToolPrompt, marker_tokens, opens_think, reasoning_parser
from .detect import tool_format_for
from .stream import Delta, ReplyParser, ToolCallDelta

__all__ = ["Delta", "ReplyParser", "ToolCallDelta", "ToolFormat", "ToolPrompt", "marker_tokens", "opens_think", "reasoning_parser",
           "tool_format_for"]
