"""Hybrid models' speed beside llama.cpp on the same random-weight file at a released model's shape.

Writes a random model with tests/support/model_factory.py at one of these shapes, then runs `llmchat bench` and llama.cpp
(../shared/bench/peers.py, through llama-cpp-python) on it, rounds interleaved by tools/bench/bench_side_by_side.py, and
prints their best decode and prefill rates and ratios. Run from the repository:

    .venv/bin/python tools/bench/hybrid_bench.py [--shape lfm2-350m] [--qtype Q4_0] [--rounds 2] [--n 32] [--threads 1]
                                           [--keep DIR]

- lfm2-350m: LFM2-350M's dimensions (16 layers, attention at 2, 5, 8, 10, 12, 14, n_embd 1024, 16 heads / 8 K/V
  heads, n_ff 4608, 3 convolution taps, 65536 tokens).
- qwen3.5-0.8b: Qwen3.5-0.8B's text model as its config.json gives it (24 layers, every 4th full attention,
  n_embd 1024, n_ff 3584; attention: 8 heads / 2 K/V heads of 256, 64 dimensions rotated, base 1e7; gated
  DeltaNet: 16 key and 16 value heads of 128, 4 convolution taps; 248320 tokens, tied output).
"""
from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "support"))

from model_factory import write_model  # noqa: E402

SHAPES = {
    "lfm2-350m": dict(arch="lfm2", n_layer=16, n_embd=1024, n_head=16, n_kv_head=8, n_ff=4608, l_cache=3,
                      conv_layers=tuple(i not in (2, 5, 8, 10, 12, 14) for i in range(16)), vocab_size=65536,
                      context_length=128000, rope_base=1e6, seed=350),
    "qwen3.5-0.8b": dict(arch="qwen35", n_layer=24, n_embd=1024, n_head=8, n_kv_head=2, head_dim=256, n_ff=3584,
                         rope_dim=64, rope_sections=(11, 11, 10, 0), full_attention_interval=4, ssm_heads=(16, 16),
                         ssm_head_dim=128, conv_kernel=4, vocab_size=248320, context_length=262144, rope_base=1e7,
                         norm_eps=1e-6, seed=8),
}
PEERS = ROOT.parent.parent / "shared" / "bench" / "peers.py"
PROMPT = ("The history of the city of Paris begins with the Parisii, a Celtic tribe who settled on an island "
          "in the Seine. Over the centuries the settlement grew into")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="lfm2-350m", choices=list(SHAPES))
    parser.add_argument("--qtype", default="Q4_0", help="type of the weight matrices (default Q4_0)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--n", type=int, default=32, help="greedy tokens generated per run")
    parser.add_argument("--threads", type=int, default=1,
                        help="llama.cpp's threads (default 1: on a machine busier than its cores, llama.cpp's "
                             "threads wait on each other; measured here, 2 threads took 1 s per token, 1 thread 61 ms)")
    parser.add_argument("--keep", type=Path, help="write the model into this folder and keep it")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp())
    path = folder / f"{args.shape}-shape-{args.qtype.lower()}.gguf"
    if not path.exists():
        write_model(path, qtype=args.qtype, types={"token_embd": "Q8_0"} if args.qtype != "F16" else None,
                    **SHAPES[args.shape])
    print(f"model: {path} ({path.stat().st_size >> 20} MiB)", file=sys.stderr)
    py = shlex.quote(sys.executable)
    commands = [f"llmchat={py} -m llmchat bench {path} --json -n {args.n} -p {shlex.quote(PROMPT)} --repeat 1",
                f"llama.cpp=python3 {PEERS} llamacpp {path} --n {args.n} --threads {args.threads} --prompt {shlex.quote(PROMPT)}"]
    return subprocess.run([sys.executable, str(ROOT / "tools" / "bench" / "bench_side_by_side.py"), "--rounds",
                           str(args.rounds), *commands]).returncode


if __name__ == "__main__":
    sys.exit(main())
