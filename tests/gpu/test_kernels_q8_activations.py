"""Matmuls with activations rounded to 8 bits (Recorder.q8_activations), llama.cpp's numerics, against numpy:
each 32-element block of x becomes integers round(x / d) in [-127, 127] times d = max|x| / 127 held as f16,
before the dot products with a quantized weight; F32/F16 weights keep f32 activations. With a folded RMSNorm the
block is x * g (scaling a block leaves its integers unchanged). |err| <= 1e-5 * max|ref| + 1e-6 (gpu_util).
"""
from __future__ import annotations

import numpy as np
import pytest
from gpu_util import Gpu, assert_close, case_id, gpu, random_weight, rng, round_blocks  # noqa: F401 (fixtures)

from llmchat.gguf.types import GGMLType
from llmchat.gpu import ops

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("qtype,n_tokens", [(GGMLType.Q8_0, 1), (GGMLType.Q4_K, 5), (GGMLType.Q5_0, 9)], ids=case_id)
def test_activations_rounded_per_block(gpu: Gpu, rng, qtype: GGMLType, n_tokens: int):
    rows, k = 37, 512
    raw, w = random_weight(rng, qtype, rows, k)
    x = rng.standard_normal((n_tokens, k)).astype(np.float32).astype(np.float64)
    x[0, :32] = 0.0  # an all-zero block stays zero
    rec = gpu.recorder(n_tokens)
    rec.q8_activations = True
    y = gpu.poisoned(rec, "y", n_tokens, rows)
    ops.matmul(rec, gpu.weight("w", qtype, raw), gpu.act(rec, "x", x), y)
    gpu.run(rec)
    want = round_blocks(x) @ w.T
    assert_close(gpu.read(y), want, what=qtype.name)
    assert np.abs(want - x @ w.T).max() > 1e-3 * np.abs(want).max()  # the rounding is visible at this tolerance


def test_rounding_follows_a_folded_norm(gpu: Gpu, rng):
    rows, k, n_tokens = 19, 256, 3
    raw, w = random_weight(rng, GGMLType.Q8_0, rows, k)
    x = rng.standard_normal((n_tokens, k)).astype(np.float32).astype(np.float64)
    g = rng.standard_normal(k).astype(np.float32).astype(np.float64)
    rec = gpu.recorder(n_tokens)
    rec.q8_activations = True
    y = gpu.poisoned(rec, "y", n_tokens, rows)
    ops.matmul(rec, gpu.weight("w", GGMLType.Q8_0, raw), gpu.act(rec, "x", x), y,
               norm=gpu.act(rec, "g", g[None, :]).buffer, eps=1e-6)
    gpu.run(rec)
    inv_rms = 1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)
    assert_close(gpu.read(y), (round_blocks(x * g) @ w.T) * inv_rms)


def test_float_weights_keep_f32_activations(gpu: Gpu, rng):
    rows, k = 21, 256
    raw, w = random_weight(rng, GGMLType.F16, rows, k)
    x = rng.standard_normal((2, k)).astype(np.float32).astype(np.float64)
    rec = gpu.recorder(2)
    rec.q8_activations = True
    y = gpu.poisoned(rec, "y", 2, rows)
    ops.matmul(rec, gpu.weight("w", GGMLType.F16, raw), gpu.act(rec, "x", x), y)
    gpu.run(rec)
    assert_close(gpu.read(y), x @ w.T)
