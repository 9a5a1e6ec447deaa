"""Unquantized element types: F32, F16 and BF16 (a "block" is one element)."""
from __future__ import annotations

import numpy as np

from llmchat.gguf.types import GGMLType

from .base import BlockFormat
from .packing import F16 as F16_DTYPE

_F32 = np.dtype("<f4")
_U16 = np.dtype("<u2")
_U32 = np.dtype("<u4")


class F32(BlockFormat, ggml_type=GGMLType.F32, f16_fields=()):
    """IEEE binary32, 4 bytes little-endian per element. Decoding is a reinterpretation, so every bit pattern
    (NaN payloads, signed zeros) survives."""

    @classmethod
    def _decode(cls, blocks: np.ndarray) -> np.ndarray:
        return blocks.view(_F32).astype(np.float32)

    @classmethod
    def _encode(cls, values: np.ndarray) -> np.ndarray:
        return values.astype(_F32).view(np.uint8)


class F16(BlockFormat, ggml_type=GGMLType.F16, f16_fields=(0,)):
    """IEEE binary16, 2 bytes little-endian per element; widened exactly to float32. Encoding rounds to nearest,
    ties to even; magnitudes beyond 65504 become infinity, as in llama.cpp."""

    @classmethod
    def _decode(cls, blocks: np.ndarray) -> np.ndarray:
        return blocks.view(F16_DTYPE).astype(np.float32)

    @classmethod
    def _encode(cls, values: np.ndarray) -> np.ndarray:
        return values.astype(F16_DTYPE).view(np.uint8)


class BF16(BlockFormat, ggml_type=GGMLType.BF16, f16_fields=()):
    """bfloat16, 2 bytes little-endian per element: the upper 16 bits of a float32 (sign, 8 exponent bits,
    7 mantissa bits). Decode: float32 bits = u16 << 16.

    Encoding (llama.cpp's rule): NaN keeps its sign and top mantissa bits and is forced quiet (bit 6 of the u16
    set); any other value is rounded to nearest, ties to even, on the 16 bits dropped.
    """

    @classmethod
    def _decode(cls, blocks: np.ndarray) -> np.ndarray:
        return (blocks.view(_U16).astype(_U32) << np.uint32(16)).view(np.float32)

    @classmethod
    def _encode(cls, values: np.ndarray) -> np.ndarray:
        bits = values.view(_U32)
        is_nan = (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
        # Round to nearest even: add 0x7FFF plus the lowest kept bit, then drop 16 bits. Only NaNs could wrap
        # past 2**32 here, and they take the other branch.
        rounded = (bits + (np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))) >> np.uint32(16)
        quiet_nan = (bits >> np.uint32(16)) | np.uint32(0x40)
        return np.where(is_nan, quiet_nan, rounded).astype(_U16).view(np.uint8)
