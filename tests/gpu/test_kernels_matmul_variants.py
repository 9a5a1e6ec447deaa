"""Every matmul kernel variant (llmchat.gpu.variants.MatmulTile: rows and tokens per invocation, plain or
subgroup-shared loads of x) and every weight layout against float64 numpy, whichever variant this adapter would
choose itself.

Same references and tolerance as test_kernels_matmul.py (gpu_util: |err| <= 1e-5 * max|ref| + 1e-6, outputs
poisoned with NaN first). Row counts are not multiples of rows x workgroup, nor of the split layout's 8-row tiles,
and token counts not multiples of the tile, so clamped rows and tokens at the grid's edges and short last tiles
are exercised; Q8_0 rows of an odd number of blocks put every other row's blocks at 2 mod 4 and so cover both of
its decoder's alignments. The tiles also run in MODE 2 (gated) and with a folded RMSNorm, whose sum of squares the
kernel accumulates while it loads x.

Every type runs in each layout it has (as stored, and the split layout of tensors.split_weight:
rewritten on the GPU after upload, quants and scales apart, in tiles of 8 rows, read from its buffer or from a
texture, tensors.texture_weight) through the tiles CPU emulators choose for decode and prefill and the GPU tile, at
row lengths of real models; the split layout also runs in the embedding lookup and split over several bindings,
whose textures end in part-filled rows.
"""
from __future__ import annotations

import numpy as np
import pytest
from gpu_util import (  # noqa: F401 (gpu, rng, split_gpu and tiles_gpu are fixtures)
    ALL_TYPES, SPLIT_BINDING, TILES_BINDING, Gpu, adapter_only, assert_close, case_id, gpu, needs, random_weight, rng,
    split_gpu, tiles_gpu,
)

from llmchat.gguf.types import BLOCK_LAYOUT, GGMLType
from llmchat.gpu import ops
from llmchat.gpu.device import Texture, texture_bytes
from llmchat.gpu.tensors import (
    SPLIT_TILE, SPLIT_TYPES, split_bytes, split_row_bytes, split_weight, splits, texture_weight,
)
from llmchat.gpu.variants import MatmulTile, subgroup_size, variants

pytestmark = pytest.mark.gpu

# What CPU emulators choose with weights in buffers (8 rows for decode, 8 x 4 or 8 x 8 for prefill, shared or plain
# loads), the GPU decode tile, and smaller tiles with larger workgroups.
TILES = [MatmulTile(*t) for t in [(1, 1, 64, "plain"), (8, 1, 8, "shared"), (8, 1, 8, "plain"), (8, 4, 8, "shared"),
                                  (8, 4, 8, "plain"), (8, 8, 8, "shared"), (8, 8, 8, "plain"), (4, 8, 16, "shared"),
                                  (2, 4, 16, "plain")]]
# What they choose with weights in textures: 16 rows, x shared by the subgroup or (no subgroups: the phone profile)
# loaded by each lane. Run from textures only, where they are chosen (a 16-row kernel compiles slowly on lavapipe).
WIDE = [MatmulTile(*t) for t in [(16, 1, 8, "shared"), (16, 8, 8, "shared"), (16, 4, 8, "shared"),
                                 (16, 1, 8, "plain"), (16, 4, 8, "plain"), (16, 8, 8, "plain")]]


def tile_id(t: MatmulTile) -> str:
    return f"R{t.rows}xT{t.tokens}-wg{t.wg}-{t.xload}"


def usable(gpu: Gpu, tile: MatmulTile) -> None:
    if tile.xload == "shared" and subgroup_size(gpu.device) < 8:
        pytest.skip("shared loads of x need subgroups of at least 8 lanes")


def subgroup_cases(cases: list) -> list:
    """`cases` (tiles, or tuples that start with one) for parametrize, each whose tile works on subgroups (shared
    loads of x, subgroup reductions) marked as needing them, so that no profile without subgroups collects it."""
    def case(c):
        values = c if isinstance(c, tuple) else (c,)
        return pytest.param(*values, marks=needs("subgroups")) if on_subgroups(values[0]) else c
    return [case(c) for c in cases]


def on_subgroups(tile: MatmulTile) -> bool:
    return tile.xload == "shared" or tile.reduce == "subgroup"


