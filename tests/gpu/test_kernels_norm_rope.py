"""RMSNorm (shaders/rmsnorm.wgsl) and RoPE + KV-cache store (shaders/rope_store.wgsl) against float64 numpy.

Tolerances:
- RMSNorm: |err| <= 1e-5 * max|ref| (f32 sums of squares over up to 8192 elements drift by a few ulps).
- RoPE: |err| <= 2e-6 * max|x| at every position, 1M included. The shader reduces pos * frequency modulo one
  turn in exact integer arithmetic, so the error is that of one f32 sin/cos and one rotation, independent of the
  position; an angle formed in f32 radians would already be off by up to 2e-3 at position 32k (checked below).
  With GPU-held frequency factors the turn count is divided in f32; for the llama3 factors used here that keeps
  the error under 5e-6 * max|x| up to position 32k (measured: 8e-7; without factors 2e-7).
Outputs are poisoned with NaN before each run, and programs are recorded for more tokens than the step runs, so
the rows past the step's token count must stay untouched.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import reference_ops as ref
from gpu_util import Gpu, assert_close, gpu, needs, rng  # noqa: F401 (gpu and rng are fixtures)
from paged_cache import PagedCache, slots_for, token_infos, upload

from llmchat.gguf.config import AttentionShape, Rope
from llmchat.gguf.types import GGMLType
from llmchat.gpu import ops
from llmchat.gpu.tensors import Piece, upload_weight

pytestmark = pytest.mark.gpu

NORM_REL = 1e-5
ROPE_ABS = 2e-6  # times max|x|
ROPE_FACTORS_ABS = 5e-6  # times max|x|


def f32(a: np.ndarray) -> np.ndarray:
    """Values rounded to f32 and held as float64, so the reference sees exactly what the GPU sees."""
    return np.asarray(a, np.float32).astype(np.float64)


# -- RMSNorm ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("wg", [8, 64], ids=["wg8", "wg64"])
@pytest.mark.parametrize("n_tokens,dim", [(1, 576), (7, 100), (3, 8192), (2, 4), (65, 1000)])
def test_rmsnorm_matches_reference(gpu: Gpu, rng, monkeypatch, n_tokens: int, dim: int, wg: int):
    """Rows shorter and longer than the workgroup, not multiples of it; one token per workgroup, of the CPU
    adapters' size and of the GPUs'."""
    monkeypatch.setattr(ops, "NORM_WG", wg)
    monkeypatch.setattr(ops, "NORM_WG_SOFTWARE", wg)
    x = f32(rng.standard_normal((n_tokens, dim)) * rng.uniform(0.1, 10, (n_tokens, 1)))
    g = f32(rng.standard_normal(dim))
    rec = gpu.recorder(n_tokens)
    rows = slots_for(n_tokens)
    xa, ya = gpu.act(rec, "x", np.vstack([x, np.zeros((rows - n_tokens, dim))])), gpu.poisoned(rec, "y", rows, dim)
    ops.rmsnorm(rec, xa, upload(gpu, g.astype(np.float32), "g"), ya, 1e-5)
    gpu.run(rec)
    got = gpu.read(ya)
    assert_close(got[:n_tokens], ref.rmsnorm(x, g, 1e-5), rel=NORM_REL, abs_=0.0)
    assert np.isnan(got[n_tokens:]).all(), "rows past the step's token count were written"


def test_rmsnorm_eps_and_f32_weight(gpu: Gpu, rng):
    """eps dominates rows of tiny values; the weight may be an uploaded F32 GGUF tensor."""
    dim = 320
    x = f32(rng.standard_normal((3, dim)) * np.array([[1e-4], [1.0], [3e-3]]))
    g = f32(rng.standard_normal(dim))
    weight = upload_weight(gpu.device, "attn_norm.weight", GGMLType.F32, dim,
                           [Piece.of(1, g.astype(np.float32).tobytes())])
    rec = gpu.recorder(3)
    ya = gpu.poisoned(rec, "y", 3, dim)
    ops.rmsnorm(rec, gpu.act(rec, "x", x), weight, ya, 1e-5)
    gpu.run(rec)
    got = gpu.read(ya)
    for r in range(3):
        assert_close(got[r], ref.rmsnorm(x[r], g, 1e-5), rel=NORM_REL, abs_=0.0, what=f"row {r}")


def test_rmsnorm_per_head_in_place(gpu: Gpu, rng):
    """q/k norms: each head of the k part of qkv normalised on its own, in place, the rest of the row untouched."""
    n_head, n_kv, hd, n_tokens = 4, 2, 64, 5
    qkv = f32(rng.standard_normal((n_tokens, (n_head + 2 * n_kv) * hd)))
    g = f32(rng.standard_normal(hd))
    rec = gpu.recorder(n_tokens)
    qa = gpu.act(rec, "qkv", qkv)
    ops.rmsnorm(rec, qa, upload(gpu, g.astype(np.float32), "k_norm"), qa, 1e-6, dim=hd, groups=n_kv,
                offset=n_head * hd)
    gpu.run(rec)
    want = qkv.copy()
    k = slice(n_head * hd, (n_head + n_kv) * hd)
    want[:, k] = ref.rmsnorm(qkv[:, k].reshape(n_tokens, n_kv, hd), g, 1e-6).reshape(n_tokens, -1)
    assert_close(gpu.read(qa), want, rel=NORM_REL, abs_=0.0)


@pytest.mark.parametrize("n_head,n_kv,hd", [(4, 2, 64), (4, 1, 256), (9, 3, 64), (1, 1, 8)])
def test_qk_norm_gives_q_and_k_heads_their_own_weights(gpu: Gpu, rng, n_head: int, n_kv: int, hd: int):
    """qk_norm: every q head normalised with the q weight and every k head with the k weight in one dispatch,
    in place; v untouched."""
    n_tokens = 3
    qkv = f32(rng.standard_normal((n_tokens, (n_head + 2 * n_kv) * hd)) * rng.uniform(0.1, 10, (n_tokens, 1)))
    gq, gk = f32(rng.standard_normal(hd)), f32(rng.standard_normal(hd))
    rec = gpu.recorder(n_tokens)
    qa = gpu.act(rec, "qkv", qkv)
    ops.qk_norm(rec, qa, upload(gpu, gq.astype(np.float32), "q_norm"), upload(gpu, gk.astype(np.float32), "k_norm"),
                1e-6, AttentionShape(n_head, n_kv, hd, scale=hd ** -0.5))
    assert len(rec.dispatches) == 1
    gpu.run(rec)
    want = qkv.copy()
    for heads, start, g in ((n_head, 0, gq), (n_kv, n_head * hd, gk)):
        part = slice(start, start + heads * hd)
        want[:, part] = ref.rmsnorm(qkv[:, part].reshape(n_tokens, heads, hd), g, 1e-6).reshape(n_tokens, -1)
    assert_close(gpu.read(qa), want, rel=NORM_REL, abs_=0.0)


def test_rmsnorm_adds_into_the_residual_stream(gpu: Gpu, rng):
    """Gemma's post-norms: y += rmsnorm(x) * g, rows past the step untouched."""
    n_tokens, dim = 3, 640
    x, y0 = f32(rng.standard_normal((n_tokens, dim))), f32(rng.standard_normal((n_tokens + 1, dim)))
    g = f32(rng.standard_normal(dim))
    rec = gpu.recorder(n_tokens)
    ya = gpu.act(rec, "y", y0)
    ops.rmsnorm(rec, gpu.act(rec, "x", x), upload(gpu, g.astype(np.float32), "post_norm"), ya, 1e-6, add=True)
    gpu.run(rec)
    got = gpu.read(ya)
    assert_close(got[:n_tokens], y0[:n_tokens] + ref.rmsnorm(x, g, 1e-6), rel=NORM_REL, abs_=0.0)
    assert (got[n_tokens] == y0[n_tokens].astype(np.float32)).all()
    with pytest.raises(ValueError, match="cannot also read"):
        ops.rmsnorm(rec, ya, upload(gpu, g.astype(np.float32), "g"), ya, 1e-6, add=True)


