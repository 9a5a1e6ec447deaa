"""The 1B-scale benchmark: llmchat beside llama.cpp (CPU) on the same random-weight 1B-class GGUFs, in one run.

    .venv/bin/python tools/bench/bench_1b.py                                   # llama-3.2-1b, Q4_0 and Q4_K_M
    .venv/bin/python tools/bench/bench_1b.py --shape qwen3-1.7b --type Q4_K_M -n 16 --rounds 3

The files come from tools/bench/make_bench_gguf.py (written once, cached). Per file, tools/bench/bench_side_by_side.py runs
`llmchat bench FILE --json` and llama.cpp through ../shared/bench/peers.py (--peers) interleaved for --rounds
rounds and keeps each one's best figures; without peers.py (or with --no-peer) llmchat runs alone, and the output
says so. Prints one JSON line per file: {"file", "shape", "type", "prompt", "best": {name: figures}, "ratio_to_llmchat"}.
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

import bench_side_by_side
import make_bench_gguf

ROOT = Path(__file__).resolve().parents[2]
# Short, so prefill of a 1B model on a CPU emulator stays within a minute; the same text for both engines.
PROMPT = "The history of the city of Paris begins with a Celtic tribe"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", nargs="+", choices=sorted(make_bench_gguf.SHAPES), default=["llama-3.2-1b"])
    parser.add_argument("--type", nargs="+", type=str.upper, choices=sorted(make_bench_gguf.FILE_TYPES),
                        default=["Q4_0", "Q4_K_M"])
    parser.add_argument("-n", "--max-tokens", type=int, default=16, help="tokens each engine generates per run")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--prompt", default=PROMPT)
    parser.add_argument("--threads", type=int, default=2, help="llama.cpp's CPU threads")
    parser.add_argument("--llmchat", default=str(ROOT / ".venv" / "bin" / "llmchat"), help="the llmchat command")
    parser.add_argument("--peers", type=Path, default=ROOT.parent.parent / "shared" / "bench" / "peers.py",
                        help="peers.py, which runs llama.cpp (default: ../shared/bench/peers.py of the checkout)")
    parser.add_argument("--no-peer", action="store_true", help="llmchat alone")
    args = parser.parse_args(argv)
    peer = not args.no_peer and args.peers.exists()
    if not peer and not args.no_peer:
        print(f"bench_1b: {args.peers} not found: llmchat runs without llama.cpp beside it", file=sys.stderr)
    for shape in args.shape:
        for file_type in args.type:
            path = make_bench_gguf.cached(shape, file_type)
            q = shlex.quote
            commands = [f"llmchat={q(args.llmchat)} bench {q(str(path))} --json --repeat 1 -n {args.max_tokens} "
                        f"-p {q(args.prompt)}"]
            if peer:
                commands.append(f"llama.cpp={q(sys.executable)} {q(str(args.peers))} llamacpp {q(str(path))} "
                                f"--n {args.max_tokens} --threads {args.threads} --prompt {q(args.prompt)}")
            result = bench_side_by_side.side_by_side(commands, args.rounds)
            print(json.dumps({"file": str(path), "shape": shape, "type": file_type, "prompt": args.prompt,
                              "llama_cpp": peer, **result}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
