"""The gated delta rule's per-head gates (shaders/delta_gates.wgsl, Qwen3.5's linear-attention layers) against the
float64 numpy reference written from llama.cpp's qwen35 graph (tests/support/reference_recurrent.py): g = a * softplus(alpha
+ dt_bias), beta = sigmoid(beta), in place over [alpha | beta] rows. Inputs reach +-40 so softplus's linear branch
(above 20) and sigmoid's saturated tails are covered. |err| <= 1e-5 * max|ref| + 1e-6 (gpu_util).
"""
from __future__ import annotations

import numpy as np
import pytest
from gpu_util import Gpu, assert_close, gpu, rng  # noqa: F401 (gpu and rng are fixtures)
from reference_recurrent import delta_gates

from llmchat.gpu import state_ops

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("n_tokens,n_heads", [(1, 16), (7, 4), (3, 96)])
def test_delta_gates(gpu: Gpu, rng, n_tokens: int, n_heads: int):  # noqa: F811
    alpha = rng.standard_normal((n_tokens, n_heads)) * 3
    alpha[0, :min(n_heads, 4)] = [-40.0, 19.9, 20.1, 40.0][:min(n_heads, 4)]
    beta = rng.standard_normal((n_tokens, n_heads)) * 4
    beta[-1, :2] = [-40.0, 40.0]
    a = -rng.uniform(0.01, 16.0, n_heads)
    dt = rng.standard_normal(n_heads) * 0.5
    alpha, beta, a, dt = (v.astype(np.float32) for v in (alpha, beta, a, dt))
    rec = gpu.recorder(n_tokens)
    ab = gpu.act(rec, "ab", np.concatenate([alpha, beta], 1))
    bufs = []
    for v, label in ((a, "a"), (dt, "dt")):
        bufs.append(gpu.device.buffer(v.nbytes, label))
        gpu.device.write(bufs[-1], v.tobytes())
    state_ops.delta_gates(rec, ab, *bufs, n_heads=n_heads)
    gpu.run(rec)
    got = gpu.read(ab)
    g, b = delta_gates(*(v.astype(np.float64) for v in (alpha, beta, a, dt)))
    assert_close(got[:, :n_heads], g, what="g")
    assert_close(got[:, n_heads:], b, what="beta")
