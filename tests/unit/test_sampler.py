"""The token sampler: parameter checks, greedy exactness, penalties, the chain's order and statistics, seeds, and
agreement between the GPU-candidates path and the full-row path."""
from __future__ import annotations

import dataclasses
import math
import random
from array import array
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmchat.runtime import sampler as sampler_module
from llmchat.runtime.sampler import MAX_GPU_CANDIDATES, Sampler, SamplingParams

NEG_INF = -math.inf


# --- helpers ----------------------------------------------------------------------------------------------------


def candidates(row: Sequence[float], count: int) -> tuple[list[int], list[float], float, float]:
    """What the GPU top-k kernel hands over: the `count` largest logits (ties by lower id), max and sum of exps."""
    ranked = sorted(range(len(row)), key=lambda i: (-row[i], i))[:count]
    row_max = max(row)
    return ranked, [row[i] for i in ranked], row_max, sum(math.exp(x - row_max) for x in row)


def log_softmax(row: Sequence[float]) -> np.ndarray:
    values = np.asarray(row, dtype=np.float64)
    shifted = values - values.max()
    return shifted - np.log(np.exp(shifted).sum())


def reference_logits(params: SamplingParams, row: Sequence[float], history: Sequence[int]) -> list[float]:
    logits = list(row)
    if params.uses_penalties:
        window = history if params.penalty_last_n == -1 else history[-params.penalty_last_n:]
        for token, count in Counter(window).items():
            x = logits[token]
            x = x / params.repetition_penalty if x > 0 else x * params.repetition_penalty
            logits[token] = x - count * params.frequency_penalty - params.presence_penalty
    return logits


def reference_kept(params: SamplingParams, logits: list[float]) -> list[int]:
    """Top-k, top-p and min-p written the slow, obvious way: rank everything, then cut; survivors in id order.

    It spells out the float arithmetic the sampler promises (top-p's normaliser summed in id order, its running
    sum in rank order), so the fast paths must keep exactly these tokens.
    """
    ranked = sorted(range(len(logits)), key=lambda i: (-logits[i], i))
    if 0 < params.top_k < len(ranked):
        ranked = ranked[: params.top_k]
    best = logits[ranked[0]]
    if params.top_p < 1:
        total = sum(math.exp(logits[i] - best) for i in sorted(ranked))
        cumulative = 0.0
        for count, i in enumerate(ranked, 1):
            cumulative += math.exp(logits[i] - best)
            if cumulative >= params.top_p * total:
                ranked = ranked[:count]
                break
    if params.min_p > 0:
        ranked = [i for i in ranked if logits[i] >= best + math.log(params.min_p)]
    return sorted(ranked)


def reference_token(params: SamplingParams, row: Sequence[float], history: Sequence[int], rng: random.Random) -> int:
    """The whole chain: penalties, arg-max or truncation, then weights exp((logit - best) / temperature)
    accumulated in id order and inverted at one uniform point."""
    logits = reference_logits(params, row, history)
    if params.temperature == 0:
        return logits.index(max(logits))
    kept = reference_kept(params, logits)
    best = max(logits[i] for i in kept)
    running, cumulative_weights = 0.0, []
    for i in kept:
        running += math.exp((logits[i] - best) / params.temperature)
        cumulative_weights.append(running)
    point = rng.random() * cumulative_weights[-1]
    return next(i for i, c in zip(kept, cumulative_weights) if c > point)


@contextmanager
def kept_sets() -> Iterator[list[list[float]]]:
    """Record the logits of the tokens each draw chooses among (in id order), by watching the draw."""
    seen: list[list[float]] = []
    real_draw = sampler_module._draw

    def watching_draw(rng: random.Random, logits: Sequence[float], temperature: float) -> int:
        seen.append(list(logits))
        return real_draw(rng, logits, temperature)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sampler_module, "_draw", watching_draw)
        yield seen


def gpu_float(value: float) -> float:
    """Round to float32, as logits read back from the GPU are."""
    return array("f", [value])[0]


def realistic_row(vocab_size: int, seed: int) -> list[float]:
    """A logits row shaped like a language model's: a broad body around 0 and a handful of strong tokens."""
    rng = random.Random(seed)
    row = [rng.gauss(0.0, 3.0) for _ in range(vocab_size)]
    for i in rng.sample(range(vocab_size), 20):
        row[i] = rng.uniform(8.0, 17.0)
    return list(array("f", row))


