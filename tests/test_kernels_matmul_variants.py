"""Every matmul kernel variant (llmchat.gpu.variants.MatmulTile: rows and tokens per invocation, plain or
subgroup-shared loads of x) against float64 numpy, whichever variant this adapter would choose itself.

Same references and tolerance as test_kernels_matmul.py (gpu_util: |err| <= 1e-5 * max|ref| + 1e-6, outputs
poisoned with NaN first). Row counts are not multiples of rows x workgroup and token counts not multiples of the
tile, so clamped rows and tokens at the grid's edges are exercised; Q8_0 rows of an odd number of blocks put every
other row's blocks at 2 mod 4 and so cover both of its decoder's alignments. The tiles also run in MODE 2 (gated)
and with a folded RMSNorm, whose sum of squares the kernel accumulates while it loads x.
"""
from __future__ import annotations

import numpy as np
import pytest
from gpu_util import Gpu, assert_close, case_id, gpu, random_weight, rng  # noqa: F401 (gpu, rng are fixtures)

from llmchat.ggml_types import GGMLType
from llmchat.gpu import ops
from llmchat.gpu.variants import MatmulTile, subgroup_size, variants

pytestmark = pytest.mark.gpu

# What CPU emulators choose (8 rows for decode, 4 x 4 or 4 x 8 for prefill, shared or plain loads), the GPU
# decode tile, and a 2-row tile with a larger workgroup.
TILES = [MatmulTile(*t) for t in [(1, 1, 64, "plain"), (8, 1, 8, "shared"), (8, 1, 8, "plain"), (4, 4, 8, "shared"),
                                  (4, 8, 8, "shared"), (4, 8, 8, "plain"), (2, 4, 16, "shared")]]


def tile_id(t: MatmulTile) -> str:
    return f"R{t.rows}xT{t.tokens}-wg{t.wg}-{t.xload}"


def usable(gpu: Gpu, tile: MatmulTile) -> None:
    if tile.xload == "shared" and subgroup_size(gpu.device) < 8:
        pytest.skip("shared loads of x need subgroups of at least 8 lanes")


def silu(v: np.ndarray) -> np.ndarray:
    return v / (1.0 + np.exp(-v))


def activations(rng: np.random.Generator, rows: int, cols: int, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal((rows, cols)) * scale).astype(np.float32).astype(np.float64)


@pytest.mark.parametrize("tile", TILES, ids=tile_id)
@pytest.mark.parametrize("qtype,rows,k,n_tokens", [(GGMLType.Q4_1, 75, 192, 11), (GGMLType.Q8_0, 37, 160, 3),
                                                   (GGMLType.Q4_K, 19, 256, 9)],
                         ids=case_id)
def test_tile_matches_reference(gpu: Gpu, rng, tile: MatmulTile, qtype: GGMLType, rows: int, k: int,
                                n_tokens: int):
    usable(gpu, tile)
    raw, w = random_weight(rng, qtype, rows, k)
    x = activations(rng, n_tokens, k)
    rec = gpu.recorder(n_tokens)
    y = gpu.poisoned(rec, "y", n_tokens, rows)
    ops.matmul(rec, gpu.weight("w", qtype, raw), gpu.act(rec, "x", x), y, tile=tile)
    gpu.run(rec)
    assert_close(gpu.read(y), x @ w.T, what=f"{tile_id(tile)} {qtype.name} {rows}x{k} T={n_tokens}")


@pytest.mark.parametrize("tile", TILES, ids=tile_id)
def test_tile_gated_with_folded_norm(gpu: Gpu, rng, tile: MatmulTile):
    """MODE 2 with `norm`: silu(rmsnorm(x) @ gate^T) * (rmsnorm(x) @ up^T), 21 gate rows (the up half starts at
    an odd row); x far from unit RMS so a missing normalisation cannot pass."""
    usable(gpu, tile)
    hidden, k, n_tokens, eps = 21, 128, 6, 1e-5
    raw, w = random_weight(rng, GGMLType.Q4_1, 2 * hidden, k)
    x = activations(rng, n_tokens, k, 7.0)
    g = activations(rng, 1, k)[0]
    rec = gpu.recorder(n_tokens)
    y = gpu.poisoned(rec, "y", n_tokens, hidden)
    ops.matmul(rec, gpu.weight("w", GGMLType.Q4_1, raw), gpu.act(rec, "x", x), y, mode=ops.GLU,
               norm=gpu.act(rec, "g", g[None, :]).buffer, eps=eps, tile=tile)
    gpu.run(rec)
    h = x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g
    assert_close(gpu.read(y), silu(h @ w[:hidden].T) * (h @ w[hidden:].T), what=tile_id(tile))


@pytest.mark.parametrize("tile", TILES, ids=tile_id)
def test_tile_adds_into_residual_with_bias(gpu: Gpu, rng, tile: MatmulTile):
    """MODE 1 with a bias into columns [5, 5 + rows) of a wider y: the other columns keep their values."""
    usable(gpu, tile)
    rows, k, n_tokens, width, offset = 29, 64, 5, 40, 5
    raw, w = random_weight(rng, GGMLType.Q8_0, rows, k)
    x = activations(rng, n_tokens, k)
    before = activations(rng, n_tokens, width)
    bias = activations(rng, 1, rows)[0]
    rec = gpu.recorder(n_tokens)
    y = gpu.act(rec, "y", before)
    ops.matmul(rec, gpu.weight("w", GGMLType.Q8_0, raw), gpu.act(rec, "x", x), y, y_offset=offset, mode=ops.ADD,
               bias=gpu.act(rec, "bias", bias[None, :]).buffer, tile=tile)
    gpu.run(rec)
    want = before.copy()
    want[:, offset:offset + rows] += x @ w.T + bias
    assert_close(gpu.read(y), want, what=tile_id(tile))


def test_adapter_choice_is_a_tested_tile(gpu: Gpu):
    """On CPU emulators the tiles chosen for every step size are among those tested here (GPUs choose one row
    per invocation, which test_kernels_matmul.py covers through ops.matmul's default)."""
    v = variants(gpu.device)
    for tokens in (1, 2, 4, 8, 64):
        t = v.matmul(tokens)
        assert t in TILES if v.software else t.rows == 1, t
