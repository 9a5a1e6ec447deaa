"""`llmchat inspect MODEL [--json]`: what a GGUF file holds, read from its header alone, and what running it needs.

Text mode is for people: a summary first (the model, its tensor types, context, tokenizer, chat template, and the
GPU memory and kernels it needs), then the metadata, long arrays and strings shortened to their first items and a
length; the tensor table only with `--tensors`. `--json` is for programs: one object with every metadata value and
every tensor in full.
"""
from __future__ import annotations

import argparse
import json
import math
import struct
import sys
from typing import TYPE_CHECKING, TextIO

from ..errors import LLMChatError
from ..gguf.file import GGUFFile, GGUFValueType, open_gguf
from ..gguf.header import MetadataType
from ..hub.catalogue import model_title, resolve
from ..gpu.profiles import Profile, get_profile
from .options import model_argument, profile_argument

if TYPE_CHECKING:
    from ..runtime.memory import MemoryPlan

ARRAY_PREVIEW = 5  # items shown of a long array
STRING_PREVIEW = 60  # characters shown of a long string

HELP = "summarise a model file: what it is, what running it takes, its metadata (and tensors: --tensors)"


def arguments(parser: argparse.ArgumentParser) -> None:
    model_argument(parser)
    profile_argument(parser)
    parser.add_argument("--tensors", action="store_true",
                        help="also list every tensor (name, type, shape, offset, bytes); JSON always has them")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def run(args: argparse.Namespace) -> int:
    args.profile = get_profile(args.profile)  # an unknown name is refused before a catalogue model is pulled
    args.model = resolve(args.model)
    return inspect_main(args)


def inspect_main(args: argparse.Namespace) -> int:
    """Print the summary of `args.model` (a path or URL) as text, or as JSON when `args.json` is set."""
    with open_gguf(args.model) as model:
        if getattr(args, "json", False):
            json.dump(summary(model, getattr(args, "profile", None)), sys.stdout)
            sys.stdout.write("\n")
        else:
            print_text(model, sys.stdout, getattr(args, "profile", None), getattr(args, "tensors", False))
    return 0


def summary(model: GGUFFile, profile: Profile | None = None) -> dict[str, object]:
    """The JSON form: full metadata, and the tensor table (with each tensor's shard for split models)."""
    split = len(model.sources) > 1
    tensors = []
    for t in model.tensors.values():
        entry: dict[str, object] = {"name": t.name, "type": t.type.name, "shape": list(t.shape),
                                    "offset": t.offset, "nbytes": t.nbytes}
        if split:
            entry["shard"] = t.shard
        tensors.append(entry)
    return {"version": model.version, "alignment": model.alignment,
            "metadata": {key: _jsonable(value) for key, value in model.metadata.items()}, "tensors": tensors,
            "plan": run_plan(model, profile)}


def run_plan(model: GGUFFile, profile: Profile | None = None) -> dict:
    """What this version needs to run the model (llmchat.runtime.memory) on a device of `profile`, or why it cannot."""
    where = {"profile": profile.name, "gpu_budget": profile.gpu_budget} if profile else {}
    plan = _plan(model, profile)
    if isinstance(plan, LLMChatError):
        return {"error": str(plan), **where,
                **({"largest_context": plan.largest_context} if getattr(plan, "largest_context", None) is not None
                   else {})}
    return {**plan.as_dict(), **where}


def _plan(model: GGUFFile, profile: Profile | None) -> MemoryPlan | LLMChatError:
    from ..runtime.memory import default_plan

    try:
        return default_plan(model, profile)
    except LLMChatError as exc:
        return exc


