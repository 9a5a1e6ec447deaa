"""Unigram (SentencePiece "unigram" model: T5, XLM-R based embedding models) tokenization, as llama.cpp runs it
for `tokenizer.ggml.model` "t5".

Encoding a piece of text:

1. Normalise its UTF-8 bytes left to right. At each point the longest match wins among: a prefix of some
   USER_DEFINED token's text (llama.cpp matches prefixes of those texts, not only whole ones, and so do we), else
   the longest input prefix that the SentencePiece `precompiled_charsmap` maps to a replacement, else the code
   point itself. Spaces in the result become "▁"; with `tokenizer.ggml.remove_extra_whitespaces` runs of spaces
   collapse and every word gets one "▁" in front, else one "▁" goes in front of the text when
   `tokenizer.ggml.add_space_prefix` says so (and decoding takes it off again).
2. Viterbi over the normalised bytes: every vocabulary token (NORMAL, USER_DEFINED and UNUSED ones; USER_DEFINED
   scored 0, the others by their log-probability score) that matches at a code point boundary competes for the
   best total score at the position it reaches; a code point no single token covers may also be taken as the
   unknown token, scored 10 below the lowest token score. Ties keep the earlier candidate. Runs of unknown tokens
   in the result merge into one.

The charsmap is SentencePiece's: a little-endian u32 byte length, an XOR-compressed compact double array (XCDA)
over input bytes whose leaves index the NUL-terminated replacement strings that follow it.
"""
from __future__ import annotations

import struct
from collections.abc import Mapping

from ..errors import TokenizerError
from .model import SPACE_MARK, TokenizerModel, field, flag
from .vocabulary import Attr, Vocabulary

_SPACE_MARK = SPACE_MARK.encode("utf-8")
_UNKNOWN_PENALTY = 10.0
_UTF8_LENGTH = (1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4)  # by the first byte's high nibble


class CharsMap:
    """SentencePiece's precompiled normalisation map: the longest input prefix with a replacement."""

    def __init__(self, blob: bytes):
        if len(blob) < 4:
            raise TokenizerError("tokenizer.ggml.precompiled_charsmap is too small for its header")
        (size,) = struct.unpack_from("<I", blob)
        if size % 4 or 4 + size >= len(blob):
            raise TokenizerError(f"tokenizer.ggml.precompiled_charsmap: its double array of {size} bytes does not "
                                 f"fit the {len(blob)} bytes of the map")
        self._nodes = struct.unpack_from(f"<{size // 4}I", blob, 4)
        self._replacements = blob[4 + size:]

    def _node(self, index: int) -> int:
        if index >= len(self._nodes):
            raise TokenizerError("tokenizer.ggml.precompiled_charsmap: an index leaves its double array")
        return self._nodes[index]

    def _base(self, index: int) -> int:
        node = self._node(index)
        return (node >> 10) << ((node & (1 << 9)) >> 6)

    def longest(self, data: bytes, start: int) -> tuple[int, bytes]:
        """(input bytes matched, replacement) for the longest prefix of data[start:] the map replaces, (0, b"")
        when none is."""
        matched, value = 0, 0
        index = self._base(0)
        for offset in range(start, len(data)):
            c = data[offset]
            if c == 0:
                break
            index ^= c
            node = self._node(index)
            if node & ((1 << 31) | 0xFF) != c:  # not a child of the previous node
                break
            leaf = (node >> 8) & 1
            index ^= self._base(index)
            if leaf:
                matched, value = offset - start + 1, self._node(index) & ((1 << 31) - 1)
        if not matched:
            return 0, b""
        end = self._replacements.find(b"\0", value)
        if value >= len(self._replacements) or end < 0:
            raise TokenizerError("tokenizer.ggml.precompiled_charsmap: a replacement is outside the map or "
                                 "unterminated")
        return matched, self._replacements[value:end]


