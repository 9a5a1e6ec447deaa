"""A host-side paged KV cache for kernel tests: scattered block tables, NaN-poisoned buffers, token infos.

Blocks are handed out in shuffled order and interleaved between sequences, so a kernel that assumes contiguous
or ordered blocks, or ignores the sequence slot, reads the wrong rows; every row nobody wrote holds NaN, so a
kernel that reads or writes outside what it should shows up as NaN or as a clobbered poison value.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from gpu_util import Gpu
from reference_ops import paged_rows

from llmchat.gpu.device import Buffer
from llmchat.gpu.kvlayout import BLOCK_TOKENS, KVLayer


def upload(g: Gpu, values: np.ndarray, label: str) -> Buffer:
    """A storage buffer holding `values` as they are (dtype included)."""
    data = np.ascontiguousarray(values).tobytes()
    buf = g.device.buffer(len(data), label)
    g.device.write(buf, data)
    return buf


@dataclass
class PagedCache:
    """K and V of one layer as [n_blocks, BLOCK_TOKENS, n_kv_head, head_dim] arrays plus their block table."""

    k: np.ndarray
    v: np.ndarray
    table: np.ndarray  # [n_slots, max_blocks] block ids; unused entries point at a NaN block
    kv_type: str = "f32"  # the GPU buffers' element type; with f16 the values held here are f16-representable

    @classmethod
    def scattered(cls, rng: np.random.Generator, positions: dict[int, range | list[int]], *, n_slots: int,
                  max_blocks: int, n_kv_head: int, head_dim: int, kv_type: str = "f32") -> "PagedCache":
        """Blocks for the listed positions of each slot, shuffled and interleaved between slots; all NaN.

        Only blocks holding a listed position exist, so far-apart positions cost a few blocks, not a whole context.
        """
        wanted = {slot: sorted({p // BLOCK_TOKENS for p in ps}) for slot, ps in positions.items()}
        n_blocks = sum(len(b) for b in wanted.values()) + 3  # spares stay NaN; unused table entries point at one
        order = rng.permutation(n_blocks)
        ids = iter(order)
        table = np.full((n_slots, max_blocks), order[-1], np.uint32)
        # Deal blocks round-robin so each sequence's blocks are interleaved with the others'.
        for i in range(max(len(b) for b in wanted.values())):
            for slot, blocks in wanted.items():
                if i < len(blocks):
                    table[slot, blocks[i]] = next(ids)
        shape = (n_blocks, BLOCK_TOKENS, n_kv_head, head_dim)
        return cls(np.full(shape, np.nan, np.float32), np.full(shape, np.nan, np.float32), table, kv_type)

    def rows(self, slot: int, positions) -> np.ndarray:
        return paged_rows(self.table, slot, positions, BLOCK_TOKENS)

    def flat(self, which: np.ndarray) -> np.ndarray:
        """[n_blocks * BLOCK_TOKENS, n_kv_head, head_dim] view: one row per cached position."""
        return which.reshape(-1, *which.shape[2:])

    def fill(self, rng: np.random.Generator, slot: int, n_positions: int) -> None:
        """Random k and v for positions 0..n_positions-1 of `slot` (rounded to the cache's element type)."""
        rows = self.rows(slot, np.arange(n_positions))
        for which in (self.k, self.v):
            values = rng.standard_normal((n_positions, *which.shape[2:]))
            self.flat(which)[rows] = values.astype(self.np_type)

    def as_type(self, kv_type: str) -> "PagedCache":
        """A copy whose buffers hold `kv_type` elements, the values rounded to it."""
        t = {"f16": np.float16, "f32": np.float32}[kv_type]
        return PagedCache(self.k.astype(t).astype(np.float32), self.v.astype(t).astype(np.float32), self.table.copy(),
                          kv_type)

    @property
    def np_type(self) -> type:
        return {"f16": np.float16, "f32": np.float32}[self.kv_type]

    def history(self, slot: int, n_positions: int) -> tuple[np.ndarray, np.ndarray]:
        """k and v of positions 0..n_positions-1 of `slot`, each [n_positions, n_kv_head, head_dim] float64."""
        rows = self.rows(slot, np.arange(n_positions))
        return self.flat(self.k)[rows].astype(np.float64), self.flat(self.v)[rows].astype(np.float64)

    def upload(self, g: Gpu) -> KVLayer:
        """The cache on the GPU as a layer of a cache whose sequences may hold every position the table covers."""
        max_blocks = self.table.shape[1]
        return KVLayer(upload(g, self.k.astype(self.np_type), "k_cache"),
                       upload(g, self.v.astype(self.np_type), "v_cache"), upload(g, self.table, "block_table"),
                       max_blocks, max_blocks * BLOCK_TOKENS, self.kv_type)

    def read(self, g: Gpu, layer: KVLayer) -> tuple[np.ndarray, np.ndarray]:
        """The GPU's K and V buffers in the cache's shape."""
        shape, t = self.k.shape, self.np_type
        n = self.k.size * np.dtype(t).itemsize
        k = np.frombuffer(g.device.read(layer.k, 0, n), t).reshape(shape).astype(np.float32)
        v = np.frombuffer(g.device.read(layer.v, 0, n), t).reshape(shape).astype(np.float32)
        return k, v


def slots_for(n_tokens: int) -> int:
    """Token slots of a step of `n_tokens`: a power of two with some left empty, as the engine records its programs
    (kernels take the slots in an order of their own there, shaders/token_order.wgsl, which must still cover every
    token once)."""
    return 1 << (n_tokens + 1).bit_length()


def token_infos(g: Gpu, infos: list[tuple[int, int]], padded_to: int) -> Buffer:
    """The token buffer for (slot, position) per token: (id, position, slot, 0), padded with zero rows."""
    rows = np.zeros((padded_to, 4), np.uint32)
    for t, (slot, pos) in enumerate(infos):
        rows[t] = (t + 1, pos, slot, 0)
    return upload(g, rows, "tokens")
