"""The `llmchat` command line.

Each subcommand is one handler `(args) -> exit status` registered with `@command`, which also names a function that
adds the subcommand's arguments; `build_parser` turns the registry into argparse subparsers. Adding a command is
therefore one arguments function and one handler, nothing else. Handlers import what they need lazily, so
`llmchat --help` and light commands stay fast.

Every MODEL argument goes through `catalogue.resolve`: a path, an http(s) URL or a catalogue name (pulled on first
use). Errors from the LLMChatError family print one line, `llmchat: error: ...`, and exit with status 2;
`--debug` adds the traceback.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import __version__
from .catalogue import CATALOGUE, pull, resolve
from .errors import LLMChatError

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
        help=f"a GGUF file, an http(s) URL, or a catalogue name ({', '.join(CATALOGUE)})",
    )


# --- pull -------------------------------------------------------------------------------------------------------


def _pull_arguments(parser: argparse.ArgumentParser) -> None:
    catalogue = "; ".join(f"{entry.name}: {entry.description}" for entry in CATALOGUE.values())
    parser.add_argument("name", metavar="NAME", help=f"catalogue name ({catalogue})")
    parser.add_argument(
        "--verify", action="store_true", help="re-hash a cached file (sha256) instead of checking only its size"
    )


@command("pull", "download a catalogue model into the local cache and print its path", _pull_arguments)
def pull_command(args: argparse.Namespace) -> int:
    print(pull(args.name, verify=args.verify))
    return 0


# --- inspect ----------------------------------------------------------------------------------------------------


def _inspect_arguments(parser: argparse.ArgumentParser) -> None:
    _model_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


@command("inspect", "summarise a model file: metadata, tensors, sizes", _inspect_arguments)
def inspect_command(args: argparse.Namespace) -> int:
    args.model = resolve(args.model)
    from .inspect_cmd import inspect_main

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
    from .tokenizer import Tokenizer

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
    from .chat import ChatTemplate

    template = ChatTemplate.from_metadata(metadata, name=args.template)
    if template.is_default:
        print("llmchat: the model has no chat template; using ChatML", file=sys.stderr)
    sys.stdout.write(template.render(args.messages, add_generation_prompt=args.add_generation_prompt, tools=args.tools))
    return 0


# --- plumbing ---------------------------------------------------------------------------------------------------


def _load_metadata(model: str) -> Mapping[str, Any]:
    from .gguf import open_gguf

    with open_gguf(resolve(model)) as gguf:
        return gguf.metadata


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
