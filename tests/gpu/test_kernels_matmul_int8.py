"""Matmuls in 8-bit integers (MatmulTile.dot "i8", shaders/matmul_dot_i8.wgsl: dot4I8Packed) against numpy, for
every type that has them (variants.INT8_TYPES) in both weight layouts, decode (1 token) and prefill (5, 13, 64
tokens), at SmolLM2's row length with a row count that is not a multiple of any tile. The adapter's own tiles run on
the adapter as it is and under the phone profile (plain loads of x); the rest, whose kernels do not depend on the
profile, on the adapter as it is.

Two references, two tolerances:
- a numpy model of exactly the kernel's rounding (gpu_util.round_blocks: each 32-element block of x as integers
  round(x / d), d = max|x| / 127, times d as f16), times the float64 weights: |err| <= 1e-5 * max|ref| + 1e-6, the
  f32 kernels' tolerance (gpu_util), because integer products of the same integers differ from it only in the
  order of float additions. Random f32 x does hit exact ties (x / d = 48.5), which an f32 division on the GPU and
  numpy's may round apart, one step of d in one element; test inputs are moved 0.01 d off them (`off_ties`);
- the exact product x @ W^T in float64: per output, |err| <= sum_j |W_j| * |x_j - rounded x_j| (what the 8-bit
  rounding of x can move it by, computed from the same x) plus the f32 tolerance; and the rounding must show (an
  error above 1e-4 of max|ref|), so these really are the rounded numbers, as llama.cpp's are.
"""
from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
from gpu_util import (  # noqa: F401 (adapter_gpu, gpu and rng are fixtures)
    Gpu, adapter_gpu, assert_close, case_id, gpu, random_weight, rng, round_blocks,
)

from llmchat.errors import ShaderError
from llmchat.gguf.types import GGMLType
from llmchat.gpu import ops, tune
from llmchat.gpu.kernels import Kernels
from llmchat.gpu.tensors import SPLIT_TYPES, split_weight
from llmchat.gpu.variants import INT8_TYPES, MatmulTile, variants

pytestmark = pytest.mark.gpu

ROWS = 75  # not a multiple of 8 (CPU tiles, split-layout tiles) nor of 2 (GPU row-group tiles)
K = {GGMLType.Q4_0: 576, GGMLType.Q4_1: 576, GGMLType.Q8_0: 544}  # Q8_0: an odd count of blocks, both alignments
TYPES = sorted(INT8_TYPES, key=int)


def needs_int8(gpu: Gpu) -> None:
    if not gpu.device.info.dot4i8:
        pytest.skip(f"{gpu.device.info.name} has no packed_4x8_integer_dot_product")


def upload(gpu: Gpu, qtype: GGMLType, raw: np.ndarray, layout: str):
    w = gpu.weight("w", qtype, raw)
    return split_weight(gpu.device, gpu.kernels, w) if layout == "split" else w


def off_ties(x: np.ndarray) -> np.ndarray:
    """x with every element whose x / d lies within 0.005 of a rounding tie moved 0.01 d up (never past the
    block's largest magnitude, whose x / d is +-127: d stays the same)."""
    blocks = x.reshape(x.shape[0], -1, 32)
    d = (np.abs(blocks).max(-1, keepdims=True) / 127.0).astype(np.float32).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        q = np.where(d > 0, blocks / np.where(d > 0, d, 1), 0.0)
    near = np.abs(q - np.floor(q) - 0.5) < 0.005
    return np.where(near, blocks + 0.01 * d, blocks).reshape(x.shape).astype(np.float32).astype(np.float64)


def activations(rng: np.random.Generator, n_tokens: int, k: int) -> np.ndarray:
    return off_ties(rng.standard_normal((n_tokens, k)).astype(np.float32).astype(np.float64))


def check(got: np.ndarray, x: np.ndarray, w: np.ndarray, what: str) -> None:
    """Both references of the module docstring."""
    xr = round_blocks(x)
    assert_close(got, xr @ w.T, what=f"{what} vs the 8-bit model")
    exact = x @ w.T
    bound = np.abs(x - xr) @ np.abs(w).T + 1e-5 * np.abs(exact).max() + 1e-6
    err = np.abs(got - exact)
    assert (err <= bound).all(), f"{what}: error {err.max():.3g} beyond what rounding x allows ({bound.max():.3g})"
    assert err.max() > 1e-4 * np.abs(exact).max(), f"{what}: no trace of 8-bit activations"


def layouts() -> list[str]:
    return ["gguf", "split"]


# The adapter's own tiles (CPU emulators: 8 rows, shared x loads where subgroups allow) with int8 products.
@pytest.mark.parametrize("n_tokens", [1, 5, 13, 64])
@pytest.mark.parametrize("layout", layouts())
@pytest.mark.parametrize("qtype", TYPES, ids=case_id)
def test_adapter_tile(gpu: Gpu, rng, qtype: GGMLType, layout: str, n_tokens: int):
    needs_int8(gpu)
    assert qtype in SPLIT_TYPES or layout == "gguf"
    raw, w = random_weight(rng, qtype, ROWS, K[qtype])
    x = activations(rng, n_tokens, K[qtype])
    x[0, 32:64] = 0.0  # an all-zero block: scale 0, integers 0
    tile = variants(gpu.device).matmul(n_tokens).int8()
    rec = gpu.recorder(n_tokens)
    y = gpu.poisoned(rec, "y", n_tokens, ROWS)
    ops.matmul(rec, upload(gpu, qtype, raw, layout), gpu.act(rec, "x", x), y, tile=tile)
    gpu.run(rec)
    check(gpu.read(y), x, w, f"{qtype.name}/{layout} {tile}")


