"""The paged KV cache: GPU buffers of fixed-size blocks, and the host-side bookkeeping of who owns which block.

Each sequence slot has a block table (block ids in position order). Blocks are reference-counted so sequences can
share a prefix: a fork shares the full blocks of its parent and copies nothing.

Beside the blocks, a model may keep fixed-size state per layer and slot (a convolution's last inputs, a recurrent
layer's matrix: `Model.state_widths`). Such state stands at one position, the end of what its slot last computed,
and cannot be rewound. The cache tracks that position per slot and enforces the rules that keep it right:
- a sequence starting at position 0 needs no reset: the kernels read positions before 0 as zeros, never the state;
- a step must continue a slot exactly where its state stands (`check_start` refuses anything else);
- `truncate` keeps a stateful slot's positions only when nothing is cut, else it keeps none (recompute from the
  start: no snapshots are kept);
- `fork` copies the state along with the shared blocks, so only at the parent's state position (`can_fork`), and
  copies a partly filled last block too, so the child has every position up to there.

Another engine keeps its positions in memory of its own (llama.cpp's, cpu_engine.py) and this cache only its
bookkeeping: given a `memory`, the cache allocates no buffers, keeps the same rules and accounting (so the scheduler
and the prefix cache admit and evict by them on either engine), and tells the memory what changed: `fork(parent,
child, n_positions)` when a slot starts from another's first n_positions, `forget(slot, n_positions)` when a slot
keeps only its first n_positions (0 when it is freed).
"""
from __future__ import annotations

from array import array
from collections.abc import Sequence

from ..errors import ContextOverflowError, LLMChatError, ModelTooLargeError
from ..gpu.device import Device
from ..gpu.kvlayout import BLOCK_TOKENS, KVLayer, blocks_for, cache_type, layer_bytes


def state_bytes(width: int, n_slots: int) -> int:
    """Bytes of one layer's per-slot state: `width` f32 values for each of `n_slots` slots."""
    return width * n_slots * 4


