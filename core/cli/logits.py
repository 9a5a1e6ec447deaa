"""`llmchat logits MODEL -p PROMPT`: the largest logits at the last prompt position."""
from __future__ import annotations

import argparse
import json

from .options import engine_arguments, load

HELP = "print the largest logits at the last prompt position"


def arguments(parser: argparse.ArgumentParser) -> None:
    engine_arguments(parser)
    parser.add_argument("-p", "--prompt", required=True)
    parser.add_argument("--top", type=int, default=10, help="how many of the largest logits to print")


def run(args: argparse.Namespace) -> int:
    llm = load(args)
    ids, logits = llm.logits(args.prompt)
    top = sorted(range(len(logits)), key=lambda i: (-logits[i], i))[:args.top]
    if args.json:
        print(json.dumps({"ids": ids, "top": [[i, logits[i]] for i in top]}))
    else:
        for i in top:
            print(f"{i:>8} {logits[i]:>10.4f} {llm.tokenizer.decode([i])!r}")
    return 0
