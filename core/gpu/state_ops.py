"""Operations of layers that keep per-sequence state beside the KV cache (`KVCache.state`): the kernels that read
a slot's state for the first positions of a step and leave it at the step's end. Bindings and `Params` layouts of
shaders/shortconv.wgsl live here only.
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
    kernel = rec.kernels.get("shortconv.wgsl", L=l_cache)
    params = rec.params("shortconv", "4I", n_embd, bcx.cols, y.cols, 0)
    rec.add(kernel, (params, rec.step, bcx.buffer, tokens, conv, state, y.buffer), (cdiv(n_embd, 64), bcx.rows, 1))
