"""A `Constraint` is part of a request: a compiled grammar, applied from the first generated token, or (lazy, for
tool calls the model may choose to make) only from the first trigger text on: the model writes freely until a
trigger such as `<tool_call>` appears, and from the trigger's first byte the grammar holds. The runtime applies it
token by token (llmchat.runtime.constraint).
"""
from __future__ import annotations

from dataclasses import dataclass

from .grammar import Grammar


@dataclass(frozen=True)
class Constraint:
    grammar: Grammar
    triggers: tuple[str, ...] = ()  # none (and no start_triggers): the grammar holds from the first token
    start_triggers: tuple[str, ...] = ()  # triggers that count only at the start of the reply's content
    # JSON-schema keywords (by path) a best-effort request ("strict": false) asked for that the grammar does not
    # enforce: the reply's answer names them.
    unenforced: tuple[str, ...] = ()

    @property
    def lazy(self) -> bool:
        return bool(self.triggers or self.start_triggers)
