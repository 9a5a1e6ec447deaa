"""The gated delta rule (Qwen3.5's linear attention), both kernels: the decode form (shaders/gated_delta.wgsl,
"token") and the chunked prefill form (shaders/gated_delta_chunk.wgsl, "chunk"), each against a float64 numpy
reference written from llama.cpp's autoregressive graph (tests/support/reference_recurrent.py), and against each other.
The chunked numpy reference (llama.cpp's prefill graph) is checked against the autoregressive one here too.

Steps mix sequences as the engine packs them: several slots, one token each (decode) or several in a row, new
sequences at position 0 over a state full of NaN, sequences resuming from their slot's state, key heads shared by
several value heads; for the chunked form, sequences of 1, 7, 64 and 130 tokens (chunks of 32: partial last
chunks, chunks crossing no boundary, a lone token).
Tolerance: |err| <= 1e-4 * max|ref| + 1e-6: the state carries f32 rounding from step to step and chunk to chunk
(measured: 9e-7 relative to the largest output for the decode form).
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from gpu_util import Gpu, assert_close, gpu, rng  # noqa: F401 (gpu and rng are fixtures)
from reference_recurrent import gated_delta, gated_delta_chunked

from llmchat.gpu import state_ops, tune, variants

pytestmark = pytest.mark.gpu

MAX_ROWS = 8
EPS = 1e-6


def random_step(rng, n: int, n_k: int, n_v: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """qkv and gb for `n` tokens: g in the range of Qwen3.5's gates, beta in (0, 1)."""
    qkv = rng.standard_normal((n, (2 * n_k + n_v) * d)).astype(np.float32)
    gb = np.concatenate([-rng.uniform(0.01, 2.0, (n, n_v)), rng.uniform(0.05, 0.95, (n, n_v))], 1)
    return qkv, gb.astype(np.float32)


def run_steps(g: Gpu, rng, n_k: int, n_v: int, d: int, schedule: list[list[tuple]], n_slots: int = 3,
              form: str | None = None, rows: int | None = None) -> None:
    """Run `schedule` (steps of (slot, tokens[, restart]) feeds) through one recorded program and check every
    step's outputs and states against the reference."""
    max_rows = max(MAX_ROWS, *(sum(f[1] for f in feeds) for feeds in schedule))
    qkv_cols, gb_cols = (2 * n_k + n_v) * d, 2 * n_v
    rec = g.recorder(max_rows)
    qkv_act = rec.act("qkv", max_rows, qkv_cols)
    gb_act = rec.act("gb", max_rows, gb_cols)
    out_act = rec.act("out", max_rows, n_v * d)
    state = g.device.buffer(n_slots * n_v * d * d * 4, "state")
    g.device.write(state, np.full(n_slots * n_v * d * d, np.nan, np.float32).tobytes())
    tokens = g.device.buffer(max_rows * 16, "tokens")
    state_ops.gated_delta(rec, qkv_act, gb_act, tokens, state, out_act, n_k_heads=n_k, n_v_heads=n_v, head_dim=d,
                          eps=EPS, form=form, rows=rows)
    program = rec.finish()
    ref_state, pos = {}, {}
    for feeds in schedule:
        n = sum(f[1] for f in feeds)
        qkv, gbv = random_step(rng, n, n_k, n_v, d)
        records = []
        for slot, k, *restart in feeds:
            if restart or slot not in pos:
                pos[slot], ref_state[slot] = 0, np.zeros((n_v, d, d))
            records += [(1, pos[slot] + i, slot, 0) for i in range(k)]
        g.device.write(tokens, np.array(records, np.uint32).tobytes())
        g.device.write(rec.step, np.array([n, 0, 0, 0], np.uint32).tobytes())
        g.device.write(qkv_act.buffer, qkv.tobytes())
        g.device.write(gb_act.buffer, gbv.tobytes())
        g.device.write(out_act.buffer, np.full((max_rows, n_v * d), np.nan, np.float32).tobytes())
        g.device.run(program)
        got = np.frombuffer(g.device.read(out_act.buffer), np.float32).reshape(max_rows, n_v, d).astype(np.float64)
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


# Prefill steps for the chunked form: one long sequence then its continuation, three sequences of 1 to 130 tokens
# (one new, two resuming at positions > 0 in the second step, one restarted).
CHUNK_SCHEDULES = {
    "one": [[(0, 130)], [(0, 7)], [(0, 64)], [(0, 1)]],
    "three": [[(0, 64), (1, 7), (2, 130)], [(1, 130), (0, 1), (2, 64, True)], [(2, 7), (1, 1), (0, 64)]],
}


@pytest.mark.parametrize("n_k,n_v,d", [(2, 2, 16), (1, 4, 32), (2, 4, 128)])
@pytest.mark.parametrize("form", variants.GATED_DELTA_FORMS)
@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_gated_delta_steps(gpu: Gpu, rng, n_k: int, n_v: int, d: int, schedule: str, form: str):  # noqa: F811
    run_steps(gpu, rng, n_k, n_v, d, SCHEDULES[schedule], form=form)


@pytest.mark.parametrize("n_k,n_v,d,schedule,rows", [
    (2, 2, 16, "three", None), (1, 2, 32, "one", None), (2, 4, 64, "three", None), (1, 2, 128, "three", None),
    (2, 2, 128, "one", None),
    # the other adapter class's rows per lane (GPUs 1, CPU emulators 8); heads of 20 (rows past the head) and 48
    # (a partial tile of key columns)
    (1, 2, 16, "three", 1), (2, 2, 64, "one", 1), (1, 2, 20, "three", 8), (1, 1, 48, "one", 8)])
