"""`llmchat rm REF`: remove a cached model."""
from __future__ import annotations

import argparse

from ..hub.catalogue import remove
from .options import REFERENCE_HELP

HELP = "remove a cached model"


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("reference", metavar="REF", help=f"{REFERENCE_HELP}, or a file name `llmchat list` shows")


def run(args: argparse.Namespace) -> int:
    for path in remove(args.reference):
        print(f"removed {path}")
    return 0
