"""Operations of layers that keep per-sequence state beside the KV cache (`KVCache.state`): the kernels that read
a slot's state for the first positions of a step and leave it at the step's end. Bindings and `Params` layouts of
shaders/shortconv.wgsl, shaders/gated_delta.wgsl, shaders/gated_delta_chunk.wgsl and shaders/delta_gates.wgsl live
here only.
"""
from __future__ import annotations

from . import variants
from .device import Binding, Buffer
from .recorder import Act, Recorder, cdiv

CHUNK = 32  # tokens per chunk of the chunked form: its q.k and k.k triangles (C x C f32) fit workgroup memory
CHUNK_COLS = 32  # key columns per workgroup-memory tile of the chunked form
MAX_WG = 256  # lanes per workgroup of the chunked form: a whole head where it fits (rows per lane: variants.py),
# so the chunk's q.k and k.k products are computed once per head


def shortconv(rec: Recorder, bcx: Act, tokens: Binding, conv: Buffer, state: Buffer, y: Act, *, n_embd: int,
              l_cache: int) -> None:
    """y[t] = c[t] * causal_conv(b * x)[t] over the last `l_cache` positions of each token's sequence, with
    bcx[t] = [b | c | x] (3 * n_embd) and `conv` [n_embd][l_cache] taps; reads and moves each slot's state of
    (l_cache - 1) x n_embd values (see shaders/shortconv.wgsl)."""
    if bcx.cols != 3 * n_embd or y.cols < n_embd or l_cache < 2:
        raise ValueError(f"shortconv over {n_embd} channels and {l_cache} taps: bcx is {bcx.rows}x{bcx.cols}, "
                         f"y {y.rows}x{y.cols}")
    if conv.size < 4 * n_embd * l_cache:
        raise ValueError(f"conv taps '{conv.label}' hold {conv.size} bytes, not {n_embd} x {l_cache} f32")
    kernel = rec.kernels.get("shortconv.wgsl", L=l_cache, SILU="false")
    params = rec.params("shortconv", "4I", n_embd, bcx.cols, y.cols, 0)
    rec.add(kernel, (params, rec.step, bcx.buffer, tokens, conv, state, y.buffer), (cdiv(n_embd, 64), bcx.rows, 1))


