"""The original 32-element block formats: Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0.

Conventions in the layouts below: offsets are bytes from the start of the block; `d` and `m` are f16 (IEEE
binary16, little-endian); element i is the i-th of the block's 32 consecutive values along ne[0]. All four- and
five-bit formats share one nibble order: byte qs[j] (j = 0..15, counted from the start of the qs field) holds
element j in its low nibble and element j + 16 in its high nibble. Decoding arithmetic is float32 in the order
written, which is what makes results bit-exact.

Blocks are 18, 20, 22, 24 and 34 bytes long, so f16 and u32 fields are not 4-byte aligned in a tensor: read them
byte-wise (or from u32 words with shifts).

The encoders reproduce llama.cpp's reference quantizers (`quantize_row_*_ref`) exactly, including their use of
the full-precision float32 scale while picking quants even though the block stores the f16-rounded one. The
one departure: where 1/d overflows float32 (llama.cpp's casts are then undefined) quants are taken at the offset.
"""
from __future__ import annotations

import numpy as np

from llmchat.gguf.types import GGMLType

from .base import BlockFormat
from .packing import f16_bytes, join_nibbles, read_f16, round_half_away, split_nibbles


def _nibbles_to_elements(qs: np.ndarray) -> np.ndarray:
    """(n, 16) packed bytes -> (n, 32) uint8 values 0..15 in element order."""
    return split_nibbles(qs).reshape(qs.shape[0], 32)


def _elements_to_nibbles(q: np.ndarray) -> np.ndarray:
    """(n, 32) values -> (n, 16) bytes: element j low, element j + 16 high (bits above 4 dropped)."""
    return join_nibbles(q.reshape(q.shape[0], 2, 16))


def _high_bits_to_u32(q: np.ndarray) -> np.ndarray:
    """(n, 32) 5-bit values -> (n, 4) bytes of the little-endian u32 whose bit i is bit 4 of element i."""
    return np.packbits((q >> np.uint8(4)) & np.uint8(1), axis=1, bitorder="little")


def _u32_to_high_bits(qh: np.ndarray) -> np.ndarray:
    """(n, 4) bytes of a little-endian u32 -> (n, 32) values 0 or 16: bit i of the u32 placed at bit 4."""
    return np.unpackbits(qh, axis=1, bitorder="little") << np.uint8(4)


def _signed_extreme(values: np.ndarray) -> np.ndarray:
    """Per block, the value of largest magnitude with its sign (the first one on ties), shaped (n, 1)."""
    index = np.abs(values).argmax(axis=1, keepdims=True)
    return np.take_along_axis(values, index, axis=1)


def _inverse(d: np.ndarray) -> np.ndarray:
    """1/d in float32, or 0 where that is not finite.

    d = 0 (a constant block) is llama.cpp's own guard. A d so small that 1/d overflows (block magnitudes below
    about 1e-37) is undefined behaviour in llama.cpp's integer casts; the stored f16 d is 0 there anyway, so
    putting every quant at the offset loses nothing and keeps the bytes well defined.
    """
    with np.errstate(divide="ignore", over="ignore"):
        inverse = np.float32(1) / d
    return np.where(np.isfinite(inverse), inverse, np.float32(0))


class Q4_0(BlockFormat, ggml_type=GGMLType.Q4_0, f16_fields=(0,)):
    """4-bit symmetric, 32 elements in 18 bytes (4.5 bits per weight).

    Layout:
      bytes  0..1   d   f16 scale
      bytes  2..17  qs  16 bytes of nibbles: qs[j] low nibble = element j, high nibble = element j + 16

    Decode: y[i] = d * (q[i] - 8), q in 0..15, so the grid is -8d .. 7d.

    Encode: take the element of largest magnitude, `max`, keeping its sign; d = max / -8, so that element lands
    on quant 0 exactly; q = min(15, trunc(x / d + 8.5)) computed as x * (1/d) in float32.
    """

    @classmethod
    def _decode(cls, blocks: np.ndarray) -> np.ndarray:
        q = _nibbles_to_elements(blocks[:, 2:18]).view(np.int8)
        q -= np.int8(8)
        y = q.astype(np.float32)
        y *= read_f16(blocks, 0)
        return y

    @classmethod
    def _encode(cls, values: np.ndarray) -> np.ndarray:
        d = _signed_extreme(values) / np.float32(-8)
        scaled = values * _inverse(d) + np.float32(8.5)
        q = np.minimum(np.trunc(scaled), 15).astype(np.uint8)
        return np.concatenate([f16_bytes(d), _elements_to_nibbles(q)], axis=1)


