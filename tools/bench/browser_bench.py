"""Benchmark the browser runtime: drive web/bench.html in headless Chromium and print its result as one JSON line.

    python tools/bench/browser_bench.py [--model smollm2] [--n 16] [--reps 2] [--prompt TEXT] [--tune on] [--sweep 8]
                                  [--restore 500]

Measures cold load (download into OPFS, judge, upload), warm load (a new worker, model from OPFS), time to first
token, prefill and decode tokens/s and host milliseconds per token (with --sweep, every kernel variant the tuner
chooses among timed beside the one running; with --restore, a conversation of that many tokens brought back from its
KV cache kept in OPFS and by one prefill, side by side), on whatever WebGPU adapter Chromium offers
(SwiftShader, a CPU emulation, on machines without a GPU). The page is served by the same small server the
browser tests use: web/ at `/`, the model at `/models/` with HTTP Range. Needs `make web` first.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import urllib.parse
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "support"))

from browser_server import WebServer  # noqa: E402
from browser_util import CHROMIUM_FLAGS  # noqa: E402

from llmchat.hub.catalogue import resolve  # noqa: E402


@contextmanager
def bench_page(web: Path, model: Path, query: dict, *, chromium: str, timeout_s: float = 900):
    """web/bench.html (from the folder `web`) run with `query` on `model` in headless Chromium with a fresh profile:
    yields the page, still open, and window.benchResult once it is there."""
    if not (web / "dist" / "pyodide" / "pyodide-lock.json").exists():
        sys.exit(f"{web / 'dist'} is not built; run `make web` first")
    from playwright.sync_api import sync_playwright
    query = {"model": f"/models/{model.name}", **query}
    with WebServer(web, model.parent) as server, sync_playwright() as pw, tempfile.TemporaryDirectory() as profile:
        context = pw.chromium.launch_persistent_context(profile, executable_path=chromium, headless=True,
                                                        args=CHROMIUM_FLAGS)
        try:
            page = context.new_page()
            page.goto(f"{server.url}/bench.html?{urllib.parse.urlencode(query)}")
            page.wait_for_function("window.benchResult", timeout=timeout_s * 1000)
            yield page, page.evaluate("window.benchResult")
        finally:
            context.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2", help="catalogue name or path of a GGUF file")
    parser.add_argument("--n", type=int, default=16, help="tokens to generate (greedy, EOS ignored)")
    parser.add_argument("--reps", type=int, default=2, help="completions after the loads; the best is reported")
    parser.add_argument("--prompt", help="prompt text (default: the one of shared/bench/peers.py)")
    parser.add_argument("--context", type=int, default=2048, help="KV cache size in tokens")
    parser.add_argument("--tune", choices=("on", "off"), help="the kernel tuner (default: on for hardware adapters)")
    parser.add_argument("--sweep", type=int, default=0, metavar="ROUNDS",
                        help="then time every kernel variant the tuner chooses among, ROUNDS times each")
    parser.add_argument("--restore", type=int, default=0, metavar="TOKENS",
                        help="then time a conversation of about TOKENS tokens restored from OPFS and recomputed")
    parser.add_argument("--timeout", type=float, default=900, help="seconds")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--web", type=Path, default=ROOT / "web",
                        help="the web folder to serve (another checkout's, to compare versions in one run)")
    args = parser.parse_args()
    model = Path(resolve(args.model))
    query = {"n": args.n, "reps": args.reps, "context": args.context}
    if args.prompt:
        query["prompt"] = args.prompt
    if args.tune:
        query["tune"] = int(args.tune == "on")
    if args.sweep:
        query["sweep"] = args.sweep
    if args.restore:
        query["restore"] = args.restore
    with bench_page(args.web, model, query, chromium=args.chromium, timeout_s=args.timeout) as (_, result):
        pass
    print(json.dumps(result))
    if "error" in result:
        sys.exit(1)


if __name__ == "__main__":
    main()
