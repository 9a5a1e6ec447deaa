"""What a model's tensors must look like given its metadata, and the one check that compares them at load.

Every dimension the forward pass relies on comes from metadata (`{arch}.embedding_length`, head counts, ...) and is
also written into the tensors' shapes. A file whose metadata disagrees with its tensors would run with the wrong
strides and print garbage (or read past a buffer), so each config declares the shape of every tensor it reads
(`ModelConfig.tensor_shapes`), each dimension carrying the metadata it came from, and `check_blocks` and
`check_shapes` refuse a file where one differs, naming the key, its value and what the tensor says.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import ModelMetadataError

_BLOCK = re.compile(r"^blk\.(\d+)\.")


@dataclass(frozen=True)
class Dim:
    """A dimension a tensor must have, and where the number comes from, e.g.
    "llama.attention.head_count = 3 × llama.attention.key_length = 64"."""

    value: int
    source: str

    def __mul__(self, other: "Dim | int") -> "Dim":
        if isinstance(other, int):
            return Dim(self.value * other, f"{other} × {self.source}" if other != 1 else self.source)
        return Dim(self.value * other.value, f"{self.source} × {other.source}")

    __rmul__ = __mul__

    def __add__(self, other: "Dim") -> "Dim":
        return Dim(self.value + other.value, f"({self.source}) + ({other.source})")

    def __floordiv__(self, n: int) -> "Dim":
        return Dim(self.value // n, f"{self.source} / {n}")


def block_index(name: str) -> int | None:
    """The block a tensor belongs to (`blk.N.`...), or None."""
    m = _BLOCK.match(name)
    return int(m.group(1)) if m else None


def check_blocks(n_layer: Dim, tensors: dict, where: str) -> None:
    """Refuse `tensors` unless their blocks are exactly blk.0 .. blk.{n_layer - 1}."""
    blocks = {b for name in tensors if (b := block_index(name)) is not None}
    if blocks != set(range(n_layer.value)):
        found = (f"tensors for blocks {min(blocks)}..{max(blocks)}" + ("" if len(blocks) == max(blocks) + 1 else
                 f" ({len(blocks)} of them)")) if blocks else "no block tensors"
        raise ModelMetadataError(f"{where}: metadata disagrees with the tensors: {n_layer.source}, but the file has "
                                 f"{found}")


def check_shapes(shapes: dict[str, tuple[Dim, ...]], tensors: dict, where: str) -> None:
    """Refuse `tensors` (name -> info with `.shape`, GGUF order: row length first) when a present tensor's shape is
    not the declared one. A declared tensor the file lacks is left to the loader, which names it when the model
    needs it; an optional one is simply absent."""
    for name, want in shapes.items():
        info = tensors.get(name)
        if info is None:
            continue
        have = tuple(info.shape)
        if len(have) != len(want):
            raise ModelMetadataError(f"{where}: tensor {name} has shape {list(have)}; a {len(want)}-dimensional "
                                     f"tensor of {[d.value for d in want]} was expected")
        for axis, (n, dim) in enumerate(zip(have, want)):
            if n != dim.value:
                what = "rows" if axis == 1 else "columns (row length)" if len(have) > 1 else "elements"
                raise ModelMetadataError(
                    f"{where}: metadata disagrees with the tensors: {dim.source} gives {dim.value} {what} for "
                    f"{name}, but the tensor has {n} (shape {list(have)})")