def test_rmsnorm_without_weight(gpu: Gpu, rng):
    """Gemma 4's value norm: per-head RMSNorm with no weight, in place on the v part of qkv."""
    n_head, n_kv, hd, n_tokens = 4, 2, 32, 3
    qkv = f32(rng.standard_normal((n_tokens, (n_head + 2 * n_kv) * hd)) * 3)
    rec = gpu.recorder(n_tokens)
    qa = gpu.act(rec, "qkv", qkv)
    ops.rmsnorm(rec, qa, None, qa, 1e-6, dim=hd, groups=n_kv, offset=(n_head + n_kv) * hd)
    gpu.run(rec)
    want = qkv.copy()
    v = slice((n_head + n_kv) * hd, None)
    want[:, v] = ref.rmsnorm(qkv[:, v].reshape(n_tokens, n_kv, hd), np.ones(hd), 1e-6).reshape(n_tokens, -1)
    assert_close(gpu.read(qa), want, rel=NORM_REL, abs_=0.0)


# -- RoPE + store ----------------------------------------------------------------------------------------------------

def llama3_factors(rope_dim: int, freq_base: float, factor: float = 8.0, low: float = 1.0, high: float = 4.0,
                   original_context: int = 8192) -> np.ndarray:
    """The frequency divisors llama3 models store as `rope_freqs.weight`."""
    inv_freq = freq_base ** (-np.arange(0, rope_dim, 2) / rope_dim)
    wavelen = 2 * math.pi / inv_freq
    smooth = np.clip((original_context / wavelen - low) / (high - low), 0.0, 1.0)
    return f32(1.0 / ((1.0 - smooth) / factor + smooth))


