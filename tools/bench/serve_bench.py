"""Aggregate decode speed of OpenAI-compatible servers on one model: N concurrent streams, each a greedy
completion of the same length, for each N asked for; the servers run one after another, each on a free port.

    .venv/bin/python tools/bench/serve_bench.py MODEL.gguf --streams 1 4 8 \\
        llmchat=".venv/bin/llmchat serve {model} --engine cpu --threads 2 --max-batch 8 --port {port}" \\
        llama_cpp.server="PEER_PYTHON -m llama_cpp.server --model {model} --n_threads 2 --n_ctx 4096 --port {port}"

Each NAME=COMMAND starts a server ({model} and {port} filled in) that must answer GET /v1/models once ready. A round
at N streams sends N completions at once (different prompts, `max_tokens` each, temperature 0, ignore EOS where
the server takes llama.cpp's `ignore_eos`) and counts the completion tokens the servers report over the round's
wall time; the best of `--rounds` is kept. Prints one JSON object: per server and N, tokens/s in all and per stream.
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from llmchat.server.launch import free_port, spawned_server  # noqa: E402

PROMPTS = ["The history of the city of Paris begins with", "Once upon a time, in a small village,",
           "The three most useful things to know about cooking are", "In the year 1492,",
           "A good way to learn a new language is", "The ocean covers most of the Earth, and",
           "def fibonacci(n):", "The best advice I ever got was"]


def one(base: str, model: str, prompt: str, max_tokens: int, out: list, index: int) -> None:
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True}
    r = httpx.post(f"{base}/v1/completions", json=body, timeout=600)
    r.raise_for_status()
    out[index] = r.json()["usage"]["completion_tokens"]


def round_of(base: str, n: int, max_tokens: int) -> float:
    model = httpx.get(f"{base}/v1/models", timeout=30).json()["data"][0]["id"]
    counts: list = [0] * n
    threads = [threading.Thread(target=one, args=(base, model, PROMPTS[i % len(PROMPTS)], max_tokens, counts, i))
               for i in range(n)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / (time.perf_counter() - t0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("servers", nargs="+", metavar="NAME=COMMAND")
    ap.add_argument("--streams", type=int, nargs="+", default=[1, 4, 8])
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    result: dict = {"model": a.model, "max_tokens": a.max_tokens, "servers": {}}
    for spec in a.servers:
        name, command = spec.split("=", 1)
        port = free_port()
        cmd = shlex.split(command.format(model=a.model, port=port))
        with spawned_server(cmd, port, ready_path="/v1/models", timeout=300) as base:
            round_of(base, 1, 4)  # warm-up: the first request of a server compiles or allocates
            figures = {}
            for n in a.streams:
                best = max(round_of(base, n, a.max_tokens) for _ in range(a.rounds))
                figures[str(n)] = {"tok_s": best, "tok_s_per_stream": best / n}
            result["servers"][name] = figures
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
