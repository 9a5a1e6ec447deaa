"""A sequence under a grammar (llmchat.runtime.constraint and the generation loop's use of it), on logits rows made by
hand over SmolLM2's real vocabulary: no GPU. The candidates path and the whole-row path, end-of-generation only
where the grammar may end, a finished grammar ending the reply, and lazy grammars that start at a trigger."""
from __future__ import annotations

import math

import pytest

from llmchat.runtime.generation import FinishEvent, Generation, GenerationRequest
from llmchat.gguf.file import open_gguf
from llmchat.gpu.ops import TopK
from llmchat.grammar import Constraint, Grammar
from llmchat.runtime.sampler import SamplingParams
from llmchat.tokenizer.tokenizer import Tokenizer

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def tokenizer(smollm2_path) -> Tokenizer:
    with open_gguf(str(smollm2_path)) as g:
        return Tokenizer.from_metadata(g.metadata)


def token(tokenizer: Tokenizer, text: str) -> int:
    ids = tokenizer.encode(text)
    assert len(ids) == 1, (text, ids)
    return ids[0]


def sequence(tokenizer, grammar: str, *, triggers=(), start_triggers=(), max_tokens=16, **sampling) -> Generation:
    constraint = Constraint(Grammar.parse(grammar), tuple(triggers), tuple(start_triggers))
    request = GenerationRequest([1, 2, 3], SamplingParams(**sampling), max_tokens, constraint=constraint)
    seq = Generation(request, tokenizer, tokenizer.vocab_size, 256)
    seq.start(slot=0)
    seq.pos = len(seq.tokens)
    return seq


def favouring(tokenizer: Tokenizer, *tokens: int) -> list[float]:
    """A row where `tokens` are the most likely, in that order, and everything else far behind."""
    row = [0.0] * tokenizer.vocab_size
    for rank, t in enumerate(tokens):
        row[t] = 20.0 - rank
    return row


def candidates(row: list[float], k: int) -> TopK:
    ranked = sorted(range(len(row)), key=lambda i: (-row[i], i))[:k]
    best = max(row)
    return TopK(best, sum(math.exp(x - best) for x in row), tuple(row[i] for i in ranked), tuple(ranked))


def step(seq: Generation, row: list[float], k: int = 16) -> list:
    reads = []
    events = seq.sample(candidates(row, k), lambda: reads.append(1) or row)
    seq.pos = len(seq.tokens)
    return events, len(reads)


def test_candidates_the_grammar_forbids_are_skipped_without_reading_the_row(tokenizer):
    seq = sequence(tokenizer, 'root ::= "yes" | "no"')
    events, reads = step(seq, favouring(tokenizer, token(tokenizer, "maybe"), token(tokenizer, "no")))
    assert events[0].token == token(tokenizer, "no") and reads == 0
    assert isinstance(events[-1], FinishEvent) and events[-1].reason == "stop"  # nothing can follow "no"


def test_the_whole_row_is_read_and_masked_when_no_candidate_is_allowed(tokenizer):
    seq = sequence(tokenizer, 'root ::= "yes" | "no"')
    row = favouring(tokenizer, *range(20000, 20016))  # the 16 candidates: long words, none a prefix of yes or no
    row[token(tokenizer, "yes")] = 1.0
    events, reads = step(seq, row)
    assert reads == 1 and events[0].token == token(tokenizer, "yes")
    assert seq.constraint.stats["row_reads"] == 1


def test_end_of_generation_is_allowed_only_where_the_grammar_may_end(tokenizer):
    eos = next(iter(tokenizer.eog_ids))
    seq = sequence(tokenizer, 'root ::= "a"+')
    events, _ = step(seq, favouring(tokenizer, eos, token(tokenizer, "a")))
    assert events[0].token == token(tokenizer, "a")  # the end was more likely but not allowed yet
    events, _ = step(seq, favouring(tokenizer, eos, token(tokenizer, "a")))
    assert isinstance(events[0], FinishEvent) and events[0].reason == "stop"


def test_sampling_at_temperature_only_draws_allowed_tokens(tokenizer):
    allowed = {token(tokenizer, t) for t in ("yes", "no")}
    for seed in range(20):
        seq = sequence(tokenizer, 'root ::= "yes" | "no"', temperature=1.5, seed=seed)
        row = [0.0] * tokenizer.vocab_size  # flat: the whole vocabulary is as likely
        events = seq.sample(row)
        assert events[0].token in allowed or tokenizer.token_bytes(events[0].token) in (b"y", b"ye", b"n")


def test_a_lazy_grammar_starts_at_its_trigger(tokenizer):
    seq = sequence(tokenizer, 'root ::= "<call>" [a-z]+ "</call>"', triggers=["<call>"])
    free = [token(tokenizer, t) for t in ("Hello", " there")]
    for t in free:  # free text: anything goes
        step(seq, favouring(tokenizer, t))
    assert not seq.constraint.active
    for t in tokenizer.encode(" <call>"):
        step(seq, favouring(tokenizer, t))
    assert seq.constraint.active
    upper = token(tokenizer, "X")
    events, _ = step(seq, favouring(tokenizer, upper, token(tokenizer, "abc")))
    assert events[0].token == token(tokenizer, "abc")  # upper case is outside [a-z]


def test_a_start_trigger_counts_only_at_the_start_of_the_content(tokenizer):
    grammar = 'root ::= "{" [a-z]* "}"'
    late = sequence(tokenizer, grammar, start_triggers=["{"])
    for t in tokenizer.encode("Sure: {"):
        step(late, favouring(tokenizer, t))
    assert not late.constraint.active
    early = sequence(tokenizer, grammar, start_triggers=["{"])
    for t in tokenizer.encode("<think>hm</think>\n{"):
        step(early, favouring(tokenizer, t))
    assert early.constraint.active