# --- parameters -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("temperature", -0.1), ("temperature", math.nan), ("temperature", math.inf), ("temperature", "1"),
        ("top_k", -1), ("top_k", 2.0), ("top_k", True),
        ("top_p", -0.01), ("top_p", 1.01), ("top_p", math.nan),
        ("min_p", -0.5), ("min_p", 2.0),
        ("repetition_penalty", 0.0), ("repetition_penalty", -1.1), ("repetition_penalty", math.inf),
        ("presence_penalty", math.nan), ("frequency_penalty", -math.inf),
        ("penalty_last_n", -2), ("penalty_last_n", 1.5),
        ("seed", 1.5), ("seed", "42"),
        ("logit_bias", {1: 101}), ("logit_bias", {1: -math.inf}), ("logit_bias", {"1": 5}), ("logit_bias", {-1: 5}),
        ("logit_bias", [1, 2]),
    ],
)
def test_invalid_parameters_are_refused_by_name(field: str, value: object) -> None:
    params = SamplingParams(**{field: value})
    with pytest.raises(ValueError, match=rf"SamplingParams\.{field} must be"):
        params.validate()
    with pytest.raises(ValueError, match=field):
        Sampler(params, vocab_size=10)


def test_boundary_parameters_are_accepted() -> None:
    for params in (
        SamplingParams(),
        SamplingParams(temperature=2, top_k=1_000_000, top_p=0.0, min_p=1.0),
        SamplingParams(temperature=1e-6, top_p=1.0, min_p=0.0, repetition_penalty=0.5, presence_penalty=-2,
                       frequency_penalty=2, penalty_last_n=-1, seed=-7),
    ):
        params.validate()


def test_vocab_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="vocab_size"):
        Sampler(SamplingParams(), vocab_size=0)


@pytest.mark.parametrize(
    ("params", "needs_full", "k"),
    [
        (SamplingParams(), False, 1),
        (SamplingParams(top_k=500, top_p=0.5), False, 1),  # greedy ignores truncation
        (SamplingParams(repetition_penalty=1.1), True, 0),
        (SamplingParams(repetition_penalty=1.1, penalty_last_n=0), False, 1),
        (SamplingParams(presence_penalty=0.5), True, 0),
        (SamplingParams(frequency_penalty=-0.5), True, 0),
        (SamplingParams(temperature=0.8), True, 0),
        (SamplingParams(temperature=0.8, top_p=0.9, min_p=0.05), True, 0),
        (SamplingParams(temperature=0.8, top_k=40, top_p=0.95, min_p=0.05), False, 40),
        (SamplingParams(temperature=0.8, top_k=MAX_GPU_CANDIDATES), False, MAX_GPU_CANDIDATES),
        (SamplingParams(temperature=0.8, top_k=MAX_GPU_CANDIDATES + 1), True, 0),
        (SamplingParams(temperature=0.8, top_k=40, presence_penalty=0.1), True, 0),
        (SamplingParams(logit_bias={3: -100}), True, 0),
        (SamplingParams(logit_bias={}), False, 1),
    ],
)
def test_which_parameters_need_the_full_row(params: SamplingParams, needs_full: bool, k: int) -> None:
    assert params.needs_full_logits is needs_full
    assert params.candidates_k == k


# --- logit bias and masks --------------------------------------------------------------------------------------


def test_logit_bias_moves_the_choice_but_not_the_reported_logprob() -> None:
    row = [0.0, 5.0, 4.0, 1.0]
    banned = Sampler(SamplingParams(logit_bias={1: -100}), vocab_size=4)
    token, logprob = banned.sample_full(row, [])
    assert token == 2 and logprob == pytest.approx(log_softmax(row)[2])
    lifted, _ = Sampler(SamplingParams(logit_bias={3: 4.5}), vocab_size=4).sample_full(row, [])
    assert lifted == 3
    assert row == [0.0, 5.0, 4.0, 1.0]


def test_logit_bias_naming_a_token_outside_the_vocabulary_is_refused() -> None:
    with pytest.raises(ValueError, match="logit_bias names token 9"):
        Sampler(SamplingParams(logit_bias={9: 1.0}), vocab_size=4)


@pytest.mark.parametrize("allowed", [{2}, {0, 3}, set(range(1, 40)), set(range(50)) - {7}])
@pytest.mark.parametrize("params", [SamplingParams(), SamplingParams(temperature=1.0, seed=3),
                                    SamplingParams(temperature=0.7, top_k=5, top_p=0.9, seed=4)])
