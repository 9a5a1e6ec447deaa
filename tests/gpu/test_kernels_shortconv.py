"""The short causal convolution with its rolling per-slot state (shaders/shortconv.wgsl), in both forms: LFM2's
gated one and Qwen3.5's SiLU one, against float64 numpy references that recompute from each sequence's whole
history (tests/support/reference_recurrent.py).

Steps mix sequences as the engine packs them: several slots per step, each with a prefill chunk or one decode token,
continuing where its state stands, new sequences starting at position 0 over a state full of NaN (which they must
never read). Tolerance: |err| <= 1e-5 * max|ref| + 1e-6 (gpu_util), a sum of L f32 products (measured: 1.6e-7 relative to the
largest output).
"""
from __future__ import annotations

import numpy as np
import pytest
from gpu_util import Gpu, assert_close, gpu, rng  # noqa: F401 (gpu and rng are fixtures)
from reference_recurrent import conv_silu, conv_state, shortconv

from llmchat.gpu import state_ops

pytestmark = pytest.mark.gpu

MAX_ROWS = 24  # the program is recorded for this many tokens; each step runs fewer


def run_steps(g: Gpu, rng, n_embd: int, taps: int, schedule: list[list[tuple[int, int]]], n_slots: int = 4,
              silu: bool = False):
    """Run `schedule` (per step: (slot, tokens) feeds, or (slot, tokens, True) to start a new sequence in a used
    slot; a slot's first feed starts one too) and check every step's outputs and every slot's state. With `silu`
    the Qwen3.5 form runs over the first n_embd columns of input rows wider than that."""
    conv = rng.standard_normal((n_embd, taps)).astype(np.float32)
    rec = g.recorder(MAX_ROWS)
    bcx_act = rec.act("bcx", MAX_ROWS, n_embd + 7 if silu else 3 * n_embd)
    y_act = rec.act("y", MAX_ROWS, n_embd + 5)  # wider rows than n_embd: the stride is honoured
    conv_buf = g.device.buffer(conv.nbytes, "conv")
    g.device.write(conv_buf, conv.tobytes())
    state = g.device.buffer(n_slots * (taps - 1) * n_embd * 4, "state")
    g.device.write(state, np.full(n_slots * (taps - 1) * n_embd, np.nan, np.float32).tobytes())
    tokens = g.device.buffer(MAX_ROWS * 16, "tokens")
    if silu:
        state_ops.conv_silu(rec, bcx_act, tokens, conv_buf, state, y_act, channels=n_embd, taps=taps)
    else:
        state_ops.shortconv(rec, bcx_act, tokens, conv_buf, state, y_act, n_embd=n_embd, l_cache=taps)
    program = rec.finish()
    history = {}
    for feeds in schedule:
        n = sum(f[1] for f in feeds)
        bcx = (rng.standard_normal((n, bcx_act.cols)) * 2).astype(np.float32)
        records = []
        for slot, k, *restart in feeds:
            if restart or slot not in history:
                history[slot] = np.zeros((0, n_embd))
            start = len(history[slot])
            records += [(7, start + i, slot, 0) for i in range(k)]
        g.device.write(tokens, np.array(records, np.uint32).tobytes())
        g.device.write(rec.step, np.array([n, 0, 0, 0], np.uint32).tobytes())
        g.device.write(y_act.buffer, np.full((MAX_ROWS, y_act.cols), np.nan, np.float32).tobytes())
        g.device.write(bcx_act.buffer, bcx.tobytes())
        g.device.run(program)
        got = np.frombuffer(g.device.read(y_act.buffer), np.float32).reshape(MAX_ROWS, -1).astype(np.float64)
        row = 0
        for slot, k, *_ in feeds:
            reference = conv_silu if silu else shortconv
            inputs = bcx[row:row + k, :n_embd] if silu else bcx[row:row + k]
            want, history[slot] = reference(inputs.astype(np.float64), conv.astype(np.float64), history[slot])
            assert_close(got[row:row + k, :n_embd], want, what=f"slot {slot} positions {len(history[slot]) - k}+")
            row += k
        assert np.isnan(got[n:]).all(), "rows past the step's token count were written"
        assert np.isnan(got[:n, n_embd:]).all(), "columns past n_embd were written"
        states = np.frombuffer(g.device.read(state), np.float32).reshape(n_slots, taps - 1, n_embd)
        for slot, *_ in feeds:
            assert_close(states[slot].astype(np.float64), conv_state(history[slot], taps), what=f"slot {slot} state")


# Decode only; prefill chunks shorter and longer than the window; mixed steps of up to four sequences.
SCHEDULES = {
    "decode": [[(0, 1)]] * 6,
    "prefill-then-decode": [[(1, 5)], [(1, 1)], [(1, 2)], [(1, 1)]],
    "mixed": [[(0, 7), (2, 1)], [(2, 3), (0, 1), (3, 1)], [(3, 9), (0, 1), (2, 1)], [(1, 2), (3, 1), (0, 1)],
              [(0, 1), (1, 1), (2, 1), (3, 1)]],
}


@pytest.mark.parametrize("n_embd,taps", [(64, 3), (200, 2), (96, 4)])
@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_shortconv_steps(gpu: Gpu, rng, n_embd: int, taps: int, schedule: str):  # noqa: F811
    run_steps(gpu, rng, n_embd, taps, SCHEDULES[schedule])


@pytest.mark.parametrize("channels,taps", [(64, 4), (160, 4), (72, 2)])
@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_conv_silu_steps(gpu: Gpu, rng, channels: int, taps: int, schedule: str):  # noqa: F811
    run_steps(gpu, rng, channels, taps, SCHEDULES[schedule], silu=True)


def test_new_sequence_in_a_used_slot_ignores_its_state(gpu: Gpu, rng):  # noqa: F811
    """A slot whose state holds another sequence's values starts over at position 0 without a reset."""
    for silu in (False, True):
        run_steps(gpu, rng, 64, 3, [[(0, 6), (1, 2)], [(0, 1), (1, 4, True)], [(0, 2, True), (1, 1)], [(0, 1)]],
                  silu=silu)
