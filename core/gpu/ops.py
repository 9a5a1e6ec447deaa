"""Operations as the model files use them; each records one or a few dispatches of a kernel family.

These are the only functions that know kernel bindings and `Params` layouts (see shaders/*.wgsl).
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from ..gguf.config import AttentionShape, Rope
from ..gguf.types import GGMLType
from . import kvlayout, variants
from .device import Binding, Buffer, Traffic
from .kernels import wgsl_bool
from .kvlayout import BLOCK_TOKENS, KVLayer
from .recorder import Act, Recorder, cdiv
from .tensors import Weight

STORE, ADD, GLU = 0, 1, 2  # matmul modes: y = Wx, y += Wx, y = silu(W_gate x) * (W_up x)
F32 = 4  # bytes of an f32 value: activations, and the KV cache's elements (kvlayout)


# Weight types whose matmuls llama.cpp feeds 8-bit activations (Recorder.q8_activations emulates that)
QUANTIZED = frozenset(GGMLType) - {GGMLType.F32, GGMLType.F16, GGMLType.BF16}
# Activations of a gated unit (shaders/activation.wgsl)
ACTIVATIONS = {"silu": 0, "gelu": 1, "sigmoid": 2}


def matmul(rec: Recorder, w: Weight, x: Act, y: Act, *, y_offset: int = 0, mode: int = 0, bias=None,
           bias_offset: int = 0, norm=None, eps: float = 0.0, rows_from=None, act: str = "silu",
           tile: variants.MatmulTile | None = None) -> None:
    """y[:, y_offset:y_offset+n] (=, +=) x @ W^T; mode GLU computes act(x @ Wg^T) * (x @ Wu^T) over stacked [Wg; Wu]
    with `act` "silu" or "gelu" (tanh approximation).

    With `norm` (an f32 vector buffer) x is RMS-normalised first: rmsnorm(x, norm, eps) @ W^T, in the same dispatch.
    The number of rows of x to compute is the first u32 of `rows_from` (default: the step's token count).
    `tile` overrides the adapter's choice of kernel variant (variants.py); tests use it to cover every variant.
    """
    if x.cols != w.k:
        raise ValueError(f"'{w.name}' takes rows of {w.k} elements; its input has {x.cols}")
    if mode == GLU and (len(w.parts) > 1 or bias is not None):
        raise ValueError(f"'{w.name}': a gated matmul takes one stacked [gate; up] weight in one binding, no bias")
    glu_rows = w.rows // 2 if mode == GLU else 0
    t = tile or variants.variants(rec.device).matmul(x.rows, w.type.name, textures=w.store == "texture")
    if t.dot == "i8" and w.type not in variants.INT8_TYPES:
        raise ValueError(f"'{w.name}': int8 dot products take {sorted(q.name for q in variants.INT8_TYPES)} "
                         f"weights, not {w.type.name}")
    if t.workgroup_bytes(2 if mode == GLU else 1) > variants.WORKGROUP_BYTES:
        raise ValueError(f"'{w.name}': {t} needs more than {variants.WORKGROUP_BYTES} bytes of workgroup memory")
    kernel = rec.kernels.get("matmul.wgsl", QUANT=w.shader, LAYOUT=w.layout, WEIGHTS=w.store, QUADS=7,
                             **t.values(), MODE=mode,
                             BIAS=wgsl_bool(bias is not None),
                             NORM=wgsl_bool(norm is not None), ACT=ACTIVATIONS[act],
                             GLU_ALIGNED=wgsl_bool(glu_rows % 4 == 0),
                             XQ8=wgsl_bool(rec.q8_activations and w.type in QUANTIZED))
    for part in w.parts:
        n_out = glu_rows if mode == GLU else part.rows
        params = rec.params(w.name, "8IfI", w.k, n_out, w.row_bytes, x.cols, y.cols, y_offset + part.row_start,
                            glu_rows, bias_offset + part.row_start, eps, 0)
        rec.add(kernel, (params, rows_from or rec.step, w.words(part, rec.empty()), x.buffer, y.buffer,
                         bias or rec.empty(), norm or rec.empty(), part.buffer), t.grid(n_out, x.rows),
                _matmul_traffic(w, part.rows, x, n_out, mode, bias is not None, norm is not None))


def _matmul_traffic(w: Weight, rows: int, x: Act, n_out: int, mode: int, bias: bool, norm: bool) -> Traffic:
    """A matmul part reads its weight rows once, x, and the bias, norm and (adding) y vectors; it writes y."""
    out = x.rows * n_out * F32
    vectors = (n_out if bias else 0) + (x.cols if norm else 0)
    return Traffic(weights=rows * w.row_bytes, writes=out,
                   reads=x.rows * x.cols * F32 + vectors * F32 + (out if mode == ADD else 0))


def embed(rec: Recorder, w: Weight, tokens, y: Act, scale: float = 1.0) -> None:
    """y[t] = W[id of token t] * scale; each part of a split table fills the tokens whose rows it holds."""
    kernel = rec.kernels.get("embed.wgsl", QUANT=w.shader, LAYOUT=w.layout, WEIGHTS=w.store, QUADS=5)
    for part in w.parts:
        params = rec.params(w.name, "4If", w.k, w.row_bytes, part.row_start, part.rows, scale)
        # Each token's row lies in one part: a part is charged its expected share of the rows, tokens spread over
        # the table.
        share = part.rows / w.rows
        rec.add(kernel, (params, rec.step, w.words(part, rec.empty()), tokens, y.buffer, part.buffer),
                (cdiv(w.k // 32, 64), y.rows, 1),
                Traffic(weights=round(y.rows * w.row_bytes * share), reads=y.rows * 16,
                        writes=round(y.rows * w.k * F32 * share)))




def gather_rows(rec: Recorder, x: Act, rows, y: Act) -> None:
    """y[i] = x[rows[i]] for the first step-out-count rows; picks the tokens whose logits are wanted."""
    kernel = rec.kernels.get("gather.wgsl")
    params = rec.params("gather", "4I", x.cols, 0, 0, 0)
    rec.add(kernel, (params, rec.out_step, x.buffer, rows, y.buffer), (cdiv(x.cols, 64), y.rows, 1),
            Traffic(reads=y.rows * (x.cols * F32 + 4), writes=y.rows * x.cols * F32))


def mul_gate(rec: Recorder, gate: Act, up: Act, act: str = "silu", up_offset: int = 0) -> None:
    """gate = act(gate) * up[:, up_offset:up_offset + gate.cols], in place; used when gate and up weights could not
    be stacked into one matmul, and where `up` is one layer's columns of a wider activation."""
    if up_offset + gate.cols > up.cols:
        raise ValueError(f"gate rows of {gate.cols} at column {up_offset} overrun up rows of {up.cols}")
    kernel = rec.kernels.get("glu.wgsl", ACT=ACTIVATIONS[act])
    params = rec.params("glu", "4I", gate.cols, up.cols, up_offset, 0)
    size = gate.rows * gate.cols * F32
    rec.add(kernel, (params, rec.step, gate.buffer, up.buffer), (cdiv(gate.cols, 64), gate.rows, 1),
            Traffic(reads=2 * size, writes=size))


def scale_by(rec: Recorder, x: Act, factor: Weight | Buffer) -> None:
    """x *= factor[0] for the step's tokens, in place: a scalar the model holds as a one-element tensor."""
    _pointwise(rec, x, 0, 0.0, _vector(factor, 1, "scale"), rec.step)


def softcap(rec: Recorder, y: Act, cap: float, *, rows_from: Buffer | None = None) -> None:
    """y = cap * tanh(y / cap) in place for the first n rows, n the first u32 of `rows_from` (default: the step's
    token count): final logit soft-capping."""
    if not cap > 0:
        raise ValueError(f"a soft cap must be positive, not {cap}")
    _pointwise(rec, y, 1, cap, rec.empty(), rows_from or rec.step)


def _pointwise(rec: Recorder, y: Act, mode: int, cap: float, s: Buffer, count: Buffer) -> None:
    kernel = rec.kernels.get("pointwise.wgsl", MODE=mode)
    params = rec.params("pointwise", "3If", y.cols, 0, 0, cap)
    size = y.rows * y.cols * F32
    rec.add(kernel, (params, count, y.buffer, s), (cdiv(y.cols, 64), y.rows, 1), Traffic(reads=size, writes=size))


# -- normalisation, rotary embedding, attention and sampling ---------------------------------------------------------

NORM_WG = 64  # invocations per RMSNorm workgroup (one workgroup per token and segment) on GPUs
# On CPU adapters one SIMD batch (8 lanes on lavapipe) makes the workgroup barrier nearly free: 2x faster there.
NORM_WG_SOFTWARE = 8
ATTN_WG = 32  # invocations per attention workgroup; small, so one decode token still fills several workgroups
# Invocations per workgroup of the scores kernel (CPU emulators): one SIMD batch of lavapipe, so the 16 invocations
# of a 64-position decode's first pass make two workgroups for the threads to share, not one.
SCORES_WG = 8
TOPK_WG = 16  # invocations per top-k scan workgroup; a row has only tens of chunks
TOPK_MAX = 64


def _vector(v: Weight | Buffer, n: int, what: str) -> Buffer:
    """The buffer of an f32 vector of `n` elements given as an uploaded weight or a plain buffer."""
    if isinstance(v, Weight):
        if v.type != GGMLType.F32 or v.k * v.rows != n or len(v.parts) != 1:
            raise ValueError(f"{what} '{v.name}' must be one F32 vector of {n} elements, not {v.type.name} "
                             f"{v.rows}x{v.k}")
        return v.parts[0].buffer
    if v.size < 4 * n:
        raise ValueError(f"{what} '{v.label}' holds {v.size} bytes; {n} f32 values need {4 * n}")
    return v


def rmsnorm(rec: Recorder, x: Act, weight: Weight | Buffer | None, y: Act, eps: float, *, dim: int | None = None,
            groups: int = 1, offset: int = 0, add: bool = False) -> None:
    """y = x / sqrt(mean(x^2) + eps) * weight over each of `groups` segments of `dim` elements (default: the whole
    row) starting at column `offset` of every token; several segments give per-head norms. `y` may be `x`.
    With `add` the result is added into y (y += ...), which cannot be done in place. `weight` None: no weight."""
    _rmsnorm(rec, x, weight, None, y, eps, dim=x.cols if dim is None else dim, groups=groups, split=groups,
             offset=offset, add=add)


def qk_norm(rec: Recorder, qkv: Act, q_weight: Weight | Buffer, k_weight: Weight | Buffer, eps: float,
            shape: AttentionShape) -> None:
    """The per-head RMSNorms of q and k (Qwen3, Gemma 3) in place in `qkv`, whose rows start with the q heads and
    then the k heads: one dispatch for both."""
    _rmsnorm(rec, qkv, q_weight, k_weight, qkv, eps, dim=shape.head_dim, groups=shape.n_head + shape.n_kv_head,
             split=shape.n_head)


def _rmsnorm(rec: Recorder, x: Act, weight: Weight | Buffer | None, weight2: Weight | Buffer | None, y: Act,
             eps: float, *, dim: int, groups: int, split: int, offset: int = 0, add: bool = False) -> None:
    """rmsnorm over `groups` segments, those from `split` on weighted by `weight2`."""
    if offset + groups * dim > min(x.cols, y.cols):
        raise ValueError(f"rmsnorm of {groups} x {dim} elements at column {offset} overruns rows of {x.cols}/{y.cols}")
    in_place = x.buffer is y.buffer
    if in_place and x.cols != y.cols:
        raise ValueError("an in-place rmsnorm needs x and y to be the same activation")
    if in_place and add:
        raise ValueError("an rmsnorm that adds into y cannot also read y")
    wg = NORM_WG_SOFTWARE if rec.device.info.software else NORM_WG
    kernel = rec.kernels.get("rmsnorm.wgsl", WG=wg, SRC="y" if in_place else "x", ADD=wgsl_bool(add),
                             WEIGHTS=(weight is not None) + (weight2 is not None))
    params = rec.params("rmsnorm", "5IfI", dim, groups, offset, x.cols, y.cols, eps, split)
    # In place, `x` is not read; a stand-in keeps the layout (binding y twice would alias a writable binding).
    g = rec.empty() if weight is None else _vector(weight, dim, "norm weight")
    g2 = g if weight2 is None else _vector(weight2, dim, "norm weight")
    bindings = (params, rec.step, g, y.buffer, rec.empty() if in_place else x.buffer, g2)
    size = x.rows * groups * dim * F32
    reads = size * (2 if add else 1) + dim * F32 * (1 if weight2 is None else 2)
    rec.add(kernel, bindings, (groups, x.rows, 1), Traffic(reads=reads, writes=size))


def rope_turns(rope_dim: int, freq_base: float, freq_scale: float = 1.0) -> list[int]:
    """Per rotated pair i, turns per position freq_scale * freq_base^(-2i/rope_dim) / 2pi as a fraction of 2^64.

    Computed here in double precision so that the shader's integer arithmetic reduces pos * frequency modulo one
    turn exactly, however large the position.
    """
    turns = []
    for i in range(rope_dim // 2):
        f = freq_scale * freq_base ** (-2.0 * i / rope_dim) / (2.0 * math.pi)
        if not 0.0 <= f < 1.0:
            raise ValueError(f"rope frequency {f} turns per position is outside [0, 1)")
        turns.append(min(round(f * 2.0 ** 64), 2 ** 64 - 1))
    return turns


_NO_ROPE = Rope(dim=0, base=1.0, neox=False)  # rotates nothing


def rope_store(rec: Recorder, qkv: Act, tokens: Binding, kv: KVLayer, shape: AttentionShape, *,
               freqs: Weight | Buffer | None = None, store: bool = True) -> None:
    """Rotate q and k of every token in place in `qkv` by `shape.rope` and store k and v in the layer's paged cache
    at the token's position; a shape without RoPE only stores.

    `store` False rotates q only and writes nothing to the caches (bound but untouched): a layer that attends over
    another layer's cache.

    `freqs` holds rope.dim/2 divisors of the angles (llama3-style `rope_freqs.weight`, LongRoPE's factors).
    """
    n_head, n_kv_head, head_dim = shape.n_head, shape.n_kv_head, shape.head_dim
    rope = shape.rope or _NO_ROPE
    if qkv.cols != shape.qkv_width:
        raise ValueError(f"qkv rows of {qkv.cols} do not hold {n_head} + 2 x {n_kv_head} heads of {head_dim}")
    if head_dim % 2 or rope.dim % 2 or not 0 <= rope.dim <= head_dim:
        raise ValueError(f"rope over {rope.dim} of {head_dim} dimensions: both must be even, rope.dim <= head_dim")
    words = []
    for f in rope_turns(rope.dim, rope.base, rope.freq_scale):
        words += [f & 0xFFFFFFFF, f >> 32]
    words = words + [0] * (-len(words) % 4) if words else [0] * 4  # a WGSL array cannot be empty
    kernel = rec.kernels.get("rope_store.wgsl", FREQ_VEC4=len(words) // 4, HAS_FACTORS=wgsl_bool(freqs is not None),
                             BLOCK_TOKENS=BLOCK_TOKENS,
                             **kvlayout.shader_values(kv.dtype))
    # The kernel's heads past the query heads are the ones it rotates into and stores to the cache: none here.
    stored = n_kv_head if store else 0
    params = rec.params("rope", f"7If{len(words)}I", n_head, stored, head_dim, rope.dim, qkv.cols, kv.max_blocks,
                        int(rope.neox), rope.mscale, *words)
    factors = rec.empty() if freqs is None or not rope.dim else _vector(freqs, rope.dim // 2, "rope frequency factors")
    heads = n_head + 2 * stored
    # q and k are rotated in place; k and v are stored into the cache.
    kv_row = 2 * stored * head_dim * kvlayout.CACHE_TYPES[kv.dtype]
    rec.add(kernel, (params, rec.step, qkv.buffer, tokens, kv.k, kv.v, kv.table, factors),
            (cdiv(heads * head_dim // 2, 64), qkv.rows, 1),
            Traffic(reads=qkv.rows * (heads * head_dim * F32 + 16),
                    writes=qkv.rows * ((n_head + stored) * head_dim * F32 + kv_row)))


FLASH_WG = 64  # lanes per flash-attention workgroup
FLASH_QUERY_VEC4 = 256  # query vec4s one flash workgroup holds (tokens x heads x head_dim / 4): 4 KiB
FLASH_TILE_BYTES = 8192  # bytes of the K (then V) tile a flash workgroup holds
FLASH_MAX_TOKENS = 8  # tokens per flash workgroup (prefill)


@dataclass(frozen=True)
class FlashShape:
    """What one flash-attention workgroup covers (shaders/attention_flash.wgsl)."""

    tokens: int  # TT: consecutive tokens of the step
    heads: int  # QH: query heads of one kv group
    tile: int  # TP: positions per K/V tile


def flash_shape(rows: int, n_head: int, n_kv_head: int, head_dim: int, max_workgroup_storage: int) -> FlashShape:
    """The largest share of one kv group's query heads, then as many tokens as fit FLASH_QUERY_VEC4, so each K/V
    tile loaded serves as many query rows as workgroup memory allows; tiles of FLASH_TILE_BYTES."""
    hd4 = head_dim // 4
    group = n_head // n_kv_head
    heads = group_share(group, FLASH_QUERY_VEC4 // hd4)
    tokens = max(1, min(rows, FLASH_MAX_TOKENS, FLASH_QUERY_VEC4 // (heads * hd4)))
    tile = max(1, min(64, FLASH_TILE_BYTES // (hd4 * 16)))

    def storage(tile: int) -> int:
        q_rows = tokens * heads
        return (q_rows * hd4 + tile * hd4) * 16 + (q_rows * tile + tile + 3 * q_rows) * 4

    while tile > 1 and storage(tile) > max_workgroup_storage:
        tile //= 2
    if storage(tile) > max_workgroup_storage:
        raise ValueError(f"flash attention over heads of {head_dim} needs {storage(tile)} bytes of workgroup memory; "
                         f"the adapter has {max_workgroup_storage}")
    return FlashShape(tokens, heads, tile)


def attention(rec: Recorder, qkv: Act, tokens: Binding, kv: KVLayer, out: Act, shape: AttentionShape, *,
              context: int | None = None, splits: int | None = None, kernel: str | None = None) -> None:
    """out[t, h] = causal softmax(q_t,h . K * scale) V over the token's own sequence in the layer's paged cache.

    A shape's `window` > 0 limits a token at position p to positions > p - window; its `softcap` > 0 squashes
    scores with softcap * tanh(score / softcap). `context` bounds the positions any token of the program sees
    (default: the cache's whole context).
    `kernel` (variants.ATTENTION_KERNELS) and `splits` (ranges per token) override the adapter's choices
    (variants.Variants.attention_kernel, attention_splits, flash_splits); tests use them to cover every variant.
    """
    n_head, n_kv_head, head_dim, window = shape.n_head, shape.n_kv_head, shape.head_dim, shape.window
    max_context = context or kv.max_context
    if qkv.cols != shape.qkv_width or out.cols < shape.q_dim or out.rows < qkv.rows:
        raise ValueError(f"attention over {n_head}/{n_kv_head} heads of {head_dim}: qkv is {qkv.rows}x{qkv.cols}, "
                         f"out {out.rows}x{out.cols}")
    if n_head % n_kv_head or head_dim % 4 or out.cols % 4:
        raise ValueError(f"attention needs n_kv_head | n_head ({n_kv_head}, {n_head}) and multiples of 4 "
                         f"(head_dim {head_dim}, out columns {out.cols})")
    v = variants.variants(rec.device)
    # Steps of one token are decode steps; the tuner (tune.attention_cases) may have chosen apart for the two.
    mode = "decode" if qkv.rows == 1 else "prefill"
    forced = kernel is not None
    kernel = kernel or v.choice("attention", mode, v.attention_kernel(mode))
    if kernel not in variants.ATTENTION_KERNELS:
        raise ValueError(f"attention kernel must be one of {variants.ATTENTION_KERNELS}, not {kernel!r}")
    hd4 = head_dim // 4
    kv_values = kvlayout.shader_values(kv.dtype)
    if kernel == "scores":
        heads = grouped_heads(n_head // n_kv_head)
        span = min(max_context, window) if window else max_context  # positions one token sees at most
        score_bytes = qkv.rows * (n_head // heads) * span * 16
        if span <= variants.SCORES_MAX_SPAN and score_bytes <= rec.device.info.max_binding_size:
            _attention_scores(rec, qkv, tokens, kv, out, shape, heads, span, score_bytes)
            return
        if forced:
            raise ValueError(f"the scores attention kernel takes at most {variants.SCORES_MAX_SPAN} positions and "
                             f"{rec.device.info.max_binding_size} bytes of scores; {qkv.rows} tokens over {span} "
                             f"positions need {score_bytes}")
        kernel = "grouped"  # the adapter's rule past what the scores kernel takes (Variants.attention_kernel)
    if kernel == "flash":
        flash = flash_shape(qkv.rows, n_head, n_kv_head, head_dim, rec.device.info.max_workgroup_storage)
        groups = cdiv(qkv.rows, flash.tokens) * (n_head // flash.heads)
        n_splits = splits or v.flash_splits(groups, max_context, flash.tile)
    else:
        heads = grouped_heads(n_head // n_kv_head) if kernel == "grouped" else 1
        n_splits = splits or v.attention_splits(qkv.rows, n_head // heads, max_context, kernel)
    record_bytes = (hd4 + 1) * 16
    n_splits = max(1, min(n_splits, rec.device.info.max_binding_size // (qkv.rows * n_head * record_bytes)))
    params = rec.params("attention", "8I2f", n_head, n_kv_head, qkv.cols, out.cols, kv.max_blocks, window,
                        n_splits, qkv.rows, shape.scale, shape.softcap)
    dst = out.buffer if n_splits == 1 else rec.scratch(qkv.rows * n_head * n_splits * record_bytes)
    bindings = (params, rec.step, qkv.buffer, tokens, kv.k, kv.v, kv.table, dst)
    # The program's tokens see at most `max_context` positions (a window's worth for one token) of one sequence's
    # K and V: each is read once.
    span = min(max_context, kv.max_blocks * BLOCK_TOKENS, window + qkv.rows if window else max_context)
    kv_read = span * 2 * shape.kv_dim * kvlayout.CACHE_TYPES[kv.dtype]
    q_bytes = out_bytes = qkv.rows * shape.q_dim * F32
    partial = qkv.rows * n_head * n_splits * record_bytes
    traffic = Traffic(reads=q_bytes + kv_read, writes=out_bytes if n_splits == 1 else partial)
    if kernel == "flash":
        walk = rec.kernels.get("attention_flash.wgsl", HD4=hd4, WG=FLASH_WG, TT=flash.tokens, QH=flash.heads,
                               TP=flash.tile, MIN_RANGE=variants.ATTN_MIN_RANGE, BLOCK_TOKENS=BLOCK_TOKENS,
                               **kv_values)
        rec.add(walk, bindings, _grid_1d(groups * n_splits, 1), traffic)
    else:
        walk = rec.kernels.get("attention.wgsl", HD4=hd4, QH=heads, WG=ATTN_WG, MIN_RANGE=variants.ATTN_MIN_RANGE,
                               BLOCK_TOKENS=BLOCK_TOKENS, **kv_values)
        rec.add(walk, bindings, _grid_1d(qkv.rows * n_head // heads * n_splits, ATTN_WG), traffic)
    if n_splits > 1:
        combine = rec.kernels.get("attention_combine.wgsl", HD4=hd4)
        params = rec.params("attention_combine", "3I", n_head, out.cols, n_splits)
        rec.add(combine, (params, rec.step, dst, out.buffer), (cdiv(n_head * hd4, 64), qkv.rows, 1),
                Traffic(reads=partial, writes=out_bytes))


def _attention_scores(rec: Recorder, qkv: Act, tokens: Binding, kv: KVLayer, out: Act, shape: AttentionShape,
                      heads: int, span: int, score_bytes: int) -> None:
    """ops.attention's "scores" kernel: the scores of `heads` heads at a time against `span` positions per token
    into scratch (attention_scores.wgsl), then V weighed by their softmax (attention_values.wgsl)."""
    groups = shape.n_head // heads
    hd4 = shape.head_dim // 4
    params = rec.params("attention", "8I2f", shape.n_head, shape.n_kv_head, qkv.cols, out.cols, kv.max_blocks,
                        shape.window, span, qkv.rows, shape.scale, shape.softcap)
    scores = rec.scratch(score_bytes)
    bindings = (params, rec.step, qkv.buffer, tokens, kv.k, kv.v, kv.table, scores)
    kv_bytes = span * shape.kv_dim * kvlayout.CACHE_TYPES[kv.dtype]
    act_bytes = qkv.rows * shape.q_dim * F32
    values = dict(HD4=hd4, QH=heads, WG=SCORES_WG, BLOCK_TOKENS=BLOCK_TOKENS, **kvlayout.shader_values(kv.dtype))
    runs = qkv.rows * groups * cdiv(span, 4)  # attention_scores.wgsl takes four positions per invocation
    rec.add(rec.kernels.get("attention_scores.wgsl", **values), bindings, _grid_1d(runs, SCORES_WG),
            Traffic(reads=act_bytes + kv_bytes, writes=score_bytes))
    rec.add(rec.kernels.get("attention_values.wgsl", **values), bindings + (out.buffer,),
            _grid_1d(qkv.rows * groups * hd4, SCORES_WG), Traffic(reads=score_bytes + kv_bytes, writes=act_bytes))


def group_share(group: int, limit: int) -> int:
    """The most query heads of a kv group of `group` that one invocation or workgroup may take together: the largest
    divisor of the group up to `limit` (at least 1)."""
    return max(d for d in range(1, max(1, min(group, limit)) + 1) if group % d == 0)


def grouped_heads(group: int) -> int:
    """Query heads one invocation of the grouped attention kernel holds (attention.wgsl writes out four)."""
    return group_share(group, variants.GROUPED_HEADS)


def topk_words(k: int) -> int:
    """u32 words of one row's top-k record (see shaders/topk.wgsl): max, sum of exp, 2 spare, k (value, index)."""
    return 4 + 2 * k


def topk_chunk(vocab: int, k: int) -> int:
    """Logits each first-pass invocation scans: about sqrt(vocab * k), which balances the scan of one chunk
    against the merge of all chunks' candidates."""
    return min(vocab, max(256, 1 << math.ceil(math.log2(math.sqrt(vocab * max(k, 4))))))


def topk(rec: Recorder, logits: Act, out: Buffer, k: int, *, rows_from: Buffer | None = None) -> None:
    """For each of the first min(logits.rows, n) rows, n being the first u32 of `rows_from` (default: the step's
    token count): the k largest logits with their indices (ties to the lower index), the row max and
    sum(exp(logit - max)). `out` holds topk_words(k) u32 per row; `read_topk` decodes them."""
    if not 1 <= k <= min(TOPK_MAX, logits.cols):
        raise ValueError(f"top-k needs 1 <= k <= {min(TOPK_MAX, logits.cols)}, not {k}")
    if out.size < logits.rows * topk_words(k) * 4:
        raise ValueError(f"top-k output '{out.label}' is {out.size} bytes; {logits.rows} rows need "
                         f"{logits.rows * topk_words(k) * 4}")
    count = rows_from or rec.step
    chunk = topk_chunk(logits.cols, k)
    n_chunks = cdiv(logits.cols, chunk)
    scan = rec.kernels.get("topk.wgsl", K=k, PASS=1, WG=TOPK_WG)
    params = rec.params("topk.scan", "4I", logits.rows, logits.cols, logits.cols, chunk)
    parts = out if n_chunks == 1 else rec.scratch(logits.rows * n_chunks * topk_words(k) * 4)
    records = logits.rows * n_chunks * topk_words(k) * 4
    rec.add(scan, (params, count, logits.buffer, parts), (cdiv(n_chunks, TOPK_WG), logits.rows, 1),
            Traffic(reads=logits.rows * logits.cols * F32, writes=records))
    if n_chunks > 1:
        merge = rec.kernels.get("topk.wgsl", K=k, PASS=2, WG=1)
        params = rec.params("topk.merge", "4I", logits.rows, n_chunks, 0, 0)
        rec.add(merge, (params, count, parts, out), (1, logits.rows, 1),
                Traffic(reads=records, writes=logits.rows * topk_words(k) * 4))


@dataclass(frozen=True)
class TopK:
    """One row's candidates: probabilities are exp(value - max) / sum_exp."""

    max: float
    sum_exp: float
    values: tuple[float, ...]
    indices: tuple[int, ...]


def read_topk(data: bytes, k: int, rows: int = 1) -> list[TopK]:
    """Decode `rows` records of a top-k output buffer, dropping the empty entries of rows with fewer candidates."""
    words = topk_words(k)
    result = []
    for r in range(rows):
        m, s = struct.unpack_from("<2f", data, r * words * 4)
        pairs = struct.unpack_from(f"<{2 * k}I", data, (r * words + 4) * 4)
        values = struct.unpack(f"<{k}f", struct.pack(f"<{k}I", *pairs[0::2]))
        n = next((j for j, i in enumerate(pairs[1::2]) if i == 0xFFFFFFFF), k)
        result.append(TopK(m, s, values[:n], pairs[1::2][:n]))
    return result




def _grid_1d(invocations: int, wg: int) -> tuple[int, int, int]:
    """A grid of at least `invocations`, folded into y when x would pass the 65535-workgroup limit."""
    groups = cdiv(invocations, wg)
    return (groups, 1, 1) if groups <= 65535 else (65535, cdiv(groups, 65535), 1)
