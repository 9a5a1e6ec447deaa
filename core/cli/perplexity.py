"""`llmchat perplexity MODEL --file TEXT`: perplexity of a text file over consecutive windows."""
from __future__ import annotations

import argparse
import json

from ..errors import LLMChatError
from .options import engine_arguments, load

HELP = "score a text file: perplexity over consecutive windows"


def arguments(parser: argparse.ArgumentParser) -> None:
    engine_arguments(parser)
    parser.add_argument("--file", required=True, help="text file to score")
    parser.add_argument("--window", type=int, default=256, help="tokens per window (default 256)")


def run(args: argparse.Namespace) -> int:
    try:
        with open(args.file, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise LLMChatError(f"cannot read {args.file}: {exc.strerror}") from None
    result = load(args).perplexity(text, window=args.window)
    print(json.dumps(result) if args.json else f"perplexity {result['ppl']:.4f} over {result['tokens']} tokens")
    return 0
