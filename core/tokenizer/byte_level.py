"""Byte-level BPE, `tokenizer.ggml.model` "gpt2" (GPT-2, Llama 3, Qwen, SmolLM...).

Text is cut into words by the pre-tokenizer named in `tokenizer.ggml.pre` (pretokenize.py); each word is spelled
in GPT-2's byte characters and merged by `tokenizer.ggml.merges` ranks (bpe.py). llama.cpp never puts a space in
front of the text for these vocabularies.
"""
from __future__ import annotations

from collections.abc import Mapping

from .bpe import UNICODE_TO_BYTE, byte_level, merge_by_rank, merge_ranks
from .model import TokenizerModel, cached, merges
from .pretokenize import get_pre_tokenizer
from .vocabulary import Vocabulary

# The pre-tokenizers for which llama.cpp adds BOS by default, and takes a whole word that is itself a token as is
# instead of merging it (HF `ignore_merges`).
_LLAMA3_FAMILY = frozenset({"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0",
                            "lfm2", "tekken"})


class ByteLevelBPE(TokenizerModel):
    """Pre-tokenized words merged by rank over their byte-level spelling."""

    def __init__(self, vocabulary: Vocabulary, metadata: Mapping[str, object], pre: str) -> None:
        self._ids = vocabulary.ids
        self._ranks = merge_ranks(merges(metadata))
        self._pre = get_pre_tokenizer(pre)
        self._whole_words = pre in _LLAMA3_FAMILY
        self._word_ids = cached(self._merge)

    @classmethod
    def adds_bos(cls, pre: str, add_bos_token: bool | None) -> bool:
        return pre in _LLAMA3_FAMILY if add_bos_token is None else add_bos_token

    def encode(self, text: str, out: list[int]) -> None:
        word_ids = self._word_ids
        for word in self._pre.split(text):
            out.extend(word_ids(word))

    def _merge(self, word: str) -> tuple[int, ...]:
        spelled = byte_level(word)
        ids = self._ids
        if self._whole_words:
            whole = ids.get(spelled)
            if whole is not None:
                return (whole,)
        out: list[int] = []
        for symbol in merge_by_rank(list(spelled), self._ranks):
            tid = ids.get(symbol)
            if tid is not None:
                out.append(tid)
            else:
                # A merge whose result is not a token, or a byte the vocabulary lacks: llama.cpp keeps only the
                # ASCII characters that are tokens by themselves and drops the rest.
                out.extend(ids[ch] for ch in symbol if ch < "\x80" and ch in ids)
        return tuple(out)

    def normal_bytes(self, text: str) -> bytes:
        # A character outside GPT-2's byte alphabet cannot come from our encoder; keep it as its own UTF-8.
        return b"".join(bytes([UNICODE_TO_BYTE[ch]]) if ch in UNICODE_TO_BYTE else ch.encode("utf-8")
                        for ch in text)

    def __repr__(self) -> str:
        return f"byte-level BPE, pre={self._pre.name!r}"
