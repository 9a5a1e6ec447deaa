"""`llmchat serve MODEL`: an OpenAI-compatible HTTP server (continuous batching, prefix caching)."""
from __future__ import annotations

import argparse
import os

from ..errors import LLMChatError
from .options import CTX_HELP, engine_choice_arguments, model_argument, positive_int, profile_argument

HELP = "run an OpenAI-compatible HTTP server (continuous batching, prefix caching)"


def arguments(parser: argparse.ArgumentParser) -> None:
    model_argument(parser)
    profile_argument(parser)
    engine_choice_arguments(parser)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    parser.add_argument("--api-key", default=os.environ.get("LLMCHAT_API_KEY"),
                        help="require `Authorization: Bearer KEY` on /v1 routes (default: $LLMCHAT_API_KEY, else none)")
    parser.add_argument("--ctx", type=positive_int, help=CTX_HELP + "; per sequence")
    parser.add_argument("--max-batch", type=int,
                        help="sequences decoded together (default 8; 2 on a CPU-emulated adapter such as lavapipe, "
                             "whose KV cache is the machine's own memory and whose sequences share its few cores; "
                             "fewer where a device profile's GPU memory budget holds fewer)")
    parser.add_argument("--max-queue", type=int, default=64,
                        help="sequences that may wait for a batch place; beyond that requests get 429 (default 64)")
    parser.add_argument("--prefill-chunk", type=int, default=16,
                        help="most prompt tokens a step carries while other sequences decode (default 16; "
                             "raise it on fast GPUs, where a step's cost hardly grows with its tokens)")
    parser.add_argument("--cache-entries", type=int,
                        help="finished sequences kept for prefix sharing (default: --max-batch)")
    parser.add_argument("--cors-origin", action="extend", nargs="+", default=[], metavar="ORIGIN",
                        help="allow browser pages from ORIGIN (repeatable; '*' allows any)")
    parser.add_argument("--web-dir", metavar="DIR", help="serve this folder at / instead of the bundled web demo")
    parser.add_argument("--pages", metavar="DIR",
                        help="also serve this folder at /pages/ (your own pages beside the chat page, e.g. examples/)")
    parser.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    parser.add_argument("--api-key-all", action="store_true",
                        help="require the API key on every route (the web demo, model files, /health, /metrics too)")
    parser.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                        help="also answer requests whose Host header is NAME (repeatable; '*' answers any); by "
                             "default only the loopback names and the --host address are answered")
    parser.add_argument("--max-body", type=int, default=8 << 20, metavar="BYTES",
                        help="largest request body accepted; larger ones get 413 (default 8 MiB)")
    parser.add_argument("--shutdown-grace", type=float, default=10.0, metavar="SECONDS",
                        help="on SIGTERM or Ctrl-C, how long running requests may finish before they are ended "
                             "(default 10)")
    parser.add_argument("--header-timeout", type=float, default=30.0, metavar="SECONDS",
                        help="close a connection whose request headers are not complete after this long (default 30)")


def run(args: argparse.Namespace) -> int:
    try:
        from ..server import ServeConfig, serve
    except ImportError as exc:
        raise LLMChatError(f"the server needs FastAPI and uvicorn ({exc.name} is missing): "
                           "pip install fastapi uvicorn") from None
    serve(ServeConfig(model=args.model, host=args.host, port=args.port, api_key=args.api_key, ctx=args.ctx,
                      max_batch=args.max_batch, max_queue=args.max_queue, prefill_chunk=args.prefill_chunk,
                      cache_entries=args.cache_entries, cors_origins=tuple(args.cors_origin),
                      web_dir=args.web_dir, pages_dir=args.pages, log_level=args.log_level, api_key_all=args.api_key_all,
                      allowed_hosts=tuple(args.allowed_host), max_body=args.max_body,
                      shutdown_grace=args.shutdown_grace, header_timeout=args.header_timeout,
                      profile=args.profile, engine=args.engine,
                      threads=args.threads))
    return 0
