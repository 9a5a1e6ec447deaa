"""Choosing the next token from a row of logits: greedy, or a seeded draw after penalties and truncation.

The chain runs in llama.cpp's default order (the parts of it we offer):

    logit bias and penalties → grammar mask → top-k → top-p → min-p → temperature → draw

A grammar mask (constrained decoding) removes the tokens the grammar does not allow before any truncation, so
top-k counts allowed tokens only. So top-p and min-p judge tokens by their probability at temperature 1 (top-p renormalised over what top-k kept,
as llama.cpp does), and temperature only reshapes the odds among the survivors. Temperature 0 short-circuits the
chain to the arg-max of the penalised logits, lowest id on ties: every truncation step keeps the most likely
token, so nothing else could change the answer.

Two entry points see the same distribution through different windows:

- `Sampler.sample_candidates` takes the few largest logits that a GPU top-k kernel read back, plus the row's
  maximum and sum of exponentials so log-probabilities stay exact. That suffices whenever the chain can only keep
  tokens among them: greedy, or a top-k of at most `MAX_GPU_CANDIDATES`, and no penalties.
- `Sampler.sample_full` takes the whole row; penalties and unbounded truncation need it.

Both paths reduce a row to the same set of kept tokens and then run the same code with the same float
operations in the same order, so for one seed they pick the same token. Two choices make that hold: the top-p
normaliser is summed over the kept set in token-id order, and the draw walks the kept tokens in token-id order,
whichever path found them (a GPU kernel hands them over by rank, the full row holds them by id).

The draw uses nothing but `random.Random.random()`, one call per sampled token whatever the truncation kept, so
a seed replays the same tokens on every Python version, natively and inside Pyodide, and two sequences with the
same seed stay in step.

Cost on the full row (49152 logits, pure Python): every pass over it is a C-level `map`/`max`/`sum`; top-k uses
`heapq.nlargest`, and top-p without top-k sorts only the tokens that can possibly fall inside its cut (see
`_top_p_and_min_p_over_row`), never the whole vocabulary unless the distribution is flat enough to need it.
"""
from __future__ import annotations

import heapq
import math
import random
from bisect import bisect_right
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate, compress, repeat
from operator import ge, sub, truediv

from ..errors import InvalidRequestError

__all__ = ["LOGIT_BIAS_RANGE", "MAX_GPU_CANDIDATES", "REPETITION_PENALTY_RANGE", "Sampler", "SamplingParams"]

MAX_GPU_CANDIDATES = 64
"""The most (token, logit) pairs the GPU top-k kernel reads back per row."""

# Bounded so that dividing or multiplying any finite logit by it stays finite.
REPETITION_PENALTY_RANGE = (1e-3, 1e3)
LOGIT_BIAS_RANGE = (-100, 100)  # OpenAI's; -100 bans a token

# Below this, a sum of unshifted exponentials may be made of subnormal terms and lose precision; above it, it is
# as exact as the shifted form. The shifted form costs one more pass over the row, so it is only the fallback.
_SMALLEST_SAFE_SUM = 1e-200


