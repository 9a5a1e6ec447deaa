"""The non-linear 4-bit formats IQ4_NL and IQ4_XS: 4-bit indices into a fixed table of 16 signed values.

Conventions as in `kquants`: offsets are bytes from the start of the block, `d` is f16 (IEEE binary16,
little-endian), element e is the e-th of the block's consecutive values along ne[0], "bit b" counts from the least
significant bit. Decoding arithmetic is float32 in the order written, which makes results bit-exact.

There are no encoders here: llama.cpp picks IQ4 scales by a search, and this project only needs to read the files.
"""
from __future__ import annotations

import numpy as np

from llmchat.gguf.types import GGMLType

from .base import BlockFormat
from .packing import read_f16, split_nibbles, unpack_fields

# The 16 values an index selects (llama.cpp's kvalues_iq4nl): denser near zero, where most weights are.
GRID = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], dtype=np.float32)


def _grid_values(qs: np.ndarray) -> np.ndarray:
    """(..., 16) index bytes -> (..., 32) float32 grid values: the 16 low nibbles, then the 16 high nibbles."""
    indices = split_nibbles(qs).reshape(*qs.shape[:-1], 32)
    return GRID[indices]


class IQ4_NL(BlockFormat, ggml_type=GGMLType.IQ4_NL, f16_fields=(0,)):
    """Non-linear 4-bit, 32 elements in 18 bytes (4.5 bits per weight).

    Layout:
      bytes  0..1   d   f16 scale
      bytes  2..17  qs  16 bytes of 4-bit indices: qs[j] low nibble = element j, high nibble = element j + 16

    Decode: y[i] = d * GRID[q[i]], GRID = (-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113).
    """

    @classmethod
    def _decode(cls, blocks: np.ndarray) -> np.ndarray:
        y = _grid_values(blocks[:, 2:18])
        y *= read_f16(blocks, 0)
        return y


class IQ4_XS(BlockFormat, ggml_type=GGMLType.IQ4_XS, f16_fields=(0,)):
    """Non-linear 4-bit, 256 elements in 136 bytes (4.25 bits per weight); 8 sub-blocks of 32 with 6-bit scales.

    Layout:
      bytes  0..1    d         f16 super-block scale
      bytes  2..3    scales_h  u16, little-endian: bits 2j..2j+1 are the top two bits of sub-block j's scale
      bytes  4..7    scales_l  low four bits of sub-block j's scale: nibble j % 2 (low first) of byte 4 + j // 2
      bytes  8..135  qs        4-bit indices: sub-block j (elements 32j..32j+31) is bytes 8 + 16j..8 + 16j + 15,
                               byte 8 + 16j + l holding element 32j + l in its low nibble, 32j + l + 16 in its high

    Decode: sc_j = (low4 | high2 << 4) - 32, in -32..31; y[e] = (d * sc_j) * GRID[q[e]], j = e // 32 (GRID as
    IQ4_NL's).
    """

    @classmethod
    def _decode(cls, blocks: np.ndarray) -> np.ndarray:
        n = blocks.shape[0]
        low = split_nibbles(blocks[:, 4:8]).transpose(0, 2, 1).reshape(n, 8)
        high = unpack_fields(blocks[:, 2:4], 2, 4).transpose(0, 2, 1).reshape(n, 8)
        scales = (low | (high << np.uint8(4))).astype(np.int8)
        scales -= np.int8(32)
        scale = read_f16(blocks, 0) * scales.astype(np.float32)
        y = _grid_values(blocks[:, 8:136].reshape(n, 8, 16))
        y *= scale[:, :, np.newaxis]
        return y.reshape(n, 256)
