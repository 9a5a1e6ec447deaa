"""Prefix caching over the paged KV cache: finished sequences stay in their slots as cache entries.

When a sequence finishes, the positions it computed (prompt plus generated tokens) are still in its KV blocks.
Rather than freeing the slot, the scheduler hands it here as an entry keyed by those token ids. A new prompt then
starts from the entry — or the running sequence — that shares its longest prefix: `KVCache.fork` gives the new
slot that source's full blocks (reference-counted, nothing is copied) and only the rest of the prompt is computed.
A system prompt, or the history of a multi-turn chat, is therefore computed once.

Only whole blocks are shared: a block that is partly filled may still be written by its owner, and positions
past the shared prefix differ between the two sequences. So up to BLOCK_TOKENS - 1 shared tokens are computed
again, which costs little and keeps the cache free of copy-on-write.

A model with per-sequence state (a convolution's or recurrent layer's, see `KVCache`) can share a prefix only where
that state stands: the whole of what the source computed (`KVCache.can_fork`; the fork copies the state and the
partly filled last block). A prompt that goes on from a finished conversation forks it; a prompt that shares only
part of an entry is computed again.

Entries are kept in least-recently-used order and evicted when slots or blocks run short. Lookup is a linear scan
comparing token lists; with a few dozen entries of at most a context's length each, that is microseconds next to
one model step.
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..gpu.kvlayout import BLOCK_TOKENS
from ..runtime.kv_cache import KVCache, common_prefix


@dataclass(frozen=True)
class Lease:
    """A slot given to a new sequence: `cached` of its first positions are already computed."""

    slot: int
    cached: int


def whole_blocks(n_positions: int) -> int:
    """`n_positions` rounded down to whole blocks: what a fork can share."""
    return n_positions - n_positions % BLOCK_TOKENS


class PrefixCache:
    """Finished sequences' KV slots, keyed by the token ids they hold, least recently used first."""

    def __init__(self, kv: KVCache, max_entries: int) -> None:
        if max_entries < 0:
            raise ValueError(f"max_entries must be >= 0, got {max_entries}")
        self.kv = kv
        self.max_entries = max_entries
        self._entries: OrderedDict[int, tuple[int, ...]] = OrderedDict()  # slot -> tokens whose KV it holds
        self.hit_tokens = 0  # positions served from shared blocks instead of being computed, since start

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def cached_tokens(self) -> int:
        return sum(len(t) for t in self._entries.values())

    def lease(self, tokens: Sequence[int], live: Iterable[tuple[int, Sequence[int]]] = ()) -> Lease:
        """A slot for a sequence that will be fed `tokens`, sharing the longest cached prefix.

        `live` lists running sequences as (slot, tokens already computed): a prompt may share the blocks of one
        that is still decoding. At least one token is always left to compute, since the step that computes it
        also yields the logits the first new token is sampled from.
        """
        best_slot, best = self.match(tokens, live)
        if best_slot is not None and best_slot in self._entries:
            self._entries.move_to_end(best_slot)
        self._make_slot_room(keep=best_slot)
        if best_slot is None:
            return Lease(self.kv.new_slot(), 0)
        self.hit_tokens += best
        return Lease(self.kv.fork(best_slot, best), best)

    def match(self, tokens: Sequence[int], live: Iterable[tuple[int, Sequence[int]]] = ()) -> tuple[int | None, int]:
        """The slot holding the longest shareable prefix of `tokens` (None if none) and that prefix's length in
        whole blocks, leaving at least the last token to compute."""
        limit = len(tokens) - 1
        best_slot, best = None, 0
        shareable = (lambda n: n) if self.kv.stateful else whole_blocks  # with state: up to where it stands
        for slot, held in [*self._entries.items(), *live]:
            n = shareable(min(common_prefix(tokens, held), limit))
            if n > best and self.kv.can_fork(slot, n):
                best_slot, best = slot, n
        return best_slot, best

    def insert(self, slot: int, tokens: Sequence[int]) -> None:
        """Keep a finished sequence's slot (ownership passes to the cache); `tokens` are the positions it holds."""
        held = tuple(tokens)
        full = whole_blocks(len(held))
        if self.max_entries == 0 or (len(held) if self.kv.stateful else full) == 0:
            self.kv.free_slot(slot)
            return
        # With state, an entry serves only its own length: one never covers another.
        for other, other_held in [] if self.kv.stateful else list(self._entries.items()):
            other_full = whole_blocks(len(other_held))
            if other_full <= full and other_held[:other_full] == held[:other_full]:
                self._drop(other)  # the new entry covers everything the old one could share
            elif other_full > full and other_held[:full] == held[:full]:
                self._entries.move_to_end(other)  # an existing entry already covers this one
                self.kv.free_slot(slot)
                return
        self._entries[slot] = held
        while len(self._entries) > self.max_entries:
            self.evict()

    def evict(self) -> bool:
        """Free the least recently used entry; False when there is none."""
        if not self._entries:
            return False
        self._drop(next(iter(self._entries)))
        return True

    def make_block_room(self, n_blocks: int) -> bool:
        """Evict entries until `n_blocks` blocks are free; False if even an empty cache leaves too few (blocks
        shared with running sequences are not freed by evicting their entry)."""
        while self.kv.free_blocks < n_blocks:
            if not self.evict():
                return False
        return True

    def clear(self) -> None:
        while self.evict():
            pass

    def _make_slot_room(self, keep: int | None) -> None:
        if self.kv.free_slots:
            return
        for slot in list(self._entries):
            if slot != keep:
                self._drop(slot)
                return

    def _drop(self, slot: int) -> None:
        del self._entries[slot]
        self.kv.free_slot(slot)
