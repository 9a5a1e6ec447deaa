"""Throughput of the decode matrix-vector product (matmul.wgsl with one token) per weight type, in G multiply-adds/s.

Each measurement records one program of many identical dispatches (same weight, same x, same y), runs it once
to warm up, then times one run followed by a single readback, so per-call Python and submission costs are
amortised the way a recorded forward pass amortises them. Besides wall-clock throughput it reports multiply-adds
per CPU-second of this process (all threads): on CPU adapters such as lavapipe that figure barely moves when
other programs compete for the cores, while wall-clock figures do. Weights are random blocks whose f16 scales are sane
(random f16 bytes would include NaN and subnormals, which CPU adapters handle at a different speed).

    .venv/bin/python tools/kernel_speed.py                      # q4_1 q8_0 q4_k q6_k on two shapes
    .venv/bin/python tools/kernel_speed.py --types q4_0 f16 --json

Weights are in the layout and the kernel variant the model would get on this adapter (llmchat.gpu.variants).
Shapes are SmolLM2-135M's: ffn_down (576 outputs, rows of 1536) and the tied output matrix (49152 outputs, rows
of 576; K-quants need rows that are a multiple of 256, so they use 512 there and the line says so).
"""
from __future__ import annotations

import argparse
import json
import struct
import sys
import time

import numpy as np

from llmchat.ggml_types import BLOCK_LAYOUT, GGMLType
from llmchat.gpu import ops
from llmchat.gpu.kernels import Kernels
from llmchat.gpu.native import NativeDevice
from llmchat.gpu.recorder import Recorder
from llmchat.gpu.tensors import SPLIT_TYPES, Piece, split_weight, upload_weight
from llmchat.gpu.variants import variants

# Byte offsets of the f16 fields (scales, mins) in one block of each quantized type.
F16_FIELDS: dict[GGMLType, tuple[int, ...]] = {
    GGMLType.Q4_0: (0,), GGMLType.Q4_1: (0, 2), GGMLType.Q5_0: (0,), GGMLType.Q5_1: (0, 2), GGMLType.Q8_0: (0,),
    GGMLType.Q2_K: (80, 82), GGMLType.Q3_K: (108,), GGMLType.Q4_K: (0, 2), GGMLType.Q5_K: (0, 2),
    GGMLType.Q6_K: (208,),
}
FLOAT_DTYPES = {GGMLType.F32: np.float32, GGMLType.F16: np.float16}

SHAPES = [(576, 1536), (49152, 576)]  # (outputs, row length)


def random_weight(rng: np.random.Generator, qtype: GGMLType, rows: int, k: int) -> bytes:
    elems, nbytes = BLOCK_LAYOUT[qtype]
    if qtype in FLOAT_DTYPES:
        return rng.standard_normal(rows * k).astype(FLOAT_DTYPES[qtype]).tobytes()
    if qtype == GGMLType.BF16:
        return (rng.standard_normal(rows * k).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes()
    blocks = rng.integers(0, 256, (rows * k // elems, nbytes), dtype=np.uint8)
    for offset in F16_FIELDS[qtype]:
        blocks[:, offset:offset + 2] = rng.uniform(0.005, 0.05, (len(blocks), 1)).astype(np.float16).view(np.uint8)
    return blocks.tobytes()


def measure(device: NativeDevice, kernels: Kernels, qtype: GGMLType, rows: int, k: int, seconds: float,
            max_dispatches: int) -> dict:
    """Time `n` back-to-back dispatches of one matvec, n chosen so the timed run lasts about `seconds`."""
    rng = np.random.default_rng(0)
    weight = upload_weight(device, "w", qtype, k, [Piece.of(rows, random_weight(rng, qtype, rows, k))])
    if variants(device).split_weights and qtype in SPLIT_TYPES:  # the layout the model loader would choose
        weight = split_weight(device, kernels, weight)
    step = device.buffer(16, "step", uniform=True)
    device.write(step, struct.pack("<4I", 1, 0, 0, 0))

    def timed(n: int) -> tuple[float, float]:
        rec = Recorder(device, kernels, step)
        x = rec.act("x", 1, k)
        device.write(x.buffer, rng.standard_normal(k).astype(np.float32).tobytes())
        y = rec.act("y", 1, rows)
        for _ in range(n):
            ops.matmul(rec, weight, x, y)
        program = rec.finish()
        device.run(program)  # warm-up: first use of the pipeline and the bind groups
        device.read(y.buffer, 0, 4)
        start, cpu = time.perf_counter(), time.process_time()
        device.run(program)
        device.read(y.buffer, 0, 4)
        return time.perf_counter() - start, time.process_time() - cpu

    probe = 4
    per = timed(probe)[0] / probe
    n = int(min(max_dispatches, max(probe, seconds / per)))
    elapsed, cpu = timed(n)
    macs = n * rows * k
    tile = variants(device).matmul(1)
    return {"type": qtype.name, "rows": rows, "k": k, "layout": weight.layout,
            "tile": f"{tile.rows} rows x {tile.tokens} tokens, {tile.xload} x loads", "dispatches": n, "seconds": round(elapsed, 4),
            "us_per_dispatch": round(elapsed / n * 1e6, 1), "gmacs": round(macs / elapsed / 1e9, 3),
            "weight_gb_per_s": round(n * weight.nbytes / elapsed / 1e9, 3),
            "cpu_seconds": round(cpu, 4), "gmacs_per_cpu_s": round(macs / cpu / 1e9, 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--types", nargs="+", default=["q4_1", "q8_0", "q4_k", "q6_k"],
                        help="GGML type names (case-insensitive)")
    parser.add_argument("--seconds", type=float, default=1.0, help="target length of each timed run")
    parser.add_argument("--max-dispatches", type=int, default=400)
    parser.add_argument("--json", action="store_true", help="one JSON object per line instead of a table")
    args = parser.parse_args(argv)

    device = NativeDevice()
    kernels = Kernels(device)
    info = device.info
    if not args.json:
        print(f"adapter: {info.name} ({info.backend}, software={info.software}); decode tile: "
              f"{variants(device).matmul(1)}")
        print(f"{'type':6} {'outputs':>7} {'k':>5} {'dispatches':>10} {'us/dispatch':>11} {'GMAC/s':>8} {'GB/s':>7} {'GMAC/cpu-s':>10}")
    for name in args.types:
        qtype = GGMLType[name.upper()]
        for rows, k in SHAPES:
            block = BLOCK_LAYOUT[qtype][0]
            k_used = k // block * block if k % block else k  # K-quants: the largest whole number of blocks
            r = measure(device, kernels, qtype, rows, k_used, args.seconds, args.max_dispatches)
            r["adapter"] = info.name
            if args.json:
                print(json.dumps(r))
            else:
                note = f"  (rows of {k_used}, not {k})" if k_used != k else ""
                print(f"{r['type']:6} {rows:>7} {k_used:>5} {r['dispatches']:>10} {r['us_per_dispatch']:>11} "
                      f"{r['gmacs']:>8} {r['weight_gb_per_s']:>7} {r['gmacs_per_cpu_s']:>10}  {r['layout']}{note}")
            sys.stdout.flush()
    device.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
