"""A parsed GBNF grammar checked and compiled into a flat program that matchers run (see __init__ for the design).

The program is llama.cpp's layout over bytes: every alternative of every rule is a run of positions ending in END,
a position being a byte set, a special token or a rule reference. A parse stack is a tuple of positions, bottom
first; its top is always a terminal (a byte set or token) still to match, the entries below it are where to go
on when the rule above ends. `closure(p)` -- every way to reach a terminal from position p without consuming
input -- is computed once per position. A reference followed by END pushes nothing (a tail call), so
right-recursive repetition (`x*`) keeps stacks short.
"""
from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import GrammarError
from .gbnf import ParsedGrammar, parse as parse_gbnf
from .matcher import Matcher, State

END, BYTES, TOKEN, REF = 0, 1, 2, 3
MAX_STACKS = 4096          # parse stacks in one state: more means an ambiguous grammar about to blow up
MAX_NESTING = 1024         # rules open at once before a terminal: a parse stack's depth when it is expanded
MAX_STATES = 20_000        # interned states per grammar before the table starts afresh (~2.5 kB each)
_CACHE_SIZE = 64           # compiled grammars kept by Grammar.parse


def _user_name(name: str) -> str:
    return name.split("/", 1)[0]


class Grammar:
    """A compiled grammar: immutable, shared by every sequence that uses it. Build it with `Grammar.parse`."""

    def __init__(self, parsed: ParsedGrammar, root: str) -> None:
        _check(parsed, root)
        self.root = root
        kind: list[int] = []
        arg: list[int] = []
        names: list[str] = []          # rule of each position, for messages
        index: dict[str, int] = {}
        alts: list[list[int]] = []
        productive = _productive(parsed.rules)
        order = [root]
        seen = {root}
        while len(index) < len(order):  # rules reachable from root through alternatives that can complete
            name = order[len(index)]
            index[name] = len(index)
            for alt in parsed.rules[name]:
                if all(_item_ok(it, productive) for it in alt):
                    for it in alt:
                        if it[0] == "r" and it[1] not in seen:
                            seen.add(it[1])
                            order.append(it[1])
        for name in order:
            starts = []
            for alt in parsed.rules[name]:
                if not all(_item_ok(it, productive) for it in alt):
                    continue
                starts.append(len(kind))
                for tag, value in alt:
                    kind.append(BYTES if tag == "b" else TOKEN if tag == "t" else REF)
                    arg.append(index[value] if tag == "r" else value)
                    names.append(name)
                kind.append(END)
                arg.append(0)
                names.append(name)
            alts.append(starts)
        self._kind = kind
        self._arg = arg
        self._names = names
        self._alts = alts
        self._closures: list[tuple[tuple[tuple[int, ...], ...], bool] | None] = [None] * len(kind)
        # What each position matches as the top of a stack, read by every state's transitions: its byte set
        # (0: not a byte set) and its special token (-1: not a token).
        self.byte_sets = [a if k == BYTES else 0 for k, a in zip(kind, arg)]
        self.tokens = [a if k == TOKEN else -1 for k, a in zip(kind, arg)]
        self.special_ids = frozenset(a for k, a in zip(kind, arg) if k == TOKEN)
        self._lock = threading.Lock()
        self._states: dict[frozenset, State] = {}
        self._initial = None
        self._initial = self._start_state()

    # ----------------------------------------------------------------------------------------------- public
    @classmethod
    def parse(cls, gbnf: str, root: str = "root", special: Mapping[str, int] | None = None) -> Grammar:
        """Compile GBNF text (llama.cpp's dialect). `special` maps special-token texts to ids for `<...>` in the
        grammar. Repeated calls with the same arguments return the same object (an LRU of recent grammars)."""
        key = None if special is None else tuple(sorted(special.items()))
        return _parse_cached(gbnf, root, key)

    def matcher(self) -> Matcher:
        """A matcher at the start of the grammar (one per sequence)."""
        return Matcher(self, self._initial)

    def __repr__(self) -> str:
        return f"Grammar(root={self.root!r}, {len(self._alts)} rules, {len(self._kind)} positions)"

    # ----------------------------------------------------------------------------------------------- engine
    def closure(self, p: int) -> tuple[tuple[tuple[int, ...], ...], bool]:
        """(stack suffixes reaching a terminal from p, whether p can reach the end of its alternative).

        Worked out without recursion (a chain of rules can be thousands long): positions wait on a list until the
        closures they are made of are known. `_check` has refused left recursion, so the waiting never cycles."""
        done = self._closures
        if done[p] is not None:
            return done[p]
        kind, alts, arg = self._kind, self._alts, self._arg
        waiting = [p]
        while waiting:
            q = waiting[-1]
            if done[q] is not None:
                waiting.pop()
                continue
            k = kind[q]
            if k == END:
                done[q] = ((), True)
            elif k != REF:
                done[q] = (((q,),), False)
            else:
                firsts = alts[arg[q]]
                unknown = [a for a in firsts if done[a] is None]
                cont = q + 1
                through = not unknown and any(done[a][1] for a in firsts)
                if through and done[cont] is None:
                    unknown.append(cont)
                if unknown:
                    waiting.extend(unknown)
                    continue
                done[q] = self._expand(q, through)
            waiting.pop()
        return done[p]

    def _expand(self, p: int, through: bool) -> tuple[tuple[tuple[int, ...], ...], bool]:
        """The closure of the reference at p, from the known closures of its rule's alternatives (and of what
        follows p, when the rule can match nothing)."""
        cont = p + 1
        tail = self._kind[cont] == END
        found: dict[tuple[int, ...], None] = {}
        for a in self._alts[self._arg[p]]:
            sufs = self._closures[a][0]
            if tail:
                found.update(dict.fromkeys(sufs))
            else:
                if sufs and len(sufs[0]) >= MAX_NESTING:
                    raise GrammarError(f"grammar: rules nest more than {MAX_NESTING} deep before any input "
                                       f"(at rule '{_user_name(self._names[p])}')")
                found.update(dict.fromkeys((cont,) + s for s in sufs))
        ends = False
        if through:
            sufs, ends = self._closures[cont]
            found.update(dict.fromkeys(sufs))
        if len(found) > MAX_STACKS:
            raise self._too_ambiguous(len(found), p)
        return tuple(found), ends

    def step(self, stack: tuple[int, ...], out: set) -> None:
        """Add to `out` the stacks that follow `stack` once its top terminal has matched."""
        base = stack[:-1]
        cont = stack[-1] + 1
        closure = self.closure
        while True:
            sufs, ends = closure(cont)
            for s in sufs:
                out.add(base + s)
            if not ends:
                return
            if not base:
                out.add(())
                return
            cont = base[-1]
            base = base[:-1]

    def _start_state(self):
        out: set = set()
        for a in self._alts[0]:
            sufs, ends = self.closure(a)
            out.update(sufs)
            if ends:
                out.add(())
        return self.intern(frozenset(out))

    def intern(self, stacks: frozenset) -> State:
        """The one state object for this set of stacks."""
        state = self._states.get(stacks)
        if state is not None:
            return state
        if len(stacks) > MAX_STACKS:
            raise self._too_ambiguous(len(stacks), next(iter(stacks))[-1] if any(stacks) else 0)
        with self._lock:
            state = self._states.get(stacks)
            if state is None:
                if len(self._states) >= MAX_STATES:
                    # Start afresh; live matchers keep their states, the old graph goes when they do.
                    self._states = {}
                    if self._initial is not None:
                        init = self._initial
                        self._initial = State(self, init.stacks)
                        self._states[init.stacks] = self._initial
                        if stacks == init.stacks:
                            return self._initial
                state = self._states[stacks] = State(self, stacks)
        return state

    def _too_ambiguous(self, n: int, p: int) -> GrammarError:
        return GrammarError(f"grammar: more than {MAX_STACKS} simultaneous parses ({n}) near rule "
                            f"'{_user_name(self._names[p])}': the grammar is too ambiguous; make alternatives "
                            f"start differently or bound nullable repetitions")


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _parse_cached(text: str, root: str, special: tuple | None) -> Grammar:
    return Grammar(parse_gbnf(text, None if special is None else dict(special)), root)


