"""Time of ops.attention per kernel variant and KV cache type, decode and prefill, at real models' head shapes.

Each case records one program of `--layers` attention dispatches (as many as the model has layers, each over its
own K/V buffers, so caches do not stay warm between layers more than they would in the model), runs it once to
warm up, then keeps the best of `--rounds` timed runs; the variants of one case run interleaved, so load from other
programs falls on all of them alike. Splits are the adapter's own choice for each kernel (variants.py) unless
`--splits` forces one.

    .venv/bin/python tools/bench/attention_speed.py                       # SmolLM2 and Gemma 3 shapes, both kernels
    .venv/bin/python tools/bench/attention_speed.py --kernels flash --kv f16 --json
"""
from __future__ import annotations

import argparse
import json
import struct
import time

import numpy as np

from llmchat.gguf.config import AttentionShape
from llmchat.gpu import ops
from llmchat.gpu.kernels import Kernels
from llmchat.gpu.kvlayout import BLOCK_TOKENS, KVLayer, blocks_for
from llmchat.gpu.native import NativeDevice
from llmchat.gpu.recorder import Recorder
from llmchat.gpu.variants import ATTENTION_KERNELS

# name: (query heads, kv heads, head_dim, layers)
SHAPES = {"smollm2": (9, 3, 64, 30), "gemma3": (4, 1, 256, 26)}
# (mode, tokens, last position): decode at three contexts, a 64-token prefill chunk from position 0
CASES = [("decode", 1, 63), ("decode", 1, 511), ("decode", 1, 1999), ("prefill", 64, 63)]


def case_program(device: NativeDevice, kernels: Kernels, shape: tuple[int, int, int, int], tokens: int, last: int,
                 kernel: str, kv_type: str, splits: int | None):
    n_head, n_kv, hd, layers = shape
    rng = np.random.default_rng(0)
    context = last + 1
    max_blocks = blocks_for(context)
    step = device.buffer(16, "step", uniform=True)
    device.write(step, struct.pack("<4I", tokens, 0, 0, 0))
    rec = Recorder(device, kernels, step)
    qkv = rec.act("qkv", tokens, (n_head + 2 * n_kv) * hd)
    device.write(qkv.buffer, rng.standard_normal(tokens * qkv.cols).astype(np.float32).tobytes())
    out = rec.act("out", tokens, n_head * hd)
    infos = np.array([(1, last - tokens + 1 + t, 0, 0) for t in range(tokens)], np.uint32)
    tok = device.buffer(infos.nbytes, "tokens")
    device.write(tok, infos.tobytes())
    table = device.buffer(max_blocks * 4, "table")
    device.write(table, np.arange(max_blocks, dtype=np.uint32).tobytes())
    dtype = np.float16 if kv_type == "f16" else np.float32
    values = rng.standard_normal(max_blocks * BLOCK_TOKENS * n_kv * hd).astype(dtype).tobytes()
    shape = AttentionShape(n_head, n_kv, hd, scale=hd ** -0.5)
    for _ in range(layers):
        k, v = device.buffer(len(values), "k"), device.buffer(len(values), "v")
        device.write(k, values)
        device.write(v, values)
        ops.attention(rec, qkv, tok, KVLayer(k, v, table, max_blocks, context, kv_type), out, shape,
                      kernel=kernel, splits=splits)
    return rec.finish(), out


def timed(device: NativeDevice, program, out) -> float:
    start = time.perf_counter()
    device.run(program)
    device.read(out.buffer, 0, 4)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--kernels", nargs="+", default=list(ATTENTION_KERNELS), choices=ATTENTION_KERNELS)
    parser.add_argument("--kv", nargs="+", default=["f32", "f16"], choices=["f32", "f16"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--splits", type=int, default=None)
    parser.add_argument("--json", action="store_true", help="one JSON object per line instead of a table")
    args = parser.parse_args(argv)

    device = NativeDevice()
    kernels = Kernels(device)
    kv_types = [t for t in args.kv if t == "f32" or device.info.f16]
    if not args.json:
        print(f"adapter: {device.info.name} ({device.info.backend}); ms per step of all layers, best of "
              f"{args.rounds}")
    for name in args.shapes:
        shape = SHAPES[name]
        for mode, tokens, last in CASES:
            variants = [(k, t) for k in args.kernels for t in kv_types]
            programs = {v: case_program(device, kernels, shape, tokens, last, *v, args.splits) for v in variants}
            for program, out in programs.values():
                timed(device, program, out)  # warm-up
            best = {v: float("inf") for v in variants}
            for r in range(args.rounds):
                for v in (variants if r % 2 == 0 else variants[::-1]):
                    best[v] = min(best[v], timed(device, *programs[v]))
            for (kernel, kv_type), seconds in best.items():
                row = {"shape": name, "mode": mode, "tokens": tokens, "context": last + 1, "kernel": kernel,
                       "kv": kv_type, "layers": shape[3], "ms": round(seconds * 1e3, 2)}
                if args.json:
                    print(json.dumps(row))
                else:
                    print(f"{name:8} {mode:7} tokens {tokens:3} context {last + 1:5}  {kernel:10} {kv_type}  "
                          f"{row['ms']:8.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
