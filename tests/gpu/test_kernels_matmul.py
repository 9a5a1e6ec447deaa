"""The matmul kernel (shaders/matmul.wgsl through `ops.matmul`) against float64 numpy, for every GPU weight type.

Each case: a random weight of the type (see gpu_util.random_weight) and random f32 activations, outputs
poisoned with NaN before the run, compared with x @ W^T over the `gguf` package's dequantized weights with the
tolerance stated in gpu_util (|err| <= 1e-5 * max|ref| + 1e-6). Row counts are not multiples of the workgroup
(64) and token counts not multiples of the token tile (1, 4, 8), so the edges of both grids are exercised; row
sizes are whole K-quant super-blocks, which for Q3_K (110 bytes) and Q6_K (210 bytes) puts every other row's
blocks at an address that is 2 mod 4.
"""
from __future__ import annotations

import numpy as np
import pytest
from gpu_util import (  # noqa: F401 (gpu, rng and split_gpu are fixtures)
    ALL_TYPES, SPLIT_BINDING, Gpu, assert_close, case_id, gpu, random_weight, rng, split_gpu,
)

from llmchat.gguf.types import BLOCK_LAYOUT, GGMLType
from llmchat.gpu import ops

pytestmark = pytest.mark.gpu

# (rows of W, row length k, tokens): token counts 1, 5 and 13 use tiles of 1, 4 and 8 (see variants.Variants.matmul).
SHAPES = [(70, 768, 1), (131, 512, 5), (37, 256, 13)]


def silu(v: np.ndarray) -> np.ndarray:
    return v / (1.0 + np.exp(-v))


