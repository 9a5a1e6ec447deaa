"""Throughput of every matmul tile the tuner considers on this adapter (llmchat.gpu.tune's candidates), per weight
type and shape, decode and prefill, in G multiply-adds/s; the fixed table's tile is marked "default".

Shapes are SmolLM2-135M's ffn_down (576 outputs, rows of 1536) and ffn_up (1536 outputs, rows of 576; 512 for
the K-quants, whose rows are whole 256-element blocks). Measurement as tools/bench/kernel_speed.py makes it (one program
of many identical dispatches, timed after a warm-up run), every tile of a case measured in each of `--rounds`
interleaved rounds, best kept; "cpu" columns are multiply-adds per CPU-second of this process, which on CPU
adapters barely moves when other programs compete for the cores.

    .venv/bin/python tools/bench/tile_sweep.py --rounds 2
    .venv/bin/python tools/bench/tile_sweep.py --types q4_1 --json
"""
from __future__ import annotations

import argparse
import json
import sys

from kernel_speed import Case, best, tile_label

from llmchat.gguf.types import BLOCK_LAYOUT, GGMLType
from llmchat.gpu.kernels import Kernels
from llmchat.gpu.native import NativeDevice
from llmchat.gpu.tune import matvec_candidates, prefill_candidates
from llmchat.gpu.variants import variants

SHAPES = [(576, 1536), (1536, 576)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--types", nargs="+", default=["q4_1", "q4_k", "q6_k", "q8_0"])
    parser.add_argument("--prefill-tokens", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=0.3, help="target length of each timed run")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    device = NativeDevice()
    kernels = Kernels(device)
    v = variants(device)
    print(f"adapter: {device.info.name} ({device.info.backend}, software={device.info.software})", file=sys.stderr)
    for name in args.types:
        qtype = GGMLType[name.upper()]
        for rows, k in SHAPES:
            k = k if k % BLOCK_LAYOUT[qtype][0] == 0 else k // 256 * 256
            for tokens in (1, args.prefill_tokens):
                tiles = matvec_candidates(v) if tokens == 1 else prefill_candidates(v, tokens)
                cases = [Case(device, kernels, qtype, rows, k, tokens, tile=t) for t in tiles]
                results = [None] * len(cases)
                for r in range(args.rounds):
                    for i in range(len(cases))[::-1 if r % 2 else 1]:
                        results[i] = best(results[i], cases[i].measure(args.seconds, 200))
                for i, (tile, res) in enumerate(zip(tiles, results, strict=True)):
                    res["default"] = i == 0
                    if args.json:
                        print(json.dumps(res))
                    else:
                        print(f"{qtype.name:5} {rows:>5}x{k:<5} T={tokens:<3} {res['gmacs']:>7.3f} GMAC/s "
                              f"{res['gmacs_per_cpu_s']:>7.3f} /cpu-s  {tile_label(tile)}"
                              f"{'  (default)' if i == 0 else ''}", flush=True)
    device.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