def run_rope(g: Gpu, rng: np.random.Generator, infos: list[tuple[int, int]], *, n_head: int, n_kv: int, hd: int,
             rope_dim: int, neox: bool, freq_base: float = 10000.0, freq_scale: float = 1.0,
             factors: np.ndarray | None = None, tol: float = ROPE_ABS, kv_type: str = "f32") -> None:
    """rope_store for tokens at (slot, position) `infos`; checks qkv and the whole cache against the reference.
    An f16 cache must hold the reference's values rounded to f16, within one f16 unit (2^-10 relative): the GPU's
    f32 rotation and numpy's f64 one may round to neighbouring f16 values."""
    n_tokens = len(infos)
    slots = sorted({s for s, _ in infos})
    max_blocks = max(p for _, p in infos) // 16 + 1
    cache = PagedCache.scattered(rng, {s: [p for t, p in infos if t == s] for s in slots}, n_slots=max(slots) + 1,
                                 max_blocks=max_blocks, n_kv_head=n_kv, head_dim=hd, kv_type=kv_type)
    heads = n_head + 2 * n_kv
    qkv = f32(rng.standard_normal((n_tokens, heads * hd)))
    rec = g.recorder(n_tokens)
    rows = slots_for(n_tokens)
    qa = g.act(rec, "qkv", np.vstack([qkv, np.full((rows - n_tokens, heads * hd), np.nan)]))
    layer = cache.upload(g)
    freqs = None if factors is None else upload(g, factors.astype(np.float32), "rope_freqs")
    shape = AttentionShape(n_head, n_kv, hd, scale=hd ** -0.5, rope=Rope(rope_dim, freq_base, freq_scale, neox=neox))
    ops.rope_store(rec, qa, token_infos(g, infos, rows), layer, shape, freqs=freqs)
    g.run(rec)

    positions = np.array([p for _, p in infos])
    heads_in = qkv.reshape(n_tokens, heads, hd)
    rotated = ref.rope(heads_in[:, :n_head + n_kv], positions, rope_dim=rope_dim, freq_base=freq_base,
                       freq_scale=freq_scale, neox=neox, factors=factors)
    want = np.concatenate([rotated, heads_in[:, n_head + n_kv:]], axis=1).reshape(n_tokens, -1)
    got = g.read(qa)
    limit = tol * np.abs(qkv).max()
    assert_close(got[:n_tokens], want, rel=0.0, abs_=limit, what="qkv")
    assert np.isnan(got[n_tokens:]).all(), "rows past the step's token count were written"

    want_k, want_v = cache.flat(cache.k.astype(np.float64)), cache.flat(cache.v.astype(np.float64))
    for t, (slot, pos) in enumerate(infos):
        row = cache.rows(slot, pos)
        want_k[row] = want.reshape(n_tokens, heads, hd)[t, n_head:n_head + n_kv]
        want_v[row] = heads_in[t, n_head + n_kv:]
    got_k, got_v = (cache.flat(a).astype(np.float64) for a in cache.read(g, layer))
    for name, got_c, want_c in (("k cache", got_k, want_k), ("v cache", got_v, want_v)):
        written = ~np.isnan(want_c).all(axis=(1, 2))
        assert np.isnan(got_c[~written]).all(), f"{name}: rows that belong to no token were written"
        want_c = want_c[written].astype(cache.np_type).astype(np.float64)
        f16_unit = 0.0 if kv_type == "f32" else 2.0 ** -10 * np.abs(want_c).max()
        assert_close(got_c[written], want_c, rel=0.0, abs_=limit + f16_unit, what=name)


