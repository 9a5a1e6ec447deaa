"""What every tool format shares: the request checks, the prompt with its grammar, and the parser it implies."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..template import ChatTemplate, template_variables
from .gbnf import GrammarBuilder
from .messages import check_tool_choice, check_tools, convert_messages
from .stream import THINK_CLOSE, THINK_OPEN, CallSyntax, ReplyParser, random_call_id


@dataclass
class ToolPrompt:
    """A rendered prompt and how to constrain and read the reply.

    `grammar` (GBNF) is None when the reply is free. `lazy`: it applies from the first trigger on, the trigger
    included (tool_choice auto); otherwise from the reply's first token. `triggers` start a call anywhere;
    `start_triggers` only at the start of the reply's content (after whitespace and any reasoning). `special`: the
    special tokens the grammar names (text -> id), for `Grammar.parse(..., special=...)`.
    """
    text: str
    grammar: str | None = None
    lazy: bool = False
    triggers: tuple[str, ...] = ()
    start_triggers: tuple[str, ...] = ()
    thinking: bool = False
    special: dict[str, int] = field(default_factory=dict)
    format: str = ""
    _think: bool = field(default=False, repr=False)
    _syntax: CallSyntax | None = field(default=None, repr=False)
    _ids: Callable[[int], str] = field(default=random_call_id, repr=False)

    def parser(self, *, ids: Callable[[int], str] | None = None) -> ReplyParser:
        """A fresh parser for one reply; `ids` makes call ids (default: random, in the format's id shape)."""
        return ReplyParser(think=self._think, thinking=self.thinking, syntax=self._syntax, ids=ids or self._ids)


def opens_think(prompt: str) -> bool:
    """Whether the prompt ends inside an open `<think>` block (DeepSeek-R1 style generation prompts)."""
    at = prompt.rfind(THINK_OPEN)
    return at >= 0 and prompt.rfind(THINK_CLOSE) < at and not prompt[at + len(THINK_OPEN):].strip()


def reasoning_parser(template: ChatTemplate, prompt_text: str) -> ReplyParser:
    """The parser for a reply without tools: `<think>` blocks become reasoning, the rest content."""
    return ReplyParser(think=THINK_OPEN in template.source, thinking=opens_think(prompt_text))


class ToolFormat:
    """One family of tool-calling conventions. Subclasses say how messages and tools reach the template
    (`render`), how calls look (`syntax`) and the grammar of the calls (`calls_grammar`)."""

    name = "?"
    ids: Callable[[int], str] = staticmethod(random_call_id)
    # Whether tools are described to the model even with tool_choice 'none' (templates that take `tools` do, as
    # llama.cpp does; formats that describe tools in their own words say nothing, since nothing would be parsed).
    describe_when_none = True
    # Whether a reply under tool_choice 'none' keeps the format's own shape, calls left out: a format that writes
    # earlier calls and results as JSON sets it, since a model shown them goes on writing such JSON when free.
    constrain_none = False

    def __init__(self, template: ChatTemplate) -> None:
        self.template = template

    def prepare(self, template: ChatTemplate | None, messages: Sequence[Mapping[str, Any]], *,
                tools: Sequence[Mapping[str, Any]] | None = None, tool_choice: Any = "auto",
                parallel_tool_calls: bool = True, template_kwargs: Mapping[str, Any] | None = None,
                special_tokens: Mapping[str, int] | None = None) -> ToolPrompt:
        template = template or self.template
        checked = check_tools(tools) if tools else []
        choice = check_tool_choice(tool_choice, checked)
        extra = template_variables(template_kwargs)
        offered = checked if checked and (choice != "none" or self.describe_when_none) else []
        text = self.render(template, messages, offered, extra)
        think = THINK_OPEN in template.source
        prompt = ToolPrompt(text=text, thinking=think and opens_think(text), format=self.name, _think=think,
                            _ids=self.ids)
        if not checked or (choice == "none" and not self.constrain_none):
            return prompt
        chosen = [] if choice == "none" else [choice] if isinstance(choice, dict) else checked
        syntax = self.syntax(chosen)
        builder = GrammarBuilder(special_tokens)
        calls = self.calls_grammar(builder, chosen, parallel_tool_calls)
        lazy = choice == "auto" and self.lazy_capable
        if lazy:
            root = calls
        else:
            # Blank lines may separate the reasoning from the calls (Qwen 3 writes "</think>\n\n").
            root = f"{self._reasoning_prefix(builder, prompt.thinking, think)}[ \\t\\n]{{0,8}} {calls}"
        prompt.grammar = builder.gbnf(root)
        prompt.lazy = lazy
        prompt.triggers = syntax.triggers if lazy else ()
        prompt.start_triggers = syntax.start_triggers if lazy else ()
        prompt.special = builder.used_special
        prompt._syntax = syntax
        return prompt

    # A format whose every reply is constrained (generic JSON) sets this False: its grammar is never lazy.
    lazy_capable = True

    @staticmethod
    def _reasoning_prefix(b: GrammarBuilder, thinking: bool, think: bool) -> str:
        if thinking:
            return f"{b.until(THINK_CLOSE)} "
        if think:
            return f"( {b.marker(THINK_OPEN)} {b.until(THINK_CLOSE)} )? "
        return ""

    # -- what subclasses provide ----------------------------------------------------------------------------

    def render(self, template: ChatTemplate, messages: Sequence[Mapping[str, Any]], tools: list[dict[str, Any]],
               extra: dict[str, Any]) -> str:
        return template.render(convert_messages(messages), add_generation_prompt=True,
                               tools=tools or None, **extra)

    def syntax(self, tools: list[dict[str, Any]]) -> CallSyntax:
        raise NotImplementedError

    def calls_grammar(self, b: GrammarBuilder, tools: list[dict[str, Any]], parallel: bool) -> str:
        raise NotImplementedError


# Every marker a format may name in a grammar; `marker_tokens` looks them up in a vocabulary.
MARKERS = ("<tool_call>", "</tool_call>", "<|python_tag|>", "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "<|tool_call|>",
           "<|/tool_call|>", THINK_OPEN, THINK_CLOSE)


def marker_tokens(tokenizer: Any) -> dict[str, int]:
    """The markers that are control tokens of `tokenizer`'s vocabulary (text -> id): what `prepare` needs as
    `special_tokens`, since a grammar must name those as tokens. Markers that are ordinary (or user-defined)
    tokens are left out: they are matched by their bytes."""
    out = {}
    for text in MARKERS:
        token = tokenizer.token_id(text)
        if token is not None and tokenizer.is_control(token):
            out[text] = token
    return out