class Unigram(TokenizerModel):
    """The normaliser and Viterbi search of the module docstring for one vocabulary."""

    special_defaults = {"eos": 1, "unk": 2, "pad": 0}  # T5's ids, llama.cpp's defaults
    eos_by_default = True

    def __init__(self, vocabulary: Vocabulary, metadata: Mapping[str, object], pre: str) -> None:
        self.add_space_prefix = bool(flag(metadata, "add_space_prefix"))
        self._collapse_spaces = bool(flag(metadata, "remove_extra_whitespaces"))
        blob = field(metadata, "precompiled_charsmap")  # a list of (possibly signed) bytes
        self._charsmap = CharsMap(bytes(v & 0xFF for v in blob)) if isinstance(blob, list) and blob else None
        tokens, scores, attrs = vocabulary.tokens, vocabulary.scores, vocabulary.attrs
        self._scores: dict[bytes, tuple[int, float]] = {}
        low = min((s for s, a in zip(scores, attrs) if a & Attr.NORMAL), default=0.0)
        for tid, text in enumerate(tokens):
            if attrs[tid] & (Attr.NORMAL | Attr.USER_DEFINED | Attr.UNUSED):
                score = 0.0 if attrs[tid] & Attr.USER_DEFINED else scores[tid]
                self._scores[text.encode("utf-8")] = (tid, score)
        self._longest = max(map(len, self._scores), default=1)
        self._unknown_score = low - _UNKNOWN_PENALTY
        self._unk_id = vocabulary.unk_id
        self._user_prefixes = {t.encode("utf-8")[:n] for t, a in zip(tokens, attrs) if a & Attr.USER_DEFINED
                               for n in range(1, len(t.encode("utf-8")) + 1)}

    def _normalized_prefix(self, data: bytes, start: int) -> tuple[int, bytes]:
        n = 0
        while start + n < len(data) and data[start:start + n + 1] in self._user_prefixes:
            n += 1
        if n:
            return n, data[start:start + n]
        if self._charsmap is not None:
            matched, replacement = self._charsmap.longest(data, start)
            if matched:
                return matched, replacement
        n = min(_UTF8_LENGTH[data[start] >> 4], len(data) - start)  # the text is valid UTF-8
        return n, data[start:start + n]

    def _normalize(self, text: str) -> bytes:
        data, out = text.encode("utf-8"), bytearray()
        prepended = in_word = False
        start = 0
        while start < len(data):
            used, piece = self._normalized_prefix(data, start)
            for c in piece:
                if c != 0x20:
                    if not in_word:
                        in_word = True
                        if (self.add_space_prefix and not prepended) or self._collapse_spaces:
                            out += _SPACE_MARK
                            prepended = True
                    out.append(c)
                else:
                    in_word = False
                    if not self._collapse_spaces:
                        out += _SPACE_MARK
            start += used
        return bytes(out)

    def encode(self, text: str, out: list[int]) -> None:
        data = self._normalize(text)
        n = len(data)
        if not n:
            return
        unk = -1 if self._unk_id is None else self._unk_id
        # best[i]: (score of the best cut of data[:i], its last token, where that token starts)
        best: list[tuple[float, int, int]] = [(-float("inf"), unk, 0)] * (n + 1)
        best[0] = (0.0, unk, 0)
        scores, longest = self._scores, self._longest
        start = 0
        while start < n:
            width = min(_UTF8_LENGTH[data[start] >> 4], n - start)
            base = best[start][0]
            whole = False
            for end in range(start + 1, min(n, start + longest) + 1):
                hit = scores.get(data[start:end])
                if hit is None:
                    continue
                whole = whole or end - start == width
                total = base + hit[1]
                if total > best[end][0]:
                    best[end] = (total, hit[0], start)
            if not whole:
                total = base + self._unknown_score
                if total > best[start + width][0]:
                    best[start + width] = (total, unk, start)
            start += width
        ids: list[int] = []
        at, previous_unknown = n, False
        while True:
            _, tid, begin = best[at]
            unknown = tid == unk
            if not (previous_unknown and unknown):
                ids.append(tid)
            if begin == 0:
                break
            previous_unknown, at = unknown, begin
        out.extend(tid for tid in reversed(ids) if tid >= 0)

    def __repr__(self) -> str:
        return "SentencePiece unigram"