def test_a_mask_limits_every_choice_to_the_allowed_tokens(allowed: set[int], params: SamplingParams) -> None:
    rng = random.Random(0)
    sampler = Sampler(params, vocab_size=50)
    for _ in range(200):
        row = [rng.gauss(0, 3) for _ in range(50)]
        token, logprob = sampler.sample_full(row, [], allowed)
        assert token in allowed
        assert logprob == pytest.approx(log_softmax(row)[token])  # the model's own distribution
    if params.temperature == 0:
        row = [float(i) for i in range(50)]
        assert sampler.sample_full(row, [], allowed)[0] == max(allowed)


# --- greedy -----------------------------------------------------------------------------------------------------


def test_greedy_is_exactly_argmax_with_lowest_id_on_ties() -> None:
    rng = np.random.default_rng(7)
    for trial in range(20):
        vocab_size = int(rng.integers(1, 3000))
        # Coarse values make ties common, including ties for the maximum.
        row = array("f", (rng.integers(-40, 40, vocab_size) / 4).astype(np.float32).tobytes())
        expected = int(np.argmax(np.frombuffer(row, dtype=np.float32)))  # numpy: the first maximum
        sampler = Sampler(SamplingParams(seed=trial), vocab_size)
        token, logprob = sampler.sample_full(row, history=[])
        assert token == expected
        assert logprob == pytest.approx(log_softmax(row)[expected], abs=1e-9)
        ids, logits, row_max, row_sumexp = candidates(row, 1)
        assert sampler.sample_candidates(ids, logits, row_max, row_sumexp, history=[])[0] == expected


def test_greedy_with_many_tied_maxima_picks_the_lowest_id() -> None:
    row = [0.0, 5.0, 1.0, 5.0, 5.0]
    assert Sampler(SamplingParams(), 5).sample_full(row, [])[0] == 1


def test_near_zero_temperature_and_top_k_1_and_top_p_0_all_behave_greedily() -> None:
    row = realistic_row(5000, seed=3)
    best = max(range(len(row)), key=row.__getitem__)
    for params in (
        SamplingParams(temperature=1e-3, seed=1),
        SamplingParams(temperature=1.5, top_k=1, seed=2),
        SamplingParams(temperature=1.5, top_p=0.0, seed=3),
        SamplingParams(temperature=1.5, min_p=1.0, seed=4),
    ):
        sampler = Sampler(params, len(row))
        assert {sampler.sample_full(row, [])[0] for _ in range(30)} == {best}


# --- penalties --------------------------------------------------------------------------------------------------


def greedy_with(row: list[float], history: list[int], **penalties: float) -> int:
    return Sampler(SamplingParams(**penalties), len(row)).sample_full(row, history)[0]


def test_repetition_penalty_divides_positive_logits_and_multiplies_negative_ones() -> None:
    assert greedy_with([2.0, 1.5], [0], repetition_penalty=1.5) == 1  # 2.0 / 1.5 = 1.33 < 1.5
    assert greedy_with([2.0, 1.5], [0], repetition_penalty=1.25) == 0  # 2.0 / 1.25 = 1.6 > 1.5
    assert greedy_with([-1.0, -1.2], [0], repetition_penalty=1.5) == 1  # -1.0 * 1.5 = -1.5 < -1.2
    assert greedy_with([-1.0, -1.2], [0], repetition_penalty=1.1) == 0  # -1.1 > -1.2
    assert greedy_with([1.0, 1.2], [1], repetition_penalty=0.5) == 1  # below 1 it rewards repeats


def test_presence_counts_once_and_frequency_counts_every_occurrence() -> None:
    row = [2.0, 1.5, 0.0]
    assert greedy_with(row, [0, 0, 0], presence_penalty=0.5) == 0  # 1.5 ties with token 1: lower id wins
    assert greedy_with(row, [0, 0, 0], presence_penalty=0.51) == 1
    assert greedy_with(row, [0, 0], frequency_penalty=0.24) == 0  # 2.0 - 0.48 = 1.52
    assert greedy_with(row, [0, 0, 0], frequency_penalty=0.24) == 1  # 2.0 - 0.72 = 1.28
    assert greedy_with(row, [0, 1], presence_penalty=1.0) == 0  # both penalised alike
    assert greedy_with([0.0, 0.1], [1], presence_penalty=-0.5) == 1  # negative values reward