@dataclass(frozen=True)
class SamplingParams:
    """How to pick tokens. The defaults switch every step off, which leaves greedy decoding.

    temperature         0 means greedy (arg-max, lowest id on ties); otherwise logits are divided by it.
    top_k               keep the k most likely tokens; 0 disables it.
    top_p               keep the smallest head of the ranking whose probability reaches top_p; 1 disables it.
    min_p               keep tokens at least min_p times as likely as the most likely one; 0 disables it.
    repetition_penalty  llama.cpp's: a seen token's logit is divided by it if positive, multiplied if not.
    presence_penalty    OpenAI's: subtracted once from the logit of every seen token.
    frequency_penalty   OpenAI's: subtracted from a seen token's logit once per occurrence.
    penalty_last_n      how many of the most recent tokens count as seen; -1 means all, 0 disables penalties.
    logit_bias          OpenAI's: token id -> a number in [-100, 100] added to that token's logit (-100 bans it).
    seed                seeds this sequence's generator; None draws a seed from the operating system.
    """

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    penalty_last_n: int = 64
    logit_bias: Mapping[int, float] | None = None
    seed: int | None = None

    def validate(self) -> None:
        """Raise ValueError naming the first field outside its allowed range."""
        _require(_is_real(self.temperature) and self.temperature >= 0,
                 "temperature", "a finite number >= 0 (0 means greedy)", self.temperature)
        _require(_is_int(self.top_k) and self.top_k >= 0, "top_k", "an integer >= 0 (0 disables it)", self.top_k)
        _require(_is_real(self.top_p) and 0 <= self.top_p <= 1, "top_p", "a number in [0, 1]", self.top_p)
        _require(_is_real(self.min_p) and 0 <= self.min_p <= 1, "min_p", "a number in [0, 1]", self.min_p)
        low, high = REPETITION_PENALTY_RANGE
        _require(_is_real(self.repetition_penalty) and low <= self.repetition_penalty <= high,
                 "repetition_penalty", f"a number in [{low:g}, {high:g}] (1 disables it)", self.repetition_penalty)
        _require(_is_real(self.presence_penalty), "presence_penalty", "a finite number", self.presence_penalty)
        _require(_is_real(self.frequency_penalty), "frequency_penalty", "a finite number", self.frequency_penalty)
        _require(_is_int(self.penalty_last_n) and self.penalty_last_n >= -1,
                 "penalty_last_n", "an integer >= -1 (-1 means the whole history)", self.penalty_last_n)
        _require(self.logit_bias is None or (isinstance(self.logit_bias, Mapping) and all(
            _is_int(t) and t >= 0 and _is_real(b) and LOGIT_BIAS_RANGE[0] <= b <= LOGIT_BIAS_RANGE[1]
            for t, b in self.logit_bias.items())),
            "logit_bias", "a mapping of token ids to numbers in [{}, {}]".format(*LOGIT_BIAS_RANGE), self.logit_bias)
        _require(self.seed is None or _is_int(self.seed), "seed", "an integer or None", self.seed)

    @property
    def uses_penalties(self) -> bool:
        """Whether any penalty can change a logit."""
        return self.penalty_last_n != 0 and (
            self.repetition_penalty != 1 or self.presence_penalty != 0 or self.frequency_penalty != 0
        )

    @property
    def needs_full_logits(self) -> bool:
        """Whether sampling may keep tokens outside the GPU's candidate set, so the whole row must be read back.

        Penalties and logit bias can lift or sink any token past the candidates' edge; a draw without a small
        top-k can land anywhere in the vocabulary.
        """
        if self.uses_penalties or self.logit_bias:
            return True
        return self.temperature > 0 and not 0 < self.top_k <= MAX_GPU_CANDIDATES

    @property
    def candidates_k(self) -> int:
        """How many GPU candidates `Sampler.sample_candidates` needs; 0 when no candidate set suffices."""
        if self.needs_full_logits:
            return 0
        return 1 if self.temperature == 0 else self.top_k


