"""What a grammar lets one sequence say next.

`ConstraintState` is a request's `Constraint` (llmchat.grammar.constraint) applied to one sequence. It answers
the sampler's two questions — is this candidate allowed (cheap: one token's bytes against the grammar state), and
which tokens of the whole vocabulary are (the vocabulary index's trie walk, cached per grammar state) — and
advances with each chosen token. End-of-generation tokens are allowed exactly when the grammar may end; once
nothing can follow, the sequence finishes without spending a step on sampling the end token.
"""
from __future__ import annotations

import time
from collections.abc import Collection, Iterator

from ..errors import GrammarError
from ..grammar import Constraint, VocabIndex
from ..tokenizer.tokenizer import Tokenizer


class ConstraintState:
    def __init__(self, constraint: Constraint, tokenizer: Tokenizer, eog: frozenset[int]) -> None:
        self.grammar = constraint.grammar
        self.vocab = VocabIndex.for_tokenizer(tokenizer)
        self.eog = eog
        self.matcher = None if constraint.lazy else self.grammar.matcher()
        self._triggers = [(_symbols(tokenizer, t), False) for t in constraint.triggers]
        self._triggers += [(_symbols(tokenizer, t), True) for t in constraint.start_triggers]
        self._written: list[int] = []  # symbols written while waiting for a trigger
        # How the mask reached the sampler: steps served by the GPU's candidates, steps whose candidates the
        # grammar thinned out so far that the whole row was read and masked, and the host time both took.
        self.stats = {"candidate_steps": 0, "row_reads": 0, "mask_s": 0.0}

    @property
    def active(self) -> bool:
        return self.matcher is not None

    @property
    def finished(self) -> bool:
        """The grammar is complete and nothing can follow: the reply is over."""
        return self.matcher is not None and self.matcher.finished

    def allows(self, token: int) -> bool:
        if token in self.eog:
            return self.matcher.can_end
        return self.vocab.allows(self.matcher, token)

    def candidates(self, ids: list[int], values: list[float], needed: int) -> tuple[list[int], list[float]] | None:
        """The GPU's candidates the grammar allows, in their order; None when fewer than `needed` are (then
        sampling needs the whole row, masked by `allowed`)."""
        t0 = time.perf_counter()
        kept = [j for j, token in enumerate(ids) if self.allows(token)]
        self.stats["mask_s"] += time.perf_counter() - t0
        if len(kept) < needed:
            return None
        self.stats["candidate_steps"] += 1
        return [ids[j] for j in kept], [values[j] for j in kept]

    def allowed(self) -> Collection[int]:
        """Every token the grammar allows next, end-of-generation included when it may end."""
        t0 = time.perf_counter()
        allowed = self.vocab.allowed(self.matcher)
        self.stats["mask_s"] += time.perf_counter() - t0
        self.stats["row_reads"] += 1
        end = self.eog if self.matcher.can_end else frozenset()
        if not allowed and not end:
            raise GrammarError("no token of this model's vocabulary can continue the grammar here; the grammar "
                               "needs text the vocabulary cannot spell")
        return _Union(allowed, end) if end else allowed

    def accept(self, token: int) -> None:
        """Advance past `token` (chosen among the allowed ones while the grammar holds)."""
        if token in self.eog:
            return
        if self.matcher is not None:
            if not self.vocab.advance(self.matcher, token):
                raise GrammarError(f"token {token} was chosen but the grammar does not allow it")
            return
        symbols = self.vocab.symbols(token) or b""
        self._written.extend(symbols)
        self._look_for_trigger(len(symbols))

    def _look_for_trigger(self, added: int) -> None:
        """Start the grammar at the earliest trigger that the last token completed (or contains)."""
        written = self._written
        starts = []
        for trigger, at_start in self._triggers:
            lo = max(0, len(written) - added - len(trigger) + 1)
            for start in range(lo, len(written) - len(trigger) + 1):
                if written[start:start + len(trigger)] == trigger and (not at_start or _opening(written[:start])):
                    starts.append(start)
                    break
        for start in sorted(starts):
            matcher = self.grammar.matcher()
            if matcher.advance(written[start:]):
                self.matcher = matcher
                return
        # A trigger followed by what the grammar cannot continue stays free text: it was written before the
        # grammar could hold, and the reply parser reports it as text.


_THINK_END = list(b"</think>")


def _opening(before: list[int]) -> bool:
    """Whether what precedes a start trigger leaves it at the start of the content: only whitespace, after a
    reasoning block if there is one."""
    for at in range(len(before) - len(_THINK_END), -1, -1):
        if before[at:at + len(_THINK_END)] == _THINK_END:
            before = before[at + len(_THINK_END):]
            break
    return all(symbol in b" \t\r\n" for symbol in before)


def _symbols(tokenizer: Tokenizer, text: str) -> list[int]:
    """A trigger as the symbols a reply would show it as: a special token's own symbol, else its UTF-8 bytes."""
    token = tokenizer.token_id(text)
    if token is not None and (tokenizer.is_control(token) or token in tokenizer.eog_ids):
        return [256 + token]
    return list(text.encode("utf-8"))


class _Union(Collection[int]):
    """The grammar's allowed tokens plus the end-of-generation ones (disjoint: those are never spelt by bytes)."""

    def __init__(self, allowed: Collection[int], end: frozenset[int]) -> None:
        self._allowed, self._end = allowed, end

    def __contains__(self, token: object) -> bool:
        return token in self._end or token in self._allowed

    def __len__(self) -> int:
        return len(self._allowed) + len(self._end)

    def __iter__(self) -> Iterator[int]:
        yield from self._allowed
        yield from self._end