def test_penalty_window_looks_at_the_last_n_tokens_only() -> None:
    row = [2.0, 1.5, 0.0]
    history = [0, 2, 2, 2]
    assert greedy_with(row, history, presence_penalty=1.0, penalty_last_n=3) == 0  # token 0 is outside
    assert greedy_with(row, history, presence_penalty=1.0, penalty_last_n=4) == 1
    assert greedy_with(row, history, presence_penalty=1.0, penalty_last_n=-1) == 1
    assert greedy_with(row, history, presence_penalty=1.0, penalty_last_n=0) == 0
    assert greedy_with(row, history, presence_penalty=1.0, penalty_last_n=100) == 1  # window longer than history


def test_penalties_neither_touch_the_callers_row_nor_the_reported_logprob() -> None:
    row = [2.0, 1.5, 0.0, -1.0]
    before = list(row)
    sampler = Sampler(SamplingParams(repetition_penalty=3.0, presence_penalty=1.0), len(row))
    token, logprob = sampler.sample_full(row, [0])
    assert row == before
    assert token == 1
    assert logprob == pytest.approx(log_softmax(row)[1], abs=1e-12)


def test_penalties_without_history_change_nothing() -> None:
    row = realistic_row(2000, seed=5)
    plain = Sampler(SamplingParams(temperature=1.2, seed=9), len(row))
    penalised = Sampler(SamplingParams(temperature=1.2, seed=9, repetition_penalty=1.3, frequency_penalty=1), len(row))
    assert [plain.sample_full(row, [])[0] for _ in range(20)] == [penalised.sample_full(row, [])[0] for _ in range(20)]


def test_history_tokens_outside_the_vocabulary_are_refused() -> None:
    sampler = Sampler(SamplingParams(presence_penalty=1.0), 4)
    with pytest.raises(ValueError, match="history token 4"):
        sampler.sample_full([0.0] * 4, [1, 4])


# --- seeds ------------------------------------------------------------------------------------------------------


def run(sampler: Sampler, row: Sequence[float], steps: int, full: bool) -> list[int]:
    """Sample `steps` tokens from a fixed row, feeding each back into the history as an engine would."""
    history: list[int] = []
    ids, logits, row_max, row_sumexp = candidates(row, MAX_GPU_CANDIDATES)
    for _ in range(steps):
        if full:
            token = sampler.sample_full(row, history)[0]
        else:
            token = sampler.sample_candidates(ids, logits, row_max, row_sumexp, history)[0]
        history.append(token)
    return history


@pytest.mark.parametrize(
    ("params", "full"),
    [
        (SamplingParams(temperature=0.9, top_k=40, top_p=0.95, min_p=0.02, seed=1234), False),
        (SamplingParams(temperature=0.9, top_k=40, top_p=0.95, min_p=0.02, seed=1234), True),
        (SamplingParams(temperature=1.3, top_p=0.97, repetition_penalty=1.2, frequency_penalty=0.3, seed=99), True),
    ],
)
def test_the_same_seed_replays_the_same_tokens_and_another_seed_does_not(params: SamplingParams, full: bool) -> None:
    row = realistic_row(3000, seed=11)
    first = run(Sampler(params, len(row)), row, 200, full)
    assert run(Sampler(params, len(row)), row, 200, full) == first
    assert len(set(first)) > 5, "the row must leave room for chance, or this test proves nothing"
    other = dataclasses.replace(params, seed=params.seed + 1)
    assert run(Sampler(other, len(row)), row, 200, full) != first


def test_unseeded_samplers_draw_from_the_operating_system() -> None:
    row = [0.0] * 1000
    params = SamplingParams(temperature=1.0)
    # Equal sequences of 40 uniform draws over 1000 tokens would take a 1e-120 coincidence.
    assert run(Sampler(params, 1000), row, 40, True) != run(Sampler(params, 1000), row, 40, True)


# --- both paths and the reference agree -------------------------------------------------------------------------


few_values = st.sampled_from([NEG_INF, -2.0, 0.0, 0.5, 1.0, 3.0])  # rows of these tie at every cut
f32_logits = st.one_of(few_values, st.floats(-20, 20, width=32))


@st.composite
def rows(draw: st.DrawFn, max_vocab: int) -> list[float]:
    row = draw(st.lists(draw(st.sampled_from([few_values, f32_logits])), min_size=1, max_size=max_vocab))
    if all(x == NEG_INF for x in row):
        row[draw(st.integers(0, len(row) - 1))] = draw(st.floats(-20, 20, width=32))
    return row


probabilities = st.one_of(st.floats(0, 1), st.sampled_from([0.0, 1.0, 0.9999999999999999]))


