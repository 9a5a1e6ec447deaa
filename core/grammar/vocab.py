"""The vocabulary seen by a grammar: each token as symbols, a byte trie of them, and the tokens a state allows.

`allowed` walks the trie in preorder against the matcher's automaton: a node whose byte no stack accepts skips
its whole subtree (one index jump, since the trie is laid out flat in preorder), every other node costs one cached
transition lookup. Skipped subtrees are ranges of the tokens in preorder, so the result is assembled from slices
rather than token by token. The walk runs on the state's relative part (see State.relative): tokens that pop
into the shared context are left undecided there and checked one by one against the full state. Both results
are cached -- per (grammar, relative state) and per (grammar, state key) -- in an LRU bounded by size.
"""
from __future__ import annotations

import heapq
import threading
import weakref
from array import array
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Iterator
from itertools import accumulate, compress

from .matcher import UNSET, Matcher, State

# What the allowed-set cache of one vocabulary may hold, in 4-byte units: ids, plus a bitset's worth per entry
# (64 MB: ~2,000 states of a 262k vocabulary, ~10,000 of a 49k one).
_CACHE_IDS = 16_000_000


class AllowedSet:
    """Token ids a grammar state allows, in id order. `bitset()` is the GPU mask: bit i of byte i//8 = token i.

    It may extend a shared `base` set (the tokens allowed whatever the enclosing context) by a few `ids` of its
    own, disjoint from the base."""

    __slots__ = ("_ids", "_base", "_n_vocab", "_bits")

    def __init__(self, ids: array, n_vocab: int, base: AllowedSet | None = None, bits: bytes | None = None) -> None:
        self._ids = ids          # sorted, unique, none of them in base
        self._base = base
        self._n_vocab = n_vocab
        self._bits = bits

    def __contains__(self, token: object) -> bool:
        ids = self._ids
        i = bisect_left(ids, token)  # type: ignore[call-overload]
        if i < len(ids) and ids[i] == token:
            return True
        return self._base is not None and token in self._base

    def __len__(self) -> int:
        return len(self._ids) + (len(self._base) if self._base is not None else 0)

    def __iter__(self) -> Iterator[int]:
        if self._base is None:
            return iter(self._ids)
        return heapq.merge(self._base, self._ids)

    def __repr__(self) -> str:
        return f"AllowedSet({len(self)} of {self._n_vocab} tokens)"

    def bitset(self) -> bytes:
        bits = self._bits
        if bits is None:
            out = bytearray(self._base.bitset()) if self._base is not None else bytearray((self._n_vocab + 7) >> 3)
            for t in self._ids:
                out[t >> 3] |= 1 << (t & 7)
            bits = self._bits = bytes(out)
        return bits