def test_gated_delta_chunk_prefill(gpu: Gpu, rng, n_k: int, n_v: int, d: int, schedule: str,  # noqa: F811
                                   rows: int | None):
    run_steps(gpu, rng, n_k, n_v, d, CHUNK_SCHEDULES[schedule], form="chunk", rows=rows)


def test_gated_delta_chunk_long_step(gpu: Gpu, rng):  # noqa: F811
    """A 520-token step of one sequence at head size 128: past the chunks one dispatch may walk on CPU emulators
    (Variants.gated_delta_window), so the kernel runs as several dispatches, each resuming from the state."""
    run_steps(gpu, rng, 1, 1, 128, [[(0, 520)]], n_slots=1, form="chunk")


def test_gated_delta_chunk_equals_token(gpu: Gpu, rng):  # noqa: F811
    """Both kernels on the same step (three sequences of 130, 7 and 64 tokens resuming from the same states, key
    heads shared): outputs and states agree within f32 rounding (|err| <= 2e-5 * max|b| + 1e-6)."""
    n_k, n_v, d, lengths = 1, 4, 64, (130, 7, 64)
    n = sum(lengths)
    qkv, gbv = random_step(rng, n, n_k, n_v, d)
    start = (rng.standard_normal((len(lengths), n_v, d, d)) * 0.3).astype(np.float32)
    records = [(1, 40 + i, slot, 0) for slot, k in enumerate(lengths) for i in range(k)]
    results = {}
    for form in variants.GATED_DELTA_FORMS:
        rec = gpu.recorder(n)
        qkv_act, gb_act, out_act = rec.act("qkv", n, qkv.shape[1]), rec.act("gb", n, gbv.shape[1]), rec.act(
            "out", n, n_v * d)
        state = gpu.device.buffer(start.nbytes, "state")
        tokens = gpu.device.buffer(n * 16, "tokens")
        state_ops.gated_delta(rec, qkv_act, gb_act, tokens, state, out_act, n_k_heads=n_k, n_v_heads=n_v,
                              head_dim=d, eps=EPS, form=form)
        gpu.device.write(tokens, np.array(records, np.uint32).tobytes())
        gpu.device.write(rec.step, np.array([n, 0, 0, 0], np.uint32).tobytes())
        for act, data in ((qkv_act, qkv), (gb_act, gbv)):
            gpu.device.write(act.buffer, data.tobytes())
        gpu.device.write(state, start.tobytes())
        gpu.device.run(rec.finish())
        results[form] = [np.frombuffer(gpu.device.read(b), np.float32).astype(np.float64)
                         for b in (out_act.buffer, state)]
    for got, want, what in zip(results["chunk"], results["token"], ("outputs", "states")):
        assert_close(got, want, rel=2e-5, what=f"chunk vs token {what}")


def test_chunked_reference_equals_token_reference(rng):  # noqa: F811
    """The chunked reference (llama.cpp's prefill graph) is the autoregressive one: several sequences of lengths
    that leave partial chunks, a nonzero starting state, key heads shared by value heads, chunk sizes 64 and 32."""
    n_k, n_v, d = 2, 6, 16
    for n in (1, 7, 64, 150):
        q, k = rng.standard_normal((2, n, n_k, d))
        v = rng.standard_normal((n, n_v, d))
        g, beta = -rng.uniform(0.01, 2.0, (n, n_v)), rng.uniform(0.05, 0.95, (n, n_v))
        start = rng.standard_normal((n_v, d, d))
        want, want_state = gated_delta(q, k, v, g, beta, start, EPS)
        for chunk in (64, 32):
            got, got_state = gated_delta_chunked(q, k, v, g, beta, start, EPS, chunk)
            assert_close(got, want, rel=1e-12, what=f"{n} tokens, chunks of {chunk}")
            assert_close(got_state, want_state, rel=1e-12, what=f"{n} tokens, chunks of {chunk}, state")


def test_gated_delta_form_is_chosen_and_reported(gpu: Gpu):  # noqa: F811
    """Without a forced form, decode programs record the token kernel and prefill programs the adapter's choice
    (Variants.gated_delta_form), and the tuning report (`llmchat bench`'s "kernels") names both for a model with
    linear-attention layers, none for one without."""
    v = variants.variants(gpu.device)
    for rows, key in ((1, "decode"), (8, "prefill")):
        rec = gpu.recorder(rows)
        acts = [rec.act(name, rows, cols) for name, cols in (("qkv", 3 * 32), ("gb", 2), ("out", 32))]
        state_ops.gated_delta(rec, acts[0], acts[1], gpu.device.buffer(rows * 16, "tokens"),
                              gpu.device.buffer(32 * 32 * 4, "state"), acts[2], n_k_heads=1, n_v_heads=1,
                              head_dim=32, eps=EPS)
        want = {"token": "gated_delta", "chunk": "gated_delta_chunk["}[v.gated_delta_form(rows)]
        assert rec.dispatches[0].kernel.name.startswith(want), (key, rec.dispatches[0].kernel.name)
    fresh = dataclasses.replace(v, tuned={})
    assert tune.gated_delta_choices(fresh, {"blk.0.attn_q.weight": None}, 64) == {}
    choices = tune.gated_delta_choices(fresh, {"blk.0.ssm_a": None}, 64)
    assert choices["gated_delta/decode"] == {"variant": "'token'", "by": "default"}
    assert choices["gated_delta/prefill"] == {"variant": "'chunk'", "by": "default",
                                              "rows_per_lane": fresh.gated_delta_rows}
    fresh.tuned[("gated_delta", "prefill")] = "token"
    assert tune.gated_delta_choices(fresh, {"blk.0.ssm_a": None}, 64)["gated_delta/prefill"] == {
        "variant": "'token'", "by": "tuned"}
