"""WordPiece (BERT-style embedding models), as llama.cpp runs it for `tokenizer.ggml.model` "bert".

GGUF stores a WordPiece vocabulary with word-initial pieces spelled "▁piece" and continuation pieces bare (the
converter turns BERT's "##piece" into "piece" and "piece" into "▁piece"). Encoding a text:

1. Normalise and split into words, code point by code point: whitespace ends a word; NUL, U+FFFD and control
   characters (\\p{C}) are dropped; with `strip_accents` every code point is first replaced by the first code point
   of its canonical decomposition and marks (\\p{M}) are dropped; with `lowercase` each code point takes its simple
   lowercase mapping; punctuation, ASCII symbols and CJK ideographs are words of their own.
2. Each word, spelled "▁" + word, is cut greedily from the left into the longest pieces in the vocabulary,
   comparing UTF-8 bytes as llama.cpp does. A word that cannot be cut completely becomes one unknown token.

`lowercase` is `tokenizer.ggml.normalizer.lowercase` (default on), `strip_accents` is
`tokenizer.ggml.normalizer.strip_accents` (default: as `lowercase`). The normaliser's tables come from unicode_classes (generated from Unicode 15.1, as llama.cpp's are), so the
result does not depend on the running Python's unicodedata.
"""
from __future__ import annotations

import bisect
import functools
from collections.abc import Mapping

from . import unicode_classes as uc
from .model import SPACE_MARK, TokenizerModel, cached, flag
from .vocabulary import Vocabulary

# CJK ideograph blocks that BERT's basic tokenizer treats as words of their own (its ranges, which leave out
# 0x2B820-0x2B91F the way the reference implementation does).
_CJK = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
        (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


class _Ranges:
    """Membership in a flat (first0, last0, first1, last1, ...) table of unicode_classes."""

    def __init__(self, *tables: tuple[int, ...]):
        runs = sorted((t[i], t[i + 1]) for t in tables for i in range(0, len(t), 2))
        self._firsts = [first for first, _ in runs]
        self._lasts = [last for _, last in runs]

    def __contains__(self, cp: int) -> bool:
        at = bisect.bisect_right(self._firsts, cp) - 1
        return at >= 0 and cp <= self._lasts[at]


@functools.cache
def _tables() -> tuple[_Ranges, _Ranges, _Ranges, _Ranges, dict[int, int], dict[int, int]]:
    """Whitespace, controls, marks, word-by-itself characters (punctuation, ASCII symbols, CJK) and the two maps,
    built on first use: only WordPiece vocabularies need them."""
    lower = uc.LOWERCASE
    lowercase = {cp: cp + lower[i + 3] for i in range(0, len(lower), 4)
                 for cp in range(lower[i], lower[i + 1] + 1, lower[i + 2] or 1)}
    nfd = uc.NFD_FIRST
    nfd_first = {cp: nfd[i + 2] for i in range(0, len(nfd), 3) for cp in range(nfd[i], nfd[i + 1] + 1)}
    symbols = _Ranges(uc.SYMBOL)
    ascii_symbols = tuple(v for cp in range(0x7F) if cp in symbols for v in (cp, cp))
    alone = _Ranges(uc.PUNCTUATION, ascii_symbols, tuple(v for run in _CJK for v in run))
    return (_Ranges(uc.WHITESPACE), _Ranges(uc.CONTROL), _Ranges(uc.MARK), alone, lowercase, nfd_first)


def split_words(text: str, *, lowercase: bool, strip_accents: bool) -> list[str]:
    """The normalised words of `text` (step 1 of the module docstring)."""
    whitespace, control, mark, alone, lower_map, nfd_map = _tables()
    words: list[str] = []
    word: list[str] = []

    def end_word() -> None:
        if word:
            words.append("".join(word))
            word.clear()

    for ch in text:
        cp = ord(ch)
        if strip_accents:
            cp = nfd_map.get(cp, cp)
        if cp in whitespace:
            end_word()
            continue
        if cp == 0 or cp == 0xFFFD or cp in control or (strip_accents and cp in mark):
            continue
        if lowercase:
            cp = lower_map.get(cp, cp)
        if cp in alone:
            end_word()
            words.append(chr(cp))
        else:
            word.append(chr(cp))
    end_word()
    return words


class WordPiece(TokenizerModel):
    """Greedy longest-match of normalised words against the vocabulary. As in llama.cpp, BOS frames the text as
    [CLS] ... [SEP]: `encode(add_bos=True)` appends the separator token too."""

    special_defaults = {"bos": 101, "unk": 100, "pad": 0, "sep": 102}  # BERT's ids, llama.cpp's defaults
    bos_by_default = True
    separator_after_bos = True

    def __init__(self, vocabulary: Vocabulary, metadata: Mapping[str, object], pre: str) -> None:
        lowercase = flag(metadata, "normalizer.lowercase")
        strip_accents = flag(metadata, "normalizer.strip_accents")
        self._lowercase = True if lowercase is None else lowercase
        self._strip_accents = self._lowercase if strip_accents is None else strip_accents
        self._ids = {t.encode("utf-8"): i for i, t in enumerate(vocabulary.tokens)}  # a repeated text keeps its last id
        self._longest = max(len(t) for t in self._ids)
        self._unk_id = vocabulary.unk_id
        self._word_ids = cached(self._cut)

    def encode(self, text: str, out: list[int]) -> None:
        word_ids = self._word_ids
        for word in split_words(text, lowercase=self._lowercase, strip_accents=self._strip_accents):
            out.extend(word_ids(word))

    def _cut(self, word: str) -> tuple[int, ...]:
        """Step 2 of the module docstring."""
        spelled = (SPACE_MARK + word).encode("utf-8")
        n, ids, out, i = len(spelled), self._ids, [], 0
        while i < n:
            for j in range(min(n, i + self._longest), i, -1):
                tid = ids.get(spelled[i:j])
                if tid is not None:
                    out.append(tid)
                    i = j
                    break
            else:
                out = []
                break
        if out:
            return tuple(out)
        return () if self._unk_id is None else (self._unk_id,)

    def __repr__(self) -> str:
        return "WordPiece"
