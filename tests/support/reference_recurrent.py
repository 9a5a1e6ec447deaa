"""float64 numpy references of the layers that keep per-sequence state (LFM2's short convolution, Qwen3.5's
convolution and gated delta rule), written from the definitions, position by position, over a sequence's whole
history; and the gated delta rule's chunked form, as llama.cpp's prefill graph computes it, checked against the
position-by-position one."""
from __future__ import annotations

import numpy as np


def shortconv(bcx: np.ndarray, conv: np.ndarray, history: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One sequence's tokens through the short convolution block's middle: bcx (n, 3E) holds [b | c | x] per token,
    conv (E, L) the taps (the last for the current position), history (h, E) the b * x of the positions before.
    Returns y (n, E) and the new history."""
    n_embd, taps = conv.shape
    b, c, x = bcx[:, :n_embd], bcx[:, n_embd:2 * n_embd], bcx[:, 2 * n_embd:]
    v = np.concatenate([np.zeros((taps - 1, n_embd)), history, b * x])  # zeros before position 0
    start = taps - 1 + len(history)
    y = np.stack([c[t] * (v[start + t - taps + 1:start + t + 1] * conv.T).sum(axis=0) for t in range(len(bcx))])
    return y, v[taps - 1:]


def conv_silu(x: np.ndarray, conv: np.ndarray, history: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Qwen3.5's convolution: x (n, C) one sequence's inputs, conv (C, L) the taps, history (h, C) the inputs of the
    positions before. Returns silu(causal_conv(x)) (n, C) and the new history."""
    taps = conv.shape[1]
    v = np.concatenate([np.zeros((taps - 1, x.shape[1])), history, x])
    start = taps - 1 + len(history)
    y = np.stack([(v[start + t - taps + 1:start + t + 1] * conv.T).sum(axis=0) for t in range(len(x))])
    return y / (1.0 + np.exp(-y)), v[taps - 1:]


def delta_gates(alpha: np.ndarray, beta: np.ndarray, a: np.ndarray, dt_bias: np.ndarray) -> tuple[np.ndarray, ...]:
    """The gated delta rule's per-head gates from the raw projections, as llama.cpp's qwen35 graph computes them:
    g = a * softplus(alpha + dt_bias) (softplus(x) = x above 20), beta' = sigmoid(beta)."""
    x = alpha + dt_bias
    softplus = np.where(x > 20.0, x, np.log1p(np.exp(np.minimum(x, 20.0))))
    return a * softplus, 1.0 / (1.0 + np.exp(-beta))


def conv_state(history: np.ndarray, taps: int) -> np.ndarray:
    """The state the kernel keeps for a sequence: the last taps - 1 values of b * x, oldest first (zeros before
    position 0)."""
    n_embd = history.shape[1]
    return np.concatenate([np.zeros((taps - 1, n_embd)), history])[-(taps - 1):]


def gated_delta(q: np.ndarray, k: np.ndarray, v: np.ndarray, g: np.ndarray, beta: np.ndarray, state: np.ndarray,
                eps: float) -> tuple[np.ndarray, np.ndarray]:
    """One sequence's tokens through the gated delta rule, as llama.cpp's autoregressive form computes it: q, k
    (n, Hk, d), v (n, Hv, d), g and beta (n, Hv), state (Hv, d, d) as [head][value row j][key column i]. Value head
    h reads key head h % Hk. Returns the outputs (n, Hv, d) and the new state."""
    n, n_k, d = q.shape
    n_v = v.shape[1]
    s = state.copy()
    out = np.zeros((n, n_v, d))
    for t in range(n):
        qn = q[t] / np.sqrt((q[t] ** 2).sum(-1, keepdims=True) + eps)
        kn = k[t] / np.sqrt((k[t] ** 2).sum(-1, keepdims=True) + eps)
        for h in range(n_v):
            qh, kh = qn[h % n_k], kn[h % n_k]
            s[h] *= np.exp(g[t, h])
            s[h] += beta[t, h] * np.outer(v[t, h] - s[h] @ kh, kh)
            out[t, h] = s[h] @ qh / np.sqrt(d)
    return out, s


def gated_delta_chunked(q: np.ndarray, k: np.ndarray, v: np.ndarray, g: np.ndarray, beta: np.ndarray,
                        state: np.ndarray, eps: float, chunk: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """`gated_delta` computed chunk by chunk in the WY / UT-transform form of llama.cpp's prefill graph (same
    arguments and results). Within a chunk, with G the cumulative sum of g from the chunk's start, decay
    D[t, s] = exp(G_t - G_s) and S the state at the chunk's start:
        A = strictly_lower(beta_t D[t, s] k_t . k_s);  T = (I + A)^-1
        u = T (beta v) - T (beta exp(G) k) S^T        the chunk's corrected values, all at once
        o = exp(G) q S^T + lower(D[t, s] q_t . k_s) u
        S = exp(G_last) S + sum_s exp(G_last - G_s) u_s k_s^T
    A last chunk shorter than `chunk` is the same as one padded with g = beta = k = 0 tokens."""
    n, n_k, d = q.shape
    n_v = v.shape[1]
    qn = q / np.sqrt((q ** 2).sum(-1, keepdims=True) + eps) / np.sqrt(d)
    kn = k / np.sqrt((k ** 2).sum(-1, keepdims=True) + eps)
    s = state.copy()
    out = np.zeros((n, n_v, d))
    for c0 in range(0, n, chunk):
        c1 = min(n, c0 + chunk)
        for h in range(n_v):
            qc, kc, vc = qn[c0:c1, h % n_k], kn[c0:c1, h % n_k], v[c0:c1, h]
            b = beta[c0:c1, h][:, None]
            gc = np.cumsum(g[c0:c1, h])
            decay = np.tril(np.exp(gc[:, None] - gc[None, :]))
            a = np.tril(b * decay * (kc @ kc.T), -1)
            t = np.linalg.inv(np.eye(len(gc)) + a)
            u = t @ (b * vc) - (t @ (b * np.exp(gc)[:, None] * kc)) @ s[h].T
            out[c0:c1, h] = np.exp(gc)[:, None] * (qc @ s[h].T) + (decay * (qc @ kc.T)) @ u
            s[h] = np.exp(gc[-1]) * s[h] + (np.exp(gc[-1] - gc)[:, None] * u).T @ kc
    return out, s