class VocabIndex:
    """A tokenizer's vocabulary prepared for grammars. One per tokenizer: use `VocabIndex.for_tokenizer`.

    Normal tokens are their bytes (`<0xNN>` byte tokens their byte); CONTROL/UNKNOWN and end-of-generation tokens
    are the single symbol 256 + id, so only a grammar that names them can allow them; tokens without bytes (unused
    slots) are never allowed. A grammar that names a normal token by id (`<[123]>`) may also have it as that symbol.
    """

    _by_tokenizer: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
    _class_lock = threading.Lock()

    def __init__(self, tokenizer, cache_ids: int = _CACHE_IDS) -> None:
        n = tokenizer.vocab_size
        self.vocab_size = n
        eog = tokenizer.eog_ids
        symbols: list[bytes | tuple[int] | None] = [None] * n
        special: list[int] = []
        normal: list[tuple[bytes, int]] = []
        for tid in range(n):
            if tokenizer.is_control(tid) or tid in eog:
                symbols[tid] = (256 + tid,)
                special.append(tid)
                continue
            piece = tokenizer.token_bytes(tid)
            if piece:
                symbols[tid] = piece
                normal.append((piece, tid))
        self._symbols = symbols
        self.special_ids = frozenset(special)
        self.special_texts = {tokenizer.token_text(tid): tid for tid in special}  # what `<...>` in GBNF names
        self._build_trie(normal)
        self._cache: OrderedDict = OrderedDict()
        self._cache_ids = cache_ids
        self._cached_ids = 0
        self._sizes: dict[tuple, int] = {}
        self._lock = threading.Lock()
        self.stats = {"hits": 0, "misses": 0}

    @classmethod
    def for_tokenizer(cls, tokenizer) -> VocabIndex:
        """The index of this tokenizer, built on first use (a 262k vocabulary takes about a second)."""
        with cls._class_lock:
            index = cls._by_tokenizer.get(tokenizer)
            if index is None:
                index = cls._by_tokenizer[tokenizer] = cls(tokenizer)
            return index

    def _build_trie(self, normal: list[tuple[bytes, int]]) -> None:
        # Preorder layout: node i has the byte on the edge into it, its depth (1 = child of the root), the index
        # just past its subtree, and the tokens spelled by the path to it.
        normal.sort()
        node_byte: list[int] = []
        node_depth: list[int] = []
        node_end: list[int] = []
        node_tokens: list[tuple[int, ...]] = []
        node_phase: list[int] = []  # UTF-8 decoder state after the path to the node (0: between characters)
        path: list[int] = []
        prev = b""
        for piece, tid in normal:
            if piece == prev and path:
                node_tokens[path[-1]] += (tid,)
                continue
            common = 0
            limit = min(len(prev), len(piece))
            while common < limit and prev[common] == piece[common]:
                common += 1
            while len(path) > common:
                node_end[path.pop()] = len(node_byte)
            for d in range(common, len(piece)):
                phase = node_phase[path[-1]] if path else 0
                node_phase.append(_UTF8_NEXT[phase * 256 + piece[d]] if phase >= 0 else -1)
                path.append(len(node_byte))
                node_byte.append(piece[d])
                node_depth.append(d + 1)
                node_end.append(0)
                node_tokens.append(())
            node_tokens[path[-1]] += (tid,)
            prev = piece
        while path:
            node_end[path.pop()] = len(node_byte)
        # Tokens in preorder: those of node i's subtree are order_ids[node_first[i]:node_first[node_end[i]]].
        node_first: list[int] = []
        order_ids: list[int] = []
        for toks in node_tokens:
            node_first.append(len(order_ids))
            order_ids.extend(toks)
        node_first.append(len(order_ids))
        self._node_first = node_first
        self._order_ids = order_ids
        in_trie = bytearray(len(self._symbols))
        for tid in order_ids:
            in_trie[tid] = 1
        self._in_trie = bytes(in_trie)
        # Node i is "plain" when every path below it is well-formed UTF-8 text (from a character boundary at i)
        # without ASCII controls, '"' or '\\': under a state that takes any such text and comes back to itself,
        # the whole subtree is allowed without walking it (string contents, where walks are longest).
        bad = [1 if ph < 0 or (b < 0x80 and not _PLAIN_ASCII[b]) else 0 for ph, b in zip(node_phase, node_byte)]
        bad_before = [0, *accumulate(bad)]
        self._plain = bytes(1 if node_phase[i] == 0 and bad_before[node_end[i]] == bad_before[i + 1] else 0
                            for i in range(len(node_byte)))
        self._node_byte = node_byte
        self._node_depth = node_depth
        self._node_end = node_end
        self._max_depth = max(node_depth, default=0)

    # ----------------------------------------------------------------------------------------------- queries
    def symbols(self, token: int) -> bytes | tuple[int] | None:
        """The symbols token `token` stands for (None: it has no text and is never allowed)."""
        return self._symbols[token]

    def allows(self, matcher: Matcher, token: int) -> bool:
        """Whether the grammar accepts `token` next (EOS/EOG: the caller decides by `matcher.can_end`)."""
        syms = self._symbols[token]
        if syms is None:
            return False
        if matcher.accepts(syms):
            return True
        return token in matcher.grammar.special_ids and matcher.accepts((256 + token,))

    def advance(self, matcher: Matcher, token: int) -> bool:
        """Advance `matcher` by `token` (its bytes, or the token itself where the grammar names it)."""
        syms = self._symbols[token]
        if syms is None:
            return False
        if matcher.advance(syms):
            return True
        return token in matcher.grammar.special_ids and matcher.advance((256 + token,))

    def allowed(self, matcher: Matcher) -> AllowedSet:
        """Every token the grammar accepts next (EOS/EOG excluded unless the grammar names them)."""
        state = matcher.state
        grammar = matcher.grammar
        key = (grammar, state.stacks)
        hit = self._cache.get(key)
        if hit is not None:
            self.stats["hits"] += 1
            self._touch(key)
            return hit
        self.stats["misses"] += 1
        rel = state.relative()
        if rel is state:
            base, uncertain = self._walk(state, relative=False)
        else:
            rkey = (grammar, rel.stacks, "relative")
            entry = self._cache.get(rkey)
            if entry is None:
                entry = self._walk(rel, relative=True)
                self._store(rkey, entry, len(entry[0]) + len(entry[1]))
            else:
                self._touch(rkey)
            base, uncertain = entry
        # Tokens that reach into the enclosing context are checked against the whole state, one by one.
        symbols = self._symbols
        extra = [t for t in uncertain if _accepts(state, symbols[t])]  # type: ignore[arg-type]
        for tid in grammar.special_ids:
            if 0 <= tid < self.vocab_size and state.advance(256 + tid) is not None and tid not in base:
                extra.append(tid)
        result = base if not extra else AllowedSet(array("i", sorted(set(extra))), self.vocab_size, base)
        self._store(key, result, len(extra) + (len(base) if rel is state else 0))
        return result

    def _touch(self, key: tuple) -> None:
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)

    def _store(self, key: tuple, value: object, size: int) -> None:
        with self._lock:
            cache = self._cache
            if key in cache:
                return
            cache[key] = value
            size += self.vocab_size // 32 + 1  # room for the entry's bitset (n/8 bytes), counted in 4-byte ids
            self._sizes[key] = size
            self._cached_ids += size
            while self._cached_ids > self._cache_ids and len(cache) > 1:
                old, _ = cache.popitem(last=False)
                self._cached_ids -= self._sizes.pop(old, 0)

    def _walk(self, state: State, relative: bool) -> tuple[AllowedSet, tuple[int, ...]]:
        """(tokens whose bytes `state` accepts, tokens left undecided), walking the trie in preorder. With
        `relative`, a node where some parse pops into the context below leaves its subtree undecided."""
        node_byte, node_depth, node_end = self._node_byte, self._node_depth, self._node_end
        node_first, order_ids, plain = self._node_first, self._order_ids, self._plain
        cuts: list[int] = []  # [start, stop) ranges of order_ids left out, in increasing order, flattened
        uncertain: list[int] = []
        states: list = [state] * (self._max_depth + 1)
        n = len(node_byte)
        i = 0
        while i < n:
            d = node_depth[i]
            parent = states[d - 1]
            b = node_byte[i]
            nxt = parent.next[b]
            if nxt is UNSET:
                nxt = parent.advance(b)
            if nxt is None:
                end = node_end[i]
                cuts.append(node_first[i])
                cuts.append(node_first[end])
                i = end
                continue
            if relative and nxt.can_end:
                end = node_end[i]
                lo, hi = node_first[i + 1], node_first[end]  # the tokens below node i, not those at it
                if lo < hi:
                    uncertain.extend(order_ids[lo:hi])
                    cuts.append(lo)
                    cuts.append(hi)
                i = end
                continue
            if plain[i] and (nxt.text_loop if nxt.text_loop is not None else _is_text_loop(nxt)):
                i = node_end[i]  # every token below is allowed
                continue
            states[d] = nxt
            i += 1
        ids, bits = self._complement(cuts)
        return AllowedSet(ids, self.vocab_size, bits=bits), tuple(uncertain)

    def _complement(self, cuts: list[int]) -> tuple[array, bytes | None]:
        """Ids of the trie's tokens outside the cut ranges, sorted. Loops in Python only over the smaller side:
        the kept tokens when few are allowed, the cut ones when most are (a string's content)."""
        order_ids = self._order_ids
        removed = sum(cuts[1::2]) - sum(cuts[0::2])
        if removed * 2 > len(order_ids):
            out: list[int] = []
            prev = 0
            for k in range(0, len(cuts), 2):
                out.extend(order_ids[prev:cuts[k]])
                prev = cuts[k + 1]
            out.extend(order_ids[prev:])
            out.sort()
            return array("i", out), None
        flags = bytearray(self._in_trie)
        for k in range(0, len(cuts), 2):
            for t in order_ids[cuts[k]:cuts[k + 1]]:
                flags[t] = 0
        return array("i", compress(range(self.vocab_size), flags)), pack_bits(flags)