def split(gpu: Gpu, qtype: GGMLType, raw: np.ndarray, store: str = "buffer"):
    """`raw` in the split layout, read from its buffers or (`store` "texture") from textures."""
    w = split_weight(gpu.device, gpu.kernels, gpu.weight("w", qtype, raw))
    if store == "buffer":
        return w
    if not gpu.device.textures:
        pytest.skip(f"{gpu.device.info.name}: this device does not hold weights in textures")
    t = texture_weight(gpu.device, w)
    assert t.store == "texture" and all(isinstance(p.buffer, Texture) for p in t.parts)
    assert [p.buffer.size for p in t.parts] == [texture_bytes(p.buffer.size) for p in w.parts]
    return t


def upload(gpu: Gpu, qtype: GGMLType, raw: np.ndarray, layout: str):
    """`raw` as stored ("gguf"), or in the split layout read from buffers ("split") or textures ("texture")."""
    if layout == "gguf":
        return gpu.weight("w", qtype, raw)
    return split(gpu, qtype, raw, "texture" if layout == "texture" else "buffer")


def silu(v: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):  # exp(-v) = inf for large negative v gives the right limit, 0
        return v / (1.0 + np.exp(-v))


def activations(rng: np.random.Generator, rows: int, cols: int, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal((rows, cols)) * scale).astype(np.float32).astype(np.float64)


def layouts(qtypes) -> list[tuple[GGMLType, str]]:
    return [(q, "gguf") for q in qtypes] + [(q, store) for store in ("split", "texture") for q in qtypes
                                            if q in SPLIT_TYPES]


# Every tile with Q4_1 and Q8_0 (the decoders written for speed) in both layouts, and a K-quant as stored.
SHAPES = {GGMLType.Q4_1: (75, 192, 11), GGMLType.Q8_0: (37, 160, 3), GGMLType.Q4_K: (19, 256, 9)}
CASES = ([(t, q, layout) for t in TILES for q, layout in layouts([GGMLType.Q4_1, GGMLType.Q8_0])]
         + [(t, q, "texture") for t in WIDE for q in (GGMLType.Q4_1, GGMLType.Q8_0)]
         + [(TILES[1], GGMLType.Q4_K, "gguf"), (TILES[3], GGMLType.Q4_K, "gguf")])


@pytest.mark.parametrize("tile,qtype,layout", subgroup_cases(CASES),
                         ids=lambda v: tile_id(v) if isinstance(v, MatmulTile) else case_id(v))
def test_tile_matches_reference(gpu: Gpu, rng, tile: MatmulTile, qtype: GGMLType, layout: str):
    usable(gpu, tile)
    rows, k, n_tokens = SHAPES[qtype]
    raw, w = random_weight(rng, qtype, rows, k)
    x = activations(rng, n_tokens, k)
    rec = gpu.recorder(n_tokens)
    y = gpu.poisoned(rec, "y", n_tokens, rows)
    ops.matmul(rec, upload(gpu, qtype, raw, layout), gpu.act(rec, "x", x), y, tile=tile)
    gpu.run(rec)
    assert_close(gpu.read(y), x @ w.T, what=f"{tile_id(tile)} {qtype.name} {layout} {rows}x{k} T={n_tokens}")


def model_shape(qtype: GGMLType) -> tuple[int, int]:
    """(rows, k): row lengths of SmolLM2-135M and Gemma 3 270M (hidden sizes 576 and 640 for 32-element blocks,
    ffn sizes 1536 and 2048 for K-quant super-blocks), alternating between types; row counts that are multiples
    of neither the 64 rows of a workgroup nor the 8 rows of a split tile."""
    first = ALL_TYPES.index(qtype) % 2 == 0
    if BLOCK_LAYOUT[qtype][0] == 256:
        return (147, 1536) if first else (83, 2048)
    return (195, 576) if first else (99, 640)


MODEL_CASES = ([(t, q, layout) for t in (TILES[1], TILES[4], TILES[0]) for q, layout in layouts(ALL_TYPES)]
               + [(t, q, "texture") for t in WIDE[:2] for q in SPLIT_TYPES])


@adapter_only
@pytest.mark.parametrize("tile,qtype,layout", subgroup_cases(MODEL_CASES),
                         ids=lambda v: tile_id(v) if isinstance(v, MatmulTile) else case_id(v))