def _is_real(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _require(ok: bool, field: str, allowed: str, value: object) -> None:
    if not ok:
        raise InvalidRequestError(f"SamplingParams.{field} must be {allowed}, got {value!r}")


class Sampler:
    """Picks the tokens of one sequence. It owns its random generator, so sequences never share a stream."""

    def __init__(self, params: SamplingParams, vocab_size: int) -> None:
        params.validate()
        if not _is_int(vocab_size) or vocab_size < 1:
            raise ValueError(f"vocab_size must be an integer >= 1, got {vocab_size!r}")
        bad = [t for t in params.logit_bias or () if t >= vocab_size]
        if bad:
            raise InvalidRequestError(f"logit_bias names token {bad[0]}, outside the vocabulary (0..{vocab_size - 1})")
        self.params = params
        self.vocab_size = vocab_size
        self._rng = random.Random(params.seed)

    def sample_candidates(
        self,
        ids: Sequence[int],
        logits: Sequence[float],
        row_max: float,
        row_sumexp: float,
        history: Sequence[int],
    ) -> tuple[int, float]:
        """Pick a token from the GPU's top candidates of one row.

        ids/logits: the largest logits of the row, highest first, ties by lower id; at least
        `min(params.candidates_k, vocab_size)` of them (more are fine). row_max and row_sumexp: the row's maximum
        logit and sum(exp(logit - row_max)) over the whole vocabulary. history is unused (candidates never come
        with penalties) and accepted so both entry points take the same arguments.

        Returns the token and its log-probability under the model's own distribution (temperature 1, no
        penalties, no truncation), which is what OpenAI's `logprobs` report.
        """
        params = self.params
        if params.needs_full_logits:
            raise ValueError(
                "these sampling parameters need the full row of logits (penalties, or temperature > 0 without "
                f"a top_k of 1..{MAX_GPU_CANDIDATES}); call sample_full"
            )
        self._check_candidates(ids, logits, row_max, row_sumexp)
        if params.temperature == 0:
            token, logit = ids[0], logits[0]
        else:
            k = min(params.top_k, len(ids))
            kept_ids, kept_logits = _top_p_and_min_p_after_top_k(list(ids[:k]), list(logits[:k]), params)
            chosen = _draw(self._rng, kept_logits, params.temperature)
            token, logit = kept_ids[chosen], kept_logits[chosen]
        return token, logit - row_max - math.log(row_sumexp)

    def sample_full(self, logits: Sequence[float], history: Sequence[int],
                    allowed: Collection[int] | None = None) -> tuple[int, float]:
        """Pick a token from a whole row of logits (a list, or an array('f') as read back from the GPU).

        history: the tokens the penalties may look at, oldest first; the last `penalty_last_n` of them count.
        allowed: the only tokens that may be picked (a grammar's mask), or None for all.
        Returns the token and its log-probability under the model's own distribution, as `sample_candidates`.
        """
        if len(logits) != self.vocab_size:
            raise ValueError(f"expected a row of {self.vocab_size} logits, got {len(logits)}")
        raw = logits if isinstance(logits, list) else list(logits)
        log_norm = _log_sum_exp(raw)  # first: it also rejects NaN, +inf and rows with nothing to sample
        row = self._penalized(raw, history)
        if allowed is not None:
            row = _masked(row, allowed)
        params = self.params
        if params.temperature == 0:
            token = row.index(max(row))  # index() finds the first maximum: the lowest id on ties
        else:
            kept_ids, kept_logits = self._truncated(row)
            token = kept_ids[_draw(self._rng, kept_logits, params.temperature)]
        return token, raw[token] - log_norm

    @staticmethod
    def top_logprobs(
        logits: Sequence[float],
        n: int,
        *,
        ids: Sequence[int] | None = None,
        row_max: float | None = None,
        row_sumexp: float | None = None,
    ) -> list[tuple[int, float]]:
        """The n most likely tokens with their log-probabilities (model's distribution, temperature 1), most
        likely first, ties by lower id: OpenAI's `top_logprobs`.

        Pass either a whole row as `logits`, or the GPU's candidates as `logits` with `ids`, `row_max` and
        `row_sumexp` as for `sample_candidates` (then at least n candidates are needed).
        """
        if not _is_int(n) or n < 0:
            raise ValueError(f"n must be an integer >= 0, got {n!r}")
        if ids is None:
            row = logits if isinstance(logits, list) else list(logits)
            log_norm = _log_sum_exp(row)
            return [(i, row[i] - log_norm) for i in heapq.nlargest(n, range(len(row)), key=row.__getitem__)]
        if row_max is None or row_sumexp is None:
            raise ValueError("candidate logits need row_max and row_sumexp to be turned into log-probabilities")
        if n > len(ids):
            raise ValueError(f"{n} top log-probabilities asked for but only {len(ids)} candidates given")
        log_norm = row_max + math.log(row_sumexp)
        return [(ids[j], logits[j] - log_norm) for j in range(n)]

    def _check_candidates(
        self, ids: Sequence[int], logits: Sequence[float], row_max: float, row_sumexp: float
    ) -> None:
        """Refuse candidate sets that break the kernel's contract; sampling from them would silently be wrong."""
        count = len(ids)
        if len(logits) != count:
            raise ValueError(f"{count} candidate ids but {len(logits)} candidate logits")
        needed = min(self.params.candidates_k, self.vocab_size)
        if count < needed:
            raise ValueError(f"{count} candidates given; these sampling parameters need {needed}")
        if not (math.isfinite(row_max) and math.isfinite(row_sumexp) and row_sumexp > 0):
            raise ValueError(f"row_max and row_sumexp must be finite, row_sumexp > 0; got {row_max!r}, {row_sumexp!r}")
        if not math.isfinite(logits[0]):
            raise ValueError(f"the best candidate's logit must be finite, got {logits[0]!r}")
        vocab_size = self.vocab_size
        for j in range(count):
            if not 0 <= ids[j] < vocab_size:
                raise ValueError(f"candidate id {ids[j]!r} is outside the vocabulary of {vocab_size}")
            # NaN fails both comparisons, so it is caught here as well.
            if j and not (logits[j - 1] > logits[j] or (logits[j - 1] == logits[j] and ids[j - 1] < ids[j])):
                raise ValueError(
                    "candidates must be sorted by logit, highest first, ties by lower id; "
                    f"position {j} breaks that ({ids[j - 1]}: {logits[j - 1]!r}, {ids[j]}: {logits[j]!r})"
                )

    def _penalized(self, raw: list[float], history: Sequence[int]) -> list[float]:
        """The row after logit bias and repetition, presence and frequency penalties; `raw` itself when none
        apply."""
        params = self.params
        bias = params.logit_bias
        if not (params.uses_penalties or bias):
            return raw
        row = raw.copy()
        for token, value in (bias or {}).items():
            row[token] += value
        if not params.uses_penalties:
            return row
        window = history if params.penalty_last_n == -1 else history[-params.penalty_last_n:]
        counts = Counter(window)
        vocab_size = self.vocab_size
        repetition = params.repetition_penalty
        for token, count in counts.items():
            if not 0 <= token < vocab_size:
                raise ValueError(f"history token {token!r} is outside the vocabulary of {vocab_size}")
            logit = row[token]
            logit = logit / repetition if logit > 0 else logit * repetition
            row[token] = logit - count * params.frequency_penalty - params.presence_penalty
        return row

    def _truncated(self, row: list[float]) -> tuple[Sequence[int], list[float]]:
        """Top-k, top-p and min-p over a whole (penalised) row; the survivors in id order."""
        top_k = self.params.top_k
        if 0 < top_k < len(row):
            ranked = heapq.nlargest(top_k, range(len(row)), key=row.__getitem__)  # stable: lower id first on ties
            return _top_p_and_min_p_after_top_k(ranked, [row[i] for i in ranked], self.params)
        return _top_p_and_min_p_over_row(row, self.params)


def _top_p_and_min_p_after_top_k(
    ranked_ids: list[int], ranked_logits: list[float], params: SamplingParams
) -> tuple[list[int], list[float]]:
    """Top-p then min-p over the tokens top-k kept (most likely first); the survivors in id order.

    Both steps cut the ranking at some point, so the result is its shorter head. Top-p's probabilities are
    renormalised over these tokens, as llama.cpp does after top-k.
    """
    keep = len(ranked_ids)
    best = ranked_logits[0]
    if params.top_p < 1:
        by_id = sorted(zip(ranked_ids, ranked_logits))
        total = sum(math.exp(logit - best) for _, logit in by_id)  # id order, as over a whole row
        cut = _top_p_cut(ranked_logits, params.top_p, total)
        if cut is not None:  # None only when rounding kept the sum below top_p: then top-p keeps everything
            keep = cut
    if params.min_p > 0:
        floor = best + math.log(params.min_p)
        keep = sum(1 for logit in ranked_logits[:keep] if logit >= floor)  # a ranking: the passing ones lead
    return _in_id_order(ranked_ids[:keep], ranked_logits[:keep])


def _top_p_and_min_p_over_row(row: list[float], params: SamplingParams) -> tuple[Sequence[int], list[float]]:
    """Top-p then min-p over a whole row (no top-k in force); the survivors in id order.

    Ranking the whole vocabulary to find top-p's cut is the slow part, so only tokens above a floor are ranked.
    Min-p's floor is exact: whatever lies below it is dropped anyway. Top-p's floor comes from a bound: a token
    whose probability is below (1 - top_p) / vocab_size cannot be inside the cut, since all such tokens together
    hold less than 1 - top_p. Whichever floor is higher is tried first; if top-p's cut does not show up above its
    floor (only float rounding could cause that), the ranking is widened to min-p's floor, or to everything.
    """
    vocab_size = len(row)
    top_p, min_p = params.top_p, params.min_p
    if top_p >= 1 and min_p <= 0:
        return range(vocab_size), row
    best = max(row)
    min_p_floor = best + math.log(min_p) if min_p > 0 else -math.inf
    if top_p >= 1:  # min-p alone needs no ranking: compress keeps id order
        kept = list(compress(range(vocab_size), map(ge, row, repeat(min_p_floor))))
        return kept, [row[i] for i in kept]
    total = sum(map(math.exp, map(sub, row, repeat(best))))  # id order, the same sum a top-k set gets
    top_p_floor = best + math.log((1 - top_p) * total / vocab_size)
    floors = [max(top_p_floor, min_p_floor)]
    if floors[0] > min_p_floor:
        floors.append(min_p_floor)
    for floor in floors:
        ranked = sorted(compress(range(vocab_size), map(ge, row, repeat(floor))), key=row.__getitem__, reverse=True)
        ranked_logits = [row[i] for i in ranked]
        cut = _top_p_cut(ranked_logits, top_p, total)
        if cut is not None:
            return _in_id_order(ranked[:cut], ranked_logits[:cut])
        if floor == min_p_floor:  # top-p would keep more than min-p allows: min-p decides
            return _in_id_order(ranked, ranked_logits)
    raise AssertionError("unreachable: the last floor tried is min-p's")


def _top_p_cut(ranked_logits: list[float], top_p: float, total: float) -> int | None:
    """How many leading tokens top-p keeps: up to and including the one whose cumulative probability reaches
    top_p. `total` normalises exp(logit - best); None if the cumulative sum stays below top_p over these tokens.
    """
    target = top_p * total
    best = ranked_logits[0]
    cumulative = 0.0
    for count, logit in enumerate(ranked_logits, 1):
        cumulative += math.exp(logit - best)
        if cumulative >= target:
            return count
    return None


def _masked(row: list[float], allowed: Collection[int]) -> list[float]:
    """The row with every token outside `allowed` at -inf (weight 0: never kept, never drawn)."""
    out = [-math.inf] * len(row)
    for token in allowed:  # one pass over the allowed tokens: no membership test per vocabulary entry
        out[token] = row[token]
    return out


def _in_id_order(ids: list[int], logits: list[float]) -> tuple[list[int], list[float]]:
    pairs = sorted(zip(ids, logits))
    return [token for token, _ in pairs], [logit for _, logit in pairs]


def _draw(rng: random.Random, logits: Sequence[float], temperature: float) -> int:
    """The position of one token drawn with odds exp(logit / temperature), by inverting the cumulative sum.

    `logits` are the kept tokens' in id order; walking them in that order on both paths is what makes a seed pick
    the same token from the GPU's candidates as from the whole row.
    """
    best = max(logits)
    shifted = map(sub, logits, repeat(best))  # the best token weighs 1: no overflow, no all-zero weights
    if temperature != 1:  # dividing by 1 changes no bit; skipping it saves a pass over a whole row
        shifted = map(truediv, shifted, repeat(temperature))
    cumulative = list(accumulate(map(math.exp, shifted)))
    # random() < 1 and the total is >= 1, so the product stays below the total even after rounding (it is at
    # least half an ulp below it): the point always lands on a token, and never on one whose weight is zero.
    return bisect_right(cumulative, rng.random() * cumulative[-1])


def _log_sum_exp(row: list[float]) -> float:
    """log(sum(exp(row))), refusing rows with NaN or +inf, or with every logit at -inf."""
    try:
        total = sum(map(math.exp, row))  # one pass instead of two while logits stay in exp's range
    except OverflowError:
        total = math.inf
    if _SMALLEST_SAFE_SUM <= total < math.inf:
        return math.log(total)
    best = max(row)
    if best == -math.inf:
        raise ValueError("every logit is -inf: there is no token to sample")
    log_norm = best + math.log(sum(map(math.exp, map(sub, row, repeat(best)))))
    if not math.isfinite(log_norm):
        raise ValueError("the logits contain NaN or +inf")
    return log_norm