def activations(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    """f32 values (held as float64, so references see exactly what the GPU sees)."""
    return rng.standard_normal((rows, cols)).astype(np.float32).astype(np.float64)


@pytest.mark.parametrize("rows,k,n_tokens", SHAPES, ids=case_id)
@pytest.mark.parametrize("qtype", ALL_TYPES, ids=case_id)
def test_matmul_matches_reference(gpu: Gpu, rng, qtype: GGMLType, rows: int, k: int, n_tokens: int):
    raw, w = random_weight(rng, qtype, rows, k)
    x = activations(rng, n_tokens, k)
    rec = gpu.recorder(n_tokens)
    weight = gpu.weight("w", qtype, raw)
    y = gpu.poisoned(rec, "y", n_tokens, rows)
    ops.matmul(rec, weight, gpu.act(rec, "x", x), y)
    gpu.run(rec)
    assert_close(gpu.read(y), x @ w.T, what=f"{qtype.name} {rows}x{k} T={n_tokens}")


@pytest.mark.parametrize("qtype", [GGMLType.Q5_0, GGMLType.Q6_K], ids=case_id)
def test_matmul_residual_add_with_bias(gpu: Gpu, rng, qtype: GGMLType):
    """MODE 1 adds into what y holds (the residual stream), bias included."""
    rows, k, n_tokens = 70, 256, 5
    raw, w = random_weight(rng, qtype, rows, k)
    x = activations(rng, n_tokens, k)
    y0 = activations(rng, n_tokens, rows)
    bias = activations(rng, 1, rows)[0]
    rec = gpu.recorder(n_tokens)
    y = gpu.act(rec, "y", y0)
    ops.matmul(rec, gpu.weight("w", qtype, raw), gpu.act(rec, "x", x), y, mode=1,
               bias=gpu.act(rec, "bias", bias[None, :]).buffer)
    gpu.run(rec)
    assert_close(gpu.read(y), y0 + x @ w.T + bias, what=qtype.name)


@pytest.mark.parametrize("qtype,n_tokens", [(GGMLType.Q4_1, 1), (GGMLType.Q3_K, 13)], ids=case_id)
def test_matmul_gated_silu(gpu: Gpu, rng, qtype: GGMLType, n_tokens: int):
    """MODE 2 over [gate; up] stacked by rows: y = silu(x @ gate^T) * (x @ up^T), one output per gate row.

    67 gate rows put the up half at an odd row, so for Q3_K its blocks start 2 bytes into a word.
    """
    hidden, k = 67, 256
    raw_gate, gate = random_weight(rng, qtype, hidden, k)
    raw_up, up = random_weight(rng, qtype, hidden, k)
    x = activations(rng, n_tokens, k)
    rec = gpu.recorder(n_tokens)
    weight = gpu.weight("gate_up", qtype, np.concatenate([raw_gate, raw_up]))
    y = gpu.poisoned(rec, "y", n_tokens, hidden)
    ops.matmul(rec, weight, gpu.act(rec, "x", x), y, mode=2)
    gpu.run(rec)
    assert_close(gpu.read(y), silu(x @ gate.T) * (x @ up.T), what=qtype.name)


def rmsnorm(x: np.ndarray, g: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g


@pytest.mark.parametrize("qtype,n_tokens,mode", [(GGMLType.Q4_1, 1, 0), (GGMLType.Q8_0, 13, 0), (GGMLType.Q4_K, 5, 2)],
                         ids=case_id)
def test_matmul_with_folded_rmsnorm(gpu: Gpu, rng, qtype: GGMLType, n_tokens: int, mode: int):
    """`norm`: y = rmsnorm(x, g, eps) @ W^T in one dispatch (plain and gated), against norm-then-matmul in numpy.

    x is scaled far from unit RMS so a missing or misplaced normalisation cannot pass."""
    rows, k, eps = 67, 512, 1e-5
    raw, w = random_weight(rng, qtype, 2 * rows if mode == 2 else rows, k)
    x = activations(rng, n_tokens, k) * 7.0
    g = activations(rng, 1, k)[0]
    rec = gpu.recorder(n_tokens)
    y = gpu.poisoned(rec, "y", n_tokens, rows)
    ops.matmul(rec, gpu.weight("w", qtype, raw), gpu.act(rec, "x", x), y, mode=mode,
               norm=gpu.act(rec, "g", g[None, :]).buffer, eps=eps)
    gpu.run(rec)
    h = rmsnorm(x, g, eps)
    want = h @ w.T if mode == 0 else silu(h @ w[:rows].T) * (h @ w[rows:].T)
    assert_close(gpu.read(y), want, what=f"{qtype.name} mode {mode}")


@pytest.mark.parametrize("qtype", [GGMLType.Q8_0, GGMLType.Q2_K], ids=case_id)
def test_matmul_into_columns_of_a_wider_output(gpu: Gpu, rng, qtype: GGMLType):
    """y_offset/y_stride: the result lands in columns [17, 17 + rows) of a wider y; bias read from offset 3.

    This is how Q, K and V (or several heads' outputs) share one activation; the other columns stay as they were.
    """
    rows, k, n_tokens, width, offset, bias_offset = 45, 256, 5, 100, 17, 3
    raw, w = random_weight(rng, qtype, rows, k)
    x = activations(rng, n_tokens, k)
    before = activations(rng, n_tokens, width)
    bias = activations(rng, 1, rows + 10)[0]
    rec = gpu.recorder(n_tokens)
    y = gpu.act(rec, "y", before)
    ops.matmul(rec, gpu.weight("w", qtype, raw), gpu.act(rec, "x", x), y, y_offset=offset,
               bias=gpu.act(rec, "bias", bias[None, :]).buffer, bias_offset=bias_offset)
    gpu.run(rec)
    got = gpu.read(y)
    inside = slice(offset, offset + rows)
    assert_close(got[:, inside], x @ w.T + bias[bias_offset:bias_offset + rows], what=qtype.name)
    outside = np.ones(width, bool)
    outside[inside] = False
    np.testing.assert_array_equal(got[:, outside], before[:, outside])


@pytest.mark.parametrize("qtype", [GGMLType.Q5_1, GGMLType.Q6_K], ids=case_id)
def test_matmul_weight_split_into_parts(split_gpu: Gpu, rng, qtype: GGMLType):
    """A weight larger than one binding is uploaded as several buffers of whole rows, one dispatch each.

    Every part must land in its own output columns and read its own slice of the bias, here in MODE 1 into a
    wider output so that all three offsets (part, y_offset, bias_offset) add up.
    """
    k, n_tokens, offset, bias_offset = 256, 5, 6, 2
    row_bytes = k // BLOCK_LAYOUT[qtype][0] * BLOCK_LAYOUT[qtype][1]
    per_part = SPLIT_BINDING // row_bytes
    rows = 2 * per_part + per_part // 2 + 1
    raw, w = random_weight(rng, qtype, rows, k)
    x = activations(rng, n_tokens, k)
    before = activations(rng, n_tokens, rows + 9)
    bias = activations(rng, 1, rows + bias_offset)[0]
    rec = split_gpu.recorder(n_tokens)
    weight = split_gpu.weight("w", qtype, raw)
    assert len(weight.parts) == 3
    y = split_gpu.act(rec, "y", before)
    ops.matmul(rec, weight, split_gpu.act(rec, "x", x), y, mode=1, y_offset=offset,
               bias=split_gpu.act(rec, "bias", bias[None, :]).buffer, bias_offset=bias_offset)
    split_gpu.run(rec)
    got = split_gpu.read(y)
    want = before.copy()
    want[:, offset:offset + rows] += x @ w.T + bias[bias_offset:]
    assert_close(got, want, what=qtype.name)


def test_matmul_refuses_a_split_gated_weight(split_gpu: Gpu, rng):
    """MODE 2 finds the up rows at a fixed row of the same binding, so [gate; up] must not be split."""
    raw, _ = random_weight(rng, GGMLType.Q8_0, 40, 256)
    weight = split_gpu.weight("gate_up", GGMLType.Q8_0, raw)
    assert len(weight.parts) > 1
    rec = split_gpu.recorder(1)
    with pytest.raises(ValueError, match="gate_up"):
        ops.matmul(rec, weight, rec.act("x", 1, 256), rec.act("y", 1, 20), mode=2)


def test_matmul_runs_only_the_tokens_of_the_step(gpu: Gpu, rng):
    """A program recorded for 8 tokens and run for 6 writes 6 rows (a full tile and half of one), no more."""
    rows, k, recorded, n_tokens = 70, 256, 8, 6
    raw, w = random_weight(rng, GGMLType.Q4_0, rows, k)
    x = activations(rng, recorded, k)
    rec = gpu.recorder(n_tokens)
    y = gpu.poisoned(rec, "y", recorded, rows)
    ops.matmul(rec, gpu.weight("w", GGMLType.Q4_0, raw), gpu.act(rec, "x", x), y)
    gpu.run(rec)
    got = gpu.read(y)
    assert_close(got[:n_tokens], x[:n_tokens] @ w.T)
    assert np.isnan(got[n_tokens:]).all()
