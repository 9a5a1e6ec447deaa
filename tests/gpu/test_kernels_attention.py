"""Paged attention (shaders/attention.wgsl, attention_flash.wgsl + attention_combine.wgsl through `ops.attention`)
against float64 numpy, for every kernel variant (forced) and both KV cache element types.

The cache holds each sequence in shuffled blocks interleaved with other sequences' (tests/support/paged_cache.py); every
row that no visible position owns is NaN, as are the k and v columns of qkv (attention reads k and v from the
cache only), so reading a position outside a token's causal range, another sequence's block or stale qkv data
turns the output into NaN. Outputs are poisoned with NaN; programs are recorded for more tokens than the step runs.
Tolerance: |err| <= 1e-5 * max|ref| (f32 dot products over head_dim and softmax sums over a few hundred positions).
An f16 cache holds f16-rounded values and the reference uses the same values, so the kernels' f32 arithmetic is held
to the same tolerance; test_f16_cache_error_against_f32_values bounds the rounding itself (1e-2).
"""
from __future__ import annotations

import numpy as np
import pytest
import reference_ops as ref
from gpu_util import Gpu, adapter_only, assert_close, gpu, needs, rng  # noqa: F401 (gpu and rng are fixtures)
from paged_cache import PagedCache, slots_for, token_infos

from llmchat.gguf.config import AttentionShape, Rope
from llmchat.gpu import ops
from llmchat.gpu.variants import ATTENTION_KERNELS, ATTN_MIN_RANGE, Variants

pytestmark = pytest.mark.gpu

REL = 1e-5
MAX_CONTEXT = 1024
KV_TYPES = ("f32", pytest.param("f16", marks=needs("f16")))


# Only flash fits its tiles to the device's workgroup memory (ops.flash_shape), which the phone profile lowers; the
# other kernels' shaders are the same under every profile.
@pytest.fixture(params=[k if k == "flash" else pytest.param(k, marks=adapter_only) for k in ATTENTION_KERNELS])
def kernel(request) -> str:
    return request.param


@pytest.fixture(params=KV_TYPES)
def kv_type(request, gpu: Gpu) -> str:
    if request.param == "f16" and not gpu.device.info.f16:
        pytest.skip("the adapter has no shader-f16")
    return request.param


def run_attention(g: Gpu, rng: np.random.Generator, infos: list[tuple[int, int]], *, n_head: int, n_kv: int,
                  hd: int, window: int = 0, softcap: float = 0.0, splits: int | None = None,
                  q_scale: float = 1.0, kernel: str | None = None, kv_type: str = "f32",
                  exact_values: bool = False) -> None:
    """Attention for tokens at (slot, position) `infos`, each sequence's cache filled up to its last position.

    With `exact_values` the reference sees the cache's values before rounding to `kv_type` (tolerance 1e-2)."""
    n_tokens = len(infos)
    slots = sorted({s for s, _ in infos})
    length = {s: max(p for t, p in infos if t == s) + 1 for s in slots}
    max_blocks = MAX_CONTEXT // 16
    cache = PagedCache.scattered(rng, {s: range(n) for s, n in length.items()}, n_slots=max(slots) + 2,
                                 max_blocks=max_blocks, n_kv_head=n_kv, head_dim=hd)
    for s, n in length.items():
        cache.fill(rng, s, n)
    exact, cache = cache, cache.as_type(kv_type)
    q = rng.standard_normal((n_tokens, n_head, hd)).astype(np.float32) * np.float32(q_scale)
    rows = slots_for(n_tokens)
    qkv = np.full((rows, (n_head + 2 * n_kv) * hd), np.nan, np.float32)
    qkv[:n_tokens, :n_head * hd] = q.reshape(n_tokens, -1)
    scale = hd ** -0.5

    rec = g.recorder(n_tokens)
    out = g.poisoned(rec, "out", rows, n_head * hd)
    shape = AttentionShape(n_head, n_kv, hd, scale=scale, window=window, softcap=softcap)
    ops.attention(rec, g.act(rec, "qkv", qkv), token_infos(g, infos, rows), cache.upload(g), out, shape,
                  splits=splits, kernel=kernel)
    g.run(rec)
    got = g.read(out)

    want = np.empty((n_tokens, n_head * hd))
    for s in slots:
        mine = [t for t, (slot, _) in enumerate(infos) if slot == s]
        k, v = (exact if exact_values else cache).history(s, length[s])
        want[mine] = ref.attention(q[mine], k, v, np.array([infos[t][1] for t in mine]), scale=scale,
                                   window=window, softcap=softcap)
    assert_close(got[:n_tokens], want, rel=1e-2 if exact_values else REL, abs_=0.0)
    assert np.isnan(got[n_tokens:]).all(), "rows past the step's token count were written"


