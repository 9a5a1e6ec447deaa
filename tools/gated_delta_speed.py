"""Time of the gated delta rule's prefill, one layer, by the chunked kernel against token-by-token ones.

A prompt of `--tokens` tokens (one sequence from position 0) through one linear-attention layer's gated delta rule:
  chunk   the chunked form (gated_delta_chunk.wgsl), one dispatch over the whole prompt;
  token   the decode form (gated_delta.wgsl), one dispatch over the whole prompt, walking it token by token;
  steps   the decode form as a token-at-a-time prefill runs it: one one-token dispatch per token, each over its
          own input, output and record buffers, all in one submission (the kernels' cost only, no per-step
          host round trip).
Default shape: Qwen3.5-0.8B's linear-attention layers, 16 key heads, 16 value heads, head size 128 (its
linear_num_key_heads / linear_num_value_heads / linear_key_head_dim; llama.cpp's ssm_n_group, ssm_dt_rank and
ssm_d_state). Each variant runs once to warm up, then the best of `--rounds` interleaved runs is kept, timed as the
tuner times (tune._timed): wall time, and the cost, which on CPU emulators is this process's CPU seconds (other
programs competing for the cores barely move it; ratios are taken from it). The three outputs are compared (they
must agree within f32 rounding) and the adapter's own choices for a prefill program (Variants.gated_delta_form,
gated_delta_rows) are printed beside the figures.

    .venv/bin/python tools/gated_delta_speed.py --json
"""
from __future__ import annotations

import argparse
import json
import struct

import numpy as np

from llmchat.gpu import state_ops
from llmchat.gpu.tune import _timed
from llmchat.gpu.kernels import Kernels
from llmchat.gpu.native import NativeDevice
from llmchat.gpu.recorder import Act, Recorder
from llmchat.gpu.variants import variants

EPS = 1e-6


def inputs(tokens: int, n_k: int, n_v: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    qkv = rng.standard_normal((tokens, (2 * n_k + n_v) * d)).astype(np.float32)
    gb = np.concatenate([-rng.uniform(0.01, 2.0, (tokens, n_v)), rng.uniform(0.05, 0.95, (tokens, n_v))], 1)
    return qkv, gb.astype(np.float32)


def program(device: NativeDevice, kernels: Kernels, variant: str, qkv: np.ndarray, gb: np.ndarray, n_k: int,
            n_v: int, d: int):
    """The program of `variant` and a function reading its outputs (tokens x n_v * d)."""
    tokens = len(qkv)
    state = device.buffer(n_v * d * d * 4, "state")
    shape = dict(n_k_heads=n_k, n_v_heads=n_v, head_dim=d, eps=EPS)
    if variant in ("chunk", "token"):
        step = device.buffer(16, "step", uniform=True)
        device.write(step, struct.pack("<4I", tokens, 0, 0, 0))
        rec = Recorder(device, kernels, step)
        acts = [Act(device.buffer(a.nbytes, name), tokens, a.shape[1]) for name, a in (("qkv", qkv), ("gb", gb))]
        for act, data in zip(acts, (qkv, gb)):
            device.write(act.buffer, data.tobytes())
        out = rec.act("out", tokens, n_v * d)
        records = device.buffer(tokens * 16, "tokens")
        device.write(records, np.array([(1, t, 0, 0) for t in range(tokens)], np.uint32).tobytes())
        state_ops.gated_delta(rec, acts[0], acts[1], records, state, out, form=variant, **shape)
        outs = [out.buffer]
    else:
        step = device.buffer(16, "step", uniform=True)
        device.write(step, struct.pack("<4I", 1, 0, 0, 0))
        rec = Recorder(device, kernels, step)
        outs = []
        for t in range(tokens):
            x, g = rec.act("qkv", 1, qkv.shape[1]), rec.act("gb", 1, gb.shape[1])
            device.write(x.buffer, qkv[t].tobytes())
            device.write(g.buffer, gb[t].tobytes())
            record = device.buffer(16, "tokens")
            device.write(record, struct.pack("<4I", 1, t, 0, 0))
            out = rec.act("out", 1, n_v * d)
            state_ops.gated_delta(rec, x, g, record, state, out, form="token", **shape)
            outs.append(out.buffer)

    def read() -> np.ndarray:
        return np.concatenate([np.frombuffer(device.read(b), np.float32) for b in outs]).reshape(tokens, -1)

    return rec.finish(), outs[-1], read


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--k-heads", type=int, default=16)
    parser.add_argument("--v-heads", type=int, default=16)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    args = parser.parse_args(argv)

    device = NativeDevice()
    kernels = Kernels(device)
    n_k, n_v, d = args.k_heads, args.v_heads, args.head_dim
    qkv, gb = inputs(args.tokens, n_k, n_v, d)
    names = ("chunk", "token", "steps")
    progs = {v: program(device, kernels, v, qkv, gb, n_k, n_v, d) for v in names}
    outputs = {}
    for v, (prog, last, read) in progs.items():
        _timed(device, prog, last)  # warm-up, and the outputs compared below
        outputs[v] = read()
    wall = {v: float("inf") for v in names}
    best = {v: float("inf") for v in names}
    for r in range(args.rounds):
        for v in (names if r % 2 == 0 else names[::-1]):
            w, cost = _timed(device, *progs[v][:2])
            wall[v], best[v] = min(wall[v], w), min(best[v], cost)
    scale = np.abs(outputs["steps"]).max()
    report = {
        "adapter": device.info.name, "software": device.info.software, "tokens": args.tokens,
        "shape": {"k_heads": n_k, "v_heads": n_v, "head_dim": d}, "rounds": args.rounds,
        "cost": "cpu" if device.info.software else "wall",
        "ms": {v: round(best[v] * 1e3, 2) for v in names},
        "wall_ms": {v: round(wall[v] * 1e3, 2) for v in names},
        "speedup_chunk_vs_token": round(best["token"] / best["chunk"], 2),
        "speedup_chunk_vs_steps": round(best["steps"] / best["chunk"], 2),
        "max_rel_diff_vs_steps": {v: float(np.abs(outputs[v] - outputs["steps"]).max() / scale)
                                  for v in ("chunk", "token")},
        "prefill_form_chosen": variants(device).gated_delta_form(args.tokens),
        "rows_per_lane": variants(device).gated_delta_rows,
    }
    if args.json:
        print(json.dumps(report))
    else:
        print(f"adapter: {report['adapter']}; {args.tokens} tokens, {n_k}/{n_v} heads of {d}; ms ({report['cost']}"
              f" and wall), best of {args.rounds}")
        for v in names:
            print(f"  {v:6} {report['ms'][v]:10.2f} {report['wall_ms'][v]:10.2f}")
        print(f"  chunk is {report['speedup_chunk_vs_token']}x the token kernel, {report['speedup_chunk_vs_steps']}x "
              f"one-token steps; prefill programs run '{report['prefill_form_chosen']}'")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
