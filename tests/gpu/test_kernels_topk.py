"""GPU top-k / argmax (shaders/topk.wgsl through `ops.topk`) against numpy.

Candidates are copies of input values, so values, indices and the max must match exactly (indices in numpy's
stable order: descending value, ties to the lower index). The sum of exp(logit - max) is an f32 sum over up to
256k terms, added in runs of 64: |err| <= 1e-5 relative (measured: 4e-7). The output buffer is poisoned (all
bits set) before the run, and programs are recorded for more rows than the step runs, whose records must stay
untouched.
"""
from __future__ import annotations

import numpy as np
import pytest
import reference_ops as ref
from gpu_util import Gpu, gpu, rng  # noqa: F401 (gpu and rng are fixtures)
from paged_cache import upload

from llmchat.gpu import ops

pytestmark = pytest.mark.gpu

SUM_REL = 1e-5
POISON = 0xFFFFFFFF


def run_topk(g: Gpu, logits: np.ndarray, k: int, extra_rows: int = 2, by_count: bool = False) -> list[ops.TopK]:
    """Top-k of each row of `logits` (f32) in a program recorded for `extra_rows` more rows than it runs; the
    row count comes from the step's token count, or with `by_count` from a separate uniform (the step then has
    more tokens than there are rows to sample)."""
    rows, vocab = logits.shape
    if by_count:
        rec = g.recorder(rows + extra_rows + 5)
        count = g.device.buffer(16, "count", uniform=True)
        g.device.write(count, np.array([rows, 0, 0, 0], np.uint32).tobytes())
    else:
        rec, count = g.recorder(rows), None
    padded = np.vstack([logits, np.zeros((extra_rows, vocab), np.float32)])
    words = ops.topk_words(k) * (rows + extra_rows)
    out = upload(g, np.full(words, POISON, np.uint32), "topk")
    ops.topk(rec, g.act(rec, "logits", padded), out, k, rows_from=count)
    g.run(rec)
    data = g.device.read(out)
    tail = np.frombuffer(data, np.uint32)[ops.topk_words(k) * rows:]
    assert (tail == POISON).all(), "records past the step's token count were written"
    return ops.read_topk(data, k, rows)


def check(got: list[ops.TopK], logits: np.ndarray, k: int) -> None:
    values, indices, m, s = ref.topk(logits, k)
    for r, row in enumerate(got):
        assert list(row.indices) == indices[r].tolist(), f"row {r}: indices"
        assert list(row.values) == values[r].tolist(), f"row {r}: values"
        assert row.max == m[r], f"row {r}: max"
        assert abs(row.sum_exp - s[r]) <= SUM_REL * s[r], f"row {r}: sum_exp {row.sum_exp} vs {s[r]}"


@pytest.mark.parametrize("rows,vocab,k", [(1, 49152, 1), (3, 49152, 40), (2, 1000, 64), (1, 262144, 64),
                                          (5, 32003, 8), (1, 100, 1)])
def test_topk_matches_reference(gpu: Gpu, rng, rows: int, vocab: int, k: int):
    """Vocabulary sizes of real models and odd ones (chunks that do not divide the row); one chunk and many."""
    logits = (rng.standard_normal((rows, vocab)) * 4).astype(np.float32)
    check(run_topk(gpu, logits, k), logits, k)


@pytest.mark.parametrize("k", [1, 5, 64])
def test_topk_ties_go_to_the_lower_index(gpu: Gpu, rng, k: int):
    """Few distinct values, so ties span chunks and cut across the k-th place; k = 1 must equal np.argmax."""
    logits = rng.integers(-6, 3, (3, 20000)).astype(np.float32)
    got = run_topk(gpu, logits, k)
    check(got, logits, k)
    if k == 1:
        assert [row.indices[0] for row in got] == np.argmax(logits, axis=1).tolist()


def test_topk_masked_logits(gpu: Gpu, rng):
    """Grammar masks set logits to -inf: with fewer than k allowed tokens, only those come back."""
    vocab, k = 5000, 16
    logits = np.full((2, vocab), -np.inf, np.float32)
    allowed = rng.choice(vocab, 10, replace=False)
    logits[0, allowed] = rng.standard_normal(10)
    logits[1] = rng.standard_normal(vocab)
    logits[1, ::3] = -np.inf
    got = run_topk(gpu, logits, k)
    assert sorted(got[0].indices) == sorted(allowed.tolist())
    check([got[0]], logits[:1], len(allowed))
    check([got[1]], logits[1:], k)


def test_topk_rows_counted_apart_from_tokens(gpu: Gpu, rng):
    """A prefill step samples only the rows the engine gathered; their count comes from `rows_from`."""
    logits = (rng.standard_normal((2, 30000)) * 4).astype(np.float32)
    check(run_topk(gpu, logits, 10, extra_rows=3, by_count=True), logits, 10)


def test_topk_rejects_bad_k(gpu: Gpu):
    rec = gpu.recorder(1)
    logits = rec.act("logits", 1, 50)
    out = gpu.device.buffer(ops.topk_words(64) * 4, "out")
    for k in (0, 65, 51):
        with pytest.raises(ValueError):
            ops.topk(rec, logits, out, k)