def test_every_type_and_layout_at_model_shapes(gpu: Gpu, rng, qtype: GGMLType, layout: str, tile: MatmulTile):
    """The decode and prefill tiles of CPU emulators (8 and 16 rows) and the GPU tile, for every type in each
    layout it has."""
    usable(gpu, tile)
    rows, k = model_shape(qtype)
    n_tokens = 1 if tile.tokens == 1 else 11
    raw, w = random_weight(rng, qtype, rows, k)
    x = activations(rng, n_tokens, k)
    rec = gpu.recorder(n_tokens)
    y = gpu.poisoned(rec, "y", n_tokens, rows)
    ops.matmul(rec, upload(gpu, qtype, raw, layout), gpu.act(rec, "x", x), y, tile=tile)
    gpu.run(rec)
    assert_close(gpu.read(y), x @ w.T, what=f"{tile_id(tile)} {qtype.name} {layout} {rows}x{k} T={n_tokens}")


def split_k(qtype: GGMLType) -> int:
    """A row length of a few blocks, so the small bindings of `tiles_gpu` hold a few tiles."""
    return 256 if BLOCK_LAYOUT[qtype][0] == 256 else 160


def split_rows(qtype: GGMLType, extra: int) -> int:
    """Rows filling two bindings of `tiles_gpu` with whole split tiles, then `extra` more: at least three bindings,
    one ending in a part-filled tile."""
    per_part = TILES_BINDING // split_row_bytes(qtype, split_k(qtype))
    return 2 * (per_part - per_part % SPLIT_TILE) + extra


@pytest.mark.parametrize("store", ["buffer", "texture"])
@pytest.mark.parametrize("tile", [TILES[0], TILES[1], TILES[4]], ids=tile_id)
@pytest.mark.parametrize("qtype", list(SPLIT_TYPES), ids=case_id)
def test_split_layout_in_parts_matches_reference(tiles_gpu: Gpu, rng, tile: MatmulTile, qtype: GGMLType,
                                                 store: str):
    """The split layout through decode, prefill and GPU tiles, on a device whose bindings hold a few tiles each:
    whole 8-row tiles in every binding, the last one padded."""
    usable(tiles_gpu, tile)
    rows, k, n_tokens = split_rows(qtype, 3), split_k(qtype), 9 if tile.tokens > 1 else 1
    raw, w = random_weight(rng, qtype, rows, k)
    weight = split(tiles_gpu, qtype, raw, store)
    assert weight.layout == "split" and len(weight.parts) >= 3
    assert weight.row_bytes == split_row_bytes(qtype, k) and weight.row_bytes % 16 == 0
    assert weight.nbytes == sum(split_bytes(p.rows, weight.row_bytes) for p in weight.parts)
    assert max(split_bytes(p.rows, weight.row_bytes) for p in weight.parts) <= TILES_BINDING
    x = activations(rng, n_tokens, k)
    rec = tiles_gpu.recorder(n_tokens)
    y = tiles_gpu.poisoned(rec, "y", n_tokens, rows)
    ops.matmul(rec, weight, tiles_gpu.act(rec, "x", x), y, tile=tile)
    tiles_gpu.run(rec)
    assert_close(tiles_gpu.read(y), x @ w.T, what=f"split {tile_id(tile)} {qtype.name}")


@pytest.mark.parametrize("store", ["buffer", "texture"])
@pytest.mark.parametrize("qtype", list(SPLIT_TYPES), ids=case_id)
def test_split_layout_embedding(tiles_gpu: Gpu, rng, qtype: GGMLType, store: str):
    """A table in the split layout (a tied output projection) still serves embedding lookups, scale included, when
    split over several bindings (as Gemma 3's table of 262144 rows is on 128 MiB bindings): the first and last
    row of the table and of its part-filled last tile, and rows at the ends of a binding."""
    rows, k = split_rows(qtype, 5), split_k(qtype)
    raw, w = random_weight(rng, qtype, rows, k)
    weight = split(tiles_gpu, qtype, raw, store)
    assert len(weight.parts) >= 3
    second = weight.parts[1].row_start
    ids = [rows - 1, 0, second - 1, second, rows - 5, second, rows - 3]
    rec = tiles_gpu.recorder(len(ids))
    y = tiles_gpu.poisoned(rec, "y", len(ids), k)
    ops.embed(rec, weight, tiles_gpu.tokens(ids), y, scale=0.5)
    tiles_gpu.run(rec)
    assert_close(tiles_gpu.read(y), w[ids] * 0.5, what=qtype.name)


