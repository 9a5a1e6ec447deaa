"""Whole tensors in GGUF's conventions: raw tensor bytes plus a GGUF shape <-> a numpy float32 array.

GGUF lists dimensions fastest-varying first (ne[0] is contiguous, and blocks run along it), while numpy lists them
slowest first; so a GGUF shape (cols, rows) is the numpy shape (rows, cols).
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from llmchat.errors import GGUFError
from llmchat.gguf.types import GGMLType

from .base import get


def dequantize(
    data: bytes | bytearray | memoryview | np.ndarray, ggml_type: GGMLType | int, shape: Sequence[int]
) -> np.ndarray:
    """Decode a tensor's bytes; `shape` is in GGUF order (ne[0] first), the result has it reversed.

    Raises `UnsupportedModelError` for a type without a reference, `GGUFError` when the bytes or the shape do not
    fit the type (ne[0] not a whole number of blocks, or the wrong number of bytes).
    """
    fmt = get(ggml_type)
    dims = tuple(int(n) for n in shape)
    if not dims or any(n < 0 for n in dims):
        raise GGUFError(f"{fmt.type.name} tensor has an invalid shape {dims}")
    if dims[0] % fmt.block_elems:
        raise GGUFError(
            f"{fmt.type.name} tensor of shape {dims}: ne[0] = {dims[0]} is not a multiple of "
            f"the {fmt.block_elems}-element block"
        )
    raw = _as_bytes(data)
    expected = math.prod(dims) // fmt.block_elems * fmt.block_bytes
    if raw.size != expected:
        raise GGUFError(f"{fmt.type.name} tensor of shape {dims} needs {expected} bytes, got {raw.size}")
    values = fmt.dequantize(raw.reshape(-1, fmt.block_bytes))
    return values.reshape(dims[::-1])


def quantize(values: np.ndarray, ggml_type: GGMLType | int) -> np.ndarray:
    """Encode a float array (numpy order, last axis = ne[0]) into uint8 rows of blocks.

    Returns shape (*values.shape[:-1], values.shape[-1] // block_elems * block_bytes); `.tobytes()` is what a
    GGUF file stores. Raises `UnsupportedModelError` when the type has no reference encoder and `ValueError`
    when the last axis is not a whole number of blocks.
    """
    fmt = get(ggml_type)
    array = np.asarray(values, dtype=np.float32)
    if array.ndim == 0 or array.shape[-1] % fmt.block_elems:
        raise ValueError(
            f"cannot quantize shape {array.shape} to {fmt.type.name}: "
            f"the last axis must be a multiple of {fmt.block_elems}"
        )
    blocks = fmt.quantize(array.reshape(-1, fmt.block_elems))
    return blocks.reshape(*array.shape[:-1], array.shape[-1] // fmt.block_elems * fmt.block_bytes)


def _as_bytes(data: bytes | bytearray | memoryview | np.ndarray) -> np.ndarray:
    """A flat uint8 view (no copy where possible) of bytes-like data or of any contiguous numpy array."""
    if isinstance(data, np.ndarray):
        return np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    return np.frombuffer(data, dtype=np.uint8)
