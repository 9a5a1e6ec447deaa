"""The gated delta rule's decode form (shaders/gated_delta.wgsl, Qwen3.5's linear attention) against a float64 numpy
reference written from llama.cpp's autoregressive graph (tests/reference_recurrent.py).

Steps mix sequences as the engine packs them: several slots, one token each (decode) or several in a row (walked
token by token), new sequences at position 0 over a state full of NaN, key heads shared by several value heads.
Tolerance: |err| <= 1e-4 * max|ref| + 1e-6: the state carries f32 rounding from step to step (measured: 9e-7
relative to the largest output).
"""
from __future__ import annotations

import numpy as np
import pytest
from gpu_util import Gpu, assert_close, gpu, rng  # noqa: F401 (gpu and rng are fixtures)
from reference_recurrent import gated_delta

from llmchat.gpu import state_ops

pytestmark = pytest.mark.gpu

MAX_ROWS = 8
EPS = 1e-6


def run_steps(g: Gpu, rng, n_k: int, n_v: int, d: int, schedule: list[list[tuple]], n_slots: int = 3) -> None:
    qkv_cols, gb_cols = (2 * n_k + n_v) * d, 2 * n_v
    rec = g.recorder(MAX_ROWS)
    qkv_act = rec.act("qkv", MAX_ROWS, qkv_cols)
    gb_act = rec.act("gb", MAX_ROWS, gb_cols)
    out_act = rec.act("out", MAX_ROWS, n_v * d)
    state = g.device.buffer(n_slots * n_v * d * d * 4, "state")
    g.device.write(state, np.full(n_slots * n_v * d * d, np.nan, np.float32).tobytes())
    tokens = g.device.buffer(MAX_ROWS * 16, "tokens")
    state_ops.gated_delta(rec, qkv_act, gb_act, tokens, state, out_act, n_k_heads=n_k, n_v_heads=n_v, head_dim=d,
                          eps=EPS)
    program = rec.finish()
    ref_state, pos = {}, {}
    for feeds in schedule:
        n = sum(f[1] for f in feeds)
        qkv = rng.standard_normal((n, qkv_cols)).astype(np.float32)
        gbv = np.concatenate([-rng.uniform(0.01, 2.0, (n, n_v)), rng.uniform(0.05, 0.95, (n, n_v))], 1)
        gbv = gbv.astype(np.float32)
        records = []
        for slot, k, *restart in feeds:
            if restart or slot not in pos:
                pos[slot], ref_state[slot] = 0, np.zeros((n_v, d, d))
            records += [(1, pos[slot] + i, slot, 0) for i in range(k)]
        g.device.write(tokens, np.array(records, np.uint32).tobytes())
        g.device.write(rec.step, np.array([n, 0, 0, 0], np.uint32).tobytes())
        g.device.write(qkv_act.buffer, qkv.tobytes())
        g.device.write(gb_act.buffer, gbv.tobytes())
        g.device.write(out_act.buffer, np.full((MAX_ROWS, n_v * d), np.nan, np.float32).tobytes())
        g.device.run(program)
        got = np.frombuffer(g.device.read(out_act.buffer), np.float32).reshape(MAX_ROWS, n_v, d).astype(np.float64)
        states = np.frombuffer(g.device.read(state), np.float32).reshape(n_slots, n_v, d, d).astype(np.float64)
        row = 0
        for slot, k, *_ in feeds:
            x = qkv[row:row + k].astype(np.float64)
            q = x[:, :n_k * d].reshape(k, n_k, d)
            kk = x[:, n_k * d:2 * n_k * d].reshape(k, n_k, d)
            v = x[:, 2 * n_k * d:].reshape(k, n_v, d)
            gg = gbv[row:row + k].astype(np.float64)
            want, ref_state[slot] = gated_delta(q, kk, v, gg[:, :n_v], gg[:, n_v:], ref_state[slot], EPS)
            assert_close(got[row:row + k], want, rel=1e-4, what=f"slot {slot} at {pos[slot]}")
            assert_close(states[slot], ref_state[slot], rel=1e-4, what=f"slot {slot} state")
            pos[slot] += k
            row += k
        assert np.isnan(got[n:]).all(), "rows past the step's token count were written"


SCHEDULES = {
    "decode": [[(0, 1)]] * 12,
    "mixed": [[(0, 3), (1, 1)], [(1, 1), (0, 1), (2, 2)], [(2, 1), (0, 1), (1, 4)], [(0, 1, True), (1, 1), (2, 1)],
              [(0, 1), (1, 1), (2, 1)]],
}


@pytest.mark.parametrize("n_k,n_v,d", [(2, 2, 16), (1, 4, 32), (2, 4, 128)])
@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_gated_delta_steps(gpu: Gpu, rng, n_k: int, n_v: int, d: int, schedule: str):  # noqa: F811
    run_steps(gpu, rng, n_k, n_v, d, SCHEDULES[schedule])
