"""`llmchat list`: the cached models (llmchat's and the Hugging Face cache's GGUF files), and why any cannot run;
`llmchat list --catalogue`: the models known by name, cached or not."""
from __future__ import annotations

import argparse
import json
import sys

HELP = "show the cached models (llmchat's and the Hugging Face cache's GGUF files), or the catalogue"


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--catalogue", action="store_true",
                        help="list the models known by name (`llmchat pull NAME` fetches one), cached or not")
    parser.add_argument("--json", action="store_true", help="print a JSON list, one object per model")


def run(args: argparse.Namespace) -> int:
    if args.catalogue:
        return _catalogue(args)
    from ..hub.listing import cached_models

    models = cached_models()
    if args.json:
        print(json.dumps([m.as_dict() for m in models]))
        return 0
    if not models:
        print("no cached models; `llmchat pull REF` fetches one", file=sys.stderr)
        return 0
    _table([("MODEL", "SIZE", "ARCH", "QUANT", "RUNS")] + [
        (m.model, _size(m.size), m.architecture or "?", m.quant or "?", "yes" if m.runs else "no") for m in models])
    reasons = [m for m in models if not m.runs]
    if reasons:
        print()
        for m in reasons:
            print(f"{m.model}: {m.problem}")
    return 0


def _catalogue(args: argparse.Namespace) -> int:
    from ..hub.catalogue import CATALOGUE

    if args.json:
        print(json.dumps([{"name": e.name, "size": e.size, "source": e.source, "description": e.description}
                          for e in CATALOGUE.values()]))
        return 0
    _table([("NAME", "SIZE", "DESCRIPTION")] + [(e.name, _size(e.size), e.description) for e in CATALOGUE.values()])
    return 0


def _table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())


def _size(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"