# Batched decode: three sequences at different positions (one at 0, one mid-block, one long), slots out of order.
DECODE = [(3, 200), (0, 0), (1, 37)]
# A 37-token prefill chunk of one sequence after 20 cached positions, with a decode token of another sequence.
PREFILL = [(1, 99)] + [(0, p) for p in range(20, 57)]


@pytest.mark.parametrize("n_head,n_kv", [(4, 4), (6, 2), (8, 2)], ids=["mha", "gqa3", "gqa4"])
@pytest.mark.parametrize("hd", [64, 128, 256])
def test_attention_batched_decode(gpu: Gpu, rng, n_head: int, n_kv: int, hd: int, kernel: str, kv_type: str):
    run_attention(gpu, rng, DECODE, n_head=n_head, n_kv=n_kv, hd=hd, kernel=kernel, kv_type=kv_type)


@pytest.mark.parametrize("splits", [None, 1, 3], ids=["auto", "one", "three"])
@pytest.mark.parametrize("n_head,n_kv", [(4, 4), (6, 2), (8, 2)], ids=["mha", "gqa3", "gqa4"])
def test_attention_prefill_chunk(gpu: Gpu, rng, n_head: int, n_kv: int, splits: int | None, kernel: str):
    """Causal among the chunk's own tokens; straight to `out` (one range) and through the combine pass."""
    run_attention(gpu, rng, PREFILL, n_head=n_head, n_kv=n_kv, hd=64, splits=splits, kernel=kernel)


@pytest.mark.parametrize("window", [1, 16, 50])
def test_attention_sliding_window(gpu: Gpu, rng, window: int, kernel: str):
    """Windows of one position (the token itself), one block, and one not aligned to blocks."""
    run_attention(gpu, rng, DECODE + PREFILL[1:], n_head=4, n_kv=2, hd=64, window=window, kernel=kernel)


def test_attention_softcap(gpu: Gpu, rng, kernel: str, kv_type: str):
    """Large scores, so the cap (tanh) changes the weights far from its linear range."""
    run_attention(gpu, rng, DECODE + PREFILL[1:], n_head=4, n_kv=2, hd=128, softcap=5.0, q_scale=8.0, kernel=kernel,
                  kv_type=kv_type)


def test_attention_peaked_scores(gpu: Gpu, rng, kernel: str):
    """Scores spanning hundreds: the online max must keep every exp in range, across ranges too."""
    run_attention(gpu, rng, DECODE, n_head=4, n_kv=1, hd=64, q_scale=40.0, splits=7, kernel=kernel)


# Contexts that are not multiples of a block or a tile: 1, 17, 300 and 1000 positions in one batched step, plus a
# 23-token prefill chunk crossing block edges with a window that crosses them too.
CONTEXTS = [(2, 999), (0, 0), (4, 16), (1, 299)]
CHUNK = [(3, p) for p in range(41, 64)]


@pytest.mark.parametrize("splits", [1, 2, 5, 16, 40], ids=lambda s: f"splits{s}")
def test_attention_contexts_and_splits(gpu: Gpu, rng, kernel: str, kv_type: str, splits: int):
    """Every number of ranges from one to more ranges than a short context has positions (empty ranges)."""
    run_attention(gpu, rng, CONTEXTS + CHUNK, n_head=6, n_kv=2, hd=64, splits=splits, kernel=kernel, kv_type=kv_type)


@pytest.mark.parametrize("shape", [(9, 3, 64), (4, 1, 256), (8, 2, 128), (16, 2, 64)],
                         ids=["smollm2", "gemma3", "gqa4-128", "gqa8"])
def test_attention_real_shapes_windowed(gpu: Gpu, rng, kernel: str, kv_type: str, shape):
    """Real models' head shapes (SmolLM2 9/3x64, Gemma 3 4/1x256) with a window of 37 crossing block edges."""
    n_head, n_kv, hd = shape
    run_attention(gpu, rng, CONTEXTS + CHUNK, n_head=n_head, n_kv=n_kv, hd=hd, window=37, kernel=kernel,
                  kv_type=kv_type)