@st.composite
def candidate_params(draw: st.DrawFn) -> SamplingParams:
    """Parameters for which the GPU's candidates are enough."""
    return SamplingParams(
        temperature=draw(st.one_of(st.just(0.0), st.floats(0.05, 4.0))),
        top_k=draw(st.integers(1, MAX_GPU_CANDIDATES)),
        top_p=draw(probabilities),
        min_p=draw(st.one_of(st.just(0.0), probabilities)),
        seed=draw(st.integers(0, 2**32)),
    )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(row=rows(max_vocab=150), params=candidate_params(), data=st.data())
def test_candidates_and_full_row_pick_the_same_tokens(
    row: list[float], params: SamplingParams, data: st.DataObject
) -> None:
    assert not params.needs_full_logits
    vocab_size = len(row)
    # The kernel may hand over more candidates than needed; extra ones must not matter.
    count = data.draw(st.integers(min(params.candidates_k, vocab_size), min(MAX_GPU_CANDIDATES, vocab_size)))
    ids, logits, row_max, row_sumexp = candidates(row, count)
    from_candidates = Sampler(params, vocab_size)
    from_row = Sampler(params, vocab_size)
    for _ in range(4):
        with kept_sets() as seen:
            token, logprob = from_candidates.sample_candidates(ids, logits, row_max, row_sumexp, history=[])
            full_token, full_logprob = from_row.sample_full(row, history=[])
        assert token == full_token
        if params.temperature > 0:
            assert seen[0] == seen[1]
        assert row[token] > NEG_INF
        assert logprob == pytest.approx(full_logprob, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize(
    ("row", "top_p"),
    [([-1.0, 0.0, 1.5, 3.5, -1.5, -1.0], 0.8371783492634601), ([1.5, -1.0, 4.0, -2.0, 0.5, -2.0], 0.889697261178402)],
)
def test_top_p_cuts_alike_on_both_paths_at_a_knife_edge(row: list[float], top_p: float) -> None:
    """top_p sits exactly where summing the normaliser in rank order instead of id order moves the cut by one
    token; the candidates (which arrive ranked) and the row (which is in id order) must still agree."""
    params = SamplingParams(temperature=1.0, top_k=MAX_GPU_CANDIDATES, top_p=top_p, seed=0)
    expected = [row[i] for i in reference_kept(params, row)]
    with kept_sets() as seen:
        Sampler(params, len(row)).sample_candidates(*candidates(row, len(row)), history=[])
        Sampler(params, len(row)).sample_full(row, history=[])
    assert seen == [expected, expected]


@st.composite
def any_params(draw: st.DrawFn) -> SamplingParams:
    return SamplingParams(
        temperature=draw(st.one_of(st.just(0.0), st.floats(0.05, 4.0))),
        top_k=draw(st.one_of(st.just(0), st.integers(1, 300))),
        top_p=draw(probabilities),
        min_p=draw(st.one_of(st.just(0.0), probabilities)),
        repetition_penalty=draw(st.one_of(st.just(1.0), st.floats(0.5, 2.0))),
        presence_penalty=draw(st.one_of(st.just(0.0), st.floats(-2.0, 2.0))),
        frequency_penalty=draw(st.one_of(st.just(0.0), st.floats(-2.0, 2.0))),
        penalty_last_n=draw(st.sampled_from([-1, 0, 1, 8, 64])),
        seed=draw(st.integers(0, 2**32)),
    )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(row=rows(max_vocab=300), params=any_params())
def test_full_row_matches_the_reference_chain(row: list[float], params: SamplingParams) -> None:
    sampler = Sampler(params, len(row))
    reference_rng = random.Random(params.seed)
    history: list[int] = []
    for _ in range(5):
        with kept_sets() as seen:
            token, logprob = sampler.sample_full(row, history)
        assert token == reference_token(params, row, history, reference_rng)
        if params.temperature > 0:
            logits = reference_logits(params, row, history)
            assert seen == [[logits[i] for i in reference_kept(params, logits)]]
        assert logprob == pytest.approx(log_softmax(row)[token], abs=1e-9)
        history.append(token)


def test_top_p_widens_its_ranking_when_rounding_hides_the_cut() -> None:
    """Top-p ranks only tokens above a floor that its cut provably lies above, in exact arithmetic. With top_p
    one ulp below 1 the rounded running sum never reaches the target, so the ranking must widen to the whole row
    (keeping the token below the floor) to agree with ranking everything."""
    row = [-20.0, 5.0, -20.0, 5.0, -30.0, 10.0]
    params = SamplingParams(temperature=1.0, top_p=0.9999999999999999, seed=0)
    assert reference_kept(params, row) == [0, 1, 2, 3, 4, 5]
    with kept_sets() as seen:
        Sampler(params, len(row)).sample_full(row, [])
    assert seen == [row]


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, repetition_penalty=1.1),
        SamplingParams(temperature=0.7, top_p=0.9),
        SamplingParams(temperature=1.0, top_p=0.999, presence_penalty=0.5),
        SamplingParams(temperature=1.0, min_p=0.01),
        SamplingParams(temperature=1.0, top_p=0.9, min_p=1e-9),
        SamplingParams(temperature=0.5, top_k=500, frequency_penalty=0.4),
    ],
)
@pytest.mark.parametrize("shape", ["realistic", "flat"])
def test_full_row_matches_the_reference_at_real_vocabulary_size(params: SamplingParams, shape: str) -> None:
    vocab_size = 49152
    if shape == "realistic":
        row = realistic_row(vocab_size, seed=21)
    else:  # nearly uniform: top-p's cut lies deep in the ranking
        rng = random.Random(22)
        row = list(array("f", (rng.uniform(-0.1, 0.1) for _ in range(vocab_size))))
    params = dataclasses.replace(params, seed=5)
    sampler = Sampler(params, vocab_size)
    reference_rng = random.Random(5)
    history = [17, 17, 99, 4000]
    with kept_sets() as seen:
        token = sampler.sample_full(array("f", row), history)[0]
    assert token == reference_token(params, row, history, reference_rng)
    logits = reference_logits(params, row, history)
    assert seen == [[logits[i] for i in reference_kept(params, logits)]]