class Q4_1(BlockFormat, ggml_type=GGMLType.Q4_1, f16_fields=(0, 2)):
    """4-bit with offset, 32 elements in 20 bytes (5 bits per weight).

    Layout:
      bytes  0..1   d   f16 scale
      bytes  2..3   m   f16 offset (the block minimum)
      bytes  4..19  qs  16 bytes of nibbles: qs[j] low nibble = element j, high nibble = element j + 16

    Decode: y[i] = d * q[i] + m, q in 0..15 (the product rounded to float32 before the add).

    Encode: m = min(x), d = (max(x) - m) / 15, q = min(15, trunc((x - m) * (1/d) + 0.5)).
    """

    @classmethod
    def _decode(cls, blocks: np.ndarray) -> np.ndarray:
        y = _nibbles_to_elements(blocks[:, 4:20]).astype(np.float32)
        y *= read_f16(blocks, 0)
        y += read_f16(blocks, 2)
        return y

    @classmethod
    def _encode(cls, values: np.ndarray) -> np.ndarray:
        low = values.min(axis=1, keepdims=True)
        d = (values.max(axis=1, keepdims=True) - low) / np.float32(15)
        scaled = (values - low) * _inverse(d) + np.float32(0.5)
        q = np.minimum(np.trunc(scaled), 15).astype(np.uint8)
        return np.concatenate([f16_bytes(d), f16_bytes(low), _elements_to_nibbles(q)], axis=1)


class Q5_0(BlockFormat, ggml_type=GGMLType.Q5_0, f16_fields=(0,)):
    """5-bit symmetric, 32 elements in 22 bytes (5.5 bits per weight).

    Layout:
      bytes  0..1   d   f16 scale
      bytes  2..5   qh  u32, little-endian: bit i is bit 4 (the fifth bit) of element i; equivalently
                        byte 2 + i // 8, bit i % 8
      bytes  6..21  qs  low four bits: qs[j] low nibble = element j, high nibble = element j + 16

    Decode: q[i] = nibble | (qh bit i) << 4, in 0..31; y[i] = d * (q[i] - 16).

    Encode: as Q4_0 with 32 levels: d = max / -16, q = min(31, trunc(x * (1/d) + 16.5)).
    """

    @classmethod
    def _decode(cls, blocks: np.ndarray) -> np.ndarray:
        q = _nibbles_to_elements(blocks[:, 6:22])
        q |= _u32_to_high_bits(blocks[:, 2:6])
        q = q.view(np.int8)
        q -= np.int8(16)
        y = q.astype(np.float32)
        y *= read_f16(blocks, 0)
        return y

    @classmethod
    def _encode(cls, values: np.ndarray) -> np.ndarray:
        d = _signed_extreme(values) / np.float32(-16)
        scaled = values * _inverse(d) + np.float32(16.5)
        q = np.minimum(np.trunc(scaled), 31).astype(np.uint8)
        return np.concatenate([f16_bytes(d), _high_bits_to_u32(q), _elements_to_nibbles(q)], axis=1)


class Q5_1(BlockFormat, ggml_type=GGMLType.Q5_1, f16_fields=(0, 2)):
    """5-bit with offset, 32 elements in 24 bytes (6 bits per weight).

    Layout:
      bytes  0..1   d   f16 scale
      bytes  2..3   m   f16 offset (the block minimum)
      bytes  4..7   qh  u32, little-endian: bit i is bit 4 of element i (byte 4 + i // 8, bit i % 8)
      bytes  8..23  qs  low four bits: qs[j] low nibble = element j, high nibble = element j + 16

    Decode: q[i] = nibble | (qh bit i) << 4, in 0..31; y[i] = d * q[i] + m.

    Encode: m = min(x), d = (max(x) - m) / 31, q = min(31, trunc((x - m) * (1/d) + 0.5)).
    """

    @classmethod
    def _decode(cls, blocks: np.ndarray) -> np.ndarray:
        q = _nibbles_to_elements(blocks[:, 8:24])
        q |= _u32_to_high_bits(blocks[:, 4:8])
        y = q.astype(np.float32)
        y *= read_f16(blocks, 0)
        y += read_f16(blocks, 2)
        return y

    @classmethod
    def _encode(cls, values: np.ndarray) -> np.ndarray:
        low = values.min(axis=1, keepdims=True)
        d = (values.max(axis=1, keepdims=True) - low) / np.float32(31)
        scaled = (values - low) * _inverse(d) + np.float32(0.5)
        q = np.minimum(np.trunc(scaled), 31).astype(np.uint8)
        return np.concatenate([f16_bytes(d), f16_bytes(low), _high_bits_to_u32(q), _elements_to_nibbles(q)], axis=1)


class Q8_0(BlockFormat, ggml_type=GGMLType.Q8_0, f16_fields=(0,)):
    """8-bit symmetric, 32 elements in 34 bytes (8.5 bits per weight).

    Layout:
      bytes  0..1   d   f16 scale
      bytes  2..33  qs  32 signed bytes (int8, two's complement): qs[i] = element i

    Decode: y[i] = d * qs[i].

    Encode: d = max|x| / 127; q = round(x * (1/d)) with halves rounded away from zero (C `roundf`).
    """

    @classmethod
    def _decode(cls, blocks: np.ndarray) -> np.ndarray:
        y = blocks[:, 2:34].view(np.int8).astype(np.float32)
        y *= read_f16(blocks, 0)
        return y

    @classmethod
    def _encode(cls, values: np.ndarray) -> np.ndarray:
        d = np.abs(values).max(axis=1, keepdims=True) / np.float32(127)
        q = round_half_away(values * _inverse(d)).astype(np.int8)
        return np.concatenate([f16_bytes(d), q.view(np.uint8)], axis=1)
