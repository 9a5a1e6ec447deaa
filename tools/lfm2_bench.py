"""LFM2 speed beside llama.cpp on the same random-weight file at LFM2-350M's shape.

Writes a random LFM2 with LFM2-350M's dimensions (16 layers, attention at 2, 5, 8, 10, 12, 14, n_embd 1024,
16 heads / 8 K/V heads, n_ff 4608, 3 convolution taps, 65536 tokens) with tests/model_factory.py, then runs
`llmchat bench` and llama.cpp (../shared/bench/peers.py, through llama-cpp-python) on it, rounds interleaved by
tools/bench_side_by_side.py, and prints their best decode and prefill rates and ratios. Run from the repository:

    .venv/bin/python tools/lfm2_bench.py [--qtype Q4_0] [--rounds 2] [--n 32] [--threads 1] [--keep DIR]
"""
from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from model_factory import write_model  # noqa: E402

LFM2_350M = dict(arch="lfm2", n_layer=16, n_embd=1024, n_head=16, n_kv_head=8, n_ff=4608, l_cache=3,
                 conv_layers=tuple(i not in (2, 5, 8, 10, 12, 14) for i in range(16)), vocab_size=65536,
                 context_length=128000, rope_base=1e6, seed=350)
PEERS = ROOT.parent.parent / "shared" / "bench" / "peers.py"
PROMPT = ("The history of the city of Paris begins with the Parisii, a Celtic tribe who settled on an island "
          "in the Seine. Over the centuries the settlement grew into")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--qtype", default="Q4_0", help="type of the weight matrices (default Q4_0)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--n", type=int, default=32, help="greedy tokens generated per run")
    parser.add_argument("--threads", type=int, default=1,
                        help="llama.cpp's threads (default 1: on a machine busier than its cores, llama.cpp's "
                             "threads wait on each other; measured here, 2 threads took 1 s per token, 1 thread 61 ms)")
    parser.add_argument("--keep", type=Path, help="write the model into this folder and keep it")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp())
    path = folder / f"lfm2-350m-shape-{args.qtype.lower()}.gguf"
    if not path.exists():
        write_model(path, qtype=args.qtype, types={"token_embd": "Q8_0"} if args.qtype != "F16" else None,
                    **LFM2_350M)
    print(f"model: {path} ({path.stat().st_size >> 20} MiB)", file=sys.stderr)
    py = shlex.quote(sys.executable)
    commands = [f"llmchat={py} -m llmchat bench {path} --json -n {args.n} -p {shlex.quote(PROMPT)} --repeat 1",
                f"llama.cpp=python3 {PEERS} llamacpp {path} --n {args.n} --threads {args.threads} --prompt {shlex.quote(PROMPT)}"]
    return subprocess.run([sys.executable, str(ROOT / "tools" / "bench_side_by_side.py"), "--rounds",
                           str(args.rounds), *commands]).returncode


if __name__ == "__main__":
    sys.exit(main())
