"""Cutting special tokens out of text before the merges run, the way llama.cpp does it.

llama.cpp's rule: take the special tokens (CONTROL, USER_DEFINED, UNKNOWN) longest first; each one splits every
remaining piece of plain text at each of its occurrences, left to right, without overlap. So a longer token wins
over a shorter one even when the shorter one starts earlier ("bcd" is cut out of "abcd" before "ab" is tried).

Doing that literally costs one substring search of the whole text per special token, and Gemma's vocabulary has
6,414 of them: most of the encoding time for short prompts, and half a second per megabyte. So the tokens that can
matter are found first by walking a character trie of all special token texts, descending only along prefixes
that occur in the text (one C-speed `in` per trie edge reached): a token is a candidate only if the text contains
it. The partition then runs over the candidates alone, in the same order, which gives exactly llama.cpp's result.
"""
from __future__ import annotations

from collections.abc import Sequence

# What C's isspace() accepts: the whitespace that LSTRIP/RSTRIP tokens swallow.
_C_SPACE = " \t\n\v\f\r"


class _Node:
    __slots__ = ("children", "ids")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = {}
        self.ids: list[int] = []


class SpecialSplitter:
    """Splits text at special tokens. `tokens` are the texts of the special tokens, `ids` their ids, `order` the
    sort key of each (tokens are tried by increasing key); `lstrip`/`rstrip` the ids whose matches swallow the
    whitespace before/after them."""

    def __init__(self, tokens: Sequence[str], ids: Sequence[int], order: Sequence[tuple[int, int]],
                 lstrip: frozenset[int], rstrip: frozenset[int]) -> None:
        self._text = dict(zip(ids, tokens))
        self._rank = dict(zip(ids, order))
        self._lstrip = lstrip
        self._rstrip = rstrip
        self._root = _Node()
        for text, tid in zip(tokens, ids):
            node = self._root
            for ch in text:
                node = node.children.setdefault(ch, _Node())
            node.ids.append(tid)

    def candidates(self, text: str) -> list[int]:
        """The special tokens that occur in `text`, in the order they are tried."""
        found: list[int] = []
        stack = [("", self._root)]
        while stack:
            prefix, node = stack.pop()
            for ch, child in node.children.items():
                extended = prefix + ch
                if extended in text:
                    found.extend(child.ids)
                    if child.children:
                        stack.append((extended, child))
        found.sort(key=self._rank.__getitem__)
        return found

    def split(self, text: str, skip: frozenset[int] = frozenset()) -> list[str | int]:
        """`text` as plain-text strings and special token ids, in order; the ids in `skip` are left as text."""
        if not text:
            return []
        fragments: list[str | int] = [text]
        for tid in self.candidates(text):
            if tid in skip:
                continue
            token = self._text[tid]
            lstrip, rstrip = tid in self._lstrip, tid in self._rstrip
            out: list[str | int] = []
            for fragment in fragments:
                if isinstance(fragment, int) or token not in fragment:
                    out.append(fragment)
                else:
                    split_on(fragment, token, tid, lstrip, rstrip, out)
            fragments = out
        return fragments


def split_on(fragment: str, token: str, tid: int, lstrip: bool, rstrip: bool, out: list[str | int]) -> None:
    """Append `fragment` to `out` with every occurrence of `token` replaced by `tid` (left to right, no overlap)."""
    base, end = 0, len(fragment)
    while base < end:
        at = fragment.find(token, base)
        if at < 0:
            break
        left_end = at
        if lstrip:
            while left_end > base and fragment[left_end - 1] in _C_SPACE:
                left_end -= 1
        if left_end > base:
            out.append(fragment[base:left_end])
        out.append(tid)
        base = at + len(token)
        if rstrip:
            while base < end and fragment[base] in _C_SPACE:
                base += 1
    if base < end:
        out.append(fragment[base:])