@pytest.mark.parametrize("neox", [False, True], ids=["normal", "neox"])
@pytest.mark.parametrize("hd,rope_dim", [(64, 64), (128, 128), (64, 32), (80, 40)])
def test_rope_store_modes_and_partial_rotation(gpu: Gpu, rng, neox: bool, hd: int, rope_dim: int):
    """Three sequences in shuffled blocks, a prefill run among them; rope_dim < head_dim passes the rest through."""
    infos = [(2, 0), (0, 41), (2, 1), (1, 15), (1, 16)] + [(0, p) for p in range(42, 53)]
    run_rope(gpu, rng, infos, n_head=4, n_kv=2, hd=hd, rope_dim=rope_dim, neox=neox)


@needs("f16")
@pytest.mark.parametrize("hd,rope_dim", [(64, 64), (256, 128)])
def test_rope_store_into_f16_cache(gpu: Gpu, rng, hd: int, rope_dim: int):
    """The f16 cache (adapters with shader-f16): k and v rounded to f16 at their rows, nothing else written."""
    if not gpu.device.info.f16:
        pytest.skip("the adapter has no shader-f16")
    infos = [(2, 0), (0, 41), (2, 1), (1, 15), (1, 16)] + [(0, p) for p in range(42, 53)]
    run_rope(gpu, rng, infos, n_head=4, n_kv=2, hd=hd, rope_dim=rope_dim, neox=True, kv_type="f16")


@pytest.mark.parametrize("neox", [False, True], ids=["normal", "neox"])
def test_rope_large_positions_stay_accurate(gpu: Gpu, rng, neox: bool):
    """Up to position 1M with base 1e6 and a scaled frequency: the error must not grow with the position."""
    infos = [(0, 32767), (1, 32768 + 5), (2, 1_000_003), (0, 20_000), (3, 65535)]
    run_rope(gpu, rng, infos, n_head=3, n_kv=1, hd=128, rope_dim=128, neox=neox, freq_base=1e6, freq_scale=0.25)


