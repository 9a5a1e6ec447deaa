"""Every matmul kernel variant (llmchat.gpu.variants.MatmulTile: rows and tokens per invocation, plain or
subgroup-shared loads of x) against float64 numpy, whichever variant this adapter would choose itself.

Same references and tolerance as test_kernels_matmul.py (gpu_util: |err| <= 1e-5 * max|ref| + 1e-6, outputs
poisoned with NaN first). Row counts are not multiples of rows x workgroup and token counts not multiples of the
tile, so clamped rows and tokens at the grid's edges are exercised; Q8_0 rows of an odd number of blocks put every
other row's blocks at 2 mod 4 and so cover both of its decoder's alignments. The tiles also run in MODE 2 (gated)
and with a folded RMSNorm, whose sum of squares the kernel accumulates while it loads x.

Weights of the types that have one are also tested in the split layout (tensors.split_weight: rewritten on the GPU
after upload, quants and scales apart), in the matmul and in the embedding lookup, also split over several
bindings.
"""
from __future__ import annotations

import numpy as np
import pytest
from gpu_util import (  # noqa: F401 (gpu, rng and split_gpu are fixtures)
    SPLIT_BINDING, Gpu, assert_close, case_id, gpu, random_weight, rng, split_gpu,
)

from llmchat.ggml_types import GGMLType
from llmchat.gpu import ops
from llmchat.gpu.tensors import SPLIT_TYPES, split_row_bytes, split_weight
from llmchat.gpu.variants import MatmulTile, subgroup_size, variants

pytestmark = pytest.mark.gpu

# What CPU emulators choose (8 rows for decode, 8 x 4 or 8 x 8 for prefill, shared or plain loads), the GPU
# decode tile, and smaller tiles with larger workgroups.
TILES = [MatmulTile(*t) for t in [(1, 1, 64, "plain"), (8, 1, 8, "shared"), (8, 1, 8, "plain"), (8, 4, 8, "shared"),
                                  (8, 8, 8, "shared"), (8, 8, 8, "plain"), (4, 8, 16, "shared"), (2, 4, 16, "plain")]]


def tile_id(t: MatmulTile) -> str:
    return f"R{t.rows}xT{t.tokens}-wg{t.wg}-{t.xload}"


def usable(gpu: Gpu, tile: MatmulTile) -> None:
    if tile.xload == "shared" and subgroup_size(gpu.device) < 8:
        pytest.skip("shared loads of x need subgroups of at least 8 lanes")


def split(gpu: Gpu, qtype: GGMLType, raw: np.ndarray):
    return split_weight(gpu.device, gpu.kernels, gpu.weight("w", qtype, raw))


def silu(v: np.ndarray) -> np.ndarray:
    return v / (1.0 + np.exp(-v))


def activations(rng: np.random.Generator, rows: int, cols: int, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal((rows, cols)) * scale).astype(np.float32).astype(np.float64)


# Every tile with Q4_1 and Q8_0 (the decoders written for speed) and a K-quant (the generic decoder) in two tiles.
SHAPES = {GGMLType.Q4_1: (75, 192, 11), GGMLType.Q8_0: (37, 160, 3), GGMLType.Q4_K: (19, 256, 9)}
CASES = [(t, q) for t in TILES for q in (GGMLType.Q4_1, GGMLType.Q8_0)] + [(TILES[1], GGMLType.Q4_K),
                                                                           (TILES[3], GGMLType.Q4_K)]


@pytest.mark.parametrize("tile,qtype", CASES, ids=lambda v: tile_id(v) if isinstance(v, MatmulTile) else case_id(v))
def test_tile_matches_reference(gpu: Gpu, rng, tile: MatmulTile, qtype: GGMLType):
    usable(gpu, tile)
    rows, k, n_tokens = SHAPES[qtype]
    raw, w = random_weight(rng, qtype, rows, k)
    x = activations(rng, n_tokens, k)
    rec = gpu.recorder(n_tokens)
    y = gpu.poisoned(rec, "y", n_tokens, rows)
    ops.matmul(rec, gpu.weight("w", qtype, raw), gpu.act(rec, "x", x), y, tile=tile)
    gpu.run(rec)
    assert_close(gpu.read(y), x @ w.T, what=f"{tile_id(tile)} {qtype.name} {rows}x{k} T={n_tokens}")


