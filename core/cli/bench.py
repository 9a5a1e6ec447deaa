"""`llmchat bench MODEL`: load time, prefill and decode speed, and what a decode step costs; optionally the
roofline (each kernel family's share of the step and of the memory bandwidth) and a sweep of the kernel variants."""
from __future__ import annotations

import argparse
import json

from .options import engine_arguments, load

BENCH_PROMPT = ("The history of the city of Paris begins with the Parisii, a Celtic tribe who settled on an island "
                "in the Seine. Over the centuries the settlement grew into")

HELP = "measure load time, prefill and decode speed"


def arguments(parser: argparse.ArgumentParser) -> None:
    engine_arguments(parser)
    parser.add_argument("-p", "--prompt", default=BENCH_PROMPT)
    parser.add_argument("-n", "--max-tokens", type=int, default=128, help="greedy tokens to generate (default 128)")
    parser.add_argument("--repeat", type=int, default=2, help="runs; the fastest prefill and decode are reported")
    parser.add_argument("--roofline", action="store_true", help="then measure the adapter's memory bandwidth and "
                        "each decode kernel's share of the step and of that bandwidth (llmchat.runtime.roofline)")
    parser.add_argument("--retune", action="store_true",
                        help="measure the kernel variants for this model and adapter again (see LLMCHAT_TUNE)")
    parser.add_argument("--sweep", action="store_true", help="then time every kernel variant the tuner chooses "
                        "among, at this model's shapes, beside the one running (slow on CPU emulators)")


def run(args: argparse.Namespace) -> int:
    llm = load(args)
    runtime = llm.runtime
    runs = []
    for _ in range(max(1, args.repeat)):
        for event in llm.generate(args.prompt, max_tokens=args.max_tokens, ignore_eos=True):
            pass
        runs.append(event)
    best = max(runs, key=lambda e: e.timings["decode_tok_s"])
    # Each speed from its best run: the first prefill also compiles the prefill programs.
    timings = {**best.timings, "prefill_tok_s": max(e.timings["prefill_tok_s"] for e in runs)}
    result = {"model": runtime.path, "profile": (runtime.device.info.profile or None) if runtime.device else None,
              "prompt_tokens": best.usage["prompt_tokens"],
              "generated": best.usage["completion_tokens"], **timings,
              **runtime.report(context=best.usage["prompt_tokens"] + best.usage["completion_tokens"])}
    if args.roofline:
        from ..runtime import roofline
        result["roofline"] = roofline.report(runtime, context=result["prompt_tokens"] + result["generated"],
                                             decode_tok_s=result["decode_tok_s"])
    if args.sweep:
        result["sweep"] = runtime.sweep_kernels()
    print(json.dumps(result) if args.json else "\n".join(
        roofline.format_report(v) if k == "roofline" else f"{k}: {v}" for k, v in result.items()))
    return 0
