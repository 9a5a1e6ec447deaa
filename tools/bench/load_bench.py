#!/usr/bin/env python3
"""Load benchmark for `llmchat serve` (or any OpenAI-compatible server) on loopback. Prints one JSON object.

    tools/bench/load_bench.py [MODEL] [--concurrency 1 4 8] [--max-tokens 32] [--engine cpu] [--peer llamacpp]

For each concurrency level it opens that many streaming completions at once (distinct prompts, greedy, a fixed
number of tokens) and reports the aggregate decode rate (tokens after each stream's first, over the span from the
first first-token to the last token), the steady-state decode rate (while every stream decodes and no prompt is
fed), the output rate over the whole round, and time to first token p50/p99. Then
the prefix-cache effect: a ~300-token system prompt sent cold and then again with another question (time to first
token both times, and the cached tokens the server reports).

It starts the server itself (`llmchat serve MODEL`, or with `--peer llamacpp` llama-cpp-python's own server on the
same GGUF, from the venv that /work/shared/bench/peers.py builds), unless `--url` points at a running one. Every
request has a timeout and the whole run a deadline; only 127.0.0.1 is contacted.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import openai

from llmchat.server.launch import free_port, spawned_server

PROMPTS = [
    "The history of the city of Paris begins with",
    "In a distant galaxy, a small robot named",
    "The three most important inventions of the nineteenth century were",
    "Once upon a time, in a village by the sea,",
    "A good recipe for bread starts with",
    "The theory of relativity explains that",
    "My favourite walk in the mountains goes",
    "The rules of chess are simple: each player",
]
SYSTEM = ("You are the help desk of the Lakeside Library. " +
          " ".join(f"Rule {i}: members may borrow up to {i + 2} items of category {chr(65 + i)} for {i + 1} weeks, "
                   f"and late returns of that category cost {i * 5 + 10} cents a day." for i in range(12)))
LLAMACPP_VENV = Path.home() / ".cache" / "llmchat-peers" / "llamacpp-venv"


@dataclass
class Stream:
    start: float
    first: float | None = None
    end: float | None = None
    tokens: int = 0
    cached: int | None = None
    times: list[float] = field(default_factory=list)  # arrival of each token

    def token(self) -> None:
        now = time.perf_counter()
        self.tokens += 1
        self.times.append(now)
        if self.first is None:
            self.first = now


async def stream_completion(client: openai.AsyncOpenAI, model: str, prompt: str, max_tokens: int,
                            extra: dict) -> Stream:
    s = Stream(time.perf_counter())
    chunks = await client.completions.create(model=model, prompt=prompt, max_tokens=max_tokens, temperature=0,
                                             stream=True, extra_body=extra)
    async for chunk in chunks:
        if chunk.choices and chunk.choices[0].text:
            s.token()
    s.end = time.perf_counter()
    return s


async def stream_chat(client: openai.AsyncOpenAI, model: str, system: str, question: str, max_tokens: int) -> Stream:
    s = Stream(time.perf_counter())
    chunks = await client.chat.completions.create(
        model=model, messages=[{"role": "system", "content": system}, {"role": "user", "content": question}],
        max_tokens=max_tokens, temperature=0, stream=True, stream_options={"include_usage": True})
    async for chunk in chunks:
        if chunk.choices and chunk.choices[0].delta.content:
            s.token()
        usage = getattr(chunk, "usage", None)
        if usage is not None and usage.prompt_tokens_details is not None:
            s.cached = usage.prompt_tokens_details.cached_tokens
    s.end = time.perf_counter()
    return s


def ensure_llamacpp_server() -> None:
    """llama-cpp-python's server needs its `[server]` extras in the peers' venv; install them on first use."""
    py = LLAMACPP_VENV / "bin" / "python"
    if not py.exists():
        raise SystemExit(f"no llama-cpp-python venv at {LLAMACPP_VENV}: run /work/shared/bench/peers.py llamacpp first")
    if subprocess.run([str(py), "-c", "import llama_cpp.server.app"], capture_output=True).returncode != 0:
        subprocess.run([str(py), "-m", "pip", "install", "-q", "uvicorn>=0.22", "fastapi>=0.100", "sse-starlette>=1.6.1",
                        "starlette-context>=0.3.6,<0.4", "pydantic-settings>=2.0.1"], check=True)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


async def round_at(client: openai.AsyncOpenAI, model: str, n: int, max_tokens: int, extra: dict) -> dict:
    prompts = [PROMPTS[i % len(PROMPTS)] + (f" (variant {i // len(PROMPTS)})" if i >= len(PROMPTS) else "")
               for i in range(n)]
    t0 = time.perf_counter()
    streams = await asyncio.gather(*(stream_completion(client, model, p, max_tokens, extra) for p in prompts))
    t1 = time.perf_counter()
    firsts = [s.first for s in streams if s.first is not None]
    decode_tokens = sum(max(0, s.tokens - 1) for s in streams)
    decode_span = max(s.end for s in streams) - min(firsts) if firsts else 0
    ttft = [s.first - s.start for s in streams if s.first is not None]
    # Steady state: from the moment every stream has its first token to the moment the first one ends, all of
    # them are decoding and no prompt is being fed.
    lo, hi = max(firsts, default=0), min((s.times[-1] for s in streams if s.times), default=0)
    steady = sum(lo < t <= hi for s in streams for t in s.times)
    return {"streams": n, "tokens": sum(s.tokens for s in streams), "wall_s": round(t1 - t0, 3),
            "decode_tok_s": round(decode_tokens / decode_span, 3) if decode_span > 0 else None,
            "steady_decode_tok_s": round(steady / (hi - lo), 3) if hi > lo and steady else None,
            "output_tok_s": round(sum(s.tokens for s in streams) / (t1 - t0), 3),
            "per_stream_decode_tok_s": round(statistics.mean(
                (s.tokens - 1) / (s.end - s.first) for s in streams if s.first and s.tokens > 1 and s.end > s.first
            ), 3) if any(s.tokens > 1 for s in streams) else None,
            "ttft_p50_s": round(percentile(ttft, 0.5), 3) if ttft else None,
            "ttft_p99_s": round(percentile(ttft, 0.99), 3) if ttft else None}


async def prefix_effect(client: openai.AsyncOpenAI, model: str) -> dict:
    # A fresh opening line makes the system prompt new to the server's cache on every run.
    system = f"Session {random.randrange(10 ** 9)}. {SYSTEM}"
    cold = await stream_chat(client, model, system, "How long can I keep category C items?", 4)
    warm = await stream_chat(client, model, system, "What does a late category F item cost?", 4)
    result = {"cold_ttft_s": round(cold.first - cold.start, 3) if cold.first else None,
              "warm_ttft_s": round(warm.first - warm.start, 3) if warm.first else None,
              "warm_cached_tokens": warm.cached}
    if cold.first and warm.first:
        result["ttft_speedup"] = round((cold.first - cold.start) / (warm.first - warm.start), 2)
    return result


async def run(base: str, model: str, levels: list[int], max_tokens: int, extra: dict) -> dict:
    async with openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=os.environ.get("LLMCHAT_API_KEY", "none"),
                                  max_retries=0, timeout=900) as client:
        # Warm up every step shape the rounds will use (programs are recorded on first use).
        for n in sorted(set(levels)):
            await asyncio.gather(*(stream_completion(client, model, f"Warm up {i}: {PROMPTS[i % len(PROMPTS)]}", 4,
                                                     extra) for i in range(n)))
        rounds = [await round_at(client, model, n, max_tokens, extra) for n in levels]
        prefix = await prefix_effect(client, model)
    by = {r["streams"]: r for r in rounds}
    out: dict = {"rounds": rounds, "prefix_cache": prefix}
    top = max(levels)
    for key in ("decode_tok_s", "steady_decode_tok_s"):
        if 1 in by and by[1][key] and by[top][key]:
            out[f"{key}_ratio_{top}_vs_1"] = round(by[top][key] / by[1][key], 2)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?", default="smollm2", help="catalogue name or GGUF path (default smollm2)")
    ap.add_argument("--url", help="benchmark a server already running at this base URL (http://127.0.0.1:PORT)")
    ap.add_argument("--peer", choices=["llmchat", "llamacpp"], default="llmchat", help="which server to start")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 8])
    ap.add_argument("--max-tokens", type=int, default=32, help="tokens per stream (default 32)")
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--threads", type=int, default=2, help="llama.cpp threads (default 2)")
    ap.add_argument("--engine", choices=["webgpu", "cpu", "auto"],
                    help="llmchat's engine (serve --engine; the cpu engine runs --threads threads)")
    ap.add_argument("--deadline", type=float, default=1800, help="seconds before the run gives up (default 1800)")
    ap.add_argument("--log", default="/tmp/load_bench_server.log")
    a = ap.parse_args()

    from llmchat.hub.catalogue import resolve

    path = resolve(a.model)
    model = a.model if a.peer == "llmchat" and not Path(a.model).exists() else Path(path).stem
    port = free_port()
    if a.peer == "llmchat":
        cmd = [sys.executable, "-m", "llmchat", "serve", a.model, "--port", str(port), "--ctx", str(a.ctx),
               "--max-batch", str(max(a.concurrency)), "--log-level", "warning"]
        if a.engine:
            cmd += ["--engine", a.engine, "--threads", str(a.threads)]
        extra = {"ignore_eos": True}
    else:
        ensure_llamacpp_server()
        cmd = [str(LLAMACPP_VENV / "bin" / "python"), "-m", "llama_cpp.server", "--model", path, "--port", str(port),
               "--n_ctx", str(a.ctx), "--n_threads", str(a.threads), "--model_alias", model,
               "--interrupt_requests", "False"]  # by default a new request cuts the running stream short
        extra = {}  # llama-cpp-python's server has no ignore_eos; prompts are chosen to run long

    async def bounded(base: str) -> dict:
        return await asyncio.wait_for(run(base, model, a.concurrency, a.max_tokens, extra), a.deadline)

    if a.url:
        if not a.url.startswith(("http://127.", "http://localhost", "http://[::1]")):
            raise SystemExit("--url must be a loopback address")
        result = asyncio.run(bounded(a.url))
    else:
        with spawned_server(cmd, port, ready_path="/v1/models", timeout=300, log=Path(a.log)) as base:
            result = asyncio.run(bounded(base))
    print(json.dumps({"server": a.peer if not a.url else a.url, "model": model, "max_tokens": a.max_tokens,
                      **result}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
