"""`llmchat tokenize MODEL --text TEXT`: the token ids of a text, from the model's header alone (no GPU)."""
from __future__ import annotations

import argparse
import json

from .options import load_metadata, model_argument

HELP = "print the token ids of a text"


def arguments(parser: argparse.ArgumentParser) -> None:
    model_argument(parser)
    parser.add_argument("--text", required=True, help="the text to tokenize")
    parser.add_argument("--add-bos", action="store_true", help="prepend the BOS token")
    parser.add_argument(
        "--parse-special", action="store_true",
        help="turn special-token text such as <|im_start|> into its token (default: tokenize it as plain text)",
    )
    parser.add_argument("--json", action="store_true", help='print {"ids": [...]}')


def run(args: argparse.Namespace) -> int:
    metadata = load_metadata(args.model)
    from ..tokenizer.tokenizer import Tokenizer

    tokenizer = Tokenizer.from_metadata(metadata)
    ids = tokenizer.encode(args.text, add_bos=args.add_bos, parse_special=args.parse_special)
    print(json.dumps({"ids": ids}) if args.json else " ".join(map(str, ids)))
    return 0
