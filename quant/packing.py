"""Bit-level helpers shared by the block formats: f16 fields and sub-byte quant fields.

Every helper works on whole arrays of blocks at once (leading axes are blocks or groups inside blocks), so the
formats stay free of Python loops over blocks. All multi-byte fields in GGUF blocks are little-endian; the explicit
'<' dtypes keep that true on any host.
"""
from __future__ import annotations

import numpy as np

F16 = np.dtype("<f2")


def read_f16(blocks: np.ndarray, offset: int) -> np.ndarray:
    """The f16 field at byte `offset` of every block, widened to float32, shaped (n_blocks, 1) for broadcasting."""
    # The copy makes the two bytes contiguous and aligned; viewing a strided slice would be slower and fragile.
    raw = np.ascontiguousarray(blocks[:, offset : offset + 2])
    return raw.view(F16).astype(np.float32)


def f16_bytes(values: np.ndarray) -> np.ndarray:
    """Float values of shape (n_blocks, 1) rounded to f16 (nearest-even) as (n_blocks, 2) little-endian bytes."""
    return values.astype(F16).view(np.uint8).reshape(values.shape[0], 2)


def unpack_fields(packed: np.ndarray, width: int, count: int) -> np.ndarray:
    """Split each byte of `packed` (..., k) into `count` fields of `width` bits, lowest bits first.

    Returns (..., count, k): entry [..., j, i] is bits [width*j, width*j + width) of byte i. GGUF formats lay
    consecutive elements along i (the byte index) and move to the next bit field only after a full run of bytes,
    so this axis order is usually already the element order.
    """
    shifts = np.arange(0, width * count, width, dtype=np.uint8).reshape(count, 1)
    fields = packed[..., np.newaxis, :] >> shifts
    fields &= np.uint8((1 << width) - 1)
    return fields


def split_nibbles(packed: np.ndarray) -> np.ndarray:
    """(..., k) bytes -> (..., 2, k): the k low nibbles, then the k high nibbles."""
    return unpack_fields(packed, 4, 2)


def join_nibbles(values: np.ndarray) -> np.ndarray:
    """Inverse of `split_nibbles` for 4-bit values (..., 2, k) -> bytes (..., k); bits above 4 are dropped."""
    low = values[..., 0, :] & np.uint8(0x0F)
    return low | (values[..., 1, :] << np.uint8(4))


def round_half_away(values: np.ndarray) -> np.ndarray:
    """Round float32 values to integers, halves away from zero (C `roundf`), not numpy's halves-to-even.

    Done in float64, where adding 0.5 to any float32 is exact, so values just below a half do not round up.
    """
    wide = values.astype(np.float64)
    return np.trunc(wide + np.copysign(0.5, wide))
