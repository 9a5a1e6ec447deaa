"""The work one chat-template render may do: a template comes with a downloaded model file, so it is untrusted code.

Jinja's sandbox keeps a template away from Python's internals but not from the machine's time and memory: a loop
over `range(100000)` inside another, a macro that calls itself twice, `'a' * 10**9` or `lipsum(10**6)` never
finish or take gigabytes. Every render therefore runs against a budget of

- operations: loop iterations, calls, filters and arithmetic;
- characters: every string a call, filter, operator, `{{ }}` or loop body's literal text produces, counted as it
  is produced — and checked before it is produced wherever the size is known up front (repetition, padding,
  `replace`, `join`, formatting widths, `tojson` indents, powers).

The limits are far above what real templates need (a 2,000-message conversation with 20 tools costs 7-21 thousand
operations and 0.5-2.2 million characters under the templates in tests/data/templates) and low enough that the
worst template stops within about a second of CPU and tens of megabytes. Exceeding one raises
`TemplateBudgetError`, which names the limit.
"""
from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any

from ..errors import ChatTemplateError

OPERATIONS = 1_000_000
# A call (a macro, a method, a global) costs several times a loop iteration: this many operations.
CALL = 10
# Calls nested deeper than this (a macro or a recursive loop calling itself) are refused before Python's own
# recursion limit, which each nested template call approaches by several frames, turns them into a RecursionError.
DEPTH = 100
CHARACTERS = 16 * 1024 * 1024

# The largest integer a template may compute, in bits: enough for any real arithmetic, far below the 10**10**9
# that `**` would spend minutes on.
INTEGER_BITS = 4096


class TemplateBudgetError(ChatTemplateError):
    """A chat template went past the work one render may do."""


class RenderBudget:
    """What one render has spent; the sandbox's hooks charge it (see `current`)."""

    def __init__(self, operations: int = OPERATIONS, characters: int = CHARACTERS) -> None:
        self.operations_left = operations
        self.characters_left = characters
        self._operations = operations
        self._characters = characters
        self.depth = 0

    def operation(self, count: int = 1) -> None:
        self.operations_left -= count
        if self.operations_left < 0:
            raise TemplateBudgetError(
                f"more than {self._operations:,} operations (loop iterations, calls, filters and operators)")

    def enter(self) -> None:
        """A call begins (`leave` when it returns)."""
        self.operation(CALL)
        self.depth += 1
        if self.depth > DEPTH:
            raise TemplateBudgetError(f"calls nested more than {DEPTH} deep")

    def leave(self) -> None:
        self.depth -= 1

    def characters(self, count: int) -> None:
        """Charge `count` characters produced, or about to be produced."""
        self.characters_left -= count
        if self.characters_left < 0:
            raise TemplateBudgetError(f"more than {self._characters:,} characters of text produced")

    def produced(self, value: Any) -> Any:
        """Charge a value a call or filter returned, by its length when it has one."""
        if isinstance(value, (str, list, tuple, dict)):
            self.characters(len(value))
        return value

    def integer(self, bits: int) -> None:
        if bits > INTEGER_BITS:
            raise TemplateBudgetError(f"an integer of about {bits:,} bits (the limit is {INTEGER_BITS:,})")

    def arguments(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
        """Integer arguments size what string builtins produce (widths, counts): charge them up front."""
        for value in (*args, *kwargs.values()):
            if type(value) is int and value > 0:
                self.characters(value)


_CURRENT: ContextVar[RenderBudget | None] = ContextVar("llmchat_render_budget", default=None)


def current() -> RenderBudget:
    """The budget of the render in progress; renders outside `ChatTemplate.render` get a fresh one per call."""
    return _CURRENT.get() or RenderBudget()


def start(budget: RenderBudget) -> Any:
    return _CURRENT.set(budget)


def finish(token: Any) -> None:
    _CURRENT.reset(token)


def check_binop(budget: RenderBudget, operator: str, left: Any, right: Any) -> None:
    """Refuse an operator whose result would be too large before Python builds it."""
    budget.operation()
    sized = (str, list, tuple)
    if operator == "*":
        if isinstance(left, sized) and type(right) is int:
            budget.characters(len(left) * max(right, 0))
        elif isinstance(right, sized) and type(left) is int:
            budget.characters(len(right) * max(left, 0))
        elif type(left) is int and type(right) is int:
            budget.integer(left.bit_length() + right.bit_length())
    elif operator == "**":
        if isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1:
            budget.integer(abs(left).bit_length() * right)
    elif operator == "%" and isinstance(left, str):
        budget.characters(len(left) + format_widths(left, PERCENT_SPEC))
        budget.arguments(right if isinstance(right, tuple) else (right,), {})  # `%*d` takes its width from them
    elif operator == "+" and isinstance(left, sized) and isinstance(right, sized):
        budget.characters(len(left) + len(right))


def check_string_method(budget: RenderBudget, method: Any, args: tuple[Any, ...],
                        kwargs: Mapping[str, Any]) -> tuple[Any, ...]:
    """Size up a call of a str method before it runs (widths such as `ljust(n)`, and the methods whose result can
    be much larger than their inputs); returns the arguments to call with (`join`'s iterable made a list, so that
    its size is known before joining)."""
    # The sandbox hands out `str.format` wrapped; the wrapper keeps the bound method as `__wrapped__`.
    owner = getattr(getattr(method, "__wrapped__", method), "__self__", None)
    if not isinstance(owner, str):
        return args
    budget.arguments(args, kwargs)
    name = getattr(method, "__name__", "")
    if name in ("format", "format_map"):
        budget.characters(len(owner) + format_widths(owner, BRACE_SPEC))
    elif name == "replace" and len(args) >= 2:
        budget.characters(replaced_length(owner, args[0], args[1]))
    elif name == "join" and args:
        items = listed(budget, args[0])
        budget.characters(joined_length(owner, items))
        return (items, *args[1:])
    elif name == "expandtabs":
        width = args[0] if args and type(args[0]) is int else 8
        budget.characters(len(owner) + owner.count("\t") * max(width, 0))
    return args


def listed(budget: RenderBudget, items: Any) -> Any:
    """An iterable as a list, one operation per item; other values unchanged."""
    if isinstance(items, (str, list, tuple, Mapping)) or not hasattr(items, "__iter__"):
        return items
    out = []
    for item in items:
        budget.operation()
        out.append(item)
    return out


def replaced_length(text: Any, old: Any, new: Any) -> int:
    if not (isinstance(text, str) and isinstance(old, str) and isinstance(new, str)):
        return 0
    count = len(text) + 1 if old == "" else text.count(old)
    return len(text) + count * max(len(new) - len(old), 0)


def joined_length(separator: Any, items: Any) -> int:
    if not isinstance(items, (list, tuple)):
        return len(items) if isinstance(items, str) else 0
    sizes = sum(len(item) if isinstance(item, str) else 8 for item in items)
    return sizes + max(len(items) - 1, 0) * (len(separator) if isinstance(separator, str) else 0)


PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\d*)(?:\.(\d*))?")
BRACE_SPEC = re.compile(r"\{[^{}:]*:[^{}\d]*(\d*)(?:\.(\d*))?")