# The GPU tiles (row groups; a tiled prefill tile becomes a row-group one, MatmulTile.int8), as stored.
@pytest.mark.parametrize("tile,n_tokens", [(MatmulTile(2, 1, 32, shape="rowgroup", reduce="workgroup"), 1),
                                           (MatmulTile(2, 4, 64, shape="tiled", wg_rows=16), 13)],
                         ids=["rowgroup-decode", "tiled-prefill"])
@pytest.mark.parametrize("qtype", TYPES, ids=case_id)
def test_gpu_tiles(adapter_gpu: Gpu, rng, qtype: GGMLType, tile: MatmulTile, n_tokens: int):
    gpu = adapter_gpu
    needs_int8(gpu)
    raw, w = random_weight(rng, qtype, ROWS, K[qtype])
    x = activations(rng, n_tokens, K[qtype])
    rec = gpu.recorder(n_tokens)
    y = gpu.poisoned(rec, "y", n_tokens, ROWS)
    ops.matmul(rec, gpu.weight("w", qtype, raw), gpu.act(rec, "x", x), y, tile=tile.int8())
    gpu.run(rec)
    check(gpu.read(y), x, w, f"{qtype.name} {tile.int8()}")


def test_gated_unit_with_folded_norm(adapter_gpu: Gpu, rng):
    """MODE 2 (act(gate . x) * (up . x)) with the RMSNorm folded in: x * g is rounded, 1 / rms applied after."""
    gpu = adapter_gpu
    needs_int8(gpu)
    n_tokens, k, rows = 5, 576, 2 * 37
    raw, w = random_weight(rng, GGMLType.Q4_1, rows, k)
    g = rng.standard_normal(k).astype(np.float32).astype(np.float64)
    x = (off_ties(activations(rng, n_tokens, k) * g) / g).astype(np.float32).astype(np.float64)  # x * g off ties
    rec = gpu.recorder(n_tokens)
    y = gpu.poisoned(rec, "y", n_tokens, rows // 2)
    ops.matmul(rec, upload(gpu, GGMLType.Q4_1, raw, "split"), gpu.act(rec, "x", x), y, mode=ops.GLU,
               norm=gpu.act(rec, "g", g[None, :]).buffer, eps=1e-6, tile=variants(gpu.device).matmul(n_tokens).int8())
    gpu.run(rec)
    inv_rms = 1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)
    h = round_blocks(x * g) @ w.T * inv_rms
    gate, up = h[:, :rows // 2], h[:, rows // 2:]
    assert_close(gpu.read(y), gate / (1.0 + np.exp(-gate)) * up)


def test_refused_where_it_has_no_meaning(adapter_gpu: Gpu, rng):
    gpu = adapter_gpu
    raw, _ = random_weight(rng, GGMLType.Q4_K, 8, 256)
    rec = gpu.recorder(1)
    with pytest.raises(ValueError, match="int8 dot products take"):
        ops.matmul(rec, gpu.weight("w", GGMLType.Q4_K, raw), rec.act("x", 1, 256), rec.act("y", 1, 8),
                   tile=MatmulTile(8, 1, 8).int8())
    with pytest.raises(ValueError, match="'i8' in lanes and rowgroup"):
        MatmulTile(2, 4, 64, shape="tiled", wg_rows=16, dot="i8")


def test_tuner_candidates_only_with_rounded_activations(adapter_gpu: Gpu, rng):
    """The tuner's output check (tune._close: 1e-4 of max|ref|) holds int8 products to the f32 tile's numbers: with
    rounded activations (q8_activations) they pass it and are candidates; with f32 activations their rounding is
    over the limit, so they are not offered."""
    gpu = adapter_gpu
    needs_int8(gpu)
    raw, _ = random_weight(rng, GGMLType.Q4_1, 1024, 576)
    w = gpu.weight("blk.0.ffn_down.weight", GGMLType.Q4_1, raw)
    v = variants(gpu.device)
    outputs = {}
    for q8 in (False, True):
        ctx = tune.TuneContext(gpu.device, gpu.kernels, v, {w.name: w}, prefill_tokens=8, q8_activations=q8)
        case = next(c for c in tune.matmul_cases(ctx) if c.family == "matvec")
        assert any(t.dot == "i8" for t in case.candidates) == q8
        for tile in (case.candidates[0], case.candidates[0].int8()):
            program, out, nbytes = case.trial(tile, 1)
            gpu.device.run(program)
            outputs[q8, tile.dot] = tune._floats(gpu.device.read(out, 0, nbytes))
    assert tune._close(outputs[True, "i8"], outputs[True, "f32"])
    assert not tune._close(outputs[False, "i8"], outputs[False, "f32"])


def test_kernels_need_the_language_feature(adapter_gpu: Gpu):
    """A kernel that requires packed_4x8_integer_dot_product is refused where AdapterInfo.dot4i8 is off, and the
    directive goes to the top of the source wherever its file was included (WGSL wants directives first)."""
    info = adapter_gpu.device.info
    source = "const a = 1;\nrequires packed_4x8_integer_dot_product;\n"
    with pytest.raises(ShaderError, match="needs packed_4x8_integer_dot_product, which"):
        Kernels(SimpleNamespace(info=replace(info, dot4i8=False)))._adapt(source, "probe")
    lines = Kernels(SimpleNamespace(info=replace(info, dot4i8=True)))._adapt(source, "probe").splitlines()
    assert lines == ["requires packed_4x8_integer_dot_product;", "const a = 1;"]
