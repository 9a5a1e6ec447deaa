"""The `llmchat` command line.

Each subcommand is a module here with `HELP` (its help line), `arguments(parser)` (adds its arguments) and
`run(args) -> exit status`; `COMMANDS` names them in the order `llmchat --help` lists them, and `build_parser`
turns that table into argparse subparsers. Adding a command is therefore one module and one line in the table.
Arguments several commands share live in `options`. Command modules import the engine lazily, inside `run`, so
`llmchat --help` and light commands stay fast.

Every MODEL argument goes through `catalogue.resolve`: a path, an http(s) URL, a Hugging Face reference or a
catalogue name (the last two pulled on first use). Errors from the LLMChatError family print one line,
`llmchat: error: ...`, and exit with status 2; `--debug` adds the traceback.
"""
from __future__ import annotations

import argparse
import os
import sys
import traceback
import warnings
from collections.abc import Sequence
from types import ModuleType

from ..version import __version__
from ..errors import LLMChatError
from . import bench, chat, chat_template, inspect, listing, logits, perplexity, pull, rm, run, serve, tokenize

EXIT_ERROR = 2  # the same status argparse uses for usage errors: "you asked for something we cannot do"

COMMANDS: dict[str, ModuleType] = {
    "pull": pull, "list": listing, "rm": rm, "inspect": inspect, "tokenize": tokenize,
    "chat-template": chat_template, "run": run, "chat": chat, "logits": logits, "perplexity": perplexity,
    "bench": bench, "serve": serve,
}


def build_parser() -> argparse.ArgumentParser:
    # `--debug` is accepted before and after the subcommand. Its default is SUPPRESS so that the subparser, which
    # shares the action object, cannot reset a `--debug` given before the subcommand; `main` reads it with getattr.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks on errors")
    parser = argparse.ArgumentParser(
        prog="llmchat", parents=[common], description="Run GGUF language models on WebGPU, on your own device."
    )
    parser.add_argument("--version", action="version", version=f"llmchat {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in COMMANDS.items():
        sub = subparsers.add_parser(name, parents=[common], help=module.HELP, description=module.HELP)
        module.arguments(sub)
        sub.set_defaults(handler=module.run, command_parser=sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return the process exit status."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # said with the command's own usage, which lists the options it does take
        (args.command_parser if args.command else parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command is None:  # bare `llmchat`: the commands there are to run
        parser.print_help(sys.stderr)
        return EXIT_ERROR
    with warnings.catch_warnings():  # restores the hook, for callers that run main() in their own process
        warnings.showwarning = _show_warning
        return _dispatch(args)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings from the core (a context beyond the trained length, ...) as one `llmchat: warning:` line."""
    print(f"llmchat: warning: {message}", file=sys.stderr if file is None else file)


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
