"""The GPU shapes of the matmul kernel (variants.MatmulTile shape "rowgroup": the coalesced matvec with subgroup
or workgroup-memory reductions; shape "tiled": the workgroup-memory prefill tiles) against float64 numpy, forced
through `ops.matmul(tile=...)` whatever this adapter would choose.

Same references and tolerance as test_kernels_matmul.py (gpu_util: |err| <= 1e-5 * max|ref| + 1e-6, outputs
poisoned with NaN first). Shapes are SmolLM2's (576 x 1536, 1536 x 576; a slice of the 49152-row output matrix),
and odd ones (rows not multiples of any tile, token counts 1, 5, 13, 64) so clamped rows and tokens at every edge
are exercised. Every type runs in each layout it has; every mode (store, add with bias into a wider y at an offset,
gated silu and gelu, folded RMSNorm, 8-bit activations, rows_from) runs through every shape; the grid past 65535
workgroups folds into z.
"""
from __future__ import annotations

import numpy as np
import pytest
from gpu_util import (  # noqa: F401 (gpu, rng and tiles_gpu are fixtures)
    ALL_TYPES, Gpu, adapter_only, assert_close, case_id, gpu, needs, random_weight, rng, tiles_gpu,
)
from test_kernels_matmul_variants import (
    activations, layouts, silu, split, split_k, split_rows, subgroup_cases, upload,
)

from llmchat.gguf.types import BLOCK_LAYOUT, GGMLType
from llmchat.gpu import ops
from llmchat.gpu.variants import MatmulTile, subgroup_size

pytestmark = pytest.mark.gpu

ROWGROUP = [MatmulTile(1, 1, 64, shape="rowgroup", reduce="subgroup"),
            MatmulTile(2, 1, 32, shape="rowgroup", reduce="workgroup"),
            MatmulTile(4, 1, 16, shape="rowgroup", reduce="subgroup"),
            MatmulTile(2, 4, 32, shape="rowgroup", reduce="subgroup"),
            MatmulTile(1, 8, 8, shape="rowgroup", reduce="workgroup")]
TILED = [MatmulTile(2, 8, 64, shape="tiled", wg_rows=16),
         MatmulTile(2, 4, 64, shape="tiled", wg_rows=16),
         MatmulTile(4, 4, 64, shape="tiled", wg_rows=8),
         MatmulTile(1, 1, 32, shape="tiled", wg_rows=4)]
TILES = ROWGROUP + TILED


def tile_id(t: MatmulTile) -> str:
    extra = t.reduce if t.shape == "rowgroup" else f"wgr{t.wg_rows}"
    return f"{t.shape}-R{t.rows}xT{t.tokens}-wg{t.wg}-{extra}"


def usable(gpu: Gpu, tile: MatmulTile) -> None:
    if tile.reduce == "subgroup" and subgroup_size(gpu.device) < 4:
        pytest.skip("subgroup reductions need subgroups of at least 4 lanes")


def run_case(gpu: Gpu, rng, tile: MatmulTile, qtype: GGMLType, layout: str, rows: int, k: int, n_tokens: int,
             **kw) -> None:
    usable(gpu, tile)
    raw, w = random_weight(rng, qtype, rows, k)
    x = activations(rng, n_tokens, k)
    rec = gpu.recorder(n_tokens)
    y = gpu.poisoned(rec, "y", n_tokens, rows)
    ops.matmul(rec, upload(gpu, qtype, raw, layout), gpu.act(rec, "x", x), y, tile=tile, **kw)
    gpu.run(rec)
    assert_close(gpu.read(y), x @ w.T, what=f"{tile_id(tile)} {qtype.name} {layout} {rows}x{k} T={n_tokens}")


# SmolLM2's projections (ffn_up/gate rows of 576, ffn_down rows of 1536) at decode and prefill, and odd sizes
# (neither rows nor k multiples of any tile) at 1, 5 and 13 tokens. The 64-token prefill runs the GPU's default
# tiled and row-group tiles only: each such case takes seconds on lavapipe.
DECODE = [(1536, 576, 1), (576, 1536, 1), (101, 96, 1)]
SMALL = [(576, 1536, 13), (101, 96, 5), (70, 768, 13)]
PREFILL = [(1536, 576, 64)]
QTYPES = layouts([GGMLType.Q4_1, GGMLType.Q4_K, GGMLType.Q6_K, GGMLType.Q8_0])
FEW = [(GGMLType.Q4_1, "split"), (GGMLType.Q4_K, "gguf"), (GGMLType.Q8_0, "gguf")]  # every type: test_every_type...
CASES = ([(t, q, lay, *s) for t in ROWGROUP if t.tokens == 1 for q, lay in QTYPES for s in DECODE + SMALL[1:]]
         + [(t, q, lay, *s) for t in TILES if t.tokens > 1 or t.shape == "tiled" for q, lay in FEW for s in SMALL]
         + [(t, q, lay, *s) for t in (TILED[0], ROWGROUP[3]) for q, lay in QTYPES for s in PREFILL])


@adapter_only
@pytest.mark.parametrize("tile,qtype,layout,rows,k,n_tokens", subgroup_cases(CASES),
                         ids=lambda v: tile_id(v) if isinstance(v, MatmulTile) else case_id(v))
