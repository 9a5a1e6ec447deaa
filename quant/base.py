"""The registry of GGUF block formats and the base class each format derives from.

A format is a class, never instantiated: its class attributes say which GGML type it is, how big a block is
(taken from `llmchat.gguf.types.BLOCK_LAYOUT`, the one table of block sizes, which the runtime's parser reads
without numpy) and where its f16 fields are, and its class methods convert whole arrays of blocks. Defining a
subclass registers it under its type id.
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np

from llmchat.errors import UnsupportedModelError
from llmchat.gguf.types import BLOCK_LAYOUT, GGMLType

_REGISTRY: dict[GGMLType, type[BlockFormat]] = {}


class BlockFormat:
    """Base of every format: `dequantize` always, `quantize` where the subclass provides an encoder.

    Subclasses implement `_decode` (and optionally `_encode`) on arrays already checked for dtype and shape.
    """

    type: ClassVar[GGMLType]
    block_elems: ClassVar[int]
    block_bytes: ClassVar[int]
    # Byte offsets of the f16 fields: a quantized block's scales and mins (its other bytes are quants and small
    # integer sub-block scales, so its values are finite where these are, and linear in them together), or F16's
    # element itself.
    f16_fields: ClassVar[tuple[int, ...]]

    def __init_subclass__(cls, *, ggml_type: GGMLType, f16_fields: tuple[int, ...], **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls.type = ggml_type
        cls.block_elems, cls.block_bytes = BLOCK_LAYOUT[ggml_type]
        cls.f16_fields = f16_fields
        if ggml_type in _REGISTRY:
            raise TypeError(f"{cls.__name__}: a format for {ggml_type.name} is already registered")
        _REGISTRY[ggml_type] = cls

    def __new__(cls, *args: object, **kwargs: object) -> BlockFormat:
        raise TypeError(f"{cls.__name__} is used through its class methods, not instantiated")

    @classmethod
    def bits_per_weight(cls) -> float:
        return cls.block_bytes * 8 / cls.block_elems

    @classmethod
    def can_quantize(cls) -> bool:
        return cls._encode.__func__ is not BlockFormat._encode.__func__  # type: ignore[attr-defined]

    @classmethod
    def dequantize(cls, blocks: np.ndarray) -> np.ndarray:
        """uint8 blocks (n_blocks, block_bytes) -> float32 values (n_blocks, block_elems)."""
        if not isinstance(blocks, np.ndarray) or blocks.dtype != np.uint8:
            raise TypeError(f"{cls.type.name} blocks must be a uint8 numpy array")
        if blocks.ndim != 2 or blocks.shape[1] != cls.block_bytes:
            raise ValueError(
                f"{cls.type.name} blocks must have shape (n_blocks, {cls.block_bytes}), got {blocks.shape}"
            )
        return cls._decode(np.ascontiguousarray(blocks))

    @classmethod
    def quantize(cls, values: np.ndarray) -> np.ndarray:
        """float values (n_blocks, block_elems) -> uint8 blocks (n_blocks, block_bytes), as llama.cpp writes them."""
        if not cls.can_quantize():
            raise UnsupportedModelError(f"there is no reference quantizer for {cls.type.name}, only a dequantizer")
        values = np.asarray(values)
        if values.ndim != 2 or values.shape[1] != cls.block_elems:
            raise ValueError(
                f"values for {cls.type.name} must have shape (n_blocks, {cls.block_elems}), got {values.shape}"
            )
        return cls._encode(np.ascontiguousarray(values, dtype=np.float32))

    @classmethod
    def _decode(cls, blocks: np.ndarray) -> np.ndarray:
        raise NotImplementedError(f"{cls.__name__} must implement _decode")

    @classmethod
    def _encode(cls, values: np.ndarray) -> np.ndarray:
        raise NotImplementedError(f"{cls.__name__} has no encoder")


def get(ggml_type: GGMLType | int) -> type[BlockFormat]:
    """The format class for a GGML type id; `UnsupportedModelError` (naming the type) when we have none."""
    try:
        ggml_type = GGMLType(ggml_type)
    except ValueError:
        raise UnsupportedModelError(f"GGML type id {ggml_type!r} is not a known tensor type") from None
    try:
        return _REGISTRY[ggml_type]
    except KeyError:
        raise UnsupportedModelError(
            f"tensor type {ggml_type.name} (id {int(ggml_type)}) is not supported yet; "
            f"supported: {', '.join(t.name for t in supported_types())}"
        ) from None


def supported_types() -> tuple[GGMLType, ...]:
    """Every GGML type with a registered format, in type-id order."""
    return tuple(sorted(_REGISTRY))