def format_widths(text: str, spec: re.Pattern[str]) -> int:
    """The widths and precisions a format string asks for: what formatting may add beyond its arguments."""
    return sum(int(number) for match in spec.finditer(text) for number in match.groups() if number)


# --- the hooks that filters and globals run through ----------------------------------------------------------------


def concat(items: list[Any]) -> str:
    """Jinja's `~`, with the result's size charged before it is built."""
    texts = [str(item) for item in items]
    current().characters(sum(map(len, texts)))
    return "".join(texts)


def each(items: Any, literal: int) -> Any:
    """The filter every loop iterates through: an operation and the loop body's literal text per item."""
    budget = current()
    for item in items:
        budget.operation()
        budget.characters(literal)
        yield item


def budgeted_filter(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """A filter charged to the render's budget, with the ones that multiply text sized before they run."""
    skip = 0 if getattr(function, "jinja_pass_arg", None) is None else 1  # the context or environment argument

    @functools.wraps(function)  # keeps `jinja_pass_arg`
    def budgeted(*args: Any, **kwargs: Any) -> Any:
        budget = current()
        budget.operation()
        value, rest = args[skip] if len(args) > skip else None, args[skip + 1:]
        budget.arguments(rest, kwargs)
        if name == "join" and kwargs.get("attribute", rest[1] if len(rest) > 1 else None) is None:
            value = listed(budget, value)
            args = (*args[:skip], value, *rest)
            budget.characters(joined_length(kwargs.get("d", rest[0] if rest else ""), value))
        elif name == "format" and isinstance(value, str):
            budget.characters(len(value) + format_widths(value, PERCENT_SPEC))
        elif name == "replace" and len(rest) >= 2:
            budget.characters(replaced_length(value, rest[0], rest[1]))
        elif name == "indent" and isinstance(value, str):
            width = kwargs.get("width", rest[0] if rest else 4)
            width = len(width) if isinstance(width, str) else width if type(width) is int else 0
            budget.characters(len(value) + (value.count("\n") + 1) * max(width, 0))
        return budget.produced(function(*args, **kwargs))

    return budgeted


def budgeted_lipsum(lipsum: Callable[..., str]) -> Callable[..., str]:
    def budgeted(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> str:  # noqa: A002 - Jinja's names
        # n paragraphs of up to `max` words of up to 12 characters each, paid before they are written.
        current().characters(n * max * 12 if type(n) is int and type(max) is int else 0)
        return lipsum(n, html, min, max)

    return budgeted
