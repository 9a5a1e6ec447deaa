"""`llmchat chat-template MODEL --messages JSON`: the prompt a model's chat template makes of a conversation."""
from __future__ import annotations

import argparse
import sys

from .options import json_argument, load_metadata, model_argument

HELP = "print the prompt a model's chat template makes of some messages"


def arguments(parser: argparse.ArgumentParser) -> None:
    model_argument(parser)
    parser.add_argument(
        "--messages", required=True, metavar="JSON", type=json_argument,
        help='the conversation as JSON, e.g. \'[{"role": "user", "content": "Hi"}]\' ("-" reads it from stdin)',
    )
    parser.add_argument(
        "--tools", metavar="JSON", type=json_argument, help="tool (function) descriptions as a JSON list"
    )
    parser.add_argument(
        "--no-generation-prompt", dest="add_generation_prompt", action="store_false",
        help="do not open an assistant turn at the end",
    )
    parser.add_argument("--template", metavar="NAME", help="a named template variant, e.g. tool_use")


def run(args: argparse.Namespace) -> int:
    metadata = load_metadata(args.model)
    from ..chat.template import ChatTemplate

    template = ChatTemplate.from_metadata(metadata, name=args.template)
    if not template.from_file:
        print(f"llmchat: using the {template.describe()}", file=sys.stderr)
    sys.stdout.write(template.render(args.messages, add_generation_prompt=args.add_generation_prompt, tools=args.tools))
    return 0
