"""Operations of layers that keep per-sequence state beside the KV cache (`KVCache.state`): the kernels that read
a slot's state for the first positions of a step and leave it at the step's end. Bindings and `Params` layouts of
shaders/shortconv.wgsl, shaders/gated_delta.wgsl and shaders/delta_gates.wgsl live here only.
"""
from __future__ import annotations

from .device import Binding, Buffer
from .recorder import Act, Recorder, cdiv


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
                n_v_heads: int, head_dim: int, eps: float) -> None:
    """out[t] = the gated delta rule's output for each token, token after token per sequence, moving each slot's
    n_v_heads x head_dim x head_dim state (see shaders/gated_delta.wgsl): qkv[t] = [q | k | v] (n_k_heads, n_k_heads,
    n_v_heads heads of head_dim), gb[t] = [g | beta] per value head (g the log of the decay, beta in (0, 1))."""
    if n_v_heads % n_k_heads or qkv.cols < (2 * n_k_heads + n_v_heads) * head_dim or gb.cols < 2 * n_v_heads \
            or out.cols < n_v_heads * head_dim:
        raise ValueError(f"gated delta over {n_k_heads}/{n_v_heads} heads of {head_dim}: qkv {qkv.cols}, gb {gb.cols}, "
                         f"out {out.cols} columns")
    kernel = rec.kernels.get("gated_delta.wgsl")
    params = rec.params("gated_delta", "6I2f", n_k_heads, n_v_heads, head_dim, qkv.cols, gb.cols, out.cols, eps,
                        head_dim ** -0.5)
    rec.add(kernel, (params, rec.step, qkv.buffer, gb.buffer, tokens, state, out.buffer),
            (cdiv(head_dim, 64), n_v_heads, qkv.rows))


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
