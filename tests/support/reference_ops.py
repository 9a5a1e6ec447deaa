"""Float64 numpy references of the transformer's non-matmul operations, written from their definitions.

The GPU kernels are tested against these, and the model tests build whole forward passes from them. Everything
computes in float64 whatever the input type, so a reference is never the less accurate side of a comparison.
"""
from __future__ import annotations

import numpy as np


def rmsnorm(x: np.ndarray, g: np.ndarray, eps: float) -> np.ndarray:
    """x / sqrt(mean(x^2) + eps) * g along the last axis."""
    x = np.asarray(x, np.float64)
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * np.asarray(g, np.float64)


def rope_angles(positions: np.ndarray, rope_dim: int, freq_base: float, freq_scale: float = 1.0,
                factors: np.ndarray | None = None) -> np.ndarray:
    """[len(positions), rope_dim/2] angles pos * freq_scale * freq_base^(-2i/rope_dim) / factor_i, in radians."""
    i = np.arange(rope_dim // 2, dtype=np.float64)
    inv_freq = freq_scale * freq_base ** (-2.0 * i / rope_dim)
    if factors is not None:
        inv_freq = inv_freq / np.asarray(factors, np.float64)
    return np.asarray(positions, np.float64)[:, None] * inv_freq[None, :]


def rope(x: np.ndarray, positions: np.ndarray, *, rope_dim: int, freq_base: float, freq_scale: float = 1.0,
         neox: bool, factors: np.ndarray | None = None) -> np.ndarray:
    """Rotate x [tokens, heads, head_dim] by the rotary embedding of each token's position.

    Pair i is (2i, 2i+1) in normal mode and (i, i + rope_dim/2) in NeoX mode; dimensions past rope_dim are kept.
    """
    x = np.array(x, np.float64)
    theta = rope_angles(positions, rope_dim, freq_base, freq_scale, factors)[:, None, :]
    cos, sin = np.cos(theta), np.sin(theta)
    half = rope_dim // 2
    if neox:
        a, b = x[..., :half].copy(), x[..., half:rope_dim].copy()
        x[..., :half] = a * cos - b * sin
        x[..., half:rope_dim] = a * sin + b * cos
    else:
        a, b = x[..., 0:rope_dim:2].copy(), x[..., 1:rope_dim:2].copy()
        x[..., 0:rope_dim:2] = a * cos - b * sin
        x[..., 1:rope_dim:2] = a * sin + b * cos
    return x


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, positions: np.ndarray, *, scale: float,
              window: int = 0, softcap: float = 0.0) -> np.ndarray:
    """Causal attention of one sequence: q [T, n_head, hd] at `positions`, over k, v [P, n_kv_head, hd] holding
    positions 0..P-1 of the same sequence. Returns [T, n_head * hd].

    Query head h reads kv head h // (n_head / n_kv_head); a query at position p sees positions j <= p, and with a
    window only j > p - window; scores are q.k * scale, then softcap * tanh(score / softcap) when softcap > 0.
    """
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    n_tok, n_head, hd = q.shape
    group = n_head // k.shape[1]
    kh = np.repeat(k, group, axis=1)  # [P, n_head, hd]
    vh = np.repeat(v, group, axis=1)
    scores = np.einsum("thd,phd->thp", q, kh) * scale
    if softcap:
        scores = softcap * np.tanh(scores / softcap)
    j = np.arange(k.shape[0])[None, :]
    p = np.asarray(positions)[:, None]
    visible = (j <= p) & ((j > p - window) if window else True)
    scores = np.where(visible[:, None, :], scores, -np.inf)
    w = np.exp(scores - scores.max(axis=-1, keepdims=True))
    w /= w.sum(axis=-1, keepdims=True)
    return np.einsum("thp,phd->thd", w, vh).reshape(n_tok, n_head * hd)


def paged_rows(table: np.ndarray, slot: int, positions: np.ndarray, block_tokens: int) -> np.ndarray:
    """Cache rows (block * block_tokens + position % block_tokens) of `positions` of the sequence in `slot`, given
    the block table as [n_slots, max_blocks]."""
    positions = np.asarray(positions)
    return table[slot, positions // block_tokens] * block_tokens + positions % block_tokens


def topk(logits: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per row: the k largest values and their indices (descending, ties to the lower index), the max, and
    sum(exp(logit - max)). Returns (values [rows, k], indices [rows, k], max [rows], sum_exp [rows])."""
    x = np.asarray(logits, np.float64)
    # A stable sort of the negated values keeps equal values in index order.
    order = np.argsort(-x, axis=-1, kind="stable")[:, :k]
    values = np.take_along_axis(x, order, axis=-1)
    m = x.max(axis=-1)
    return values, order, m, np.exp(x - m[:, None]).sum(axis=-1)