@pytest.mark.parametrize(
    ("params", "kept"),
    [
        # Tokens 0, 2 and 3 tie for third place (probabilities ~0.55, 0.20, then 0.074 each).
        (SamplingParams(temperature=50.0, top_k=3), {0, 1, 4}),
        (SamplingParams(temperature=50.0, top_p=0.8), {0, 1, 4}),  # cumulative 0.55, 0.75, 0.82
        (SamplingParams(temperature=50.0, top_k=5, top_p=0.8), {0, 1, 4}),  # renormalised: 0.56, 0.77, 0.85
    ],
)
def test_ties_at_a_cut_go_to_the_lower_id(params: SamplingParams, kept: set[int]) -> None:
    row = [0.0, 1.0, 0.0, 0.0, 2.0, -1.0]
    sampler = Sampler(dataclasses.replace(params, seed=3), len(row))
    assert {sampler.sample_full(row, [])[0] for _ in range(400)} == kept
    if not params.needs_full_logits:
        ids, logits, row_max, row_sumexp = candidates(row, params.candidates_k)
        assert {sampler.sample_candidates(ids, logits, row_max, row_sumexp, [])[0] for _ in range(400)} == kept


def test_masked_tokens_are_never_drawn() -> None:
    rng = random.Random(3)
    row = [rng.uniform(-1, 1) if i % 3 == 0 else NEG_INF for i in range(3000)]
    sampler = Sampler(SamplingParams(temperature=5.0, seed=8), len(row))
    drawn = {sampler.sample_full(row, [])[0] for _ in range(300)}
    assert all(token % 3 == 0 for token in drawn)
    assert len(drawn) > 200


# --- the distribution -------------------------------------------------------------------------------------------


def chain_distribution(logits: Sequence[float], params: SamplingParams, temperature_first: bool = False) -> np.ndarray:
    """Probabilities after the chain, computed with numpy independently of the sampler.

    temperature_first=True applies temperature before top-p and min-p: the wrong order, used to show that the
    statistical test can tell the difference.
    """
    values = np.asarray(logits, dtype=np.float64)
    order = np.lexsort((np.arange(len(values)), -values))  # by logit descending, then by id
    if 0 < params.top_k < len(values):
        order = order[: params.top_k]
    judged = values / params.temperature if temperature_first else values
    probs = np.exp(judged[order] - judged[order].max())
    probs /= probs.sum()
    keep = np.ones(len(order), dtype=bool)
    if params.top_p < 1:
        keep[int(np.searchsorted(np.cumsum(probs), params.top_p)) + 1:] = False
    if params.min_p > 0:
        keep &= probs >= params.min_p * probs.max()
    kept = order[keep]
    weights = np.exp((values[kept] - values[kept].max()) / params.temperature)
    result = np.zeros(len(values))
    result[kept] = weights / weights.sum()
    return result


