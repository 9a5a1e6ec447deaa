"""Operations as the model files use them; each records one or a few dispatches of a kernel family.

These are the only functions that know kernel bindings and `Params` layouts (see shaders/*.wgsl).
"""
from __future__ import annotations

from .recorder import Act, Recorder, cdiv
from .tensors import Weight

WG = 64  # invocations per workgroup for the row-parallel kernels


def token_tile(rows: int) -> int:
    """Tokens each matmul invocation handles: 1 for decode, a register tile for prefill."""
    return 1 if rows == 1 else 4 if rows <= 8 else 8


def matmul(rec: Recorder, w: Weight, x: Act, y: Act, *, y_offset: int = 0, mode: int = 0, bias=None,
           bias_offset: int = 0, n: int | None = None) -> None:
    """y[:, y_offset:y_offset+n] (=, +=) x @ W^T; mode 2 computes silu(x @ Wg^T) * (x @ Wu^T) over stacked [Wg; Wu]."""
    assert x.cols == w.k, (w.name, x.cols, w.k)
    glu_rows = w.rows // 2 if mode == 2 else 0
    if mode == 2 and len(w.parts) > 1:
        raise ValueError(f"'{w.name}': a stacked gate/up weight must fit one binding; keep the halves apart")
    tt = token_tile(x.rows)
    kernel = rec.kernels.get("matmul.wgsl", QUANT=w.shader, TT=tt, MODE=mode, BIAS=str(bias is not None).lower(),
                             WG=WG)
    for part in w.parts:
        n_out = glu_rows if mode == 2 else part.rows
        params = rec.params(w.name, "8I", w.k, n_out, w.row_bytes, x.cols, y.cols, y_offset + part.row_start,
                            glu_rows, bias_offset + part.row_start)
        rec.add(kernel, (params, rec.step, part.buffer, x.buffer, y.buffer, bias or rec.empty()),
                (cdiv(n_out, WG), cdiv(x.rows, tt), 1))


def embed(rec: Recorder, w: Weight, tokens, y: Act, scale: float = 1.0) -> None:
    """y[t] = W[id of token t] * scale; each part of a split table fills the tokens whose rows it holds."""
    kernel = rec.kernels.get("embed.wgsl", QUANT=w.shader)
    for part in w.parts:
        params = rec.params(w.name, "4If", w.k, w.row_bytes, part.row_start, part.rows, scale)
        rec.add(kernel, (params, rec.step, part.buffer, tokens, y.buffer), (cdiv(w.k // 32, 64), y.rows, 1))
