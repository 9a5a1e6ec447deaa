"""`llmchat list`: the models already on this machine — what llmchat pulled, and every GGUF file in the Hugging Face
cache whoever fetched it — with what their headers say and whether this version of llmchat can run them.

Only headers are read (a few megabytes per model at most); a file whose header cannot be read is listed with the
reason rather than left out.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from . import huggingface as hub
from .catalogue import CATALOGUE, models_dir
from ..errors import LLMChatError
from ..gguf.types import FILE_TYPES
from ..gguf.file import GGUFFile, open_gguf, shard_name, shard_number


@dataclass(frozen=True)
class CachedModel:
    model: str  # what to give as MODEL to run it (a catalogue name, a hub reference, a file name or a path)
    path: str  # the file (the first shard of a split model)
    size: int  # bytes on disk, all shards together
    files: int  # 1, or the number of shards
    source: str  # "llmchat" (its models directory) or "huggingface" (the Hugging Face cache)
    architecture: str | None
    quant: str | None
    runs: bool  # whether this version of llmchat can run it
    problem: str | None  # why it cannot (or why its header could not be read)

    def as_dict(self) -> dict:
        return asdict(self)


def cached_models() -> list[CachedModel]:
    """Everything in llmchat's models directory, then everything in the Hugging Face cache."""
    return list(_ours()) + list(_huggingface())


def _ours() -> Iterator[CachedModel]:
    root = models_dir()
    if not root.is_dir():
        return
    by_file = {entry.file_name: entry.name for entry in CATALOGUE.values() if entry.parts}
    for path in sorted(p for p in root.rglob("*.gguf") if _is_first(p) and not _hidden(p, root)):
        relative = path.relative_to(root)
        if len(relative.parts) == 1:
            name = by_file.get(path.name, path.name)
        else:
            name = str(path)
        yield describe(path, name, "llmchat")


def _huggingface() -> Iterator[CachedModel]:
    for cached in hub.cached_ggufs():
        if _is_first(cached.path):
            yield describe(cached.path, str(cached.ref), "huggingface")


def _is_first(path: Path) -> bool:
    position = shard_number(path.name)
    return position is None or position[0] == 1


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)  # scratch space of pulls in flight


def describe(path: Path, model: str, source: str) -> CachedModel:
    """Read `path`'s header (and its shards') and say what it is."""
    position = shard_number(path.name)
    shards = [path] if position is None else [
        path.with_name(name) for i in range(position[1]) if (name := shard_name(path.name, i, position[1]))]
    size = sum(p.stat().st_size for p in shards if p.is_file())
    architecture = quant = None
    try:
        with open_gguf(path) as gguf:
            architecture = gguf.metadata.get("general.architecture")
            quant = quantization(gguf)
            problem = support_problem(gguf)
    except LLMChatError as exc:
        problem = str(exc)
    return CachedModel(model=model, path=str(path), size=size, files=len(shards), source=source,
                       architecture=architecture if isinstance(architecture, str) else None, quant=quant,
                       runs=problem is None, problem=problem)


def quantization(gguf: GGUFFile) -> str | None:
    """The file's quantization as llama.cpp names it (`general.file_type`), else the type holding most bytes."""
    file_type = gguf.metadata.get("general.file_type")
    if isinstance(file_type, int) and file_type in FILE_TYPES:
        return FILE_TYPES[file_type]
    weight: dict[str, int] = {}
    for tensor in gguf.tensors.values():
        weight[tensor.type.name] = weight.get(tensor.type.name, 0) + tensor.nbytes
    return max(weight, key=weight.__getitem__) if weight else None


def support_problem(gguf: GGUFFile) -> str | None:
    """Why this version of llmchat cannot run the model, or None when it can (the memory plan on a GPU with
    WebGPU's default limits: its architecture has a model file, every tensor type a kernel, and it fits)."""
    from ..runtime.memory import default_plan

    try:
        default_plan(gguf)
    except LLMChatError as exc:
        return str(exc)
    return None