# --------------------------------------------------------------------------------------------------- checks
def _item_ok(item: tuple, productive: set[str]) -> bool:
    tag, value = item
    if tag == "b":
        return value != 0
    if tag == "t":
        return True
    return value in productive


def _productive(rules: Mapping[str, list[list[tuple]]]) -> set[str]:
    """Rules that can derive at least one finite symbol string (an empty byte class `[]` matches nothing)."""
    return _derivable(rules, lambda tag, value: tag == "t" or value != 0)


def _nullable(rules: Mapping[str, list[list[tuple]]]) -> set[str]:
    """Rules that can match without consuming input."""
    return _derivable(rules, lambda tag, value: False)


def _derivable(rules: Mapping[str, list[list[tuple]]], terminal: Callable[[str, Any], bool]) -> set[str]:
    """Rules with an alternative whose every item is a terminal that `terminal` accepts or a rule found so far.

    A worklist, linear in the grammar's size: each alternative counts the references it still waits on, and a
    rule that is found releases the alternatives waiting on it. (Sweeping the rules until nothing changes is
    quadratic on a long chain of rules.)"""
    waiting: dict[str, list[tuple[str, int]]] = {}
    missing: dict[tuple[str, int], int] = {}
    found: set[str] = set()
    ready: list[str] = []
    for name, alts in rules.items():
        for index, alt in enumerate(alts):
            refs = [value for tag, value in alt if tag == "r"]
            if len(refs) < len(alt) and not all(terminal(tag, value) for tag, value in alt if tag != "r"):
                continue
            missing[name, index] = len(refs)
            for ref in refs:
                waiting.setdefault(ref, []).append((name, index))
            if not refs:
                ready.append(name)
    while ready:
        name = ready.pop()
        if name in found:
            continue
        found.add(name)
        for alt in waiting.get(name, ()):
            missing[alt] -= 1
            if missing[alt] == 0:
                ready.append(alt[0])
    return found


