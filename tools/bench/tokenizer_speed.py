"""Tokenizer speed on a real vocabulary: load time, encode throughput (English, mixed-script text and the tokenizer
test corpus, first pass and with the word cache warm, in MB/s and ms per KB), a short chat prompt, 10k-token
prompts (repetitive, and made of words never seen before), and decoding.

Every figure is the best of several runs: on a shared two-core machine the minimum is the figure least disturbed
by other processes. "Cold" encodes use a freshly built tokenizer, so every distinct word goes through BPE once.

    .venv/bin/python tools/bench/tokenizer_speed.py            # the catalogue's smollm2
    .venv/bin/python tools/bench/tokenizer_speed.py MODEL.gguf --json
"""
from __future__ import annotations

import argparse
import json
import random
import string
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tokenizer_corpus import corpus

from llmchat.hub.catalogue import resolve
from llmchat.gguf.file import open_gguf
from llmchat.tokenizer.tokenizer import Tokenizer

ROOT = Path(__file__).resolve().parents[2]


def best_of(runs: int, fn: Callable[[], object]) -> float:
    """The shortest of `runs` wall-clock timings of `fn()`, in seconds."""
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def best_cold(runs: int, metadata: dict[str, object], text: str) -> float:
    """Like `best_of` for encoding `text` with a freshly built tokenizer each time (building not timed)."""
    best = float("inf")
    for _ in range(runs):
        fresh = Tokenizer.from_metadata(metadata)
        start = time.perf_counter()
        fresh.encode(text)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default="smollm2", help="GGUF path, URL or catalogue name")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="one JSON object instead of lines of text")
    args = parser.parse_args()

    with open_gguf(resolve(args.model)) as model:
        metadata = model.metadata
    texts = json.loads((ROOT / "tests/data/texts.json").read_text(encoding="utf-8"))
    english = texts["perplexity_text"] * 400  # ~1 MB of English prose
    mixed = "\n".join(texts["tokenize"]) * 100  # code, numbers, CJK, Cyrillic, Arabic, emoji, whitespace runs
    broad = "\n".join(s for part in corpus().values() for s in part)  # tools/reference/tokenizer_corpus.py, once: all cold

    results: dict[str, float | int | str] = {"model": args.model}
    results["load_ms"] = best_of(args.runs, lambda: Tokenizer.from_metadata(metadata)) * 1e3
    tok = Tokenizer.from_metadata(metadata)
    results["vocab_size"] = tok.vocab_size

    for name, text in (("english", english), ("mixed", mixed), ("corpus", broad)):
        megabytes = len(text.encode("utf-8")) / 1e6
        cold = best_cold(args.runs, metadata, text)
        tok.encode(text)
        warm = best_of(args.runs, lambda t=text: tok.encode(t))
        results[f"{name}_megabytes"] = round(megabytes, 3)
        results[f"{name}_tokens"] = len(tok.encode(text))
        results[f"{name}_cold_mb_per_s"] = megabytes / cold
        results[f"{name}_warm_mb_per_s"] = megabytes / warm
        results[f"{name}_cold_ms_per_kb"] = cold * 1e3 / (megabytes * 1e3)

    chat = texts["prompts"][2]  # a short chat-formatted prompt: special tokens dominate the work
    results["short_prompt_us"] = best_of(args.runs * 20, lambda: tok.encode(chat, parse_special=True)) * 1e6

    # A 10k-token prompt of fresh text (no cache help): the start of the English text plus the mixed strings.
    prompt = "\n".join(texts["tokenize"]) * 10 + texts["perplexity_text"] * 12
    results["prompt_tokens"] = len(tok.encode(prompt))
    results["prompt_cold_ms"] = best_cold(args.runs, metadata, prompt) * 1e3
    results["prompt_warm_ms"] = best_of(args.runs, lambda: tok.encode(prompt)) * 1e3

    # Worst case: ~10k tokens of words never seen before, so every word goes through BPE.
    rng = random.Random(0)
    fresh = " ".join("".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 10)))
                     for _ in range(3500))
    results["fresh_words_tokens"] = len(tok.encode(fresh))
    results["fresh_words_cold_ms"] = best_cold(args.runs, metadata, fresh) * 1e3

    ids = tok.encode(english)
    results["decode_tokens_per_s"] = len(ids) / best_of(args.runs, lambda: tok.decode(ids))

    def stream() -> None:
        decoder = tok.stream_decoder()
        for tid in ids:
            decoder.feed(tid)
        decoder.flush()
    results["stream_tokens_per_s"] = len(ids) / best_of(args.runs, stream)

    if args.json:
        json.dump(results, sys.stdout, indent=2)
        print()
    else:
        for key, value in results.items():
            print(f"{key:24} {value:.2f}" if isinstance(value, float) else f"{key:24} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
