"""`llmchat run MODEL -p PROMPT`: complete a raw prompt, streaming the text (or one JSON object with --json)."""
from __future__ import annotations

import argparse
import json

from .options import engine_arguments, load, sampling, sampling_arguments, structure

HELP = "complete a raw prompt, streaming the text"


def arguments(parser: argparse.ArgumentParser) -> None:
    engine_arguments(parser)
    parser.add_argument("-p", "--prompt", required=True, help="raw prompt (no chat template; special tokens parsed)")
    sampling_arguments(parser)


def run(args: argparse.Namespace) -> int:
    options = sampling(args)
    shape = structure(args)
    llm = load(args)
    ids, text = [], []
    for event in llm.generate(args.prompt, max_tokens=args.max_tokens, stop=args.stop, **shape, **options):
        if event.token is not None:
            ids.append(event.token)
        text.append(event.text)
        if not args.json:
            print(event.text, end="", flush=True)
    if args.json:
        print(json.dumps({"prompt_ids": llm.encode_prompt(args.prompt), "ids": ids, "text": "".join(text),
                          "finish_reason": event.finish_reason, "timings": event.timings,
                          "adapter": llm.device.info.as_dict()}))
    else:
        print()
    return 0