def chi_square(counts: np.ndarray, expected: np.ndarray, draws: int) -> float:
    if np.any((expected == 0) & (counts > 0)):
        return math.inf
    support = expected > 0
    e = expected[support] * draws
    return float(((counts[support] - e) ** 2 / e).sum())


def chi_square_bound(degrees: int) -> float:
    """Upper 1e-6 quantile of chi-square (Wilson-Hilferty): a right sampler fails it once in a million seeds."""
    z = 4.753
    return degrees * (1 - 2 / (9 * degrees) + z * math.sqrt(2 / (9 * degrees))) ** 3


STAT_LOGITS = [3.0, 2.6, 2.2, 2.0, 1.5, 1.2, 1.0, 0.5, 0.0, -0.5, -1.0, NEG_INF]


@pytest.mark.parametrize(
    ("params", "kept"),
    [
        # top-k keeps 8, top-p (at temperature 1) trims that to 6, min-p to 5; temperature 0.7 then sharpens.
        (SamplingParams(temperature=0.7, top_k=8, top_p=0.9, min_p=0.2, seed=2024), 5),
        (SamplingParams(temperature=1.6, top_k=10, top_p=0.8, seed=7), 5),
        (SamplingParams(temperature=1.0, top_k=12, seed=8), 11),
    ],
)
@pytest.mark.parametrize("full", [False, True])
def test_empirical_frequencies_match_the_chain(params: SamplingParams, kept: int, full: bool) -> None:
    logits = [gpu_float(x) for x in STAT_LOGITS]
    expected = chain_distribution(logits, params)
    assert np.count_nonzero(expected) == kept
    draws = 10_000
    sampler = Sampler(params, len(logits))
    ids, cand_logits, row_max, row_sumexp = candidates(logits, len(logits))
    counts = np.zeros(len(logits))
    for _ in range(draws):
        if full:
            token = sampler.sample_full(logits, [])[0]
        else:
            token = sampler.sample_candidates(ids, cand_logits, row_max, row_sumexp, [])[0]
        counts[token] += 1
    bound = chi_square_bound(kept - 1)
    assert chi_square(counts, expected, draws) < bound
    if params.temperature != 1:
        wrong_order = chain_distribution(logits, params, temperature_first=True)
        assert chi_square(counts, wrong_order, draws) > bound, "the test must tell the chain's order apart"


def test_empirical_frequencies_match_after_penalties() -> None:
    logits = [gpu_float(x) for x in STAT_LOGITS]
    history = [0, 0, 2, 5, 9]
    params = SamplingParams(temperature=1.3, top_p=0.85, repetition_penalty=1.3, presence_penalty=0.2,
                            frequency_penalty=0.1, seed=31)
    penalised = list(logits)
    for token, count in Counter(history).items():
        x = penalised[token]
        penalised[token] = (x / 1.3 if x > 0 else x * 1.3) - 0.1 * count - 0.2
    expected = chain_distribution(penalised, params)
    draws = 10_000
    sampler = Sampler(params, len(logits))
    counts = np.bincount([sampler.sample_full(logits, history)[0] for _ in range(draws)], minlength=len(logits))
    bound = chi_square_bound(np.count_nonzero(expected) - 1)
    assert chi_square(counts, expected, draws) < bound
    assert chi_square(counts, chain_distribution(logits, params), draws) > bound, "penalties must show"


# --- the candidates' contract -----------------------------------------------------------------------------------


def test_candidates_are_refused_when_the_parameters_need_the_full_row() -> None:
    row = [1.0, 0.0, -1.0]
    sampler = Sampler(SamplingParams(temperature=1.0, top_p=0.9), 3)
    with pytest.raises(ValueError, match="sample_full"):
        sampler.sample_candidates(*candidates(row, 3), history=[])