def _utf8_table() -> list[int]:
    """UTF-8 decoder transitions: phase * 256 + byte -> next phase, -1 for a malformed sequence. Phases: 0 between
    characters, 1-3 continuation bytes still due, 4-7 the restricted second byte after E0, ED, F0, F4."""
    table = [-1] * (8 * 256)
    for b in range(0x80):
        table[b] = 0
    for lo, hi, phase in ((0xC2, 0xDF, 1), (0xE1, 0xEC, 2), (0xEE, 0xEF, 2), (0xF1, 0xF3, 3), (0xE0, 0xE0, 4),
                          (0xED, 0xED, 5), (0xF0, 0xF0, 6), (0xF4, 0xF4, 7)):
        for b in range(lo, hi + 1):
            table[b] = phase
    for phase, lo, hi, to in ((1, 0x80, 0xBF, 0), (2, 0x80, 0xBF, 1), (3, 0x80, 0xBF, 2), (4, 0xA0, 0xBF, 1),
                              (5, 0x80, 0x9F, 1), (6, 0x90, 0xBF, 2), (7, 0x80, 0x8F, 2)):
        for b in range(lo, hi + 1):
            table[phase * 256 + b] = to
    return table


_UTF8_NEXT = _utf8_table()
_PLAIN_ASCII = bytes(1 if 0x20 <= b < 0x7F and b not in b'"\\' else 0 for b in range(128))


