"""The generation loop, once: a sequence's tokens, sampler, text stream, stop strings and finish rules, and the
step that advances any number of sequences together.

The Python API drives one sequence with `generate` below; the server's scheduler drives many with `step`, adding
admission, batching and cancellation around it. Whatever changes which token comes next or when a sequence ends
lives in `Generation`, so both see the same tokens, the same text and the same finish.
"""
from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from ..grammar import Constraint
from .constraint import ConstraintState
from .engine import Engine, Feed
from ..errors import ContextOverflowError, InvalidRequestError
from ..gpu.ops import TopK
from .sampler import MAX_GPU_CANDIDATES, Sampler, SamplingParams
from ..chat.textstream import TextStream
from ..tokenizer.tokenizer import Tokenizer


@dataclass(frozen=True)
class GenerationRequest:
    """One sequence to generate. `top_logprobs` None means no log-probabilities at all; 0 means only the chosen
    token's; n > 0 adds the n most likely alternatives at each position. `constraint` limits the reply to what a
    grammar allows (structured output, tool calls)."""

    prompt: Sequence[int]
    params: SamplingParams
    max_tokens: int
    stop: tuple[str, ...] = ()
    top_logprobs: int | None = None
    ignore_eos: bool = False
    constraint: Constraint | None = None


@dataclass(frozen=True)
class TokenEvent:
    text: str  # may be empty: held back for a possible stop string or an incomplete UTF-8 character
    token: int
    logprob: float
    top: list[tuple[int, float]] | None = None


@dataclass(frozen=True)
class FinishEvent:
    reason: str  # "stop" (end-of-generation token, stop string, or a grammar's complete match), "length"
    # (max_tokens or the context) or "abort" (the caller stopped it while its prompt was read)
    text: str  # the rest of the text held back until the end
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int


GenerationEvent = TokenEvent | FinishEvent

# GPU candidates a constrained sequence asks for at least: a grammar rules out many of the most likely tokens
# (a space where it wants a quote), and reading the whole row back costs far more than a few more candidates.
CONSTRAINED_CANDIDATES = 16


class Generation:
    """A prompt and what was generated after it, in a KV cache slot of an engine whose context is `context`."""

    def __init__(self, request: GenerationRequest, tokenizer: Tokenizer, vocab_size: int, context: int):
        check(request, vocab_size, context)
        self.request = request
        self.tokens = list(request.prompt)  # the prompt, then each generated token once it is to be fed
        self.slot = -1
        self.pos = 0  # positions computed so far (their KV is in the cache)
        self.cached = 0  # positions that were already in the cache when it started
        self.generated = 0
        self.finish_reason: str | None = None
        self.sampler = Sampler(request.params, vocab_size)
        self.text = TextStream(tokenizer, request.stop)
        self._eog = frozenset() if request.ignore_eos else tokenizer.eog_ids
        self._context = context
        self.constraint = None if request.constraint is None else ConstraintState(
            request.constraint, tokenizer, tokenizer.eog_ids)

    def start(self, slot: int, cached: int = 0) -> None:
        """Run in `slot`, whose cache already holds the first `cached` positions of the prompt."""
        self.slot, self.pos, self.cached = slot, cached, cached

    @property
    def candidates_needed(self) -> int:
        """GPU top-k candidates enough to sample this sequence's next token; 0 when it needs the whole row."""
        k = self.request.params.candidates_k
        if k and self.constraint is not None:
            # Enough that the grammar usually leaves some: the whole row is read only when it leaves too few.
            k = max(k, CONSTRAINED_CANDIDATES)
        return 0 if k == 0 else max(k, self.request.top_logprobs or 0)

    def pending(self, budget: int) -> list[int]:
        """The next tokens to feed, at most `budget`: a prompt chunk, or the last generated token."""
        return self.tokens[self.pos:self.pos + budget]

    def sample(self, out, read_row: Callable[[], array] | None = None) -> list[GenerationEvent]:
        """Pick the next token from the step's output for this sequence (a full logits row or the GPU's `TopK`)
        and return what it produces: a token event, a finish event, or both.

        Under a grammar the candidates are filtered by it; when fewer survive than sampling needs, the whole row
        is read with `read_row` and masked instead (`constraint.stats` counts how often)."""
        request, sampler, constraint = self.request, self.sampler, self.constraint
        n_top = request.top_logprobs or 0
        masked = constraint is not None and constraint.active
        top: list = []
        if isinstance(out, TopK):
            ids, values = list(out.indices), list(out.values)
            top = Sampler.top_logprobs(values, n_top, ids=ids, row_max=out.max, row_sumexp=out.sum_exp)
            if masked:
                kept = constraint.candidates(ids, values, request.params.candidates_k)
                if kept is not None:
                    ids, values = kept
                elif read_row is None:
                    raise ValueError("the grammar allows too few candidates and there is no way to read the row")
                else:
                    out = read_row()
        if isinstance(out, TopK):
            token, logprob = sampler.sample_candidates(ids, values, out.max, out.sum_exp, self.tokens)
        else:
            token, logprob = sampler.sample_full(out, self.tokens, constraint.allowed() if masked else None)
            if n_top and not top:
                top = Sampler.top_logprobs(out, n_top)
        self.generated += 1
        if token in self._eog:
            return [self._finish("stop")]
        if constraint is not None:
            constraint.accept(token)
        events: list[GenerationEvent] = [TokenEvent(self.text.push(token), token, logprob,
                                          top if request.top_logprobs is not None else None)]
        if self.text.stopped or (constraint is not None and constraint.finished):
            events.append(self._finish("stop"))
        elif self.generated >= request.max_tokens or len(self.tokens) + 1 > self._context:
            events.append(self._finish("length"))
        else:
            self.tokens.append(token)
        return events

    def abort(self) -> FinishEvent:
        """Finish with "abort": the caller stopped the sequence."""
        return self._finish("abort")

    def _finish(self, reason: str) -> FinishEvent:
        self.finish_reason = reason
        return FinishEvent(reason, self.text.close(), len(self.request.prompt), self.generated, self.cached)


