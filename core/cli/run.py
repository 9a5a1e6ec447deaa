"""`llmchat run MODEL -p PROMPT`: complete a raw prompt, streaming the text (or one JSON object with --json).

Standard output carries the completion alone, so that it pipes; on a terminal the prompt comes first, dimmed,
since a completion read without it often starts mid-sentence. The speed goes to standard error, as one line."""
from __future__ import annotations

import argparse
import json
import sys

from .options import engine_arguments, load, sampling, sampling_arguments, structure

HELP = "complete a raw prompt, streaming the text (on a terminal after the prompt, dimmed; speed on stderr)"


def arguments(parser: argparse.ArgumentParser) -> None:
    engine_arguments(parser)
    parser.add_argument("-p", "--prompt", required=True, help="raw prompt (no chat template; special tokens parsed)")
    sampling_arguments(parser)


def run(args: argparse.Namespace) -> int:
    options = sampling(args)
    shape = structure(args)
    llm = load(args)
    ids, text = [], []
    if not args.json and sys.stdout.isatty():
        print(f"\033[2m{args.prompt}\033[0m", end="", flush=True)
    for event in llm.generate(args.prompt, max_tokens=args.max_tokens, stop=args.stop, **shape, **options):
        if event.token is not None:
            ids.append(event.token)
        text.append(event.text)
        if not args.json:
            print(event.text, end="", flush=True)
    if args.json:
        print(json.dumps({"prompt_ids": llm.runtime.encode_prompt(args.prompt), "ids": ids, "text": "".join(text),
                          "finish_reason": event.finish_reason, "timings": event.timings,
                          "engine": llm.runtime.engine_report(),
                          "adapter": llm.runtime.device.info.as_dict() if llm.runtime.device else None}))
    else:
        print(flush=True)
        print(speed(event.usage, event.timings, event.finish_reason), file=sys.stderr)
    return 0


def speed(usage: dict, timings: dict, finish_reason: str | None) -> str:
    """The stats line: prompt tokens read (prefill) and tokens generated (decode), each with its rate, and the time
    spent compiling kernels (the first steps of each shape record their programs), which neither rate counts. The
    first token comes out of the prefill step, so the decode rate is over the tokens after it (as timings count
    it)."""
    prefilled = usage["prompt_tokens"] - usage["cached_tokens"]
    return (f"llmchat: {prefilled} prompt tokens at {timings['prefill_tok_s']:.1f} tokens/s (prefill), "
            f"{usage['completion_tokens']} generated at {timings['decode_tok_s']:.1f} tokens/s (decode), "
            f"{timings['compile_s']:.1f} s compiling kernels; finish: {finish_reason}")
