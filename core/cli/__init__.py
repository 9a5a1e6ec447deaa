"""The `llmchat` command line.

Each subcommand is one handler `(args) -> exit status` registered with `@command`, which also names a function that
adds the subcommand's arguments; `build_parser` turns the registry into argparse subparsers. Adding a command is
therefore one arguments function and one handler, nothing else. Handlers import what they need lazily, so
`llmchat --help` and light commands stay fast.

Every MODEL argument goes through `catalogue.resolve`: a path, an http(s) URL, a Hugging Face reference or a
catalogue name (the last two pulled on first use). Errors from the LLMChatError family print one line,
`llmchat: error: ...`, and exit with status 2; `--debug` adds the traceback.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
import traceback
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import __version__
from ..hub.catalogue import CATALOGUE, pull, remove, resolve
from ..errors import InvalidRequestError, LLMChatError

Handler = Callable[[argparse.Namespace], int]
AddArguments = Callable[[argparse.ArgumentParser], None]

EXIT_ERROR = 2  # the same status argparse uses for usage errors: "you asked for something we cannot do"


@dataclass(frozen=True)
class Command:
    """A registered subcommand: its help line, how to add its arguments, and what it does."""

    help: str
    add_arguments: AddArguments
    handler: Handler


COMMANDS: dict[str, Command] = {}


def command(name: str, help: str, arguments: AddArguments) -> Callable[[Handler], Handler]:
    """Register the decorated handler as `llmchat NAME`."""

    def register(handler: Handler) -> Handler:
        if name in COMMANDS:
            raise ValueError(f"command {name!r} registered twice")
        COMMANDS[name] = Command(help, arguments, handler)
        return handler

    return register


def _model_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model", metavar="MODEL",
        help=f"a GGUF file, an http(s) URL, a Hugging Face reference (hf://ORG/REPO/FILE.gguf, ORG/REPO:QUANT) "
             f"or a catalogue name ({', '.join(CATALOGUE)})",
    )


# --- pull, list, rm: the model cache ----------------------------------------------------------------------------

REFERENCE_HELP = ("a catalogue name, a Hugging Face reference (hf://ORG/REPO/FILE.gguf[@REV], ORG/REPO:QUANT, "
                  "hf.co/ORG/REPO[:QUANT]) or an http(s) URL of a GGUF file")


def _pull_arguments(parser: argparse.ArgumentParser) -> None:
    catalogue = "; ".join(f"{entry.name}: {entry.description}" for entry in CATALOGUE.values())
    parser.add_argument("reference", metavar="REF", help=f"{REFERENCE_HELP}. Catalogue: {catalogue}")
    parser.add_argument(
        "--verify", action="store_true",
        help="re-hash a cached catalogue model (sha256) instead of checking only its size"
    )


@command("pull", "download a model into the local cache and print its path", _pull_arguments)
def pull_command(args: argparse.Namespace) -> int:
    print(pull(args.reference, verify=args.verify))
    return 0


def _list_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print a JSON list, one object per model")


@command("list", "show the cached models (llmchat's and the Hugging Face cache's GGUF files)", _list_arguments)
def list_command(args: argparse.Namespace) -> int:
    from ..hub.listing import cached_models

    models = cached_models()
    if args.json:
        print(json.dumps([m.as_dict() for m in models]))
        return 0
    if not models:
        print("no cached models; `llmchat pull REF` fetches one", file=sys.stderr)
        return 0
    rows = [("MODEL", "SIZE", "ARCH", "QUANT", "RUNS")] + [
        (m.model, _size(m.size), m.architecture or "?", m.quant or "?", "yes" if m.runs else "no") for m in models]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    reasons = [m for m in models if not m.runs]
    if reasons:
        print()
        for m in reasons:
            print(f"{m.model}: {m.problem}")
    return 0


def _size(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


def _rm_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("reference", metavar="REF", help=f"{REFERENCE_HELP}, or a file name `llmchat list` shows")


@command("rm", "remove a cached model", _rm_arguments)
def rm_command(args: argparse.Namespace) -> int:
    for path in remove(args.reference):
        print(f"removed {path}")
    return 0


# --- inspect ----------------------------------------------------------------------------------------------------


def _inspect_arguments(parser: argparse.ArgumentParser) -> None:
    _model_argument(parser)
    _profile_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


@command("inspect", "summarise a model file: metadata, tensors, sizes", _inspect_arguments)
def inspect_command(args: argparse.Namespace) -> int:
    from ..gpu.profiles import get_profile
    args.profile = get_profile(args.profile)  # an unknown name is refused before a catalogue model is pulled
    args.model = resolve(args.model)
    from .inspect import inspect_main

    return inspect_main(args) or 0


# --- tokenize ---------------------------------------------------------------------------------------------------


def _tokenize_arguments(parser: argparse.ArgumentParser) -> None:
    _model_argument(parser)
    parser.add_argument("--text", required=True, help="the text to tokenize")
    parser.add_argument("--add-bos", action="store_true", help="prepend the BOS token")
    parser.add_argument(
        "--parse-special", action="store_true",
        help="turn special-token text such as <|im_start|> into its token (default: tokenize it as plain text)",
    )
    parser.add_argument("--json", action="store_true", help='print {"ids": [...]}')


@command("tokenize", "print the token ids of a text", _tokenize_arguments)
def tokenize_command(args: argparse.Namespace) -> int:
    metadata = _load_metadata(args.model)
    from ..tokenizer.tokenizer import Tokenizer

    tokenizer = Tokenizer.from_metadata(metadata)
    ids = tokenizer.encode(args.text, add_bos=args.add_bos, parse_special=args.parse_special)
    print(json.dumps({"ids": ids}) if args.json else " ".join(map(str, ids)))
    return 0


# --- chat-template ----------------------------------------------------------------------------------------------


def _chat_template_arguments(parser: argparse.ArgumentParser) -> None:
    _model_argument(parser)
    parser.add_argument(
        "--messages", required=True, metavar="JSON", type=_json_argument,
        help='the conversation as JSON, e.g. \'[{"role": "user", "content": "Hi"}]\' ("-" reads it from stdin)',
    )
    parser.add_argument(
        "--tools", metavar="JSON", type=_json_argument, help="tool (function) descriptions as a JSON list"
    )
    parser.add_argument(
        "--no-generation-prompt", dest="add_generation_prompt", action="store_false",
        help="do not open an assistant turn at the end",
    )
    parser.add_argument("--template", metavar="NAME", help="a named template variant, e.g. tool_use")


@command("chat-template", "print the prompt a model's chat template makes of some messages", _chat_template_arguments)
def chat_template_command(args: argparse.Namespace) -> int:
    metadata = _load_metadata(args.model)
    from ..chat.template import ChatTemplate

    template = ChatTemplate.from_metadata(metadata, name=args.template)
    if not template.from_file:
        print(f"llmchat: using the {template.describe()}", file=sys.stderr)
    sys.stdout.write(template.render(args.messages, add_generation_prompt=args.add_generation_prompt, tools=args.tools))
    return 0


# --- run, chat, logits, perplexity, bench: the GPU engine ------------------------------------------------------

BENCH_PROMPT = ("The history of the city of Paris begins with the Parisii, a Celtic tribe who settled on an island "
                "in the Seine. Over the centuries the settlement grew into")


def _profile_argument(parser: argparse.ArgumentParser) -> None:
    from ..gpu.profiles import ENV, PROFILES
    parser.add_argument("--profile", metavar="NAME",
                        help=f"cap the GPU to a class of devices: {', '.join(PROFILES)} (limits, features and a GPU "
                             f"memory budget; e.g. phone, or phone,gpu_budget=512MiB; default: ${ENV}, else none)")


def _engine_arguments(parser: argparse.ArgumentParser) -> None:
    _model_argument(parser)
    _profile_argument(parser)
    parser.add_argument("--ctx", type=_positive_int, help=CTX_HELP)
    parser.add_argument("--q8-activations", action="store_true",
                        help="round activations to 8 bits before quantized matmuls, as llama.cpp does (its numbers, "
                             "less precision)")
    parser.add_argument("--int8-dot", action="store_true",
                        help="int8 dot products (dot4I8Packed) for Q4_0/Q4_1/Q8_0 matmuls where the adapter has them; "
                             "implies --q8-activations")
    parser.add_argument("--kv-cache", choices=["f16", "f32"], default=None,
                        help="KV cache element type (default: the adapter's choice, see README)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _sampling_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-n", "--max-tokens", type=int, default=128, help="tokens to generate (default 128)")
    parser.add_argument("--temp", type=float, default=0.0, help="temperature; 0 = greedy (default)")
    parser.add_argument("--top-k", type=int, default=0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--min-p", type=float, default=0.0)
    parser.add_argument("--repeat-penalty", type=float, default=1.0)
    parser.add_argument("--presence-penalty", type=float, default=0.0)
    parser.add_argument("--frequency-penalty", type=float, default=0.0)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--stop", action="append", default=[], help="stop string (repeatable)")
    shape = parser.add_mutually_exclusive_group()
    shape.add_argument("--json-schema", metavar="FILE", help="constrain the reply to JSON matching this schema")
    shape.add_argument("--grammar", metavar="FILE", help="constrain the reply to this GBNF grammar (llama.cpp's)")


def _structure(args: argparse.Namespace) -> dict[str, Any]:
    """The reply's constraint from --json-schema / --grammar, read (and a schema converted) before any model is
    loaded, so a bad file fails in a moment rather than after the load."""
    from ..grammar.json_schema import schema_to_gbnf

    if args.json_schema:
        try:
            schema = json.loads(Path(args.json_schema).read_text(encoding="utf-8"))
        except OSError as exc:
            raise InvalidRequestError(f"--json-schema: cannot read {args.json_schema}: {exc.strerror}") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InvalidRequestError(f"--json-schema: {args.json_schema} is not JSON: {exc}") from None
        schema_to_gbnf(schema)  # refuses unsupported keywords now
        return {"json_schema": schema}
    if args.grammar:
        try:
            return {"grammar": Path(args.grammar).read_text(encoding="utf-8")}
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidRequestError(f"--grammar: cannot read {args.grammar}: {exc}") from None
    return {}


def _sampling(args: argparse.Namespace) -> dict[str, Any]:
    """The sampling options, validated before any model is loaded."""
    from ..runtime.sampler import SamplingParams

    options = dict(temperature=args.temp, top_k=args.top_k, top_p=args.top_p, min_p=args.min_p,
                   repetition_penalty=args.repeat_penalty, presence_penalty=args.presence_penalty,
                   frequency_penalty=args.frequency_penalty, seed=args.seed)
    SamplingParams(**options).validate()
    if args.max_tokens < 1:
        raise InvalidRequestError(f"--max-tokens must be at least 1, got {args.max_tokens}")
    return options


def _load(args: argparse.Namespace):
    from ..api import load

    llm = load(args.model, context=args.ctx, q8_activations=args.q8_activations, profile=args.profile,
               kv_type=args.kv_cache, retune=getattr(args, "retune", False), int8_dot=args.int8_dot)
    info = llm.device.info
    if info.software and not args.json:
        print(f"llmchat: {info.name} is a software (CPU-emulated) adapter: expect it to be slow", file=sys.stderr)
    if info.profile and not args.json:
        print(f"llmchat: device profile '{info.profile}' (GPU memory budget {info.gpu_budget / 2**20:.0f} MiB, "
              f"bindings up to {info.max_binding_size >> 20} MiB, f16 {'on' if info.f16 else 'off'}, subgroups "
              f"{'on' if info.subgroups else 'off'}, int8 dot products {'on' if info.dot4i8 else 'off'})",
              file=sys.stderr)
    return llm


def _run_arguments(parser: argparse.ArgumentParser) -> None:
    _engine_arguments(parser)
    parser.add_argument("-p", "--prompt", required=True, help="raw prompt (no chat template; special tokens parsed)")
    _sampling_arguments(parser)


@command("run", "complete a raw prompt, streaming the text", _run_arguments)
def run_command(args: argparse.Namespace) -> int:
    sampling = _sampling(args)
    structure = _structure(args)
    llm = _load(args)
    ids, text = [], []
    for event in llm.generate(args.prompt, max_tokens=args.max_tokens, stop=args.stop, **structure, **sampling):
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


def _chat_arguments(parser: argparse.ArgumentParser) -> None:
    _engine_arguments(parser)
    parser.add_argument("--system", help="system prompt")
    _sampling_arguments(parser)
    parser.set_defaults(max_tokens=512)


@command("chat", "talk with a model in the terminal (Ctrl-C stops a reply, Ctrl-D leaves)", _chat_arguments)
def chat_command(args: argparse.Namespace) -> int:
    sampling = _sampling(args)
    structure = _structure(args)
    llm = _load(args)
    messages = [{"role": "system", "content": args.system}] if args.system else []
    print(f"llmchat: {llm.config.name or args.model} on {llm.device.info.name}, chat template: "
          f"{llm.template.describe()}. Ctrl-C stops a reply, Ctrl-D leaves.", file=sys.stderr)
    while True:
        try:
            line = input("> ")
        except EOFError:
            print()
            return 0
        if not line.strip():
            continue
        messages.append({"role": "user", "content": line})
        reply = []
        dim = ("\033[2m", "\033[0m") if sys.stdout.isatty() else ("", "")
        with _ctrl_c_stops() as pressed:
            try:
                for event in llm.chat(messages, max_tokens=args.max_tokens, stop=args.stop, **structure,
                                      **sampling):
                    if event.reasoning:  # a reasoning model's thinking: shown dimmed, not kept in the history
                        print(f"{dim[0]}{event.reasoning}{dim[1]}", end="", flush=True)
                    reply.append(event.text)
                    print(event.text, end="", flush=True)
                    if pressed.is_set():
                        break
            except KeyboardInterrupt:  # pressed twice
                pass
        print(" [stopped]" if pressed.is_set() else "")
        messages.append({"role": "assistant", "content": "".join(reply)})


@contextlib.contextmanager
def _ctrl_c_stops():
    """Within it Ctrl-C sets the flag it yields, for the token loop to stop at the next token, instead of raising
    KeyboardInterrupt wherever the main thread happens to be: Python prints and drops an exception raised in a
    finalizer (`__del__`, run as wgpu objects are released every step) or a foreign callback, and the reply
    would run on. A second Ctrl-C raises at once."""
    pressed = threading.Event()

    def on_sigint(signum, frame):
        if pressed.is_set():
            raise KeyboardInterrupt
        pressed.set()

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield pressed
    finally:
        signal.signal(signal.SIGINT, previous)


def _logits_arguments(parser: argparse.ArgumentParser) -> None:
    _engine_arguments(parser)
    parser.add_argument("-p", "--prompt", required=True)
    parser.add_argument("--top", type=int, default=10, help="how many of the largest logits to print")


@command("logits", "print the largest logits at the last prompt position", _logits_arguments)
def logits_command(args: argparse.Namespace) -> int:
    llm = _load(args)
    ids, logits = llm.logits(args.prompt)
    top = sorted(range(len(logits)), key=lambda i: (-logits[i], i))[:args.top]
    if args.json:
        print(json.dumps({"ids": ids, "top": [[i, logits[i]] for i in top]}))
    else:
        for i in top:
            print(f"{i:>8} {logits[i]:>10.4f} {llm.tokenizer.decode([i])!r}")
    return 0


def _perplexity_arguments(parser: argparse.ArgumentParser) -> None:
    _engine_arguments(parser)
    parser.add_argument("--file", required=True, help="text file to score")
    parser.add_argument("--window", type=int, default=256, help="tokens per window (default 256)")


@command("perplexity", "score a text file: perplexity over consecutive windows", _perplexity_arguments)
def perplexity_command(args: argparse.Namespace) -> int:
    try:
        with open(args.file, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise LLMChatError(f"cannot read {args.file}: {exc.strerror}") from None
    result = _load(args).perplexity(text, window=args.window)
    print(json.dumps(result) if args.json else f"perplexity {result['ppl']:.4f} over {result['tokens']} tokens")
    return 0


def _bench_arguments(parser: argparse.ArgumentParser) -> None:
    _engine_arguments(parser)
    parser.add_argument("-p", "--prompt", default=BENCH_PROMPT)
    parser.add_argument("-n", "--max-tokens", type=int, default=128, help="greedy tokens to generate (default 128)")
    parser.add_argument("--repeat", type=int, default=2, help="runs; the fastest prefill and decode are reported")
    parser.add_argument("--roofline", action="store_true", help="then measure the adapter's memory bandwidth and "
                        "each decode kernel's share of the step and of that bandwidth (llmchat.gpu.roofline)")
    parser.add_argument("--retune", action="store_true",
                        help="measure the kernel variants for this model and adapter again (see LLMCHAT_TUNE)")
    parser.add_argument("--sweep", action="store_true", help="then time every kernel variant the tuner chooses "
                        "among, at this model's shapes, beside the one running (slow on CPU emulators)")


@command("bench", "measure load time, prefill and decode speed", _bench_arguments)
def bench_command(args: argparse.Namespace) -> int:
    llm = _load(args)
    runs = []
    for _ in range(max(1, args.repeat)):
        for event in llm.generate(args.prompt, max_tokens=args.max_tokens, ignore_eos=True):
            pass
        runs.append(event)
    best = max(runs, key=lambda e: e.timings["decode_tok_s"])
    # Each speed from its best run: the first prefill also compiles the prefill programs.
    timings = {**best.timings, "prefill_tok_s": max(e.timings["prefill_tok_s"] for e in runs)}
    result = {"model": llm.path, "profile": llm.device.info.profile or None,
              "prompt_tokens": best.usage["prompt_tokens"],
              "generated": best.usage["completion_tokens"], **timings,
              "dispatches_per_token": llm.engine.dispatches_per_step(
                  context=best.usage["prompt_tokens"] + best.usage["completion_tokens"]),
              "weight_bytes_per_token": llm.model.weight_bytes,
              # How many weights kernels read from buffers and how many from textures (variants.weight_textures).
              "weights_read_from": dict(Counter(w.store for w in llm.tune_context.weights.values())),
              "adapter": llm.device.info.as_dict(),
              "kernels": llm.tuning.summary()}
    if args.roofline:
        from ..gpu import roofline
        result["roofline"] = roofline.report(llm, context=result["prompt_tokens"] + result["generated"],
                                             decode_tok_s=result["decode_tok_s"])
    if args.sweep:
        result["sweep"] = llm.sweep_kernels()
    print(json.dumps(result) if args.json else "\n".join(
        roofline.format_report(v) if k == "roofline" else f"{k}: {v}" for k, v in result.items()))
    return 0


# --- serve ------------------------------------------------------------------------------------------------------


def _serve_arguments(parser: argparse.ArgumentParser) -> None:
    _model_argument(parser)
    _profile_argument(parser)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    parser.add_argument("--api-key", default=os.environ.get("LLMCHAT_API_KEY"),
                        help="require `Authorization: Bearer KEY` on /v1 routes (default: $LLMCHAT_API_KEY, else none)")
    parser.add_argument("--ctx", type=_positive_int, help=CTX_HELP + "; per sequence")
    parser.add_argument("--max-batch", type=int, default=8, help="sequences decoded together (default 8)")
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


@command("serve", "run an OpenAI-compatible HTTP server (continuous batching, prefix caching)", _serve_arguments)
def serve_command(args: argparse.Namespace) -> int:
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
                      profile=args.profile))
    return 0


# --- plumbing ---------------------------------------------------------------------------------------------------


def _load_metadata(model: str) -> Mapping[str, Any]:
    from ..gguf.file import open_gguf

    with open_gguf(resolve(model)) as gguf:
        return gguf.metadata


CTX_HELP = ("context size in tokens (default 2048, or the model's trained length when shorter; a longer one than "
            "the model was trained for runs as asked, with a warning)")


def _positive_int(text: str) -> int:
    """argparse type for sizes: a positive integer, refused as a usage error before anything is loaded."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive number of tokens, not {value}")
    return value


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings from the core (a context beyond the trained length, ...) as one `llmchat: warning:` line."""
    print(f"llmchat: warning: {message}", file=sys.stderr if file is None else file)


def _json_argument(text: str) -> Any:
    """argparse type for JSON options; "-" reads standard input. Bad JSON becomes a usage error (exit 2)."""
    try:
        return json.loads(sys.stdin.read() if text == "-" else text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({exc})") from None


def build_parser() -> argparse.ArgumentParser:
    # `--debug` is accepted before and after the subcommand. Its default is SUPPRESS so that the subparser, which
    # shares the action object, cannot reset a `--debug` given before the subcommand; `main` reads it with getattr.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks on errors")
    parser = argparse.ArgumentParser(
        prog="llmchat", parents=[common], description="Run GGUF language models on WebGPU, on your own device."
    )
    parser.add_argument("--version", action="version", version=f"llmchat {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, cmd in COMMANDS.items():
        sub = subparsers.add_parser(name, parents=[common], help=cmd.help, description=cmd.help)
        cmd.add_arguments(sub)
        sub.set_defaults(handler=cmd.handler)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return the process exit status."""
    args = build_parser().parse_args(argv)
    with warnings.catch_warnings():  # restores the hook, for callers that run main() in their own process
        warnings.showwarning = _show_warning
        return _dispatch(args)


def _dispatch(args: argparse.Namespace) -> int:
    try:
        return args.handler(args)
    except LLMChatError as exc:
        if getattr(args, "debug", False):
            traceback.print_exc()
        print(f"llmchat: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130  # the shell convention for SIGINT
    except BrokenPipeError:
        # The reader went away (`llmchat ... | head`): point stdout at /dev/null so the flush at exit cannot fail too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