@needs("f16")
def test_f16_cache_error_against_f32_values(gpu: Gpu, rng, kernel: str):
    """What rounding the cache to f16 costs: within 1e-2 of attention over the unrounded values."""
    if not gpu.device.info.f16:
        pytest.skip("the adapter has no shader-f16")
    run_attention(gpu, rng, CONTEXTS + CHUNK, n_head=6, n_kv=2, hd=128, kernel=kernel, kv_type="f16",
                  exact_values=True)


def test_attention_grid_folds_past_65535_workgroups(gpu: Gpu, rng, monkeypatch):
    """One invocation per workgroup and 128 tokens x 8 heads x 64 ranges: the grid needs a second dimension."""
    monkeypatch.setattr(ops, "ATTN_WG", 1)
    assert ops._grid_1d(128 * 8 * 64, 1) == (65535, 2, 1)
    run_attention(gpu, rng, [(0, p) for p in range(128)], n_head=8, n_kv=2, hd=16, splits=64)


def test_attention_kernel_per_adapter():
    """GPUs run flash attention; CPU emulators decode with the scores kernel and prefill with grouped."""
    gpu, cpu = Variants(software=False, shared_loads=False), Variants(software=True, shared_loads=True)
    assert gpu.attention_kernel("decode") == gpu.attention_kernel("prefill") == "flash"
    assert cpu.attention_kernel("decode") == "scores" and cpu.attention_kernel("prefill") == "grouped"
    assert cpu.attention_candidates("prefill") == ["grouped", "invocation", "flash", "scores"]
    assert cpu.attention_candidates("decode") == ["scores", "invocation", "grouped", "flash"]
    assert gpu.attention_candidates("decode") == ["flash", "invocation", "grouped", "scores"]


def test_scores_kernel_stops_at_its_span(gpu: Gpu, rng, monkeypatch):
    """Past SCORES_MAX_SPAN positions a forced scores kernel is refused, and the adapter's choice of it takes
    grouped (correctly); within it, scores runs."""
    import llmchat.gpu.variants as variants
    calls = []
    scores = ops._attention_scores
    monkeypatch.setattr(ops, "_attention_scores", lambda *a, **k: calls.append(a[7]) or scores(*a, **k))
    monkeypatch.setattr(Variants, "attention_kernel", lambda self, mode="prefill": "scores")
    run_attention(gpu, rng, [(0, 300)], n_head=4, n_kv=1, hd=64)
    assert calls == [MAX_CONTEXT]
    monkeypatch.setattr(variants, "SCORES_MAX_SPAN", MAX_CONTEXT - 1)
    run_attention(gpu, rng, [(0, 300)], n_head=4, n_kv=1, hd=64)
    assert calls == [MAX_CONTEXT]
    with pytest.raises(ValueError, match="scores attention kernel takes at most"):
        run_attention(gpu, rng, [(0, 300)], n_head=4, n_kv=1, hd=64, kernel="scores")


def test_grouped_heads_divide_the_group():
    """A grouped invocation holds the largest share of its kv group's heads that divides it, at most four."""
    assert [ops.grouped_heads(g) for g in (1, 2, 3, 4, 5, 6, 7, 8, 9, 16)] == [1, 2, 3, 4, 1, 3, 1, 4, 3, 4]


def test_flash_shape_shares_tiles_within_workgroup_memory():
    """A kv group's query heads share a workgroup, then prefill tokens as far as 4 KiB of queries allow; the
    workgroup memory stays within WebGPU's default 16 KiB."""
    assert ops.flash_shape(1, 9, 3, 64, 16384) == ops.FlashShape(tokens=1, heads=3, tile=32)
    assert ops.flash_shape(64, 9, 3, 64, 16384) == ops.FlashShape(tokens=5, heads=3, tile=32)
    assert ops.flash_shape(64, 4, 1, 256, 16384) == ops.FlashShape(tokens=1, heads=4, tile=8)
    assert ops.flash_shape(1, 64, 8, 128, 16384).heads == 8
    assert ops.flash_shape(1, 32, 1, 128, 16384).heads == 8  # 32 heads of 128 would overflow: a share of them
    with pytest.raises(ValueError, match="workgroup memory"):
        ops.flash_shape(1, 4, 1, 256, 4096)


def test_flash_splits_follow_the_work():
    """Decode cuts a long context into ranges of at least a tile; prefill, with workgroups enough, takes one."""
    gpu = Variants(software=False, shared_loads=False)
    assert gpu.flash_splits(3, 2048, 32) == 43
    assert gpu.flash_splits(13 * 3, 2048, 32) == 4
    assert gpu.flash_splits(200, 2048, 32) == 1
    assert gpu.flash_splits(1, 40, 32) == 2


