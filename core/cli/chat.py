"""`llmchat chat MODEL`: a conversation in the terminal. Ctrl-C stops a reply; Ctrl-D, or Ctrl-C twice at the
prompt, leaves."""
from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading

from ..hub.catalogue import model_title
from .options import engine_arguments, load, sampling, sampling_arguments, structure

HELP = "talk with a model in the terminal (Ctrl-C stops a reply, Ctrl-D or Ctrl-C twice at the prompt leaves)"
LEAVE_HINT = "(Ctrl-C again or Ctrl-D leaves; the conversation is not kept)"


def arguments(parser: argparse.ArgumentParser) -> None:
    engine_arguments(parser)
    parser.add_argument("--system", help="system prompt")
    sampling_arguments(parser)
    parser.set_defaults(max_tokens=512)


def run(args: argparse.Namespace) -> int:
    options = sampling(args)
    shape = structure(args)
    llm = load(args)
    messages = [{"role": "system", "content": args.system}] if args.system else []
    runtime = llm.runtime
    print(f"llmchat: {model_title(runtime.gguf)} on {runtime.engine.describe()}, chat template: "
          f"{runtime.template.describe()}. Ctrl-C stops a reply; Ctrl-D, or Ctrl-C twice at the prompt, leaves.",
          file=sys.stderr)
    interrupted = False  # Ctrl-C at the last prompt: one more leaves
    while True:
        try:
            line = input("> ")
        except EOFError:
            print()
            return 0
        except KeyboardInterrupt:
            # A reflex Ctrl-C should not throw the conversation away unasked: the first one says how to leave.
            print()
            if interrupted:
                return 0
            interrupted = True
            print(LEAVE_HINT, file=sys.stderr, flush=True)
            continue
        interrupted = False
        if not line.strip():
            continue
        messages.append({"role": "user", "content": line})
        reply = []
        dim = ("\033[2m", "\033[0m") if sys.stdout.isatty() else ("", "")
        with _ctrl_c_stops() as pressed:
            try:
                for event in llm.chat(messages, max_tokens=args.max_tokens, stop=args.stop, **shape, **options):
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
