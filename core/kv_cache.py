"""The paged KV cache: GPU buffers of fixed-size blocks, and the host-side bookkeeping of who owns which block.

Each sequence slot has a block table (block ids in position order). Blocks are reference-counted so sequences can
share a prefix: a fork shares the full blocks of its parent and copies nothing.
"""
from __future__ import annotations

from array import array

from .errors import ContextOverflowError, ModelTooLargeError
from .gpu.device import Device
from .gpu.kvlayout import BLOCK_TOKENS, blocks_for, cache_type, layer_bytes


class KVCache:
    def __init__(self, device: Device, kv_widths: list[int], *, n_slots: int, context: int,
                 n_blocks: int | None = None, kv_type: str | None = None):
        """`kv_widths[i]`: values one position keeps in layer i's K (and V) cache; 0 for a layer without one.
        `kv_type` forces the element type ("f16" or "f32"; default: the adapter's, see kvlayout.cache_type)."""
        self.device = device
        self.dtype = cache_type(device.info, kv_type)
        self.n_slots = n_slots
        self.max_context = context
        self.max_blocks = blocks_for(context)
        self.n_blocks = n_blocks or self.max_blocks * n_slots
        sizes = [layer_bytes(w, self.n_blocks, self.dtype) for w in kv_widths]
        if max(sizes, default=0) > device.info.max_binding_size:
            raise ModelTooLargeError(
                f"a KV cache of {self.n_blocks * BLOCK_TOKENS} positions needs {max(sizes) >> 20} MiB per layer, "
                f"over the adapter's {device.info.max_binding_size >> 20} MiB binding limit; "
                "use a smaller context or fewer parallel sequences")
        self.k = [device.buffer(n, f"blk.{i}.k_cache") if n else None for i, n in enumerate(sizes)]
        self.v = [device.buffer(n, f"blk.{i}.v_cache") if n else None for i, n in enumerate(sizes)]
        self.table = device.buffer(n_slots * self.max_blocks * 4, "block_table")
        self.nbytes = 2 * sum(sizes)
        self._host_table = array("I", bytes(4 * n_slots * self.max_blocks))
        self._free = list(range(self.n_blocks - 1, -1, -1))
        self._refs = [0] * self.n_blocks
        self._blocks: dict[int, list[int]] = {}
        self._free_slots = list(range(n_slots - 1, -1, -1))
        self._dirty = False

    @property
    def free_blocks(self) -> int:
        return len(self._free)

    @property
    def free_slots(self) -> int:
        return len(self._free_slots)

    def blocks_needed(self, slot: int, n_positions: int) -> int:
        """How many blocks `reserve(slot, n_positions)` would take from the free list (a scheduler asks before a
        step, so it can make room by evicting cached sequences instead of failing the step)."""
        return max(0, -(-n_positions // BLOCK_TOKENS) - len(self._blocks[slot]))

    def new_slot(self) -> int:
        if not self._free_slots:
            raise ModelTooLargeError(f"all {self.n_slots} sequence slots are in use")
        slot = self._free_slots.pop()
        self._blocks[slot] = []
        return slot

    def fork(self, parent: int, n_positions: int) -> int:
        """A new slot sharing the first `n_positions` (rounded down to whole blocks) of `parent`'s cache."""
        slot = self.new_slot()
        shared = self._blocks[parent][:n_positions // BLOCK_TOKENS]
        for b in shared:
            self._refs[b] += 1
        self._blocks[slot] = list(shared)
        self._write_table(slot)
        return slot

    def reserve(self, slot: int, n_positions: int) -> None:
        """Make sure positions [0, n_positions) of `slot` have blocks."""
        if n_positions > self.max_context:
            raise ContextOverflowError(f"{n_positions} positions exceed the context size of {self.max_context}")
        blocks = self._blocks[slot]
        need = -(-n_positions // BLOCK_TOKENS) - len(blocks)
        if need > len(self._free):
            raise ContextOverflowError(f"the KV cache is full ({self.n_blocks} blocks of {BLOCK_TOKENS} positions "
                                       "in use); finish or cancel other sequences first")
        for _ in range(need):
            b = self._free.pop()
            self._refs[b] = 1
            blocks.append(b)
        if need > 0:
            self._write_table(slot)

    def truncate(self, slot: int, n_positions: int) -> int:
        """Forget positions from `n_positions` on (e.g. when a conversation is edited), freeing whole blocks.

        Returns how many positions stay valid: fewer than asked when the block holding the cut is shared with
        another sequence, since writing into it would change that sequence's cache too.
        """
        blocks = self._blocks[slot]
        keep = -(-n_positions // BLOCK_TOKENS)
        if n_positions % BLOCK_TOKENS and keep and self._refs[blocks[keep - 1]] > 1:
            keep -= 1
            n_positions = keep * BLOCK_TOKENS
        for b in blocks[keep:]:
            self._release(b)
        del blocks[keep:]
        return n_positions

    def free_slot(self, slot: int) -> None:
        for b in self._blocks.pop(slot):
            self._release(b)
        self._free_slots.append(slot)

    def _release(self, block: int) -> None:
        self._refs[block] -= 1
        if self._refs[block] == 0:
            self._free.append(block)

    def _write_table(self, slot: int) -> None:
        base = slot * self.max_blocks
        blocks = self._blocks[slot]
        self._host_table[base:base + len(blocks)] = array("I", blocks)
        self._dirty = True

    def sync(self) -> None:
        """Upload the block tables if they changed since the last step."""
        if self._dirty:
            self.device.write(self.table, self._host_table.tobytes())
            self._dirty = False