@pytest.mark.parametrize("tile", [TILES[0], TILES[1], TILES[4]], ids=tile_id)
@pytest.mark.parametrize("qtype", list(SPLIT_TYPES), ids=case_id)
def test_split_layout_matches_reference(split_gpu: Gpu, rng, tile: MatmulTile, qtype: GGMLType):
    """The split layout through decode, prefill and GPU tiles, on a device whose bindings hold a few rows each."""
    usable(split_gpu, tile)
    rows, k, n_tokens = 27, 160, 9 if tile.tokens > 1 else 1
    raw, w = random_weight(rng, qtype, rows, k)
    weight = split(split_gpu, qtype, raw)
    assert weight.layout == "split" and len(weight.parts) > 1
    assert weight.row_bytes == split_row_bytes(qtype, k) and weight.row_bytes % 16 == 0
    assert max(p.rows for p in weight.parts) * weight.row_bytes <= SPLIT_BINDING
    x = activations(rng, n_tokens, k)
    rec = split_gpu.recorder(n_tokens)
    y = split_gpu.poisoned(rec, "y", n_tokens, rows)
    ops.matmul(rec, weight, split_gpu.act(rec, "x", x), y, tile=tile)
    split_gpu.run(rec)
    assert_close(split_gpu.read(y), x @ w.T, what=f"split {tile_id(tile)} {qtype.name}")


@pytest.mark.parametrize("qtype", list(SPLIT_TYPES), ids=case_id)
def test_split_layout_embedding(split_gpu: Gpu, rng, qtype: GGMLType):
    """A table in the split layout (a tied output projection) still serves embedding lookups, scale included."""
    rows, k = 40, 96
    raw, w = random_weight(rng, qtype, rows, k)
    weight = split(split_gpu, qtype, raw)
    ids = [39, 0, 17, 5, 17]
    rec = split_gpu.recorder(len(ids))
    y = split_gpu.poisoned(rec, "y", len(ids), k)
    ops.embed(rec, weight, split_gpu.tokens(ids), y, scale=0.5)
    split_gpu.run(rec)
    assert_close(split_gpu.read(y), w[ids] * 0.5, what=qtype.name)


@pytest.mark.parametrize("tile,layout", [(t, "gguf") for t in TILES] + [(t, "split") for t in TILES[1:5:3]],
                         ids=lambda v: tile_id(v) if isinstance(v, MatmulTile) else v)
def test_tile_gated_with_folded_norm(gpu: Gpu, rng, tile: MatmulTile, layout: str):
    """MODE 2 with `norm`: silu(rmsnorm(x) @ gate^T) * (rmsnorm(x) @ up^T), 21 gate rows (the up half starts at
    an odd row); x far from unit RMS so a missing normalisation cannot pass."""
    usable(gpu, tile)
    hidden, k, n_tokens, eps = 21, 128, 6, 1e-5
    raw, w = random_weight(rng, GGMLType.Q4_1, 2 * hidden, k)
    x = activations(rng, n_tokens, k, 7.0)
    g = activations(rng, 1, k)[0]
    rec = gpu.recorder(n_tokens)
    y = gpu.poisoned(rec, "y", n_tokens, hidden)
    weight = split(gpu, GGMLType.Q4_1, raw) if layout == "split" else gpu.weight("w", GGMLType.Q4_1, raw)
    ops.matmul(rec, weight, gpu.act(rec, "x", x), y, mode=ops.GLU,
               norm=gpu.act(rec, "g", g[None, :]).buffer, eps=eps, tile=tile)
    gpu.run(rec)
    h = x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g
    assert_close(gpu.read(y), silu(h @ w[:hidden].T) * (h @ w[hidden:].T), what=tile_id(tile))


@pytest.mark.parametrize("tile", TILES[:4], ids=tile_id)
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