def _jsonable(value: object) -> object:
    # JSON has no NaN or infinity; spell them as strings rather than emit text strict parsers reject.
    # (Strings that kept non-UTF-8 bytes as lone surrogates come out as \udcXX escapes.)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def print_text(model: GGUFFile, out: TextIO, profile: Profile | None = None, tensors: bool = False) -> None:
    """The summary (what the model is, and what running it takes), then the metadata, then the tensor table when
    `tensors` is set: a model has hundreds of tensors, which would push the rest off the screen."""
    n_params = sum(t.n_elements for t in model.tensors.values())
    n_bytes = sum(t.nbytes for t in model.tensors.values())
    if len(model.sources) == 1:
        out.write(f"{model.name}\n")
    else:  # numbered as in the shard file names, and in the shard column below
        for number, source in enumerate(model.sources, 1):
            out.write(f"shard {number}: {source.name}\n")
    out.write(f"GGUF v{model.version}, alignment {model.alignment}, {len(model.metadata)} metadata keys, "
              f"{len(model.tensors)} tensors, {n_params:,} parameters, {n_bytes / 2**20:.1f} MiB of tensor data"
              f"{f' in {len(model.sources)} shards' if len(model.sources) > 1 else ''}\n\n")
    for label, value in _overview(model):
        out.write(f"  {label:<14} {value}\n")

    from ..runtime.memory import DEFAULT_ADAPTER, DEFAULT_CONTEXT

    plan = _plan(model, profile)
    device = (f"the '{profile.name}' device profile, {profile.gpu_budget / 2**20:.0f} MiB GPU memory budget"
              if profile else DEFAULT_ADAPTER.name)
    out.write(f"\nto run ({device}, {DEFAULT_CONTEXT}-token context):\n")
    if isinstance(plan, LLMChatError):
        out.write(f"  cannot: {plan}\n")
    else:
        out.write(f"  {plan.total / 2**20:.1f} MiB of GPU memory: {plan.parts()}\n"
                  f"  matmul kernels (type/layout): {', '.join(plan.kernels)}\n")

    out.write("\nmetadata:\n")
    key_width = max((len(k) for k in model.metadata), default=0)
    for key, value in model.metadata.items():
        type_label = _type_label(model.metadata_types[key])
        out.write(f"  {key:<{key_width}}  {type_label:<9}  {_render(value, model.metadata_types[key])}\n")

    if not tensors:
        out.write(f"\ntensors: {len(model.tensors)} (--tensors lists them)\n")
        return
    out.write("\ntensors:\n")
    split = len(model.sources) > 1
    rows = [("#", "name", "type", "shape", "offset", "bytes") + (("shard",) if split else ())]
    for i, t in enumerate(model.tensors.values()):
        rows.append((str(i), t.name, t.type.name, "[" + ", ".join(map(str, t.shape)) + "]", str(t.offset),
                     str(t.nbytes)) + ((str(t.shard + 1),) if split else ()))
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    numeric = {0, 4, 5, 6}  # right-aligned columns
    for row in rows:
        cells = [cell.rjust(width) if column in numeric else cell.ljust(width)
                 for column, (cell, width) in enumerate(zip(row, widths, strict=True))]
        out.write("  " + "  ".join(cells).rstrip() + "\n")


def _overview(model: GGUFFile) -> list[tuple[str, str]]:
    """The summary's rows, from the metadata as it is: a file that is not a runnable model still gets the rows it
    can (what cannot be run is the plan's to say)."""
    meta = model.metadata
    arch = meta.get("general.architecture")
    about = ", ".join(str(v) for v in (arch, meta.get("general.size_label")) if v)
    rows = [("model", model_title(model) + (f" ({about})" if about else ""))]
    by_type: dict[str, list[int]] = {}
    for t in model.tensors.values():
        count_bytes = by_type.setdefault(t.type.name, [0, 0])
        count_bytes[0] += 1
        count_bytes[1] += t.nbytes
    mix = sorted(by_type.items(), key=lambda item: -item[1][1])
    rows.append(("tensor types", ", ".join(f"{name} ×{n} ({size / 2**20:.1f} MiB)" for name, (n, size) in mix)))
    trained = meta.get(f"{arch}.context_length")
    if isinstance(trained, int):
        from ..runtime.memory import DEFAULT_CONTEXT

        rows.append(("context", f"{trained} tokens trained; runs with {min(trained, DEFAULT_CONTEXT)} unless --ctx "
                                "says otherwise"))
    tokens = meta.get("tokenizer.ggml.tokens")
    if "tokenizer.ggml.model" in meta:
        pre = meta.get("tokenizer.ggml.pre")
        rows.append(("tokenizer", f"{meta['tokenizer.ggml.model']}" + (f" (pre-tokenizer {pre})" if pre else "")
                     + (f", {len(tokens)} tokens" if isinstance(tokens, list) else "")))
    try:
        from ..chat.template import ChatTemplate

        rows.append(("chat template", ChatTemplate.from_metadata(meta).describe()))
    except LLMChatError as exc:
        rows.append(("chat template", f"unusable: {exc}"))
    return rows


def _type_label(types: MetadataType) -> str:
    if types[0] == GGUFValueType.ARRAY:
        return f"[{types[1].name.lower()}]"
    return types[0].name.lower()


def _render(value: object, types: MetadataType | None = None) -> str:
    """One line for a metadata value; float32 values print as the shortest text that reads back the same."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, float):
        return _float32_text(value) if types and GGUFValueType.FLOAT32 in types else repr(value)
    if isinstance(value, list):
        item_types = types[1:] if types and len(types) > 1 else None  # unknown inside nested arrays
        shown = ", ".join(_render(v, item_types) for v in value[:ARRAY_PREVIEW])
        if len(value) > ARRAY_PREVIEW:
            return f"[{shown}, ...] ({len(value)} items)"
        return f"[{shown}]"
    return str(value)


def _quote(text: str) -> str:
    shown = json.dumps(text[:STRING_PREVIEW], ensure_ascii=False)  # quotes, and escapes controls and newlines
    # Bytes that were not UTF-8 were kept as lone surrogates: show them as \xNN rather than fail to print them.
    shown = shown.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return shown if len(text) <= STRING_PREVIEW else f"{shown}... ({len(text)} chars)"


def _float32_text(value: float) -> str:
    if not math.isfinite(value):
        return repr(value)
    for digits in range(6, 10):  # 9 significant digits always identify a float32
        text = f"{value:.{digits}g}"
        if struct.pack("<f", float(text)) == struct.pack("<f", value):
            return text
    return repr(value)
