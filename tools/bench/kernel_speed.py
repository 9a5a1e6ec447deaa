"""Throughput of matmul.wgsl per weight type, decode (one token) and prefill (a chunk of tokens), in G multiply-adds/s.

Each measurement records one program of many identical dispatches (same weight, same x, same y), runs it once
to warm up, then times one run followed by a single readback, so per-call Python and submission costs are
amortised the way a recorded forward pass amortises them. Besides wall-clock throughput it reports multiply-adds
per CPU-second of this process (all threads): on CPU adapters such as lavapipe that figure barely moves when
other programs compete for the cores, while wall-clock figures do. `--rounds` repeats every measurement, the
types interleaved (every other round in reverse order), and keeps each one's best, so load from other programs
falls on all types alike; the "vs Q4_1" columns give each figure relative to Q4_1's in the same run. Weights are random blocks whose f16 scales
are sane (`llmchat.quant.random_blocks`: random f16 bytes would include NaN and subnormals, which CPU adapters handle
at a different speed).

    .venv/bin/python tools/bench/kernel_speed.py --rounds 3           # the quantized types, decode and prefill
    .venv/bin/python tools/bench/kernel_speed.py --types q4_0 f16 --json
    .venv/bin/python tools/bench/kernel_speed.py --layout gguf        # rows as in the file, not the adapter's layout
    .venv/bin/python tools/bench/kernel_speed.py --types q4_0 q4_1 q8_0 --dot f32 i8 --error  # int8 dot products too

`--dot f32 i8` measures each case with f32 products and with int8 dot products (MatmulTile.dot "i8": the same
tile, x rounded to 8 bits per block), side by side in one run ("vs f32" is the ratio of the two); `--error` adds
each case's error against float64 numpy on the exact x (|y - ref| as a fraction of max|ref|: max and RMS).

Weights are in the layout and the kernel variant the model would get on this adapter (llmchat.gpu.variants):
decode runs the one-token tile, prefill the tile of a step of `--prefill-tokens` tokens. Shapes are SmolLM2-135M's
ffn_down (576 outputs, rows of 1536; it fits in a CPU's L2 or L3 cache), decode and prefill, and its tied output
matrix (49152 outputs, which stream from memory), decode only, with rows of 512 instead of 576: K-quant rows are
whole 256-element blocks, and every type runs the same shape so the ratios compare like with like.
"""
from __future__ import annotations

import argparse
import json
import struct
import sys
import time

import numpy as np

from llmchat.gguf.types import BLOCK_LAYOUT, GGMLType
from llmchat.gpu import ops
from llmchat.gpu.kernels import Kernels
from llmchat.gpu.native import NativeDevice
from llmchat.gpu.recorder import Recorder
from llmchat.gpu.tensors import Piece, split_weight, splits, texture_weight, upload_weight
from llmchat.gpu.variants import INT8_TYPES, variants
from llmchat.quant import quantize, random_blocks

