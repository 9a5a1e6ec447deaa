"""The layout of the paged KV cache, shared by the kernels that write it, the kernels that read it, and the host.

Per layer there is a K buffer and a V buffer, each [n_blocks, BLOCK_TOKENS, n_kv_head, head_dim] values of the
cache's element type (a layer without attention has none). A sequence
owns a list of blocks in the block table, an `array<u32>` [n_slots, max_blocks]: position p of the sequence in slot
s lives in block `table[s * max_blocks + p // BLOCK_TOKENS]`, row `p % BLOCK_TOKENS`. Blocks need not be
contiguous or ordered, so sequences grow, share prefixes and free memory one block at a time.

The element type is f16 where the adapter has `shader-f16` (half the memory and half the bytes attention reads;
llama.cpp's default cache type too) and f32 elsewhere; kernels store and load it, and always compute in f32.
On lavapipe (which has shader-f16, and converts f16 loads in scalar code) the f16 cache costs attention 0-13%:
30 layers of SmolLM2 decode attention 3.3 / 18.5 / 64.6 ms (f32) vs 3.4 / 20.9 / 62.5 ms (f16) at 64 / 512 / 2000
positions, Gemma 3's 26 layers at 2000 positions 138 vs 150 ms (tools/bench/attention_speed.py, best of 5).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidRequestError
from .device import AdapterInfo, Buffer

BLOCK_TOKENS = 16  # positions per cache block; shaders get it through `{{BLOCK_TOKENS}}`
CACHE_TYPES = {"f16": 2, "f32": 4}  # element type -> bytes per value


@dataclass(frozen=True)
class KVLayer:
    """One layer's K and V buffers with the block table they are reached through: what the kernels that store to
    and read from the cache bind (KVCache.layer)."""

    k: Buffer
    v: Buffer
    table: Buffer
    max_blocks: int  # block-table entries per sequence slot
    max_context: int  # positions a sequence may hold
    dtype: str  # element type, one of CACHE_TYPES


def cache_type(info: AdapterInfo, requested: str | None = None) -> str:
    """The KV cache's element type on an adapter: `requested` ("f16" or "f32") when given, else f16 where the
    adapter has shader-f16. The one place this is decided; the plan, the cache and the kernels all ask here."""
    if requested is None:
        return "f16" if info.f16 else "f32"
    if requested not in CACHE_TYPES:
        raise InvalidRequestError(f"the KV cache type must be one of {', '.join(CACHE_TYPES)}, not {requested!r}")
    if requested == "f16" and not info.f16:
        raise InvalidRequestError(f"an f16 KV cache needs the shader-f16 feature, which {info.name} lacks; use f32")
    return requested


def shader_values(kv_type: str) -> dict[str, str]:
    """Template values of kv_block.wgsl for a cache of `kv_type` elements."""
    return {"KV": kv_type, "KV_ENABLE": "enable f16;" if kv_type == "f16" else ""}


def blocks_for(n_positions: int) -> int:
    """Blocks a sequence of `n_positions` positions occupies."""
    return -(-n_positions // BLOCK_TOKENS)


def layer_bytes(width: int, n_blocks: int, kv_type: str = "f32") -> int:
    """Bytes of one layer's K (or V) buffer: `n_blocks` blocks of positions of `width` values each."""
    return n_blocks * BLOCK_TOKENS * width * CACHE_TYPES[kv_type]
