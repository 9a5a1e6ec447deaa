"""Building blocks several model files record with: a norm that may fold into the next projection, a projection
over stacked weights, a gated feed-forward."""
from __future__ import annotations

from ..gguf.config import ModelConfig
from ..gpu import ops
from ..gpu.device import Buffer
from ..gpu.recorder import Act, Recorder
from ..gpu.tensors import Weight
from .base import ActivationSpec
from .weights import WeightLoader


def decoder_activations(c: ModelConfig, *, fold_norms: bool, split_ffn: bool) -> list[ActivationSpec]:
    """The activations of a pre-norm decoder step: residual stream, q|k|v, attention output, feed-forward hidden
    state, and the rows whose logits are wanted; the normed stream where norms are not folded into projections, and
    the up projection where gate and up are computed apart."""
    specs = [ActivationSpec("x", c.n_embd), ActivationSpec("qkv", c.q_dim + 2 * c.kv_dim),
             ActivationSpec("attn", c.q_dim), ActivationSpec("ff", c.n_ff),
             ActivationSpec("last", c.n_embd, per_out_row=True)]
    if not fold_norms:
        specs.append(ActivationSpec("h", c.n_embd))
    if split_ffn:
        specs.append(ActivationSpec("up", c.n_ff))
    return specs


def output_weight(weights: WeightLoader, token_embd: Weight) -> Weight:
    """The output projection; with tied embeddings (no output.weight) the embedding table, the same buffers."""
    return weights.weight(["output.weight"]) if weights.has("output.weight") else token_embd


class Norm:
    """RMSNorm ahead of a projection: returns what the projection's matmul takes. With `h` None the norm folds
    into the matmul (it accumulates the sum of squares from the blocks of x it loads anyway); otherwise it is
    applied into `h` first."""

    def __init__(self, rec: Recorder, h: Act | None, eps: float):
        self.rec, self.h, self.eps = rec, h, eps

    def __call__(self, x: Act, weight: Buffer) -> tuple[Act, dict]:
        if self.h is None:
            return x, {"norm": weight, "eps": self.eps}
        h = Act(self.h.buffer, x.rows, x.cols)
        ops.rmsnorm(self.rec, x, weight, h, self.eps)
        return h, {}


def project(rec: Recorder, weights: list[Weight], x: Act, y: Act, *, norm: tuple[Act, dict],
            bias: Buffer | None = None) -> None:
    """y = norm(x) · [W1; W2; ...]^T (+ bias): one dispatch per weight, each filling its own columns of y."""
    x, fold = norm
    col = 0
    for w in weights:
        ops.matmul(rec, w, x, y, y_offset=col, bias=bias, bias_offset=col, **fold)
        col += w.rows


def gated(rec: Recorder, weights: list[Weight], x: Act, y: Act, up: Act | None, *, norm: tuple[Act, dict],
          act: str = "silu") -> None:
    """y = act(norm(x) · Wgate^T) * (norm(x) · Wup^T), from one stacked [gate; up] weight or two apart."""
    x, fold = norm
    if len(weights) == 1:
        ops.matmul(rec, weights[0], x, y, mode=ops.GLU, act=act, **fold)
    else:
        gate, upw = weights
        ops.matmul(rec, gate, x, y, **fold)
        ops.matmul(rec, upw, x, up, **fold)
        ops.mul_gate(rec, y, up, act=act)


def logits(rec: Recorder, x: Act, acts, output: Weight, output_norm: Buffer, eps: float, logits: Act,
           fold: bool) -> None:
    """logits = norm(x[out rows]) · Woutput^T for the rows whose logits are wanted."""
    if fold:
        # A one-token step's only row is the one whose logits are wanted: no gather.
        last = x if x.rows == 1 and acts.last.rows == 1 else acts.last
        if last is not x:
            ops.gather_rows(rec, x, acts.out_rows, last)
        ops.matmul(rec, output, last, logits, rows_from=rec.out_step, norm=output_norm, eps=eps)
    else:
        ops.gather_rows(rec, x, acts.out_rows, acts.last)
        ops.rmsnorm(rec, acts.last, output_norm, acts.last, eps)  # rows bounded by the grid
        ops.matmul(rec, output, acts.last, logits, rows_from=rec.out_step)