def test_shape_at_model_sizes(gpu: Gpu, rng, tile, qtype, layout, rows, k, n_tokens):
    if k % BLOCK_LAYOUT[qtype][0]:
        k = 256 * -(-k // 256)
    run_case(gpu, rng, tile, qtype, layout, rows, k, n_tokens)


@adapter_only
@pytest.mark.parametrize("tile", subgroup_cases([ROWGROUP[0], TILED[0]]), ids=tile_id)
@pytest.mark.parametrize("qtype,layout", layouts(ALL_TYPES), ids=case_id)
def test_every_type_and_layout(gpu: Gpu, rng, qtype: GGMLType, layout: str, tile: MatmulTile):
    """Every type's decoder in both layouts through the default GPU decode and prefill tiles."""
    rows, k = (147, 512) if BLOCK_LAYOUT[qtype][0] == 256 else (195, 576)
    run_case(gpu, rng, tile, qtype, layout, rows, k, 1 if tile.shape == "rowgroup" else 11)


@pytest.mark.parametrize("tile", subgroup_cases(TILES), ids=tile_id)
@pytest.mark.parametrize("qtype,layout,act", [(GGMLType.Q4_1, "gguf", "silu"), (GGMLType.Q6_K, "split", "gelu"),
                                              (GGMLType.Q4_K, "gguf", "silu")], ids=case_id)
def test_gated_with_folded_norm(gpu: Gpu, rng, tile: MatmulTile, qtype: GGMLType, layout: str, act: str):
    """MODE 2 with `norm`: act(rmsnorm(x) @ gate^T) * (rmsnorm(x) @ up^T); 21 gate rows put the up half at an odd
    row; x far from unit RMS so a missing normalisation cannot pass."""
    usable(gpu, tile)
    hidden, k, n_tokens, eps = 21, 512, 1 if tile.tokens == 1 and tile.shape == "rowgroup" else 6, 1e-5
    raw, w = random_weight(rng, qtype, 2 * hidden, k)
    x = activations(rng, n_tokens, k, 7.0)
    g = activations(rng, 1, k)[0]
    rec = gpu.recorder(n_tokens)
    y = gpu.poisoned(rec, "y", n_tokens, hidden)
    ops.matmul(rec, upload(gpu, qtype, raw, layout), gpu.act(rec, "x", x), y, mode=ops.GLU, act=act,
               norm=gpu.act(rec, "g", g[None, :]).buffer, eps=eps, tile=tile)
    gpu.run(rec)
    h = x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g
    a, b = h @ w[:hidden].T, h @ w[hidden:].T
    gate = silu(a) if act == "silu" else 0.5 * a * (1 + np.tanh(np.sqrt(2 / np.pi) * (a + 0.044715 * a ** 3)))
    assert_close(gpu.read(y), gate * b, what=f"{tile_id(tile)} {qtype.name} {act}")


@pytest.mark.parametrize("tile", subgroup_cases(TILES), ids=tile_id)
def test_adds_into_residual_with_bias(gpu: Gpu, rng, tile: MatmulTile):
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


@pytest.mark.parametrize("tile", [ROWGROUP[0], ROWGROUP[1], TILED[0]], ids=tile_id)
@pytest.mark.parametrize("qtype", [GGMLType.Q4_1, GGMLType.Q6_K], ids=case_id)
def test_split_layout_in_parts(tiles_gpu: Gpu, rng, tile: MatmulTile, qtype: GGMLType):
    """A weight split over several small bindings (one dispatch per part, each at its y offset), the last tile
    part-filled."""
    usable(tiles_gpu, tile)
    rows, k, n_tokens = split_rows(qtype, 3), split_k(qtype), 9 if tile.shape == "tiled" else 1
    raw, w = random_weight(rng, qtype, rows, k)
    weight = split(tiles_gpu, qtype, raw)
    assert len(weight.parts) > 1
    x = activations(rng, n_tokens, k)
    rec = tiles_gpu.recorder(n_tokens)
    y = tiles_gpu.poisoned(rec, "y", n_tokens, rows)
    ops.matmul(rec, weight, tiles_gpu.act(rec, "x", x), y, tile=tile)
    tiles_gpu.run(rec)
    assert_close(tiles_gpu.read(y), x @ w.T, what=f"split {tile_id(tile)} {qtype.name}")


@pytest.mark.parametrize("reduce", [pytest.param("subgroup", marks=needs("subgroups")), "workgroup"])
def test_rowgroup_grid_past_65535_workgroups(gpu: Gpu, rng, reduce: str):
    """A vocabulary-sized output (70001 rows, one per workgroup) folds its workgroups into z; every row lands."""
    tile = MatmulTile(1, 1, 8, shape="rowgroup", reduce=reduce)
    assert tile.grid(70001, 1) == (65535, 1, 2)
    run_case(gpu, rng, tile, GGMLType.Q8_0, "gguf", 70001, 64, 1)


def test_tiles_refuse_what_workgroup_memory_cannot_hold(gpu: Gpu, rng):
    """A tile whose workgroup memory passes the 16 KiB every adapter offers is refused before compiling."""
    tile = MatmulTile(8, 8, 64, shape="tiled", wg_rows=8)  # 64 rows: 2 x 64 x 128 bytes in the gated mode alone
    raw, _ = random_weight(rng, GGMLType.Q8_0, 42, 64)
    rec = gpu.recorder(8)
    x = gpu.act(rec, "x", activations(rng, 8, 64))
    with pytest.raises(ValueError, match="workgroup memory"):
        ops.matmul(rec, gpu.weight("w", GGMLType.Q8_0, raw), x, gpu.poisoned(rec, "y", 8, 21), mode=ops.GLU,
                   tile=tile)
