"""Random quantized tensors for kernel tests, test models and benchmarks: random bytes with chosen f16 fields.

Random bytes reach every quant, high bit and sub-block scale pattern a decoder must handle, and they need no float
weights to quantize: the types without an encoder here (K-quants, IQ4) get weights this way, and a 1B-parameter
file takes seconds. Only the f16 fields (`BlockFormat.f16_fields`) are chosen, since random bits there would be
inf, NaN or subnormal numbers (which CPU adapters also compute at other speeds).

Both functions take a numpy shape whose last axis (ne[0]) is a whole number of blocks and return uint8 rows of
blocks, as `quantize` does; both draw the same random bytes from `rng` first.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from llmchat.gguf.types import GGMLType

from .base import BlockFormat, get
from .packing import f16_bytes

# Blocks whose values `random_weights` measures: over 100k values, and a bounded cost for a 1B-parameter tensor.
SPREAD_SAMPLE = 4096


def random_blocks(
    rng: np.random.Generator,
    ggml_type: GGMLType | int,
    shape: Sequence[int],
    scale: tuple[float, float] = (0.005, 0.05),
) -> np.ndarray:
    """Random blocks whose f16 fields each hold a random sign times a magnitude drawn uniformly from `scale`."""
    fmt, blocks = _random_bytes(rng, ggml_type, shape)
    for offset in fmt.f16_fields:
        sign = rng.choice([-1.0, 1.0], len(blocks))
        _set_f16(blocks, offset, sign * rng.uniform(*scale, len(blocks)))
    return _rows(fmt, blocks, shape)


def random_weights(
    rng: np.random.Generator, ggml_type: GGMLType | int, shape: Sequence[int], spread: float
) -> np.ndarray:
    """Random blocks whose values have a standard deviation of about `spread`, as a trained layer's would.

    Values are linear in their block's f16 fields, so those are set to 1, the standard deviation of the values of
    the first SPREAD_SAMPLE blocks measured, and every field of every block set to `spread` / that.
    """
    fmt, blocks = _random_bytes(rng, ggml_type, shape)
    sample = blocks[:SPREAD_SAMPLE].copy()
    for offset in fmt.f16_fields:
        _set_f16(sample, offset, 1.0)
    factor = spread / fmt.dequantize(sample).std()
    for offset in fmt.f16_fields:
        _set_f16(blocks, offset, factor)
    return _rows(fmt, blocks, shape)


def _random_bytes(
    rng: np.random.Generator, ggml_type: GGMLType | int, shape: Sequence[int]
) -> tuple[type[BlockFormat], np.ndarray]:
    """The format and (n_blocks, block_bytes) uniformly random bytes for a tensor of numpy shape `shape`."""
    fmt = get(ggml_type)
    if fmt.block_elems == 1:
        raise ValueError(f"{fmt.type.name} has no blocks to scale: quantize float values to it instead")
    if not shape or shape[-1] % fmt.block_elems:
        raise ValueError(
            f"a {fmt.type.name} tensor of shape {tuple(shape)}: the last axis must be a multiple of {fmt.block_elems}"
        )
    return fmt, rng.integers(0, 256, (math.prod(shape) // fmt.block_elems, fmt.block_bytes), dtype=np.uint8)


def _set_f16(blocks: np.ndarray, offset: int, values: float | np.ndarray) -> None:
    """Store `values` (one per block, or one for all) as the f16 field at byte `offset` of every block."""
    # f16_bytes rounds from the values' own precision: a float64 rounded to f16 once, never through float32.
    blocks[:, offset : offset + 2] = f16_bytes(np.broadcast_to(np.reshape(values, (-1, 1)), (len(blocks), 1)))


def _rows(fmt: type[BlockFormat], blocks: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    return blocks.reshape(*shape[:-1], shape[-1] // fmt.block_elems * fmt.block_bytes)