@pytest.mark.parametrize("qtype", list(SPLIT_TYPES), ids=case_id)
def test_split_layout_needs_a_tile_per_binding(split_gpu: Gpu, rng, qtype: GGMLType):
    """Where a tile of 8 rows does not fit in one binding a weight keeps the GGUF layout (`splits` says so, and the
    model loader asks it); split_weight refuses it with a clear error rather than writing a layout kernels misread."""
    k = 256  # split rows of 160 to 288 bytes: a tile is larger than the 1 KiB bindings of split_gpu
    assert not splits(qtype, k, SPLIT_BINDING) and splits(qtype, k, 128 << 20)
    assert not splits(GGMLType.Q2_K, 256, 128 << 20)  # a type without a split layout
    raw, _ = random_weight(rng, qtype, 2, k)
    with pytest.raises(ValueError, match="keep the GGUF layout"):
        split_weight(split_gpu.device, split_gpu.kernels, split_gpu.weight("w", qtype, raw))


# 21 gate rows: the up half starts at an odd row, inside a split tile; 24: on a tile boundary, where the up rows
# share side words too (GLU_ALIGNED).
GATED = ([(t, GGMLType.Q4_1, "gguf", 21) for t in TILES] + [(t, GGMLType.Q4_1, "split", 21) for t in TILES[1:5:3]]
         + [(t, q, store, 21) for t in TILES[1:5:3] for q in (GGMLType.Q5_0, GGMLType.Q6_K)
            for store in ("split", "texture")]
         + [(WIDE[1], q, "texture", 21) for q in (GGMLType.Q5_0, GGMLType.Q6_K)]
         + [(t, q, "texture", 24) for t in (WIDE[0], WIDE[1]) for q in (GGMLType.Q8_0, GGMLType.Q5_0)])


@pytest.mark.parametrize("tile,qtype,layout,hidden", subgroup_cases(GATED),
                         ids=lambda v: tile_id(v) if isinstance(v, MatmulTile) else case_id(v))
def test_tile_gated_with_folded_norm(gpu: Gpu, rng, tile: MatmulTile, qtype: GGMLType, layout: str, hidden: int):
    """MODE 2 with `norm`: silu(rmsnorm(x) @ gate^T) * (rmsnorm(x) @ up^T), `hidden` gate rows; x far from unit
    RMS so a missing normalisation cannot pass."""
    usable(gpu, tile)
    k, n_tokens, eps = 256, 6, 1e-5
    raw, w = random_weight(rng, qtype, 2 * hidden, k)
    x = activations(rng, n_tokens, k, 7.0)
    g = activations(rng, 1, k)[0]
    rec = gpu.recorder(n_tokens)
    y = gpu.poisoned(rec, "y", n_tokens, hidden)
    ops.matmul(rec, upload(gpu, qtype, raw, layout), gpu.act(rec, "x", x), y, mode=ops.GLU,
               norm=gpu.act(rec, "g", g[None, :]).buffer, eps=eps, tile=tile)
    gpu.run(rec)
    h = x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g
    assert_close(gpu.read(y), silu(h @ w[:hidden].T) * (h @ w[hidden:].T), what=f"{tile_id(tile)} {qtype.name}")


@pytest.mark.parametrize("tile", subgroup_cases(TILES[:4]), ids=tile_id)
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
        assert t in TILES + WIDE if v.software else t.rows == 1, t


def test_only_swiftshader_keeps_gated_units_apart():
    """SwiftShader's serial compiler makes the gated kernel cost more at load than it saves (Variants.fuse_gated);
    every other adapter stacks gate and up. A plan made from the adapter's description agrees with the device."""
    from llmchat.gpu.device import AdapterInfo
    from llmchat.gpu.variants import planned
    for name, vendor, fused in [("swiftshader", "google", False), ("SwiftShader Device (Subzero)", "", False),
                                ("llvmpipe (LLVM 15.0.6, 256 bits)", "", True), ("NVIDIA GeForce RTX 4090", "", True)]:
        info = AdapterInfo(name=name, backend="test", vendor=vendor, software="nvidia" not in name.lower())
        assert planned(info).fuse_gated is fused, name