def _is_text_loop(state: State) -> bool:
    """Whether `state` accepts every plain character (see VocabIndex._plain) and is back in itself after each,
    never able to end on the way: then any plain text is accepted from it. Checked once per state by running the
    UTF-8 decoder alongside the state's transitions."""
    ok = not state.can_end
    seen = {(0, state)}
    todo = [(0, state)]
    while ok and todo:
        phase, st = todo.pop()
        base = phase * 256
        for b in range(256):
            to = _UTF8_NEXT[base + b]
            if to < 0 or (b < 0x80 and not _PLAIN_ASCII[b]):
                continue
            nxt = st.advance(b)
            if nxt is None or nxt.can_end or (to == 0 and nxt is not state):
                ok = False
                break
            if to and (to, nxt) not in seen:
                seen.add((to, nxt))
                todo.append((to, nxt))
            if len(seen) > 64:  # not a simple character loop; the plain walk handles it
                ok = False
                break
    state.text_loop = ok
    return ok


def pack_bits(flags: bytes | bytearray) -> bytes:
    """One byte per token (0/1) -> one bit per token (bit i of byte i//8), with big-int arithmetic instead of a
    Python loop: byte k of flags[j::8] is token 8k+j, shifting that int by j puts it at bit j of byte k."""
    nbytes = (len(flags) + 7) >> 3
    padded = bytes(flags) + bytes(nbytes * 8 - len(flags))
    total = 0
    for j in range(8):
        total |= int.from_bytes(padded[j::8], "little") << j
    return total.to_bytes(nbytes, "little")


def _accepts(state: State, symbols: bytes) -> bool:
    for b in symbols:
        nxt = state.next[b] if b < 256 else UNSET
        if nxt is UNSET:
            nxt = state.advance(b)
        if nxt is None:
            return False
        state = nxt
    return True
