"""The vocabulary seen by a grammar: each token as symbols, a byte trie of them, and the tokens a state allows.

`allowed` walks the trie in preorder against the matcher's automaton: a node whose byte no stack accepts skips
its whole subtree (one index jump, since the trie is laid out flat in preorder), every other node costs one cached
transition lookup. The result depends only on the state, so it is cached per (grammar, state key) in an LRU
bounded by the number of token ids it holds.
"""
from __future__ import annotations

import threading
import weakref
from array import array
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Iterator

from .grammar import Grammar
from .matcher import _UNSET, Matcher, State

_CACHE_IDS = 16_000_000  # token ids held by the allowed-set cache of one vocabulary (4 bytes each)


class AllowedSet:
    """Token ids a grammar state allows, in id order. `bitset()` is the GPU mask: bit i of byte i//8 = token i."""

    __slots__ = ("_ids", "_n_vocab", "_bits")

    def __init__(self, ids: array, n_vocab: int) -> None:
        self._ids = ids          # sorted, unique
        self._n_vocab = n_vocab
        self._bits: bytes | None = None

    def __contains__(self, token: object) -> bool:
        ids = self._ids
        i = bisect_left(ids, token)  # type: ignore[call-overload]
        return i < len(ids) and ids[i] == token

    def __len__(self) -> int:
        return len(self._ids)

    def __iter__(self) -> Iterator[int]:
        return iter(self._ids)

    def __repr__(self) -> str:
        return f"AllowedSet({len(self._ids)} of {self._n_vocab} tokens)"

    def bitset(self) -> bytes:
        bits = self._bits
        if bits is None:
            out = bytearray((self._n_vocab + 7) >> 3)
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
        self._build_trie(normal)
        self._cache: OrderedDict = OrderedDict()
        self._cache_ids = cache_ids
        self._cached_ids = 0
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
                path.append(len(node_byte))
                node_byte.append(piece[d])
                node_depth.append(d + 1)
                node_end.append(0)
                node_tokens.append(())
            node_tokens[path[-1]] += (tid,)
            prev = piece
        while path:
            node_end[path.pop()] = len(node_byte)
        self._node_byte = node_byte
        self._node_depth = node_depth
        self._node_end = node_end
        self._node_tokens = node_tokens
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
        key = (matcher.grammar, state.stacks)
        cache = self._cache
        hit = cache.get(key)
        if hit is not None:
            self.stats["hits"] += 1
            with self._lock:
                if key in cache:
                    cache.move_to_end(key)
            return hit
        self.stats["misses"] += 1
        result = AllowedSet(self._walk(state, matcher.grammar), self.vocab_size)
        with self._lock:
            if key not in cache:
                cache[key] = result
                self._cached_ids += len(result)
                while self._cached_ids > self._cache_ids and len(cache) > 1:
                    _, old = cache.popitem(last=False)
                    self._cached_ids -= len(old)
        return result

    def _walk(self, state: State, grammar: Grammar) -> array:
        out: list[int] = []
        node_byte, node_depth, node_end, node_tokens = (self._node_byte, self._node_depth, self._node_end,
                                                        self._node_tokens)
        states: list = [state] * (self._max_depth + 1)
        n = len(node_byte)
        i = 0
        while i < n:
            d = node_depth[i]
            parent = states[d - 1]
            b = node_byte[i]
            nxt = parent.next[b]
            if nxt is _UNSET:
                nxt = parent.advance(b)
            if nxt is None:
                i = node_end[i]
                continue
            states[d] = nxt
            toks = node_tokens[i]
            if toks:
                out.extend(toks)
            i += 1
        named = [tid for tid in grammar.special_ids
                 if 0 <= tid < self.vocab_size and state.advance(256 + tid) is not None]
        if named:
            out = sorted(set(out).union(named))
        else:
            out.sort()
        return array("i", out)