DEFAULT_TYPES = ["q4_1", "q4_0", "q8_0", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k", "iq4_nl", "iq4_xs"]
# (outputs, row length, decode only)
SHAPES = [(576, 1536, False), (49152, 512, True)]


def random_weight(rng: np.random.Generator, qtype: GGMLType, rows: int, k: int) -> bytes:
    if BLOCK_LAYOUT[qtype][0] == 1:
        return quantize(rng.standard_normal((rows, k)), qtype).tobytes()
    return random_blocks(rng, qtype, (rows, k)).tobytes()


class Case:
    """One weight on the device, with the program that multiplies it by `tokens` tokens `n` times."""

    def __init__(self, device: NativeDevice, kernels: Kernels, qtype: GGMLType, rows: int, k: int, tokens: int,
                 layout: str = "auto", tile=None, dot: str = "f32"):
        """`tile` forces a kernel variant (variants.MatmulTile) instead of the adapter's choice; `dot` "i8" takes
        the int8 dot products of that tile."""
        self.device, self.kernels, self.qtype, self.rows, self.k, self.tokens = device, kernels, qtype, rows, k, tokens
        self.tile = tile or variants(device).matmul(tokens)
        if dot == "i8":
            self.tile = self.tile.int8()
        self.rng = np.random.default_rng(0)
        self.raw = random_weight(self.rng, qtype, rows, k)
        weight = upload_weight(device, "w", qtype, k, [Piece.of(rows, self.raw)])
        chosen = variants(device)
        # As the model loader does:
        if layout == "auto" and chosen.split_weights and splits(qtype, k, device.info.max_binding_size):
            weight = split_weight(device, kernels, weight)
            if chosen.weight_textures:
                weight = texture_weight(device, weight)
        self.weight = weight
        self.step = device.buffer(16, "step", uniform=True)
        device.write(self.step, struct.pack("<4I", tokens, 0, 0, 0))
        self.n = 0
        self.x = self.y = None

    def timed(self, n: int) -> tuple[float, float]:
        """(wall seconds, CPU seconds) of one run of `n` dispatches."""
        rec = Recorder(self.device, self.kernels, self.step)
        x = rec.act("x", self.tokens, self.k)
        self.x = self.rng.standard_normal(self.tokens * self.k).astype(np.float32)
        self.device.write(x.buffer, self.x.tobytes())
        y = self.y = rec.act("y", self.tokens, self.rows)
        for _ in range(n):
            ops.matmul(rec, self.weight, x, y, tile=self.tile)
        program = rec.finish()
        self.device.run(program)  # warm-up: first use of the pipeline and the bind groups
        self.device.read(y.buffer, 0, 4)
        start, cpu = time.perf_counter(), time.process_time()
        self.device.run(program)
        self.device.read(y.buffer, 0, 4)
        return time.perf_counter() - start, time.process_time() - cpu

    def error(self) -> dict:
        """The last run's output against float64 numpy (weights dequantized by the gguf package) on its x."""
        import gguf  # noqa: PLC0415 (only for --error)
        raw = np.frombuffer(self.raw, np.uint8).reshape(self.rows, -1)
        w = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType(int(self.qtype))).reshape(self.rows, self.k)
        ref = self.x.reshape(self.tokens, self.k).astype(np.float64) @ w.astype(np.float64).T
        got = np.frombuffer(self.device.read(self.y.buffer, 0, self.tokens * self.rows * 4), np.float32)
        err = got.reshape(ref.shape) - ref
        scale = np.abs(ref).max()
        return {"max_err_rel": float(f"{np.abs(err).max() / scale:.3g}"),
                "rms_err_rel": float(f"{np.sqrt((err ** 2).mean()) / scale:.3g}")}

    def measure(self, seconds: float, max_dispatches: int) -> dict:
        """Time `n` back-to-back dispatches, n chosen (on the first call) so the timed run lasts about `seconds`."""
        if not self.n:
            probe = 2
            per = self.timed(probe)[0] / probe
            self.n = int(min(max_dispatches, max(probe, seconds / per)))
        elapsed, cpu = self.timed(self.n)
        macs = self.n * self.rows * self.k * self.tokens
        tile = self.tile
        return {"type": self.qtype.name, "mode": "decode" if self.tokens == 1 else "prefill", "rows": self.rows,
                "k": self.k, "tokens": self.tokens, "layout": self.weight.layout,
                "store": self.weight.store, "dot": tile.dot,
                "tile": tile_label(tile), "dispatches": self.n,
                "seconds": round(elapsed, 4), "us_per_dispatch": round(elapsed / self.n * 1e6, 1),
                "gmacs": round(macs / elapsed / 1e9, 3),
                "weight_gb_per_s": round(self.n * self.weight.nbytes / elapsed / 1e9, 3),
                "cpu_seconds": round(cpu, 4), "gmacs_per_cpu_s": round(macs / cpu / 1e9, 3)}


def tile_label(tile) -> str:
    extra = {"lanes": f"{tile.xload} x loads", "rowgroup": f"{tile.reduce} reduce",
             "tiled": f"{tile.wg_rows} row lanes"}[tile.shape]
    return f"{tile.shape} {tile.rows} rows x {tile.tokens} tokens, wg {tile.wg}, {extra}, {tile.dot}"


