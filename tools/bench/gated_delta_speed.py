"""Time of the gated delta rule's prefill, one layer, by the chunked kernel against token-by-token ones.

A prompt of `--tokens` tokens (one sequence from position 0) through one linear-attention layer's gated delta rule,
each variant a form (state_ops.gated_delta's `form`) and a step size, all its steps in one submission (the kernels'
cost only, no per-step host round trip), each step over its own input, output and record buffers:
  chunk/512  the chunked form (gated_delta_chunk.wgsl), the whole prompt in one step;
  token/512  the decode form (gated_delta.wgsl), the whole prompt in one step, walked token by token;
  token/1    the decode form one token a step: what a token-at-a-time prefill costs in kernels;
  chunk/64, token/64  both forms in steps of 64 tokens, the engine's default prefill step (Engine
             max_tokens_per_step).
Default shape: Qwen3.5-0.8B's linear-attention layers, 16 key heads, 16 value heads, head size 128 (its
linear_num_key_heads / linear_num_value_heads / linear_key_head_dim; llama.cpp's ssm_n_group, ssm_dt_rank and
ssm_d_state). Each variant runs once to warm up, then the best of `--rounds` interleaved runs is kept, timed as the
tuner times (tune.time_run): wall time, and the cost, which on CPU emulators is this process's CPU seconds (other
programs competing for the cores barely move it; ratios are taken from it). Every variant's outputs are compared
with token/1's (or the first variant's without it; `ok`: within 1e-4 of the largest output; a variant whose kernel stopped early is not ok, and its
time is not that of the whole prompt), and the adapter's own choices for a prefill program
(Variants.gated_delta_form, gated_delta_rows, gated_delta_window) are printed beside the figures.

    .venv/bin/python tools/bench/gated_delta_speed.py --json
"""
from __future__ import annotations

import argparse
import json
import struct

import numpy as np

from llmchat.gpu import state_ops
from llmchat.gpu.kernels import Kernels
from llmchat.gpu.native import NativeDevice
from llmchat.gpu.recorder import Recorder
from llmchat.gpu.tune import time_run
from llmchat.gpu.variants import variants

VARIANTS = ("chunk/512", "token/512", "token/1", "chunk/64", "token/64")
EPS = 1e-6


def inputs(tokens: int, n_k: int, n_v: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    qkv = rng.standard_normal((tokens, (2 * n_k + n_v) * d)).astype(np.float32)
    gb = np.concatenate([-rng.uniform(0.01, 2.0, (tokens, n_v)), rng.uniform(0.05, 0.95, (tokens, n_v))], 1)
    return qkv, gb.astype(np.float32)


def program(device: NativeDevice, kernels: Kernels, variant: str, qkv: np.ndarray, gb: np.ndarray, n_k: int,
            n_v: int, d: int):
    """The program of `variant` ("form/step tokens") and a function reading its outputs (tokens x n_v * d)."""
    form, size = variant.split("/")
    tokens, size = len(qkv), min(int(size), len(qkv))
    if tokens % size:
        raise SystemExit(f"--tokens {tokens} is not a multiple of {variant}'s step of {size}")
    state = device.buffer(n_v * d * d * 4, "state")
    step = device.buffer(16, "step", uniform=True)
    device.write(step, struct.pack("<4I", size, 0, 0, 0))
    rec = Recorder(device, kernels, step)
    outs = []
    for t0 in range(0, tokens, size):
        x, g = rec.act("qkv", size, qkv.shape[1]), rec.act("gb", size, gb.shape[1])
        device.write(x.buffer, qkv[t0:t0 + size].tobytes())
        device.write(g.buffer, gb[t0:t0 + size].tobytes())
        records = device.buffer(size * 16, "tokens")
        device.write(records, np.array([(1, t0 + t, 0, 0) for t in range(size)], np.uint32).tobytes())
        out = rec.act("out", size, n_v * d)
        state_ops.gated_delta(rec, x, g, records, state, out, n_k_heads=n_k, n_v_heads=n_v, head_dim=d, eps=EPS,
                              form=form)
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
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    args = parser.parse_args(argv)

    device = NativeDevice()
    kernels = Kernels(device)
    n_k, n_v, d = args.k_heads, args.v_heads, args.head_dim
    qkv, gb = inputs(args.tokens, n_k, n_v, d)
    names = args.variants
    progs = {v: program(device, kernels, v, qkv, gb, n_k, n_v, d) for v in names}
    outputs = {}
    for v, (prog, last, read) in progs.items():
        time_run(device, prog, last)  # warm-up, and the outputs compared below
        outputs[v] = read()
    wall = {v: float("inf") for v in names}
    best = {v: float("inf") for v in names}
    for r in range(args.rounds):
        for v in (names if r % 2 == 0 else names[::-1]):
            w, cost = time_run(device, *progs[v][:2])
            wall[v], best[v] = min(wall[v], w), min(best[v], cost)
    base_name = "token/1" if "token/1" in outputs else names[0]
    base = outputs[base_name]
    diff = {v: float(np.nanmax(np.abs(outputs[v] - base)) / np.abs(base).max()) for v in names}
    v_ = variants(device)
    report = {
        "adapter": device.info.name, "software": device.info.software, "tokens": args.tokens,
        "shape": {"k_heads": n_k, "v_heads": n_v, "head_dim": d}, "rounds": args.rounds,
        "cost": "cpu" if device.info.software else "wall",
        "ms": {v: round(best[v] * 1e3, 2) for v in names},
        "wall_ms": {v: round(wall[v] * 1e3, 2) for v in names},
        "compared_with": base_name,
        "max_rel_diff": diff,
        "ok": {v: bool(diff[v] <= 1e-4 and np.isfinite(outputs[v]).all()) for v in names},
        "ratios": {f"{a} / {b}": round(best[a] / best[b], 2) for a, b in
                   (("token/1", "chunk/512"), ("token/512", "chunk/512"), ("token/64", "chunk/64"),
                    ("token/1", "chunk/64")) if a in best and b in best},
        "prefill_choice": {"form": v_.gated_delta_form(args.tokens), "rows_per_lane": v_.gated_delta_rows,
                           "chunks_per_dispatch": v_.gated_delta_window(d) or "all"},
    }
    if args.json:
        print(json.dumps(report))
    else:
        print(f"adapter: {report['adapter']}; {args.tokens} tokens, {n_k}/{n_v} heads of {d}; ms ({report['cost']}"
              f" and wall), best of {args.rounds}")
        for v in names:
            print(f"  {v:10} {report['ms'][v]:10.2f} {report['wall_ms'][v]:10.2f}  "
                  f"{'ok' if report['ok'][v] else 'WRONG (max diff %.3g)' % diff[v]}")
        for k, r in report["ratios"].items():
            print(f"  {k}: {r}x")
        print(f"  prefill programs run {report['prefill_choice']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
