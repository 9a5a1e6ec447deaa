"""Run several speed commands interleaved, several rounds, and report each one's best figures and their ratios.

Each command prints one JSON object on its last line with `decode_tok_s` and `prefill_tok_s` (what `llmchat bench
--json` and ../shared/bench/peers.py print). Rounds alternate the commands, so load from other programs on the
machine falls on all of them alike; the best of the rounds is kept per command and figure.

    .venv/bin/python tools/bench/bench_side_by_side.py --rounds 3 \\
        llmchat=".venv/bin/llmchat bench smollm2 --json" \\
        llama.cpp="python3 ../shared/bench/peers.py llamacpp /path/to/model.gguf"
"""
from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys

FIGURES = ("decode_tok_s", "prefill_tok_s", "host_ms_per_token", "dispatches_per_token")
HIGHER_IS_BETTER = {"decode_tok_s": True, "prefill_tok_s": True, "host_ms_per_token": False,
                    "dispatches_per_token": False}


def run(command: str) -> dict:
    out = subprocess.run(shlex.split(command), capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def side_by_side(commands: list[str], rounds: int) -> dict:
    """Run NAME=COMMAND strings interleaved for `rounds` rounds: {"best": per name its best figures,
    "ratio_to_<first name>": per name each figure over the first command's}."""
    named = [c.split("=", 1) for c in commands]
    best: dict[str, dict] = {name: {} for name, _ in named}
    for r in range(rounds):
        for name, command in named:
            result = run(command)
            for f in FIGURES:
                if f in result:
                    keep = max if HIGHER_IS_BETTER[f] else min
                    best[name][f] = keep(best[name].get(f, result[f]), result[f])
            print(f"round {r + 1} {name}: " + ", ".join(f"{f}={result[f]:.4g}" for f in FIGURES if f in result),
                  file=sys.stderr, flush=True)
    ref = named[0][0]
    return {"best": best, "ratio_to_" + ref: {
        name: {f: v / best[ref][f] for f, v in figs.items() if best[ref].get(f)} for name, figs in best.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("commands", nargs="+", help="NAME=COMMAND; the first is the reference of the ratios")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    print(json.dumps(side_by_side(args.commands, args.rounds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