def best(a: dict | None, b: dict) -> dict:
    """The better of two measurements of one case, each figure on its own: the best wall-clock throughput and the
    best per CPU-second need not come from the same run."""
    if a is None:
        return b
    keep = dict(b if b["gmacs"] > a["gmacs"] else a)
    for key in ("cpu_seconds", "gmacs_per_cpu_s"):
        keep[key] = (b if b["gmacs_per_cpu_s"] > a["gmacs_per_cpu_s"] else a)[key]
    return keep


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--types", nargs="+", default=DEFAULT_TYPES, help="GGML type names (case-insensitive)")
    parser.add_argument("--prefill-tokens", type=int, default=64, help="tokens of the prefill step (0: no prefill)")
    parser.add_argument("--seconds", type=float, default=1.0, help="target length of each timed run")
    parser.add_argument("--max-dispatches", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=1, help="measure everything this often, keep the best")
    parser.add_argument("--layout", choices=["auto", "gguf"], default="auto",
                        help="weight layout: the model loader's choice for this adapter, or rows as in the file")
    parser.add_argument("--dot", nargs="+", choices=["f32", "i8"], default=["f32"],
                        help="products in f32 and/or int8 dot products (i8: Q4_0, Q4_1, Q8_0 only)")
    parser.add_argument("--error", action="store_true", help="also each case's error against float64 numpy")
    parser.add_argument("--json", action="store_true", help="one JSON object per line instead of a table")
    args = parser.parse_args(argv)

    device = NativeDevice()
    kernels = Kernels(device)
    info = device.info
    cases = []
    for name in args.types:
        qtype = GGMLType[name.upper()]
        for rows, k, decode_only in SHAPES:
            for tokens in [1] if decode_only or not args.prefill_tokens else [1, args.prefill_tokens]:
                for dot in args.dot:
                    if dot == "i8" and (qtype not in INT8_TYPES or not info.dot4i8):
                        print(f"no int8 dot products for {qtype.name} on {info.name}: f32 only", file=sys.stderr)
                        continue
                    cases.append(Case(device, kernels, qtype, rows, k, tokens, args.layout, dot=dot))
    results: list[dict | None] = [None] * len(cases)
    for r in range(args.rounds):
        # Every other round backwards: no type always runs first (the first measurements of a process run slower).
        for i in range(len(cases))[::-1 if r % 2 else 1]:
            results[i] = best(results[i], cases[i].measure(args.seconds, args.max_dispatches))
    if args.error:
        for result, case in zip(results, cases, strict=True):
            result.update(case.error())  # the last run's output and x
    reference = {(r["mode"], r["rows"], r["dot"]): r for r in results if r["type"] == "Q4_1"}
    f32 = {(r["type"], r["mode"], r["rows"]): r for r in results if r["dot"] == "f32"}
    if not args.json:
        print(f"adapter: {info.name} ({info.backend}, software={info.software}); decode tile: "
              f"{variants(device).matmul(1)}; prefill tile: {variants(device).matmul(args.prefill_tokens or 1)}")
        print(f"{'type':7} {'mode':7} {'outputs':>7} {'k':>5} {'tokens':>6} {'dispatches':>10} {'us/dispatch':>11} "
              f"{'GMAC/s':>8} {'GB/s':>7} {'vs Q4_1':>7} {'GMAC/cpu-s':>10} {'vs Q4_1':>7} {'dot':>4} {'vs f32':>6} "
              f"{'max err':>8} {'rms err':>8}  layout")
    for r in results:
        r["adapter"] = info.name
        ref = reference.get((r["mode"], r["rows"], r["dot"]))
        base = f32.get((r["type"], r["mode"], r["rows"]))
        r["per_cpu_s_vs_f32"] = round(r["gmacs_per_cpu_s"] / base["gmacs_per_cpu_s"], 3) if base else None
        r["vs_q4_1"] = round(r["gmacs"] / ref["gmacs"], 3) if ref else None
        r["per_cpu_s_vs_q4_1"] = round(r["gmacs_per_cpu_s"] / ref["gmacs_per_cpu_s"], 3) if ref else None
        if args.json:
            print(json.dumps(r))
            continue
        ratios = [f"{v:.2f}" if ref else "-" for v in (r["vs_q4_1"], r["per_cpu_s_vs_q4_1"])]
        print(f"{r['type']:7} {r['mode']:7} {r['rows']:>7} {r['k']:>5} {r['tokens']:>6} {r['dispatches']:>10} "
              f"{r['us_per_dispatch']:>11} {r['gmacs']:>8} {r['weight_gb_per_s']:>7} {ratios[0]:>7} "
              f"{r['gmacs_per_cpu_s']:>10} {ratios[1]:>7} {r['dot']:>4} {r['per_cpu_s_vs_f32'] or '-':>6} "
              f"{r.get('max_err_rel', '-'):>8} {r.get('rms_err_rel', '-'):>8}  {r['layout']} ({r['store']})")
    device.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
