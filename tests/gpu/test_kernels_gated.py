"""The gated unit's activations (shaders/activation.wgsl) in both places they run: the matmul's gated mode over a
stacked [gate; up] weight, and glu.wgsl when gate and up were computed apart. SiLU for the Llama family, GELU with
the tanh approximation for Gemma, sigmoid for Qwen3.5's gated attention output (apart only), against float64 numpy; |err| <= 1e-5 * max|ref| + 1e-6 (gpu_util).
Gate values reach +-30 so the tails (where tanh saturates and exp overflows in f32) are covered.
"""
from __future__ import annotations

import numpy as np
import pytest
from gpu_util import Gpu, assert_close, case_id, gpu, random_weight, rng  # noqa: F401 (gpu and rng are fixtures)

from llmchat.gguf.types import GGMLType
from llmchat.gpu import ops

pytestmark = pytest.mark.gpu


def silu(v: np.ndarray) -> np.ndarray:
    return v / (1.0 + np.exp(-v))


def gelu(v: np.ndarray) -> np.ndarray:
    return 0.5 * v * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (v + 0.044715 * v ** 3)))


def sigmoid(v: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-v))


REFERENCE = {"silu": silu, "gelu": gelu, "sigmoid": sigmoid}


@pytest.mark.parametrize("act", ["silu", "gelu"])
@pytest.mark.parametrize("n_tokens", [1, 5], ids=case_id)
def test_gated_matmul_activation(gpu: Gpu, rng, act: str, n_tokens: int):
    hidden, k = 45, 256
    raw_gate, gate = random_weight(rng, GGMLType.Q8_0, hidden, k)
    raw_up, up = random_weight(rng, GGMLType.Q8_0, hidden, k)
    x = rng.standard_normal((n_tokens, k)).astype(np.float32).astype(np.float64) * 3
    rec = gpu.recorder(n_tokens)
    y = gpu.poisoned(rec, "y", n_tokens, hidden)
    ops.matmul(rec, gpu.weight("gate_up", GGMLType.Q8_0, np.concatenate([raw_gate, raw_up])), gpu.act(rec, "x", x),
               y, mode=ops.GLU, act=act)
    gpu.run(rec)
    assert_close(gpu.read(y), REFERENCE[act](x @ gate.T) * (x @ up.T), what=act)


@pytest.mark.parametrize("act", ["silu", "gelu", "sigmoid"])
def test_gate_times_up_apart(gpu: Gpu, rng, act: str):
    n_tokens, cols = 3, 300
    g = np.concatenate([np.linspace(-30, 30, cols)[None, :], rng.standard_normal((n_tokens - 1, cols)) * 4])
    g = g.astype(np.float32).astype(np.float64)
    u = rng.standard_normal((n_tokens, cols)).astype(np.float32).astype(np.float64)
    rec = gpu.recorder(n_tokens)
    ga = gpu.act(rec, "gate", g)
    ops.mul_gate(rec, ga, gpu.act(rec, "up", u), act=act)
    gpu.run(rec)
    got = gpu.read(ga)
    assert np.isfinite(got).all()
    assert_close(got, REFERENCE[act](g) * u, what=act)


def test_gate_times_a_column_range_of_up(gpu: Gpu, rng):
    """Gemma 4's per-layer inputs: gelu(gate) times one layer's columns of rows holding every layer's."""
    n_tokens, cols, layers = 4, 48, 5
    g = f32_values(rng.standard_normal((n_tokens, cols)) * 4)
    u = f32_values(rng.standard_normal((n_tokens, cols * layers)))
    for layer in (0, 3, layers - 1):
        rec = gpu.recorder(n_tokens)
        ga = gpu.act(rec, "gate", g)
        ops.mul_gate(rec, ga, gpu.act(rec, "up", u), act="gelu", up_offset=layer * cols)
        gpu.run(rec)
        assert_close(gpu.read(ga), gelu(g) * u[:, layer * cols:(layer + 1) * cols], what=f"layer {layer}")
    with pytest.raises(ValueError, match="overrun"):
        ops.mul_gate(rec, ga, gpu.act(rec, "up", u), up_offset=cols * layers - 1)


def f32_values(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float32).astype(np.float64)
