"""The layout of the paged KV cache, shared by the kernels that write it, the kernels that read it, and the host.

Per layer there is a K buffer and a V buffer, each [n_blocks, BLOCK_TOKENS, n_kv_head, head_dim] f32 (a layer
without attention has none). A sequence
owns a list of blocks in the block table, an `array<u32>` [n_slots, max_blocks]: position p of the sequence in slot
s lives in block `table[s * max_blocks + p // BLOCK_TOKENS]`, row `p % BLOCK_TOKENS`. Blocks need not be
contiguous or ordered, so sequences grow, share prefixes and free memory one block at a time.
"""
from __future__ import annotations

BLOCK_TOKENS = 16  # positions per cache block; shaders get it through `{{BLOCK_TOKENS}}`


def blocks_for(n_positions: int) -> int:
    """Blocks a sequence of `n_positions` positions occupies."""
    return -(-n_positions // BLOCK_TOKENS)


def layer_bytes(width: int, n_blocks: int) -> int:
    """Bytes of one layer's K (or V) buffer: `n_blocks` blocks of positions of `width` f32 values each."""
    return n_blocks * BLOCK_TOKENS * width * 4
