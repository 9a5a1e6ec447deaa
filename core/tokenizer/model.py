"""What a tokenizer model (`tokenizer.ggml.model`) gives the Tokenizer: the defaults llama.cpp assumes where the
file is silent, and the ids of plain text (the special tokens written in it are already cut out).

One kind per module: byte_level.py (gpt2), sentencepiece.py (llama, and BPE over ▁-escaped text), wordpiece.py
(bert), unigram.py (t5). Each reads its own options from the metadata.
"""
from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import ClassVar

from ..errors import TokenizerError
from .vocabulary import Vocabulary

SPACE_MARK = "\u2581"  # SentencePiece's visible space: how every kind but byte-level BPE spells spaces
_WORD_CACHE_SIZE = 1 << 16

WordIds = Callable[[str], tuple[int, ...]]


def field(metadata: Mapping[str, object], key: str) -> object:
    """`tokenizer.ggml.<key>`, or None."""
    return metadata.get("tokenizer.ggml." + key)


def flag(metadata: Mapping[str, object], key: str) -> bool | None:
    """`tokenizer.ggml.<key>` if it is a boolean; anything else counts as not given."""
    value = field(metadata, key)
    return value if isinstance(value, bool) else None


def merges(metadata: Mapping[str, object]) -> list[str]:
    """`tokenizer.ggml.merges`, which the merge-ranked kinds cannot do without."""
    found = field(metadata, "merges")
    if not isinstance(found, list):
        raise TokenizerError(f"tokenizer.ggml.model is {field(metadata, 'model')} but tokenizer.ggml.merges is "
                             f"missing")
    return found


def cached(word_ids: WordIds) -> WordIds:
    """`word_ids` memoised: words repeat across a text and across prompts, and merging them is the costly part."""
    return functools.lru_cache(maxsize=_WORD_CACHE_SIZE)(word_ids)


class TokenizerModel(ABC):
    """One kind of tokenizer model over one Vocabulary. The class attributes are llama.cpp's defaults for the
    kind; `add_space_prefix` is what this file's vocabulary does."""

    # The ids llama.cpp assumes for roles (bos, eos, unk, pad, sep) the file does not name.
    special_defaults: ClassVar[Mapping[str, int]] = {}
    bos_by_default: ClassVar[bool] = False
    eos_by_default: ClassVar[bool] = False
    # BOS opens a frame that the separator token closes (BERT's [CLS] ... [SEP]).
    separator_after_bos: ClassVar[bool] = False
    # encode puts a space in front of the text, which decode takes off again.
    add_space_prefix: bool = False

    @abstractmethod
    def __init__(self, vocabulary: Vocabulary, metadata: Mapping[str, object], pre: str) -> None:
        """Index `vocabulary` for encoding, with this kind's options from `metadata` and the pre-tokenizer name
        `pre` (`tokenizer.ggml.pre` as llama.cpp resolves it)."""

    @classmethod
    def adds_bos(cls, pre: str, add_bos_token: bool | None) -> bool:
        """Whether llama.cpp puts BOS in front of prompts, given the file's `add_bos_token` (None: absent)."""
        return cls.bos_by_default if add_bos_token is None else add_bos_token

    @abstractmethod
    def encode(self, text: str, out: list[int]) -> None:
        """Append the ids of `text`: plain text between special tokens (each fragment starts the prompt or
        follows a special token, which is where SentencePiece puts its space prefix)."""

    def normal_bytes(self, text: str) -> bytes:
        """The bytes a NORMAL token stored as `text` decodes to."""
        return text.replace(SPACE_MARK, " ").encode("utf-8")
