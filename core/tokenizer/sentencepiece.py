"""The BPE vocabularies that write spaces as "▁" and merge across words, falling back to `<0xNN>` byte tokens for
what no token spells:

- "llama": SentencePiece BPE (Llama 2, Gemma 3, Phi-3...). A space is put in front of the text (and after each
  special token) when `add_space_prefix` says so, the default; pairs merge by the score of the token they form;
  an ASCII character without a byte token falls back to its one-character token, anything else to UNK.
- "gemma4", or "gpt2" with pre "gemma4", "granite-embed-multi-311m" or "sarvam-moe": BPE by merge ranks over
  ▁-escaped raw UTF-8, one line at a time; bytes without a token are dropped. A run of newlines that is a token
  is taken whole (Gemma 4 only), and llama.cpp always adds BOS for Gemma 4 whatever the file says.

Merges run over a whole line, not word by word; `bpe.SpaceCutter` cuts a line into pieces that merge
independently where the vocabulary allows it, so that long texts stay fast and pieces are cached like words.
"""
from __future__ import annotations

import re
from abc import abstractmethod
from collections.abc import Mapping

from ..errors import TokenizerError
from .bpe import SpaceCutter, merge_by_rank, merge_by_score, merge_ranks
from .model import SPACE_MARK, TokenizerModel, WordIds, cached, flag, merges
from .vocabulary import Vocabulary

# A character other than "▁" followed by "▁": a merge result like this can join pieces across a cut.
_GLUED = re.compile("[^" + SPACE_MARK + "]" + SPACE_MARK)
_LINES = re.compile("[^\n]+|\n+")
# Longer pieces (CJK text has no spaces to cut at) are merged without going through the cache.
_CACHED_PIECE_CHARS = 64
_GEMMA4 = frozenset({"gemma4", "granite-embed-multi-311m"})


class _EscapedText(TokenizerModel):
    """▁-escaped text cut into pieces by `_cutter`, each merged by `_merge`."""

    _cutter: SpaceCutter
    _merge_cached: WordIds  # `_merge` through the word cache

    @abstractmethod
    def _merge(self, piece: str) -> tuple[int, ...]:
        """The ids of one piece."""

    def _encode_escaped(self, text: str, out: list[int]) -> None:
        for piece in self._cutter.split(text):
            out.extend(self._merge_cached(piece) if len(piece) <= _CACHED_PIECE_CHARS else self._merge(piece))


class SentencePieceBPE(_EscapedText):
    """`tokenizer.ggml.model` "llama": pairs merged by the score of the token they spell."""

    special_defaults = {"bos": 1, "eos": 2, "unk": 0}
    bos_by_default = True

    def __init__(self, vocabulary: Vocabulary, metadata: Mapping[str, object], pre: str) -> None:
        prefix = flag(metadata, "add_space_prefix")
        self.add_space_prefix = True if prefix is None else prefix
        self._ids, self._scores, self._unk_id = vocabulary.ids, vocabulary.scores, vocabulary.unk_id
        self._byte_ids = vocabulary.byte_tokens(ascii_fallback=True)
        self._cutter = SpaceCutter([t for t in vocabulary.tokens if _GLUED.search(t)])
        self._merge_cached = cached(self._merge)

    def encode(self, text: str, out: list[int]) -> None:
        if self.add_space_prefix:
            text = " " + text
        self._encode_escaped(text.replace(" ", SPACE_MARK), out)

    def _merge(self, piece: str) -> tuple[int, ...]:
        out: list[int] = []
        for symbol in merge_by_score(list(piece), self._ids, self._scores):
            tid = self._ids.get(symbol)
            if tid is not None:
                out.append(tid)
                continue
            for b in symbol.encode("utf-8"):
                byte_id = self._byte_ids[b]
                if byte_id is None:
                    byte_id = self._unk_id
                if byte_id is None:
                    raise TokenizerError(f"cannot encode {symbol!r}: the vocabulary has neither a <0x{b:02X}> "
                                         f"byte token nor an unknown token")
                out.append(byte_id)
        return tuple(out)

    def __repr__(self) -> str:
        return "SentencePiece BPE"


class EscapedBPE(_EscapedText):
    """BPE by merge ranks over ▁-escaped text, line by line."""

    # The `tokenizer.ggml.pre` names that make a "gpt2" vocabulary this kind.
    PRE_NAMES = frozenset({"gemma4", "granite-embed-multi-311m", "sarvam-moe"})

    def __init__(self, vocabulary: Vocabulary, metadata: Mapping[str, object], pre: str) -> None:
        lines = merges(metadata)
        self._pre = pre
        self._ids = vocabulary.ids
        self._ranks = merge_ranks(lines)
        self._byte_ids = vocabulary.byte_tokens(ascii_fallback=False)
        self._cutter = SpaceCutter([m.replace(" ", "", 1) for m in lines if _GLUED.search(m)])
        self._newline_runs = pre in _GEMMA4
        self._merge_cached = cached(self._merge)

    @classmethod
    def adds_bos(cls, pre: str, add_bos_token: bool | None) -> bool:
        return pre in _GEMMA4 or bool(add_bos_token)  # llama.cpp overrides Gemma 4 files that say otherwise

    def encode(self, text: str, out: list[int]) -> None:
        for line in _LINES.findall(text.replace(" ", SPACE_MARK)):
            self._encode_escaped(line, out)

    def _merge(self, piece: str) -> tuple[int, ...]:
        ids = self._ids
        if self._newline_runs and piece[0] == "\n":
            whole = ids.get(piece)  # a newline run that is a token is taken whole (llama.cpp's Gemma 4 rule)
            if whole is not None:
                return (whole,)
        out: list[int] = []
        for symbol in merge_by_rank(list(piece), self._ranks):
            tid = ids.get(symbol)
            if tid is not None:
                out.append(tid)
            else:
                # Bytes without a <0xNN> token are dropped, as llama.cpp does.
                out.extend(b for b in map(self._byte_ids.__getitem__, symbol.encode("utf-8")) if b is not None)
        return tuple(out)

    def __repr__(self) -> str:
        return f"BPE over ▁-escaped text, pre={self._pre!r}"