def test_attention_splits_follow_the_work():
    """Decode cuts a long context into ranges of at least ATTN_MIN_RANGE positions; prefill and short contexts,
    where tokens and heads alone fill the device, take one range and skip the combine pass."""
    gpu = Variants(software=False, shared_loads=False)
    decode = gpu.attention_splits(1, 9, 2048)
    assert 8 < decode <= 64 and 2048 // decode >= ATTN_MIN_RANGE
    assert gpu.attention_splits(512, 32, 8192) == 1
    assert gpu.attention_splits(4, 9, ATTN_MIN_RANGE) == 1
    cpu = Variants(software=True, shared_loads=True)
    assert cpu.attention_splits(1, 4, 64) == 1 and cpu.attention_splits(1, 1, 64, "grouped") == 2
    assert cpu.attention_splits(1, 1, 2048, "grouped") == 8 and cpu.attention_splits(33, 1, 64, "grouped") == 1


def test_rope_store_then_attention_in_one_program(gpu: Gpu, rng, kernel: str, kv_type: str):
    """The order the model records: rope_store writes this step's k and v, attention reads them in the same run
    (an f16 cache rounds what rope_store writes: the reference rounds the same, within f16's half unit)."""
    n_head, n_kv, hd, base = 6, 2, 64, 10000.0
    infos = [(2, 30), (0, 5), (0, 6), (0, 7), (1, 0)]
    n_tokens = len(infos)
    length = {s: max(p for t, p in infos if t == s) + 1 for s, _ in infos}
    max_blocks = MAX_CONTEXT // 16
    cache = PagedCache.scattered(rng, {s: range(n) for s, n in length.items()}, n_slots=3, max_blocks=max_blocks,
                                 n_kv_head=n_kv, head_dim=hd, kv_type=kv_type)
    step_rows = {(s, p) for s, p in infos}
    for s, n in length.items():
        cache.fill(rng, s, n)  # history; the step's own rows are overwritten with NaN below
        for p in range(n):
            if (s, p) in step_rows:
                row = cache.rows(s, p)
                cache.flat(cache.k)[row] = cache.flat(cache.v)[row] = np.nan
    qkv = rng.standard_normal((n_tokens, (n_head + 2 * n_kv) * hd)).astype(np.float32)

    rec = gpu.recorder(n_tokens)
    qa, out = gpu.act(rec, "qkv", qkv), gpu.poisoned(rec, "out", n_tokens, n_head * hd)
    tokens = token_infos(gpu, infos, n_tokens)
    layer = cache.upload(gpu)
    shape = AttentionShape(n_head, n_kv, hd, scale=hd ** -0.5, rope=Rope(hd, base))
    ops.rope_store(rec, qa, tokens, layer, shape)
    ops.attention(rec, qa, tokens, layer, out, shape, kernel=kernel)
    gpu.run(rec)

    heads = qkv.reshape(n_tokens, -1, hd).astype(np.float64)
    positions = np.array([p for _, p in infos])
    rotated = ref.rope(heads[:, :n_head + n_kv], positions, rope_dim=hd, freq_base=base, neox=True)
    for t, (s, p) in enumerate(infos):
        row = cache.rows(s, p)
        cache.flat(cache.k)[row] = rotated[t, n_head:].astype(cache.np_type)
        cache.flat(cache.v)[row] = heads[t, n_head + n_kv:].astype(cache.np_type)
    want = np.empty((n_tokens, n_head * hd))
    for s in length:
        mine = [t for t, (slot, _) in enumerate(infos) if slot == s]
        k, v = cache.history(s, length[s])
        want[mine] = ref.attention(rotated[mine, :n_head], k, v, positions[mine], scale=hd ** -0.5)
    # f16: the GPU's f32 rotation and numpy's f64 one may round to neighbouring f16 values (2^-11 relative)
    assert_close(gpu.read(out), want, rel=REL if kv_type == "f32" else 2e-3, abs_=0.0)


@pytest.mark.parametrize("splits", [None, 4], ids=["auto", "four"])
def test_attention_long_prefill_chunk_of_wide_heads(gpu: Gpu, rng, splits: int | None, kernel: str):
    """Gemma 3's shape: 4 query heads sharing one kv head of 256, a 42-token chunk at positions 448..489 (one range
    per token ends early on lavapipe, so the adapter's own choice must cut it: Variants.attention_splits)."""
    run_attention(gpu, rng, [(0, p) for p in range(448, 490)], n_head=4, n_kv=1, hd=256, splits=splits, kernel=kernel)