def test_rope_frequency_factors(gpu: Gpu, rng):
    """llama3 `rope_freqs` divisors from a GPU buffer, at short and long positions."""
    factors = llama3_factors(128, 500000.0)
    assert (factors == 1).any() and (factors == 8).any() and ((factors > 1) & (factors < 8)).any()
    infos = [(0, 3), (0, 4000), (1, 32000), (1, 9)]
    run_rope(gpu, rng, infos, n_head=4, n_kv=1, hd=128, rope_dim=128, neox=False, freq_base=500000.0,
             factors=factors, tol=ROPE_FACTORS_ABS)


def test_rope_turn_table_beats_f32_radians():
    """The precision argument of the shader, checked on the host: at position 32767 an angle formed in f32
    radians is already wrong by ~1e-3, while the fixed-point turns lose nothing measurable."""
    rope_dim, base, pos = 128, 10000.0, 32767
    exact = ref.rope_angles(np.array([pos]), rope_dim, base)[0]
    inv_freq = np.float32(base) ** (-np.arange(0, rope_dim, 2, dtype=np.float32) / np.float32(rope_dim))
    naive = (np.float32(pos) * inv_freq).astype(np.float64)
    turns = np.array([(pos * f) % 2 ** 64 / 2.0 ** 64 for f in ops.rope_turns(rope_dim, base)])
    wrap = lambda a: (a + math.pi) % (2 * math.pi) - math.pi  # noqa: E731
    assert np.abs(wrap(naive - exact)).max() > 5e-4
    assert np.abs(wrap(turns * 2 * math.pi - exact)).max() < 1e-9


def test_rope_without_store_rotates_q_only(gpu: Gpu, rng):
    """A layer that reads another layer's cache: its q heads rotate, its k and v columns and the caches stay."""
    n_head, n_kv, hd, rope_dim = 4, 1, 64, 64
    infos = [(0, 5), (1, 17), (0, 6)]
    n_tokens = len(infos)
    cache = PagedCache.scattered(rng, {0: [5, 6], 1: [17]}, n_slots=2, max_blocks=2, n_kv_head=n_kv, head_dim=hd)
    heads = n_head + 2 * n_kv
    qkv = f32(rng.standard_normal((n_tokens, heads * hd)))
    rec = gpu.recorder(n_tokens)
    qa = gpu.act(rec, "qkv", qkv)
    layer = cache.upload(gpu)
    shape = AttentionShape(n_head, n_kv, hd, scale=hd ** -0.5, rope=Rope(rope_dim, 10000.0))
    ops.rope_store(rec, qa, token_infos(gpu, infos, n_tokens), layer, shape, store=False)
    gpu.run(rec)
    heads_in = qkv.reshape(n_tokens, heads, hd)
    rotated = ref.rope(heads_in[:, :n_head], np.array([p for _, p in infos]), rope_dim=rope_dim, freq_base=10000.0,
                       freq_scale=1.0, neox=True, factors=None)
    got = gpu.read(qa)
    assert_close(got[:, :n_head * hd], rotated.reshape(n_tokens, -1), rel=0.0, abs_=ROPE_ABS * np.abs(qkv).max())
    assert (got[:, n_head * hd:] == qkv[:, n_head * hd:]).all(), "k or v columns changed"
    got_k, got_v = cache.read(gpu, layer)
    for name, got_c, was in (("k", got_k, cache.k), ("v", got_v, cache.v)):
        assert np.array_equal(got_c, was.astype(np.float32), equal_nan=True), f"the {name} cache was written"


def test_rope_proportional_factors(gpu: Gpu, rng):
    """Gemma 4's global layers: frequencies over the whole head, the last pairs held still by divisors of 1e30."""
    hd = 128
    factors = f32(np.array([1.0] * 16 + [1e30] * (hd // 2 - 16)))
    infos = [(0, 3), (0, 4000), (1, 32000), (1, 9)]
    run_rope(gpu, rng, infos, n_head=2, n_kv=1, hd=hd, rope_dim=hd, neox=True, freq_base=1e6, factors=factors,
             tol=ROPE_FACTORS_ABS)
