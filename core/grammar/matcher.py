"""The per-sequence matcher: a pointer into a lazily built automaton whose states are interned sets of parse stacks.

A `State` is one set of parse stacks (see grammar.py). Its transition on a symbol is computed the first time it
is asked for and kept in the state, so once a grammar has seen a kind of input, advancing is one list lookup per
byte; the same transitions serve every sequence that shares the grammar. A Matcher only holds its current state,
which makes `clone` free and `accepts` side-effect free.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Protocol


class Grammar(Protocol):
    """What a state needs of its grammar (grammar.Grammar is the one there is): per element of the flattened
    rules, the bytes it accepts (`byte_sets`, a 256-bit mask) or the special token it is (`tokens`, -1 if none);
    `step`, which adds to `out` the stacks a parse stack moves to; `intern`, the one State of a set of stacks."""

    byte_sets: Sequence[int]
    tokens: Sequence[int]

    def step(self, stack: tuple[int, ...], out: set) -> None: ...

    def intern(self, stacks: frozenset) -> State: ...


UNSET = object()  # a transition not computed yet (None: computed, and the symbol is rejected)


class State:
    """A set of parse stacks of one grammar, with its transitions filled in as they are needed."""

    __slots__ = ("grammar", "stacks", "next", "special", "can_end", "finished", "_by_top", "byte_mask",
                 "_relative", "text_loop", "__weakref__")

    def __init__(self, grammar: Grammar, stacks: frozenset) -> None:
        self.grammar = grammar
        self.stacks = stacks
        self.next: list = [UNSET] * 256   # byte -> State | None
        self.special: dict[int, State | None] = {}
        self.can_end = () in stacks
        self.finished = self.can_end and len(stacks) == 1
        by_top: dict[int, list[tuple[int, ...]]] = {}
        for st in stacks:
            if st:
                by_top.setdefault(st[-1], []).append(st)
        self._by_top = by_top
        byte_sets = grammar.byte_sets
        mask = 0
        for t in by_top:
            mask |= byte_sets[t]
        self.byte_mask = mask  # bytes that some stack accepts; every other byte is rejected
        self._relative: State | None = None
        self.text_loop: bool | None = None  # see vocab._is_text_loop

    def relative(self) -> State:
        """This state without the stack entries every parse shares at the bottom (itself if there are none).

        Input that never pops into the shared part is accepted or rejected alike at any depth of nesting, so
        what is learnt about the relative state serves every context it occurs in. In the relative state an empty
        stack means "popped into the shared part", not "complete"."""
        rel = self._relative
        if rel is None:
            stacks = self.stacks
            rel = self
            if stacks and () not in stacks:
                common = len(os.path.commonprefix(list(stacks)))
                common = min(common, min(map(len, stacks)) - 1)  # keep a terminal on every stack
                if common > 0:
                    rel = self.grammar.intern(frozenset(st[common:] for st in stacks))
            self._relative = rel
        return rel

    def advance(self, symbol: int) -> State | None:
        """The state after `symbol`, or None if no stack accepts it (computed once, then looked up)."""
        if symbol < 256:
            nxt = self.next[symbol]
            if nxt is UNSET:
                nxt = self.next[symbol] = self._compute(symbol)
            return nxt
        nxt = self.special.get(symbol, UNSET)
        if nxt is UNSET:
            nxt = self.special[symbol] = self._compute(symbol)
        return nxt

    def _compute(self, symbol: int) -> State | None:
        grammar = self.grammar
        out: set[tuple[int, ...]] = set()
        if symbol < 256:
            if not (self.byte_mask >> symbol) & 1:
                return None
            byte_sets = grammar.byte_sets
            for t, stacks in self._by_top.items():
                if (byte_sets[t] >> symbol) & 1:
                    for st in stacks:
                        grammar.step(st, out)
        else:
            token = symbol - 256
            tokens = grammar.tokens
            for t, stacks in self._by_top.items():
                if tokens[t] == token:
                    for st in stacks:
                        grammar.step(st, out)
        if not out:
            return None
        return grammar.intern(frozenset(out))


class Matcher:
    """Where one sequence stands in a grammar. Symbols are bytes 0..255 and special tokens 256 + token id."""

    __slots__ = ("grammar", "_state")

    def __init__(self, grammar: Grammar, state: State) -> None:
        self.grammar = grammar
        self._state = state

    def advance(self, symbols: bytes | Sequence[int]) -> bool:
        """Consume `symbols`; False (and the state unchanged) if the grammar rejects them."""
        state = self._walk(symbols)
        if state is None:
            return False
        self._state = state
        return True

    def accepts(self, symbols: bytes | Sequence[int]) -> bool:
        """Whether `advance(symbols)` would succeed; changes nothing."""
        return self._walk(symbols) is not None

    def _walk(self, symbols: bytes | Sequence[int]) -> State | None:
        state = self._state
        for sym in symbols:
            if sym < 256:
                nxt = state.next[sym]
                if nxt is UNSET:
                    nxt = state.advance(sym)
            else:
                nxt = state.advance(sym)
            if nxt is None:
                return None
            state = nxt
        return state

    @property
    def can_end(self) -> bool:
        """The input so far is a complete match: end of generation may come now."""
        return self._state.can_end

    @property
    def finished(self) -> bool:
        """A complete match that no further symbol can extend."""
        return self._state.finished

    @property
    def key(self) -> frozenset:
        """The set of parse stacks: equal keys (of one grammar) have the same future."""
        return self._state.stacks

    @property
    def state(self) -> State:
        """The interned state (for VocabIndex; equal keys may be distinct objects after the table restarts)."""
        return self._state

    def clone(self) -> Matcher:
        return Matcher(self.grammar, self._state)

    def __repr__(self) -> str:
        return f"Matcher({len(self._state.stacks)} stacks, can_end={self.can_end}, finished={self.finished})"
