"""The two BPE merge loops found in GGUF vocabularies, and the GPT-2 byte <-> character map.

Both loops follow llama.cpp exactly, because "the same ids as llama.cpp" is the contract: repeatedly merge one
adjacent pair of symbols, chosen by priority, ties going to the leftmost pair, until no mergeable pair is left.

- `merge_by_rank` (tokenizer.ggml.model = "gpt2", "gemma4"): a pair is mergeable when it is listed in
  tokenizer.ggml.merges; the earliest listed pair wins. Only the chosen pair is merged per step (not every
  occurrence of it), which matters for merge lists that are not in training order.
- `merge_by_score` (tokenizer.ggml.model = "llama", SentencePiece BPE): a pair is mergeable when its
  concatenation is a token of the vocabulary; the pair making the highest-scoring token wins.

Symbols live in a doubly linked list over their start positions and candidate pairs in a heap keyed by
(priority, left position). A popped pair is stale when either side has changed since it was pushed; symbols only
ever grow by absorbing their right neighbour, so comparing the current texts with the pushed ones detects that.
"""
from __future__ import annotations

import heapq
import re
from collections.abc import Callable, Mapping


def _bytes_to_unicode() -> tuple[str, ...]:
    """GPT-2's reversible byte -> printable character map: printable Latin-1 bytes map to themselves, the other
    68 bytes (controls, space, soft hyphen...) to U+0100 onwards in byte order. Byte-level vocabularies spell
    every token with these characters, e.g. "Ġ" (U+0120) for the space byte."""
    keep = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table = [""] * 256
    for b in keep:
        table[b] = chr(b)
    extra = 0x100
    for b in range(256):
        if not table[b]:
            table[b] = chr(extra)
            extra += 1
    return tuple(table)


BYTE_TO_UNICODE: tuple[str, ...] = _bytes_to_unicode()
UNICODE_TO_BYTE: dict[str, int] = {ch: b for b, ch in enumerate(BYTE_TO_UNICODE)}
# For str.translate over text decoded as Latin-1 (one character per byte): the byte-level spelling of any text.
_LATIN1_TO_BYTE_LEVEL = {b: ch for b, ch in enumerate(BYTE_TO_UNICODE)}


def byte_level(text: str) -> str:
    """The byte-level spelling of `text`: its UTF-8 bytes, each written as its GPT-2 character."""
    return text.encode("utf-8").decode("latin-1").translate(_LATIN1_TO_BYTE_LEVEL)


def _merge(symbols: list[str], priority: Callable[[str, str], float | int | None]) -> list[str]:
    """Merge adjacent symbols in `priority` order (lower first, None = never), leftmost first among equals."""
    n = len(symbols)
    if n < 2:
        return symbols
    heap: list[tuple[float | int, int, str, str]] = []
    for i in range(n - 1):
        left, right = symbols[i], symbols[i + 1]
        p = priority(left, right)
        if p is not None:
            heap.append((p, i, left, right))
    if not heap:
        return symbols
    heapq.heapify(heap)
    nxt = list(range(1, n + 1))
    prv = list(range(-1, n - 1))
    while heap:
        _, i, left, right = heapq.heappop(heap)
        j = nxt[i]
        if j >= n or symbols[i] != left or symbols[j] != right:
            continue
        merged = left + right
        symbols[i] = merged
        symbols[j] = ""
        k = nxt[j]
        nxt[i] = k
        if k < n:
            prv[k] = i
            p = priority(merged, symbols[k])
            if p is not None:
                heapq.heappush(heap, (p, i, merged, symbols[k]))
        h = prv[i]
        if h >= 0:
            p = priority(symbols[h], merged)
            if p is not None:
                heapq.heappush(heap, (p, h, symbols[h], merged))
    return [s for s in symbols if s]


def merge_ranks(merges: list[str]) -> dict[str, int]:
    """Merge line -> rank, the first occurrence winning.

    Keyed by the line itself and looked up as `left + " " + right`: symbols never contain a space (byte-level
    spelling, or ▁-escaped text), so that finds exactly the pairs llama.cpp finds by splitting each line at its
    first space after the first character, without splitting 50k-500k lines at load time."""
    return dict(zip(reversed(merges), range(len(merges) - 1, -1, -1)))


def merge_by_rank(symbols: list[str], ranks: Mapping[str, int]) -> list[str]:
    """GPT-2 style BPE: `ranks[left + " " + right]` is the pair's line number in the merges list (symbols must not
    contain spaces, which holds for byte-level spellings)."""
    get = ranks.get
    return _merge(symbols, lambda left, right: get(left + " " + right))


def merge_by_score(symbols: list[str], token_ids: Mapping[str, int], scores: list[float]) -> list[str]:
    """SentencePiece style BPE: a pair merges into the token it spells; higher token score first."""
    get = token_ids.get

    def priority(left: str, right: str) -> float | None:
        tid = get(left + right)
        return None if tid is None else -scores[tid]
    return _merge(symbols, priority)


# A run of "▁" and the text up to the next one: the pieces of ▁-escaped text that merge on their own.
_SPACE_RUNS = re.compile("\u2581*[^\u2581]*")
# Above this many glued strings, one regex pass finds their occurrences instead of one search per string.
_GLUED_BY_SEARCH = 16


class SpaceCutter:
    """Cuts ▁-escaped text (SentencePiece style: spaces written as "▁") into pieces that merge independently.

    Merges in these vocabularies run over a whole line, not word by word. But a merge can only join two symbols
    across the start of a "▁" run that follows another character if its result contains that character followed
    by "▁" ("glued", e.g. Gemma's single such token ">▁</"). So the text is cut before each "▁" run, except
    where an occurrence of a glued string spans the cut; each piece then merges (and is cached) on its own, with
    the same result as merging the whole line. `glued` lists every string a merge can produce that contains a
    character other than "▁" followed by "▁": tokens for score-merged vocabularies, merge results for ranked ones.
    """

    def __init__(self, glued: list[str]) -> None:
        self._glued = sorted(set(glued), key=len, reverse=True)
        self._pattern = (re.compile("(?=(" + "|".join(map(re.escape, self._glued)) + "))")
                         if len(self._glued) > _GLUED_BY_SEARCH else None)

    def split(self, text: str) -> list[str]:
        pieces = [p for p in _SPACE_RUNS.findall(text) if p]
        if len(pieces) < 2 or not self._glued:
            return pieces
        spans = self._glued_spans(text)
        if not spans:
            return pieces
        blocked = set()
        for start, end in spans:
            blocked.update(range(start + 1, end))
        out: list[str] = []
        at = 0
        for piece in pieces:
            if at in blocked and out:
                out[-1] += piece
            else:
                out.append(piece)
            at += len(piece)
        return out

    def _glued_spans(self, text: str) -> list[tuple[int, int]]:
        spans: list[tuple[int, int]] = []
        if self._pattern is not None:
            # Alternatives longest first: at each position the longest glued string found covers the shorter ones.
            for match in self._pattern.finditer(text):
                spans.append((match.start(), match.start() + len(match.group(1))))
            return spans
        for glued in self._glued:
            at = text.find(glued)
            while at >= 0:
                spans.append((at, at + len(glued)))
                at = text.find(glued, at + 1)
        return spans