def _check(parsed: ParsedGrammar, root: str) -> None:
    rules = parsed.rules
    for name, pos in sorted(parsed.referenced_at.items(), key=lambda kv: kv[1]):
        if name not in rules:
            raise GrammarError(f"grammar: undefined rule '{name}' referenced at {parsed.where(pos)}")
    if root not in rules:
        defined = ", ".join(sorted(parsed.defined_at)) or "none"
        raise GrammarError(f"grammar: no rule named '{root}' (the start rule); rules defined: {defined}")
    cycle = _left_recursion(rules)
    if cycle:
        names = [_user_name(n) for n in cycle]
        steps = [n for i, n in enumerate(names) if i == 0 or n != names[i - 1]]
        path = " -> ".join(steps + [steps[0]] if len(steps) == 1 else steps)
        first = names[0]
        where = parsed.defined_at.get(first)
        raise GrammarError(f"grammar: rule '{first}' is left-recursive ({path}): it can reach itself without "
                           f"consuming input, which cannot terminate; rewrite it with repetition, e.g. "
                           f"`expr ::= term (\"+\" term)*`" + (f" (rule at {parsed.where(where)})"
                                                              if where is not None else ""))
    productive = _productive(rules)
    if root not in productive:
        stuck = sorted({_user_name(n) for n in rules if n not in productive})
        raise GrammarError(f"grammar: matches no input at all: rule '{root}' can never complete (rules that "
                           f"never complete: {', '.join(stuck)}; look for an empty class [] or a rule that "
                           f"always refers to itself)")


def _left_recursion(rules: Mapping[str, list[list[tuple]]]) -> list[str] | None:
    """A cycle of rules each reachable from the previous without consuming input, or None."""
    nullable = _nullable(rules)
    edges: dict[str, list[str]] = {}
    for name, alts in rules.items():
        out = []
        for alt in alts:
            for tag, value in alt:
                if tag == "r":
                    out.append(value)
                    if value in nullable:
                        continue
                break
        edges[name] = out
    color: dict[str, int] = {}
    for start in rules:
        if start in color:
            continue
        path = [start]
        iters = [iter(edges[start])]
        color[start] = 1
        while iters:
            nxt = next(iters[-1], None)
            if nxt is None:
                color[path.pop()] = 2
                iters.pop()
                continue
            c = color.get(nxt, 0)
            if c == 1:
                return path[path.index(nxt):] + [nxt]
            if c == 0:
                color[nxt] = 1
                path.append(nxt)
                iters.append(iter(edges[nxt]))
    return None
