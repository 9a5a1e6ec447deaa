"""`llmchat pull REF`: download a model into the local cache and print its path."""
from __future__ import annotations

import argparse

from ..hub.catalogue import CATALOGUE, pull
from .options import REFERENCE_HELP

HELP = "download a model into the local cache and print its path"


def arguments(parser: argparse.ArgumentParser) -> None:
    catalogue = "; ".join(f"{entry.name}: {entry.description}" for entry in CATALOGUE.values())
    parser.add_argument("reference", metavar="REF", help=f"{REFERENCE_HELP}. Catalogue: {catalogue}")
    parser.add_argument(
        "--verify", action="store_true",
        help="re-hash a cached catalogue model (sha256) instead of checking only its size"
    )


def run(args: argparse.Namespace) -> int:
    print(pull(args.reference, verify=args.verify))
    return 0
