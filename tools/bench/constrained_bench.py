"""Constrained decoding against free decoding, side by side in one run: for each schema of the test corpus,
a greedy reply held to the schema and a free reply of the same length from the same prompt, both through the
Python API on this machine's adapter. Prints JSON: per schema the tokens, both decode rates and their ratio, and
how the grammar's mask reached the sampler (steps served by the GPU's candidates, steps that read and masked the
whole row, host time in the mask); then the medians.

    python tools/bench/constrained_bench.py [--model smollm2] [--max-tokens 128] [--schemas tests/data/schemas]
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from llmchat import load


def decode_rate(events) -> tuple[int, float, dict]:
    """Tokens, the rate of those after the first (the first includes the prompt), and the finish's timings."""
    t1, n = None, 0
    for event in events:
        if event.finish_reason is not None:
            break
        if event.token is None:
            continue
        if t1 is None:
            t1 = time.perf_counter()
        n += 1
    return n, (n - 1) / (time.perf_counter() - t1) if n > 1 else 0.0, event.timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--schemas", default=str(Path(__file__).parents[2] / "tests" / "data" / "schemas"))
    args = parser.parse_args()
    llm = load(args.model, context=1024)
    rows = []
    for path in sorted(Path(args.schemas).glob("*.json")):
        schema = json.loads(path.read_text())
        messages = [{"role": "user", "content": f"Give an example {path.stem.replace('_', ' ')} as JSON."}]
        fmt = {"type": "json_schema", "json_schema": {"name": path.stem, "schema": schema}}
        t0 = time.perf_counter()  # the first reply compiles the grammar and fills the mask cache
        list(llm.chat(messages, max_tokens=args.max_tokens, response_format=fmt))
        first_s = time.perf_counter() - t0
        llm.reset_chat()
        count, constrained, timings = decode_rate(llm.chat(messages, max_tokens=args.max_tokens,
                                                           response_format=fmt))
        grammar = timings.get("grammar", {})
        llm.reset_chat()
        ids = llm.runtime.encode_messages(messages)
        _, free, _ = decode_rate(llm.generate(ids, max_tokens=max(2, count), ignore_eos=True))
        rows.append({"schema": path.stem, "tokens": count, "first_run_s": round(first_s, 3),
                     "constrained_tok_s": round(constrained, 2), "free_tok_s": round(free, 2),
                     "ratio": round(constrained / free, 3) if free else None,
                     "candidate_steps": grammar.get("candidate_steps"), "row_reads": grammar.get("row_reads"),
                     "mask_ms_per_token": round(1e3 * grammar.get("mask_s", 0) / max(1, count), 3)})
        print(json.dumps(rows[-1]), flush=True)
    ratios = [r["ratio"] for r in rows if r["ratio"]]
    print(json.dumps({"summary": {"schemas": len(rows), "adapter": llm.runtime.device.info.name,
                                  "median_ratio": statistics.median(ratios) if ratios else None,
                                  "median_mask_ms_per_token": statistics.median(r["mask_ms_per_token"] for r in rows),
                                  "row_reads": sum(r["row_reads"] or 0 for r in rows),
                                  "candidate_steps": sum(r["candidate_steps"] or 0 for r in rows)}}))


if __name__ == "__main__":
    main()
