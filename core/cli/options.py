"""Arguments several commands share (the model, the device profile, the engine and sampling options), their checks,
and the one way a command loads a model: each checks what it can before anything is opened, so a bad option fails
in a moment rather than after a load."""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import InvalidRequestError
from ..hub.catalogue import CATALOGUE, resolve
from ..runtime.engine_choice import ENGINES, ENV as ENGINE_ENV

REFERENCE_HELP = ("a catalogue name, a Hugging Face reference (hf://ORG/REPO/FILE.gguf[@REV], ORG/REPO:QUANT, "
                  "hf.co/ORG/REPO[:QUANT]) or an http(s) URL of a GGUF file")

CTX_HELP = ("context size in tokens (default 2048, or the model's trained length when shorter; a longer one than "
            "the model was trained for runs as asked, with a warning)")


def model_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model", metavar="MODEL",
        help=f"a GGUF file, an http(s) URL, a Hugging Face reference (hf://ORG/REPO/FILE.gguf, ORG/REPO:QUANT) "
             f"or a catalogue name ({', '.join(CATALOGUE)})",
    )


def profile_argument(parser: argparse.ArgumentParser) -> None:
    from ..gpu.profiles import ENV, PROFILES
    parser.add_argument("--profile", metavar="NAME",
                        help=f"cap the GPU to a class of devices: {', '.join(PROFILES)} (limits, features and a GPU "
                             f"memory budget; e.g. phone, or phone,gpu_budget=512MiB; default: ${ENV}, else none)")


def engine_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of the commands that load a model and run it."""
    model_argument(parser)
    profile_argument(parser)
    parser.add_argument("--ctx", type=positive_int, help=CTX_HELP)
    parser.add_argument("--q8-activations", action="store_true",
                        help="round activations to 8 bits before quantized matmuls, as llama.cpp does (its numbers, "
                             "less precision)")
    parser.add_argument("--int8-dot", action="store_true",
                        help="int8 dot products (dot4I8Packed) for Q4_0/Q4_1/Q8_0 matmuls where the adapter has them; "
                             "implies --q8-activations")
    parser.add_argument("--kv-cache", choices=["f16", "f32"], default=None,
                        help="KV cache element type (default: the adapter's choice, see README)")
    engine_choice_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def engine_choice_arguments(parser: argparse.ArgumentParser) -> None:
    """--engine and --threads (llmchat.runtime.engine_choice)."""
    parser.add_argument("--engine", choices=ENGINES, default=None,
                        help="webgpu (llmchat's kernels), cpu (llama.cpp's CPU kernels: pip install 'llmchat[cpu]') "
                             "or auto: webgpu on a hardware adapter, cpu where the only adapter emulates a GPU "
                             f"(default: ${ENGINE_ENV}, else auto)")
    parser.add_argument("--threads", type=positive_int, help="the cpu engine's threads (default: every core)")


def sampling_arguments(parser: argparse.ArgumentParser) -> None:
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


def structure(args: argparse.Namespace) -> dict[str, Any]:
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


def sampling(args: argparse.Namespace) -> dict[str, Any]:
    """The sampling options, validated before any model is loaded."""
    from ..runtime.sampler import SamplingParams

    options = dict(temperature=args.temp, top_k=args.top_k, top_p=args.top_p, min_p=args.min_p,
                   repetition_penalty=args.repeat_penalty, presence_penalty=args.presence_penalty,
                   frequency_penalty=args.frequency_penalty, seed=args.seed)
    SamplingParams(**options).validate()
    if args.max_tokens < 1:
        raise InvalidRequestError(f"--max-tokens must be at least 1, got {args.max_tokens}")
    return options


def load(args: argparse.Namespace):
    """The model of an engine command, loaded as its options say, with lines on stderr (unless the output is JSON)
    saying which engine runs it and why, and about an adapter that is emulated or capped by a profile."""
    from ..api import load as load_model

    llm = load_model(args.model, context=args.ctx, q8_activations=args.q8_activations, profile=args.profile,
                     kv_type=args.kv_cache, retune=getattr(args, "retune", False), int8_dot=args.int8_dot,
                     engine=args.engine, threads=args.threads)
    from ..gpu.device import adapter_notice

    if args.json:
        return llm
    print(f"llmchat: {llm.runtime.describe_engine()}", file=sys.stderr)
    if llm.runtime.device is None:
        return llm
    info = llm.runtime.device.info
    notice = adapter_notice(info)
    if notice:
        print(notice, file=sys.stderr)
    if info.profile:
        print(f"llmchat: device profile '{info.profile}' (GPU memory budget {info.gpu_budget / 2**20:.0f} MiB, "
              f"bindings up to {info.max_binding_size >> 20} MiB, f16 {'on' if info.f16 else 'off'}, subgroups "
              f"{'on' if info.subgroups else 'off'}, int8 dot products {'on' if info.dot4i8 else 'off'})",
              file=sys.stderr)
    return llm


def load_metadata(model: str) -> Mapping[str, Any]:
    """MODEL's header metadata, for the commands that need no GPU."""
    from ..gguf.file import open_gguf

    with open_gguf(resolve(model)) as gguf:
        return gguf.metadata


def positive_int(text: str) -> int:
    """argparse type for sizes and counts (--ctx, --threads): a positive integer, refused as a usage error before
    anything is loaded."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive number, not {value}")
    return value


def json_argument(text: str) -> Any:
    """argparse type for JSON options; "-" reads standard input. Bad JSON becomes a usage error (exit 2)."""
    try:
        return json.loads(sys.stdin.read() if text == "-" else text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({exc})") from None
