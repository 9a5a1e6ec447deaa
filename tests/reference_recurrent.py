"""float64 numpy references of the layers that keep per-sequence state (LFM2's short convolution), written from
the definitions, position by position, over a sequence's whole history."""
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


def conv_state(history: np.ndarray, taps: int) -> np.ndarray:
    """The state the kernel keeps for a sequence: the last taps - 1 values of b * x, oldest first (zeros before
    position 0)."""
    n_embd = history.shape[1]
    return np.concatenate([np.zeros((taps - 1, n_embd)), history])[-(taps - 1):]