@pytest.mark.parametrize(
    ("ids", "logits", "row_max", "row_sumexp", "message"),
    [
        ([5, 1, 2], [3.0, 2.0, 1.0], 3.0, 1.5, "need 4"),
        ([5, 1, 2, 3], [3.0, 2.0, 1.0], 3.0, 1.5, "4 candidate ids but 3"),
        ([5, 1, 2, 3], [3.0, 1.0, 2.0, 0.0], 3.0, 1.5, "sorted by logit"),
        ([5, 2, 1, 3], [3.0, 2.0, 2.0, 0.0], 3.0, 1.5, "ties by lower id"),
        ([5, 1, 2, 3], [3.0, math.nan, 1.0, 0.0], 3.0, 1.5, "sorted"),
        ([5, 1, 2, 99], [3.0, 2.0, 1.0, 0.0], 3.0, 1.5, "outside the vocabulary"),
        ([5, 1, 2, 3], [NEG_INF] * 4, 3.0, 1.5, "finite"),
        ([5, 1, 2, 3], [3.0, 2.0, 1.0, 0.0], math.nan, 1.5, "row_max"),
        ([5, 1, 2, 3], [3.0, 2.0, 1.0, 0.0], 3.0, 0.0, "row_sumexp"),
    ],
)
def test_broken_candidate_sets_are_refused(
    ids: list[int], logits: list[float], row_max: float, row_sumexp: float, message: str
) -> None:
    sampler = Sampler(SamplingParams(temperature=1.0, top_k=4), vocab_size=10)
    with pytest.raises(ValueError, match=message):
        sampler.sample_candidates(ids, logits, row_max, row_sumexp, history=[])


def test_a_small_vocabulary_may_have_fewer_candidates_than_top_k() -> None:
    row = [0.5, 2.0, 1.0]
    sampler = Sampler(SamplingParams(temperature=1.0, top_k=40, seed=1), 3)
    drawn = {sampler.sample_candidates(*candidates(row, 3), history=[])[0] for _ in range(200)}
    assert drawn == {0, 1, 2}


# --- bad rows ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ([0.0, math.nan, 1.0], "NaN"),
        ([0.0, math.inf, 1.0], r"\+inf"),
        ([NEG_INF, NEG_INF, NEG_INF], "every logit is -inf"),
        ([0.0, 1.0], "expected a row of 3"),
    ],
)
@pytest.mark.parametrize("params", [SamplingParams(), SamplingParams(temperature=1.0, top_p=0.5)])
def test_broken_rows_are_refused(row: list[float], message: str, params: SamplingParams) -> None:
    with pytest.raises(ValueError, match=message):
        Sampler(params, vocab_size=3).sample_full(row, [])


def test_huge_and_tiny_logits_keep_exact_logprobs() -> None:
    for offset in (1000.0, -1000.0):
        row = [offset + x for x in (0.0, 1.0, 2.0)]
        token, logprob = Sampler(SamplingParams(), 3).sample_full(row, [])
        assert token == 2
        assert logprob == pytest.approx(log_softmax(row)[2], abs=1e-12)


def test_array_and_list_rows_sample_alike() -> None:
    row = realistic_row(4000, seed=6)
    params = SamplingParams(temperature=0.9, top_p=0.9, seed=12)
    from_list, from_array = Sampler(params, len(row)), Sampler(params, len(row))
    assert [from_list.sample_full(row, [])[0] for _ in range(50)] == [
        from_array.sample_full(array("f", row), [])[0] for _ in range(50)
    ]


# --- top log-probabilities --------------------------------------------------------------------------------------


def test_top_logprobs_from_the_row_and_from_candidates_agree() -> None:
    row = [gpu_float(x) for x in (1.0, 3.0, 2.0, 3.0, -1.0, NEG_INF, 0.5)]
    expected = log_softmax(row)
    from_row = Sampler.top_logprobs(array("f", row), 4)
    assert [token for token, _ in from_row] == [1, 3, 2, 0]
    assert [lp for _, lp in from_row] == pytest.approx([expected[i] for i in (1, 3, 2, 0)], abs=1e-12)
    ids, logits, row_max, row_sumexp = candidates(row, 5)
    from_candidates = Sampler.top_logprobs(logits, 4, ids=ids, row_max=row_max, row_sumexp=row_sumexp)
    assert [token for token, _ in from_candidates] == [1, 3, 2, 0]
    assert [lp for _, lp in from_candidates] == pytest.approx([lp for _, lp in from_row], abs=1e-12)
    assert Sampler.top_logprobs(row, 0) == []
    assert len(Sampler.top_logprobs(row, 100)) == len(row)


def test_top_logprobs_refuse_what_they_cannot_answer() -> None:
    with pytest.raises(ValueError, match="only 2 candidates"):
        Sampler.top_logprobs([2.0, 1.0], 3, ids=[4, 7], row_max=2.0, row_sumexp=1.5)
    with pytest.raises(ValueError, match="row_max and row_sumexp"):
        Sampler.top_logprobs([2.0, 1.0], 1, ids=[4, 7])
    with pytest.raises(ValueError, match="n must be"):
        Sampler.top_logprobs([2.0, 1.0], -1)