class KVCache:
    def __init__(self, device: Device | None, kv_widths: list[int], *, n_slots: int, context: int,
                 n_blocks: int | None = None, state_widths: list[int] | None = None, kv_type: str | None = None,
                 memory=None):
        """`kv_widths[i]`: values one position keeps in layer i's K (and V) cache; 0 for a layer without one.
        `state_widths[i]`: f32 values of fixed-size state kept per slot in `state[i]` (default: none).
        `kv_type` forces the element type ("f16" or "f32"; default: the adapter's, see kvlayout.cache_type).
        With `memory` (and no device) the positions live there: only the bookkeeping is kept here."""
        self.device = device
        self.memory = memory
        self.dtype = (kv_type or "f16") if memory is not None else cache_type(device.info, kv_type)
        self.n_slots = n_slots
        self.max_context = context
        self.max_blocks = blocks_for(context)
        self.n_blocks = n_blocks or self.max_blocks * n_slots
        sizes = [layer_bytes(w, self.n_blocks, self.dtype) for w in kv_widths]
        state_sizes = [state_bytes(w, n_slots) for w in state_widths or []]
        self.state_widths = list(state_widths or [])
        self.stateful = any(state_sizes)
        self.state_nbytes = sum(state_sizes)
        self.nbytes = 2 * sum(sizes) + self.state_nbytes
        self._state_at = [0] * n_slots  # per slot: the position its state stands at (positions computed)
        self._host_table = array("I", bytes(4 * n_slots * self.max_blocks))
        self._free = list(range(self.n_blocks - 1, -1, -1))
        self._refs = [0] * self.n_blocks
        self._blocks: dict[int, list[int]] = {}
        self._free_slots = list(range(n_slots - 1, -1, -1))
        self._dirty = False
        self.k = self.v = self.state = self.table = None
        self._block_parts: list = []
        if memory is None:
            self._allocate(sizes, kv_widths, state_sizes)

    def _allocate(self, sizes: list[int], kv_widths: list[int], state_sizes: list[int]) -> None:
        device = self.device
        if max(sizes, default=0) > device.info.max_binding_size:
            raise ModelTooLargeError(
                f"a KV cache of {self.n_blocks * BLOCK_TOKENS} positions needs {max(sizes) >> 20} MiB per layer, "
                f"over the adapter's {device.info.max_binding_size >> 20} MiB binding limit; "
                "use a smaller context or fewer parallel sequences")
        self.k = [device.buffer(n, f"blk.{i}.k_cache") if n else None for i, n in enumerate(sizes)]
        self.v = [device.buffer(n, f"blk.{i}.v_cache") if n else None for i, n in enumerate(sizes)]
        self.table = device.buffer(self.n_slots * self.max_blocks * 4, "block_table")
        # Each layer's K then V with the bytes one block of positions takes there: the order of a saved block.
        self._block_parts = [(buf, layer_bytes(w, 1, self.dtype)) for k, v, w in zip(self.k, self.v, kv_widths)
                             if w for buf in (k, v)]
        self.state = [device.buffer(n, f"blk.{i}.state") if n else None for i, n in enumerate(state_sizes)]

    def layer(self, i: int) -> KVLayer:
        """Layer i's K and V buffers with the block table, as the kernels bind them."""
        self._own_buffers()
        if self.k[i] is None:
            raise LLMChatError(f"layer {i} keeps no K/V cache")
        return KVLayer(self.k[i], self.v[i], self.table, self.max_blocks, self.max_context, self.dtype)

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
        self._state_at[slot] = 0
        return slot

    def can_fork(self, parent: int, n_positions: int) -> bool:
        """Whether `fork(parent, n_positions)` gives a slot whose first n_positions are all computed: always for a
        cache without state (whole blocks are shared); with state only at the parent's state position (a partly
        filled last block is then copied, so a free block is needed for it)."""
        if not self.stateful:
            return True
        return n_positions == self._state_at[parent] and (n_positions % BLOCK_TOKENS == 0 or bool(self._free))

    def fork(self, parent: int, n_positions: int) -> int:
        """A new slot sharing the first `n_positions` (rounded down to whole blocks) of `parent`'s cache. With
        state, the slot gets a copy of the parent's state and of its partly filled last block, so all n_positions
        are computed (see `can_fork`)."""
        if not self.can_fork(parent, n_positions):
            raise LLMChatError(f"slot {parent}'s state stands at position {self._state_at[parent]}; it cannot be "
                               f"forked at {n_positions} (only at its state position, with a free block for a "
                               "partly filled last block)")
        slot = self.new_slot()
        shared = self._blocks[parent][:n_positions // BLOCK_TOKENS]
        for b in shared:
            self._refs[b] += 1
        self._blocks[slot] = list(shared)
        if self.stateful and n_positions % BLOCK_TOKENS:  # the partly filled last block is copied
            dst = self._free.pop()
            self._refs[dst] = 1
            self._blocks[slot].append(dst)
        if self.memory is not None:
            self.memory.fork(parent, slot, n_positions if self.stateful else len(shared) * BLOCK_TOKENS)
            self._state_at[slot] = n_positions if self.stateful else 0  # can_fork: the parent's state position
            return slot
        if self.stateful:
            # Kilobytes per layer: through the host, as the device has no copy verb.
            self.write_state(slot, self.read_state(parent), n_positions)
            if n_positions % BLOCK_TOKENS:
                for buf, size in self._block_parts:
                    self._copy_rows(buf, size, self._blocks[parent][len(shared)], self._blocks[slot][-1])
        self._write_table(slot)
        return slot

    @property
    def block_bytes(self) -> int:
        """Bytes of one block of positions over every layer's K and V: what `read_blocks` gives per block."""
        return sum(size for _, size in self._block_parts)

    def read_blocks(self, slot: int, first: int, last: int) -> bytes:
        """Blocks [first, last) of `slot`'s positions, one after another, each as every layer's K then V rows for
        those positions (a chat saved to storage, chat_cache.py). One read per layer buffer and run of consecutive
        block ids, then interleaved here."""
        self._own_buffers()
        ids = self._blocks[slot][first:last]
        runs = _runs(ids)
        parts = [(b"".join(self.device.read(buf, start * size, count * size) for start, count in runs), size)
                 for buf, size in self._block_parts]
        return b"".join(data[j * size:(j + 1) * size] for j in range(len(ids)) for data, size in parts)

    def write_blocks(self, slot: int, first: int, data: bytes) -> None:
        """The inverse of `read_blocks`: `data` (whole blocks in that form) into `slot`'s blocks from `first` on,
        which `reserve` must have given it."""
        self._own_buffers()
        record = self.block_bytes
        n = len(data) // record
        if n * record != len(data) or first + n > len(self._blocks[slot]):
            raise LLMChatError(f"{len(data)} bytes are not whole blocks of {record} that slot {slot} has room for")
        view = memoryview(data)
        ids = self._blocks[slot][first:first + n]
        at = 0
        for buf, size in self._block_parts:
            j = 0
            for start, count in _runs(ids):
                rows = b"".join(view[(j + i) * record + at:(j + i) * record + at + size] for i in range(count))
                self.device.write(buf, rows, start * size)
                j += count
            at += size

    @property
    def slot_state_bytes(self) -> int:
        """Bytes of one slot's state over every stateful layer (0 without state)."""
        return sum(w * 4 for buf, w in zip(self.state, self.state_widths) if buf is not None)

    def read_state(self, slot: int) -> bytes:
        """`slot`'s fixed-size state of every stateful layer (empty without state); it stands at
        `state_position(slot)`."""
        self._own_buffers()
        return b"".join(self.device.read(buf, slot * w * 4, w * 4)
                        for buf, w in zip(self.state, self.state_widths) if buf is not None)

    def write_state(self, slot: int, data: bytes, position: int) -> None:
        """The inverse of `read_state`: `slot`'s state, standing at `position`."""
        self._own_buffers()
        at = 0
        for buf, w in zip(self.state, self.state_widths):
            if buf is not None:
                self.device.write(buf, data[at:at + w * 4], slot * w * 4)
                at += w * 4
        if at != len(data):
            raise LLMChatError(f"{len(data)} bytes of state given where this model keeps {at} per sequence")
        self._state_at[slot] = position

    def _own_buffers(self) -> None:
        if self.memory is not None:
            raise LLMChatError("this cache keeps only the bookkeeping of positions held in the engine's own memory; "
                               "it has no buffers to bind, read or write")

    def _copy_rows(self, buf, row_bytes: int, src: int, dst: int) -> None:
        self.device.write(buf, self.device.read(buf, src * row_bytes, row_bytes), dst * row_bytes)

    def state_position(self, slot: int) -> int:
        return self._state_at[slot]

    def check_start(self, slot: int, start: int) -> None:
        """Refuse a step that would compute `slot` from position `start`: with state, it must continue where the
        state stands (or start over at 0)."""
        if self.stateful and start not in (0, self._state_at[slot]):
            raise LLMChatError(f"slot {slot}'s state stands at position {self._state_at[slot]}; a step cannot "
                               f"continue it from position {start} (its state cannot be rewound: recompute from "
                               "the start)")

    def advance(self, slot: int, start: int, end: int) -> None:
        """A step computed positions [start, end) of `slot` (the caller checked `start` with `check_start`)."""
        if self.stateful:
            self._state_at[slot] = end

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
        another sequence, since writing into it would change that sequence's cache too; with state, none unless
        nothing is cut (the state cannot be rewound, so the sequence is recomputed from the start).
        """
        blocks = self._blocks[slot]
        keep = -(-n_positions // BLOCK_TOKENS)
        if n_positions % BLOCK_TOKENS and keep and self._refs[blocks[keep - 1]] > 1:
            keep -= 1
            n_positions = keep * BLOCK_TOKENS
        if self.stateful and n_positions != self._state_at[slot]:
            keep = n_positions = self._state_at[slot] = 0
        for b in blocks[keep:]:
            self._release(b)
        del blocks[keep:]
        if self.memory is not None:
            self.memory.forget(slot, n_positions)
        return n_positions

    def free_slot(self, slot: int) -> None:
        for b in self._blocks.pop(slot):
            self._release(b)
        if self.memory is not None:
            self.memory.forget(slot, 0)
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
        if self._dirty and self.memory is None:
            self.device.write(self.table, self._host_table.tobytes())
            self._dirty = False


def _runs(ids: list[int]) -> list[tuple[int, int]]:
    """(first id, count) of each run of consecutive ids, in order."""
    runs: list[list[int]] = []
    for b in ids:
        if runs and runs[-1][0] + runs[-1][1] == b:
            runs[-1][1] += 1
        else:
            runs.append([b, 1])
    return [(start, count) for start, count in runs]


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token sequences."""
    n = min(len(a), len(b))
    # Compare a block at a time first: prompts that share a system prompt agree over long runs.
    i = 0
    while i + BLOCK_TOKENS <= n and a[i:i + BLOCK_TOKENS] == b[i:i + BLOCK_TOKENS]:
        i += BLOCK_TOKENS
    while i < n and a[i] == b[i]:
        i += 1
    return i