def check(request: GenerationRequest, vocab_size: int, context: int) -> None:
    """Refuse what cannot run, before it joins a batched step where it would fail its batch-mates too."""
    if not request.prompt:
        raise InvalidRequestError("the prompt is empty")
    bad = next((t for t in request.prompt if not 0 <= t < vocab_size), None)
    if bad is not None:
        raise InvalidRequestError(f"token id {bad} is outside the vocabulary (0..{vocab_size - 1})")
    if request.max_tokens < 1:
        raise InvalidRequestError("max_tokens must be at least 1")
    if len(request.prompt) + request.max_tokens > context:
        raise ContextOverflowError(f"the prompt has {len(request.prompt)} tokens and {request.max_tokens} more were "
                                   f"asked for; the context holds {context} (nothing was truncated)")
    request.params.validate()


def candidates_for(sampling: list[Generation]) -> int:
    """The one top-k a step asks the GPU for: the whole row (0) if any sampled sequence needs it, else enough
    candidates for the most demanding one (1 when nobody samples: the cheapest read-back)."""
    needs = [s.candidates_needed for s in sampling]
    if not needs:
        return 1
    if 0 in needs:
        return 0
    # Powers of two: each top-k is a program of its own, and a few more candidates cost nothing.
    return min(MAX_GPU_CANDIDATES, 1 << (max(needs) - 1).bit_length())


def step(engine: Engine, feeds: list[tuple[Generation, list[int]]]) -> list[tuple[Generation, object, Callable]]:
    """One engine step feeding each sequence its tokens. Returns, for each sequence whose feed reaches the end of
    its known tokens, the output to `sample` from and the reader of its whole logits row (valid until the next
    step); the others were only prefilled further."""
    ends = [s.pos + len(chunk) == len(s.tokens) for s, chunk in feeds]  # only these need logits
    sampling = [s for (s, _), end in zip(feeds, ends) if end]
    outputs = engine.step([Feed(s.slot, chunk, s.pos, logits=end) for (s, chunk), end in zip(feeds, ends)],
                          top_k=candidates_for(sampling))
    result = []
    for (seq, chunk), end, out in zip(feeds, ends, outputs):
        seq.pos += len(chunk)
        if end:  # logits rows come in the order of the feeds that asked for them
            result.append((seq, out, lambda row=len(result): engine.logits_row(row)))
    return result


def generate(engine: Engine, seq: Generation,
             on_prefill: Callable[[int, int], bool | None] | None = None) -> Iterator[GenerationEvent]:
    """Run one started sequence to its end: the prompt in chunks as large as a step allows, then token by token.

    `on_prefill(done, total)` hears, before each step of the prompt, how many of the prompt tokens to compute (those
    not found cached) are done: a long prompt takes seconds before the first token on a slow GPU. It returns False
    to stop there (a Stop button): the sequence finishes with "abort" before its next step, its cache holding the
    prompt positions computed so far. Between tokens a caller stops by no longer reading."""
    prompt = len(seq.request.prompt)
    while seq.finish_reason is None:
        if seq.pos < prompt and on_prefill is not None:
            if on_prefill(seq.pos - seq.cached, prompt - seq.cached) is False:
                yield seq.abort()
                return
        for s, out, read_row in step(engine, [(seq, seq.pending(engine.max_step))]):
            yield from s.sample(out, read_row)
