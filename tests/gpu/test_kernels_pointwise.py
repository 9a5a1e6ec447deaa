"""In-place elementwise maps (shaders/pointwise.wgsl) against float64 numpy: a scale held in a GPU buffer (Gemma 4's
per-layer output scale) and final logit soft-capping, cap * tanh(y / cap). Rows past the count must stay untouched
(poisoned with NaN). Tolerance |err| <= 1e-5 * max|ref| + 1e-6 (gpu_util); inputs reach +-1e4 so tanh's saturated
tails (where exp overflows in f32) are covered.
"""
from __future__ import annotations

import struct

import numpy as np
import pytest
from gpu_util import Gpu, assert_close, gpu, rng  # noqa: F401 (gpu and rng are fixtures)
from paged_cache import upload

from llmchat.gpu import ops

pytestmark = pytest.mark.gpu


def f32(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, np.float32).astype(np.float64)


def with_poison(g: Gpu, rec, values: np.ndarray, extra: int):
    return g.act(rec, "y", np.vstack([values, np.full((extra, values.shape[1]), np.nan)]))


@pytest.mark.parametrize("rows,cols,factor", [(1, 64, 0.5), (5, 100, -3.25), (17, 1000, 1e-3)])
def test_scale_by_a_scalar_in_a_buffer(gpu: Gpu, rng, rows: int, cols: int, factor: float):
    x = f32(rng.standard_normal((rows, cols)) * 10)
    rec = gpu.recorder(rows)
    ya = with_poison(gpu, rec, x, 2)
    ops.scale_by(rec, ya, upload(gpu, np.array([factor], np.float32), "layer_output_scale"))
    gpu.run(rec)
    got = gpu.read(ya)
    assert_close(got[:rows], x * np.float32(factor), what="scaled")
    assert np.isnan(got[rows:]).all(), "rows past the step's token count were written"


@pytest.mark.parametrize("rows,cols,cap", [(1, 64, 30.0), (3, 261, 50.0), (9, 2048, 1.0)])
def test_softcap_over_the_logits_rows(gpu: Gpu, rng, rows: int, cols: int, cap: float):
    """Rows from a count buffer of their own (the step's logits rows), fewer than the activation holds."""
    y = f32(rng.standard_normal((rows, cols)) * cap * rng.uniform(0.01, 5, (rows, 1)))
    y[0, :4] = [1e4, -1e4, 0.0, cap]
    rec = gpu.recorder(rows + 5)  # the step has more tokens than logits rows
    count = gpu.device.buffer(16, "out_step", uniform=True)
    gpu.device.write(count, struct.pack("<4I", rows, 0, 0, 0))
    ya = with_poison(gpu, rec, y, 3)
    ops.softcap(rec, ya, cap, rows_from=count)
    gpu.run(rec)
    got = gpu.read(ya)
    assert np.isfinite(got[:rows]).all()
    assert_close(got[:rows], cap * np.tanh(y / cap), what="soft-capped")
    assert np.isnan(got[rows:]).all(), "rows past the count were written"
    with pytest.raises(ValueError, match="positive"):
        ops.softcap(rec, ya, 0.0)