def gated_delta(rec: Recorder, qkv: Act, gb: Act, tokens: Binding, state: Buffer, out: Act, *, n_k_heads: int,
                n_v_heads: int, head_dim: int, eps: float, form: str | None = None, rows: int | None = None) -> None:
    """out[t] = the gated delta rule's output for each token, token after token per sequence, moving each slot's
    n_v_heads x head_dim x head_dim state: qkv[t] = [q | k | v] (n_k_heads, n_k_heads, n_v_heads heads of
    head_dim), gb[t] = [g | beta] per value head (g the log of the decay, beta in (0, 1)).

    Two kernels compute it (variants.GATED_DELTA_FORMS): "token" walks each sequence's tokens one by one
    (shaders/gated_delta.wgsl), "chunk" takes them CHUNK at a time as small matrix products
    (shaders/gated_delta_chunk.wgsl). The adapter's choice for a program of qkv.rows tokens
    (variants.Variants.gated_delta_form) runs unless `form` forces one, and the chunked form gives each lane the
    adapter's number of state rows (Variants.gated_delta_rows) unless `rows` forces one (tests, benchmarks). Where
    the adapter bounds how many chunks one dispatch may walk (Variants.gated_delta_window), a program of more tokens
    gets one dispatch per window of chunks."""
    if n_v_heads % n_k_heads or qkv.cols < (2 * n_k_heads + n_v_heads) * head_dim or gb.cols < 2 * n_v_heads \
            or out.cols < n_v_heads * head_dim:
        raise ValueError(f"gated delta over {n_k_heads}/{n_v_heads} heads of {head_dim}: qkv {qkv.cols}, gb {gb.cols}, "
                         f"out {out.cols} columns")
    form = form or variants.variants(rec.device).gated_delta_form(qkv.rows)
    if form not in variants.GATED_DELTA_FORMS:
        raise ValueError(f"gated delta form must be one of {variants.GATED_DELTA_FORMS}, not {form!r}")
    values = (n_k_heads, n_v_heads, head_dim, qkv.cols, gb.cols, out.cols, eps, head_dim ** -0.5)
    data = (rec.step, qkv.buffer, gb.buffer, tokens, state, out.buffer)
    if form == "token":
        params = rec.params("gated_delta", "6I2f", *values)
        rec.add(rec.kernels.get("gated_delta.wgsl"), (params, *data), (cdiv(head_dim, 64), n_v_heads, qkv.rows))
        return
    if head_dim % 4:
        raise ValueError(f"the chunked gated delta kernel reads heads as vec4s: head_dim {head_dim} is not a "
                         f"multiple of 4 (form='token' runs any size)")
    v = variants.variants(rec.device)
    rows = rows or v.gated_delta_rows
    wg = min(cdiv(head_dim, rows), MAX_WG)
    kernel = rec.kernels.get("gated_delta_chunk.wgsl", C=CHUNK, B4=min(CHUNK_COLS, head_dim) // 4, R=rows, WG=wg)
    chunks = cdiv(qkv.rows, CHUNK)
    window = v.gated_delta_window(head_dim) or chunks
    for first in range(0, chunks, window):
        # Only a token at least `first` chunks before the step's end can start a sequence that reaches the window.
        params = rec.params("gated_delta_chunk", "6I2f2I", *values, first, window)
        rec.add(kernel, (params, *data), (cdiv(head_dim, wg * rows), n_v_heads, qkv.rows - first * CHUNK))


def conv_silu(rec: Recorder, x: Act, tokens: Binding, conv: Buffer, state: Buffer, y: Act, *, channels: int,
              taps: int) -> None:
    """y[t] = silu(causal_conv(x)[t]) over the last `taps` positions of each token's sequence, for the first
    `channels` columns of x and `conv` [channels][taps] taps: Qwen3.5's convolution over its mixed q|k|v projection.
    Reads and moves each slot's state of (taps - 1) x channels values (see shaders/shortconv.wgsl)."""
    if x.cols < channels or y.cols < channels or taps < 2:
        raise ValueError(f"conv over {channels} channels and {taps} taps: x is {x.rows}x{x.cols}, y {y.rows}x{y.cols}")
    if conv.size < 4 * channels * taps:
        raise ValueError(f"conv taps '{conv.label}' hold {conv.size} bytes, not {channels} x {taps} f32")
    kernel = rec.kernels.get("shortconv.wgsl", L=taps, SILU="true")
    params = rec.params("conv_silu", "4I", channels, x.cols, y.cols, 0)
    rec.add(kernel, (params, rec.step, x.buffer, tokens, conv, state, y.buffer), (cdiv(channels, 64), x.rows, 1))


def delta_gates(rec: Recorder, ab: Act, a: Buffer, dt_bias: Buffer, *, n_heads: int) -> None:
    """In place over ab[t] = [alpha | beta] (n_heads each, the raw projections): alpha becomes the decay's log
    g = a * softplus(alpha + dt_bias) and beta becomes sigmoid(beta), the `gb` rows `gated_delta` takes (see
    shaders/delta_gates.wgsl)."""
    if ab.cols != 2 * n_heads:
        raise ValueError(f"delta gates of {n_heads} heads: ab rows hold {ab.cols} values, not {2 * n_heads}")
    for v, what in ((a, "a"), (dt_bias, "dt bias")):
        if v.size < 4 * n_heads:
            raise ValueError(f"{what} '{v.label}' holds {v.size} bytes, not {n_heads} f32")
    kernel = rec.kernels.get("delta_gates.wgsl")
    params = rec.params("delta_gates", "4I", n_heads, 0, 0, 0)
    rec.add(kernel, (params, rec.step, ab.buffer, a, dt_bias), (cdiv(n_heads, 64), ab.rows, 1))
