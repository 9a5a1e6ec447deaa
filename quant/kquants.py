"""The K-quant formats Q2_K, Q3_K, Q4_K, Q5_K and Q6_K: 256-element super-blocks with per-sub-block scales.

Conventions in the layouts below: offsets are bytes from the start of the super-block; `d` and `dmin` are f16
(IEEE binary16, little-endian); element e (0..255) is the e-th of the super-block's consecutive values along
ne[0]; "bit b of byte B" counts from the least significant bit. Decoding arithmetic is float32 in the order
written (the sub-block scale d * sc is rounded to float32 first, then multiplied by the quant), which is what
makes results bit-exact. Super-blocks are 84, 110, 144, 176 and 210 bytes; only 144 and 176 are multiples of 4.

There are no encoders here: llama.cpp's K-quant quantizers search for scales iteratively, and this project only
needs to read K-quant files.
"""
from __future__ import annotations

import numpy as np

from llmchat.gguf.types import GGMLType

from .base import BlockFormat
from .packing import read_f16, split_nibbles, unpack_fields


def _unpack_k4_scales(packed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The 12-byte field of Q4_K/Q5_K -> (scales, mins), each (n, 8) uint8 six-bit values.

    With bytes B[0..11]: for j < 4, scale j = B[j] & 63 and min j = B[j+4] & 63; for j >= 4,
    scale j = (B[j+4] & 15) | (B[j-4] >> 6) << 4 and min j = (B[j+4] >> 4) | (B[j] >> 6) << 4.
    """
    first, second, third = packed[:, 0:4], packed[:, 4:8], packed[:, 8:12]
    scales = np.concatenate([first & 63, (third & 15) | ((first >> 6) << 4)], axis=1)
    mins = np.concatenate([second & 63, (third >> 4) | ((second >> 6) << 4)], axis=1)
    return scales, mins


def _unpack_q3_scales(packed: np.ndarray) -> np.ndarray:
    """The 12-byte field of Q3_K -> (n, 16) int8 scales in -32..31 (see Q3_K's docstring for the bit layout)."""
    n = packed.shape[0]
    low = split_nibbles(packed[:, 0:8]).reshape(n, 16)
    high = unpack_fields(packed[:, 8:12], 2, 4).reshape(n, 16)
    scales = (low | (high << np.uint8(4))).view(np.int8)
    scales -= np.int8(32)
    return scales


def _nibble_runs(qs: np.ndarray) -> np.ndarray:
    """Q4_K/Q5_K low bits: (n, 128) bytes -> (n, 8, 32) values 0..15, one row per 32-element sub-block.

    Each 32-byte run c (bytes 32c..32c+31) holds sub-block 2c in its low nibbles and 2c + 1 in its high nibbles.
    """
    n = qs.shape[0]
    return split_nibbles(qs.reshape(n, 4, 32)).reshape(n, 8, 32)


class Q2_K(BlockFormat, ggml_type=GGMLType.Q2_K, f16_fields=(80, 82)):
    """2-bit, 256 elements in 84 bytes (2.625 bits per weight); 16 sub-blocks of 16 with 4-bit scale and min.

    Layout:
      bytes  0..15  scales  byte j for sub-block j (elements 16j..16j+15): low nibble = scale sc_j,
                            high nibble = min m_j
      bytes 16..79  qs      2-bit quants: element e = 128h + 32s + l (h in 0..1, s in 0..3, l in 0..31) is
                            bits 2s..2s+1 of qs[32h + l] (block byte 16 + 32h + l)
      bytes 80..81  d       f16 super-block scale for the scales
      bytes 82..83  dmin    f16 super-block scale for the mins

    Decode: y[e] = (d * sc_j) * q[e] - (dmin * m_j), j = e // 16, q in 0..3.
    """

    @classmethod
    def _decode(cls, blocks: np.ndarray) -> np.ndarray:
        n = blocks.shape[0]
        packed = blocks[:, 0:16]
        q = unpack_fields(blocks[:, 16:80].reshape(n, 2, 32), 2, 4).reshape(n, 16, 16)
        scale = read_f16(blocks, 80) * (packed & np.uint8(15)).astype(np.float32)
        offset = read_f16(blocks, 82) * (packed >> np.uint8(4)).astype(np.float32)
        y = q.astype(np.float32)
        y *= scale[:, :, np.newaxis]
        y -= offset[:, :, np.newaxis]
        return y.reshape(n, 256)


class Q3_K(BlockFormat, ggml_type=GGMLType.Q3_K, f16_fields=(108,)):
    """3-bit, 256 elements in 110 bytes (3.4375 bits per weight); 16 sub-blocks of 16 with signed 6-bit scales.

    Layout:
      bytes  0..31   hmask   high bit of element e = 32b + l (b in 0..7, l in 0..31) is bit b of byte l
      bytes 32..95   qs      low 2 bits: element e = 128h + 32s + l (h in 0..1, s in 0..3) is
                             bits 2s..2s+1 of qs[32h + l] (block byte 32 + 32h + l)
      bytes 96..107  scales  sixteen 6-bit scales, stored with an offset of 32:
                             low 4 bits of scale j: j < 8: low nibble of byte 96 + j;
                                                    j >= 8: high nibble of byte 96 + j - 8
                             high 2 bits of scale j: bits 2(j // 4)..2(j // 4)+1 of byte 104 + j % 4
      bytes 108..109 d       f16 super-block scale

    Decode: q[e] = low2 - (4 if the hmask bit is 0 else 0), so q in -4..3 (a set bit means "no offset");
            sc_j = six-bit value - 32 (in -32..31); y[e] = (d * sc_j) * q[e], j = e // 16.
    """

    @classmethod
    def _decode(cls, blocks: np.ndarray) -> np.ndarray:
        n = blocks.shape[0]
        high = unpack_fields(blocks[:, 0:32], 1, 8).reshape(n, 256)
        low = unpack_fields(blocks[:, 32:96].reshape(n, 2, 32), 2, 4).reshape(n, 256)
        # low - 4 * (1 - high) == (low | high << 2) - 4, which stays within int8.
        q = (low | (high << np.uint8(2))).view(np.int8)
        q -= np.int8(4)
        scale = read_f16(blocks, 108) * _unpack_q3_scales(blocks[:, 96:108]).astype(np.float32)
        y = q.reshape(n, 16, 16).astype(np.float32)
        y *= scale[:, :, np.newaxis]
        return y.reshape(n, 256)


class Q4_K(BlockFormat, ggml_type=GGMLType.Q4_K, f16_fields=(0, 2)):
    """4-bit, 256 elements in 144 bytes (4.5 bits per weight); 8 sub-blocks of 32 with 6-bit scale and min.

    Layout:
      bytes  0..1    d       f16 super-block scale for the scales
      bytes  2..3    dmin    f16 super-block scale for the mins
      bytes  4..15   scales  eight 6-bit scales sc_j and eight 6-bit mins m_j, with B[k] = byte 4 + k:
                             j < 4:  sc_j = B[j] & 63,                    m_j = B[j+4] & 63
                             j >= 4: sc_j = (B[j+4] & 15) | (B[j-4] >> 6) << 4,
                                     m_j  = (B[j+4] >> 4) | (B[j]   >> 6) << 4
      bytes 16..143  qs      element e = 64c + 32k + l (c in 0..3, k in 0..1, l in 0..31) is the low nibble
                             (k = 0) or high nibble (k = 1) of qs[32c + l] (block byte 16 + 32c + l)

    Decode: y[e] = (d * sc_j) * q[e] - (dmin * m_j), j = e // 32, q in 0..15.
    """

    @classmethod
    def _decode(cls, blocks: np.ndarray) -> np.ndarray:
        n = blocks.shape[0]
        scales, mins = _unpack_k4_scales(blocks[:, 4:16])
        y = _nibble_runs(blocks[:, 16:144]).astype(np.float32)
        y *= (read_f16(blocks, 0) * scales.astype(np.float32))[:, :, np.newaxis]
        y -= (read_f16(blocks, 2) * mins.astype(np.float32))[:, :, np.newaxis]
        return y.reshape(n, 256)


class Q5_K(BlockFormat, ggml_type=GGMLType.Q5_K, f16_fields=(0, 2)):
    """5-bit, 256 elements in 176 bytes (5.5 bits per weight); 8 sub-blocks of 32 with 6-bit scale and min.

    Layout:
      bytes  0..1    d       f16 super-block scale for the scales
      bytes  2..3    dmin    f16 super-block scale for the mins
      bytes  4..15   scales  packed exactly as in Q4_K
      bytes 16..47   qh      bit 4 of element e = 32b + l (b in 0..7, l in 0..31) is bit b of qh[l]
                             (block byte 16 + l)
      bytes 48..175  qs      low 4 bits, as Q4_K's qs: element e = 64c + 32k + l is the low (k = 0) or high
                             (k = 1) nibble of qs[32c + l] (block byte 48 + 32c + l)

    Decode: q[e] = nibble | qh bit << 4, in 0..31; y[e] = (d * sc_j) * q[e] - (dmin * m_j), j = e // 32.
    """

    @classmethod
    def _decode(cls, blocks: np.ndarray) -> np.ndarray:
        n = blocks.shape[0]
        scales, mins = _unpack_k4_scales(blocks[:, 4:16])
        q = _nibble_runs(blocks[:, 48:176])
        q |= unpack_fields(blocks[:, 16:48], 1, 8) << np.uint8(4)
        y = q.astype(np.float32)
        y *= (read_f16(blocks, 0) * scales.astype(np.float32))[:, :, np.newaxis]
        y -= (read_f16(blocks, 2) * mins.astype(np.float32))[:, :, np.newaxis]
        return y.reshape(n, 256)


class Q6_K(BlockFormat, ggml_type=GGMLType.Q6_K, f16_fields=(208,)):
    """6-bit, 256 elements in 210 bytes (6.5625 bits per weight); 16 sub-blocks of 16 with int8 scales.

    Layout (element e = 128h + 32s + l, with h in 0..1, s in 0..3, l in 0..31):
      bytes   0..127  ql      low 4 bits: s = 0: low nibble of ql byte 64h + l;  s = 1: low nibble of 64h + 32 + l;
                              s = 2: high nibble of 64h + l;  s = 3: high nibble of 64h + 32 + l
      bytes 128..191  qh      high 2 bits: bits 2s..2s+1 of qh byte 32h + l (byte 128 + 32h + l of the block)
      bytes 192..207  scales  16 signed bytes (int8): sc_j for sub-block j (elements 16j..16j+15)
      bytes 208..209  d       f16 super-block scale

    Decode: q[e] = (low4 | high2 << 4) - 32, in -32..31; y[e] = (d * sc_j) * q[e], j = e // 16.
    """

    @classmethod
    def _decode(cls, blocks: np.ndarray) -> np.ndarray:
        n = blocks.shape[0]
        # split_nibbles over each 64-byte half gives its 64 low nibbles then its 64 high nibbles: the s order.
        low = split_nibbles(blocks[:, 0:128].reshape(n, 2, 64)).reshape(n, 256)
        high = unpack_fields(blocks[:, 128:192].reshape(n, 2, 32), 2, 4).reshape(n, 256)
        q = (low | (high << np.uint8(4))).view(np.int8)
        q -= np.int8(32)
        scale = read_f16(blocks, 208) * blocks[:, 192:208].view(np.int8).astype(np.float32)
        y = q.reshape(n, 16, 16).astype(np.float32)
        y *= scale[:, :, np.newaxis]
        return y.reshape(n, 256)
