"""Sets of Unicode code points as alternatives of byte ranges, so a grammar over characters runs over bytes.

A character class such as `[^"\\]` becomes a handful of byte-range sequences (one per UTF-8 length and lead-byte
span), the same construction regex engines use for byte-level automata. Only valid UTF-8 is produced: surrogates
(U+D800..U+DFFF) and code points past U+10FFFF are never in a set.
"""
from __future__ import annotations

MAX_CODE_POINT = 0x10FFFF
_SURROGATES = (0xD800, 0xDFFF)
# First and last code point of each UTF-8 encoded length.
_LENGTH_SPANS = ((0x0, 0x7F), (0x80, 0x7FF), (0x800, 0xFFFF), (0x10000, MAX_CODE_POINT))

ByteRange = tuple[int, int]


def normalize(ranges: list[tuple[int, int]], negate: bool = False) -> list[tuple[int, int]]:
    """Sorted, merged, surrogate-free code point ranges; with `negate`, the complement within valid characters."""
    merged: list[list[int]] = []
    for lo, hi in sorted((min(a, b), max(a, b)) for a, b in ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    out = [(lo, hi) for lo, hi in merged]
    if negate:
        gaps, nxt = [], 0
        for lo, hi in out:
            if lo > nxt:
                gaps.append((nxt, lo - 1))
            nxt = hi + 1
        if nxt <= MAX_CODE_POINT:
            gaps.append((nxt, MAX_CODE_POINT))
        out = gaps
    return _without_surrogates(out)


def _without_surrogates(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    s_lo, s_hi = _SURROGATES
    out = []
    for lo, hi in ranges:
        hi = min(hi, MAX_CODE_POINT)
        if hi < s_lo or lo > s_hi:
            if lo <= hi:
                out.append((lo, hi))
            continue
        if lo < s_lo:
            out.append((lo, s_lo - 1))
        if hi > s_hi:
            out.append((s_hi + 1, hi))
    return out


def byte_sequences(ranges: list[tuple[int, int]]) -> list[list[ByteRange]]:
    """The UTF-8 encodings of the (normalized) code point ranges as sequences of per-byte ranges: a byte string
    encodes a character of the set iff it matches exactly one of the sequences."""
    out: list[list[ByteRange]] = []
    for lo, hi in ranges:
        for span_lo, span_hi in _LENGTH_SPANS:
            a, b = max(lo, span_lo), min(hi, span_hi)
            if a <= b:
                _split(a, b, out)
    return out


def _split(lo: int, hi: int, out: list[list[ByteRange]]) -> None:
    # Cut [lo, hi] (one encoded length) until every continuation byte spans a whole block or the ends agree, so
    # the encodings of lo and hi give independent per-byte ranges.
    n = len(chr(lo).encode("utf-8"))
    for i in range(1, n):
        m = (1 << (6 * i)) - 1
        if lo & ~m != hi & ~m:
            if lo & m:
                _split(lo, lo | m, out)
                _split((lo | m) + 1, hi, out)
                return
            if hi & m != m:
                _split(lo, (hi & ~m) - 1, out)
                _split(hi & ~m, hi, out)
                return
    out.append(list(zip(chr(lo).encode("utf-8"), chr(hi).encode("utf-8"))))
