"""Soak test: a real `llmchat serve` under mixed, partly hostile load for a while, watched from outside.

    python tools/bench/soak.py [MODEL] [--minutes 15] [--clients 32] [--json OUT]

Each client loops over a mix of requests: non-streaming, streaming, streams it drops after a few chunks, bodies
over --max-body (413), prompts over the context (400) and hostile chat requests (400: schemas and grammars nested
past their limits, template arguments that would replace the template's own, loose switches, tools past the
context, a lone surrogate in a grammar, a logit_bias key of 5,000 digits). The report gives requests by outcome,
p50/p99 latency of the completed ones, the server's resident memory and open file descriptors over time (from
/proc), the latency of a /health probe at each sample, and its KV blocks at the start and at the end once idle
(from /metrics). It exits 1 if any request got a 5xx or failed in transport, if a /health probe failed, or if
the KV cache did not return to where it started.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "support"))
from server_util import metrics  # noqa: E402

from llmchat.server.launch import free_port, spawned_server  # noqa: E402

MAX_BODY = 256 * 1024
KINDS = [("plain", 30), ("stream", 25), ("dropped", 15), ("oversized", 10), ("too_long", 10), ("hostile", 10)]
# Chat fields that each must be refused with a 400, quickly, whatever else the server is doing.
HOSTILE = [
    {"response_format": {"type": "json_schema", "json_schema": {"name": "deep", "schema": json.loads(
        '{"type": "array", "items": ' * 300 + "{}" + "}" * 300)}}},
    {"grammar": "root ::= " + "(" * 3000 + '"a"' + ")" * 3000},
    {"grammar": 'root ::= "\ud800"'},
    {"chat_template_kwargs": {"messages": []}},
    {"chat_template_kwargs": {"enable_thinking": "false"}},
    {"logit_bias": {"9" * 5000: 1}},
    {"tools": [{"type": "function", "function": {"name": f"f{i}", "description": "does a thing " * 40,
                                                 "parameters": {"type": "object"}}} for i in range(100)]},
]


def one_request(client: httpx.Client, base: str, model: str, kind: str, rng: random.Random) -> str:
    body = {"model": model, "prompt": rng.choice(["Once upon a time", "The capital of France is", "def f(x):"]),
            "max_tokens": rng.randint(4, 24), "temperature": 0.7}
    url = f"{base}/v1/completions"
    if kind == "plain":
        r = client.post(url, json=body)
        return str(r.status_code)
    if kind == "oversized":
        r = client.post(url, content=b'{"prompt": "' + b"a" * (MAX_BODY + 1) + b'"}',
                        headers={"content-type": "application/json"})
        return str(r.status_code)
    if kind == "too_long":
        r = client.post(url, json={**body, "prompt": "word " * 40_000})
        return str(r.status_code)
    if kind == "hostile":
        chat = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4,
                **rng.choice(HOSTILE)}
        # json.dumps keeps a lone surrogate as its \ud800 escape, which is valid JSON.
        r = client.post(f"{base}/v1/chat/completions", content=json.dumps(chat).encode(),
                        headers={"content-type": "application/json"})
        return str(r.status_code)
    with client.stream("POST", url, json={**body, "stream": True}) as r:
        if r.status_code != 200:
            return str(r.status_code)
        for i, line in enumerate(r.iter_lines()):
            if kind == "dropped" and i >= 2:
                return "dropped"
            if line == "data: [DONE]":
                return "200"
            if line.startswith('data: {"error"'):
                return "stream_error"
    return "stream_cut"


def client_loop(base: str, model: str, deadline: float, seed: int, results: list, lock: threading.Lock) -> None:
    rng = random.Random(seed)
    names, weights = zip(*KINDS)
    with httpx.Client(timeout=300) as client:
        while time.monotonic() < deadline:
            kind = rng.choices(names, weights)[0]
            start = time.monotonic()
            try:
                outcome = one_request(client, base, model, kind, rng)
            except httpx.HTTPError as exc:
                outcome = f"transport:{type(exc).__name__}"
            with lock:
                results.append((kind, outcome, time.monotonic() - start))
            if outcome == "429":
                time.sleep(rng.uniform(0.2, 1.0))


def proc_figures(pid: int) -> tuple[float, int]:
    """Resident memory (MiB) and open file descriptors of a process."""
    rss = 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


def health(base: str) -> tuple[float, int]:
    """Seconds a /health probe took, and its status (0 when it failed in transport)."""
    start = time.monotonic()
    try:
        status = httpx.get(f"{base}/health", timeout=60).status_code
    except httpx.HTTPError:
        status = 0
    return time.monotonic() - start, status


def wait_idle(base: str, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        m = metrics(base)
        if (m.get("llmchat_running_sequences") == 0 and m.get("llmchat_queue_depth") == 0) or \
                time.monotonic() > deadline:
            return m
        time.sleep(0.5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default="smollm2")
    parser.add_argument("--minutes", type=float, default=15)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--ctx", type=int, default=512)
    parser.add_argument("--sample-every", type=float, default=10, help="seconds between RSS/fd samples")
    parser.add_argument("--log", type=Path, default=Path(tempfile.gettempdir()) / "llmchat-soak-serve.log",
                        help="the server's output")
    parser.add_argument("--json", type=Path, help="also write the report here")
    args = parser.parse_args(argv)

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "llmchat", "serve", args.model, "--port", str(port), "--ctx", str(args.ctx),
           "--max-batch", "8", "--max-queue", "16", "--max-body", str(MAX_BODY), "--log-level", "warning"]
    servers: list[subprocess.Popen] = []
    try:
        with spawned_server(cmd, port, timeout=300, log=args.log, started=servers.append):
            server = servers[0]
            model = httpx.get(f"{base}/v1/models").json()["data"][0]["id"]
            before = metrics(base)
            samples = [(0.0, *proc_figures(server.pid))]
            results: list = []
            lock = threading.Lock()
            start = time.monotonic()
            end = start + args.minutes * 60
            threads = [threading.Thread(target=client_loop, args=(base, model, end, i, results, lock), daemon=True)
                       for i in range(args.clients)]
            for t in threads:
                t.start()
            probes = []
            while time.monotonic() < end:
                time.sleep(min(args.sample_every, max(0.0, end - time.monotonic())))
                samples.append((time.monotonic() - start, *proc_figures(server.pid)))
                probes.append(health(base))
            for t in threads:
                t.join(300)
            after = wait_idle(base)
            samples.append((time.monotonic() - start, *proc_figures(server.pid)))
    except RuntimeError as exc:  # the server exited or never answered: its log's end says why
        print(exc, file=sys.stderr)
        return 2

    outcomes = Counter(f"{kind}:{outcome}" for kind, outcome, _ in results)
    done = sorted(s for kind, outcome, s in results if outcome == "200" and kind in ("plain", "stream"))
    pct = lambda q: done[min(len(done) - 1, int(q * len(done)))] if done else float("nan")  # noqa: E731
    report = {
        "minutes": args.minutes, "clients": args.clients, "requests": len(results),
        "outcomes": dict(sorted(outcomes.items())),
        "latency_s": {"p50": round(pct(0.50), 3), "p99": round(pct(0.99), 3), "completed": len(done)},
        "rss_mib_and_fds_over_time": [f"{t:.0f}s {rss:.1f} MiB {fds} fds" for t, rss, fds in samples],
        "health_probes": {"count": len(probes), "failed": sum(status != 200 for _, status in probes),
                          "max_s": round(max((s for s, _ in probes), default=0.0), 3)},
        "kv_free_blocks": {"start": before.get("llmchat_kv_free_blocks"), "end": after.get("llmchat_kv_free_blocks")},
        "prefix_cache_entries_end": after.get("llmchat_prefix_cache_entries"),
        "running_end": after.get("llmchat_running_sequences"), "queued_end": after.get("llmchat_queue_depth"),
    }
    text = json.dumps(report, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text)
    expected = {"plain": ("200", "429"), "stream": ("200", "429"), "dropped": ("dropped", "200", "429"),
                "oversized": ("413",), "too_long": ("400",), "hostile": ("400", "429")}
    bad = [k for k in outcomes if k.split(":", 1)[1] not in expected[k.split(":", 1)[0]]]
    # Cancelled sequences free their blocks, finished ones park theirs in the prefix cache, which an idle server
    # keeps: with the cache entries' blocks not counted there is nothing leaked when no sequence runs.
    leaked = report["running_end"] != 0 or report["queued_end"] != 0
    unhealthy = report["health_probes"]["failed"] > 0
    if bad or leaked or unhealthy:
        why = ", ".join(bad) or ("sequences left running" if leaked else "a /health probe failed")
        print(f"soak: FAILED ({why})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
