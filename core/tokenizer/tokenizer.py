"""Text <-> token ids from the vocabulary stored in a GGUF file, producing the same ids as llama.cpp.

A Tokenizer is one Vocabulary (vocabulary.py: the tokens, their types and roles, the special tokens cut out of the
text first) and one tokenizer model, chosen by `tokenizer.ggml.model` (and `.pre`), that encodes the plain text
between special tokens:

- "gpt2": byte-level BPE over the words of a regex pre-tokenizer (byte_level.py, pretokenize.py);
- "llama": SentencePiece BPE, merged by token score (sentencepiece.py);
- "gemma4", or "gpt2" with a ▁-escaped pre-tokenizer name: BPE by merge ranks over ▁-escaped text
  (sentencepiece.py);
- "bert": WordPiece (wordpiece.py);
- "t5": SentencePiece unigram (unigram.py).

Decoding writes each token's bytes (CONTROL/UNKNOWN tokens as their text unless `skip_special`) and turns the
bytes into text once, so a character split across tokens comes out whole; `stream_decoder()` does the same
incrementally and never emits part of a character. Unlike llama.cpp's `llama_detokenize` we never "clean up"
spaces before punctuation, so `decode(encode(s)) == s`.
"""
from __future__ import annotations

import codecs
import re
from collections.abc import Iterable, Mapping

from ..errors import TokenizerError
from .byte_level import ByteLevelBPE
from .model import TokenizerModel, field, flag
from .sentencepiece import EscapedBPE, SentencePieceBPE
from .unigram import Unigram
from .vocabulary import Attr, Vocabulary
from .wordpiece import WordPiece

_KINDS: dict[str, type[TokenizerModel]] = {"gpt2": ByteLevelBPE, "llama": SentencePieceBPE, "gemma4": EscapedBPE,
                                           "bert": WordPiece, "t5": Unigram}
_SURROGATE = re.compile("[\ud800-\udfff]")
_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def _kind(metadata: Mapping[str, object]) -> tuple[type[TokenizerModel], str] | None:
    """The tokenizer model for this vocabulary and its pre-tokenizer name as llama.cpp resolves it; None when
    `tokenizer.ggml.model` is not one we implement."""
    model, pre = field(metadata, "model"), str(field(metadata, "pre") or "")
    kind = _KINDS.get(model) if isinstance(model, str) else None
    if model == "gemma4":
        pre = "gemma4"  # what llama.cpp assumes for this tokenizer model, whatever the file says
    elif model == "gpt2":
        pre = pre or "default"  # what llama.cpp falls back to (with a loud warning about degraded quality)
        if pre in EscapedBPE.PRE_NAMES:
            kind = EscapedBPE
    return None if kind is None else (kind, pre)


def adds_bos(metadata: Mapping[str, object]) -> bool:
    """Whether llama.cpp puts BOS in front of prompts for this vocabulary (without building the tokenizer)."""
    found = _kind(metadata)
    add_bos_token = flag(metadata, "add_bos_token")
    return bool(add_bos_token) if found is None else found[0].adds_bos(found[1], add_bos_token)


class StreamDecoder:
    """Turns token ids into text one id at a time, holding back an incomplete UTF-8 sequence until it completes."""

    def __init__(self, tokenizer: Tokenizer, skip_special: bool = False) -> None:
        self._tokenizer = tokenizer
        self._skip_special = skip_special
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, token_id: int) -> str:
        """The text completed by this token: whole characters only (possibly empty)."""
        return self._utf8.decode(self._tokenizer.token_bytes(token_id, self._skip_special))

    def flush(self) -> str:
        """End of stream: bytes still waiting for the rest of their character come out as U+FFFD."""
        return self._utf8.decode(b"", final=True)


class Tokenizer:
    """Encoder/decoder for one GGUF vocabulary. Build it with `Tokenizer.from_metadata(gguf.metadata)`.

    `model` and `pre` echo `tokenizer.ggml.model`/`.pre` (as llama.cpp resolves them); the `*_id` attributes are
    None where the vocabulary has no such token; `fim_ids` maps fim_pre, fim_suf, fim_mid, fim_pad, fim_rep,
    fim_sep to ids (or None). `add_bos`/`add_eos` say whether llama.cpp frames prompts with BOS/EOS.
    """

    def __init__(self, vocabulary: Vocabulary, algorithm: TokenizerModel, *, model: str, pre: str, add_bos: bool,
                 add_eos: bool) -> None:
        self._vocab = vocabulary
        self._algorithm = algorithm
        self.model, self.pre = model, pre
        self.add_bos, self.add_eos = add_bos, add_eos
        self.add_space_prefix = algorithm.add_space_prefix
        self.vocab_size = vocabulary.size
        self.bos_id, self.eos_id, self.eot_id = vocabulary.bos_id, vocabulary.eos_id, vocabulary.eot_id
        self.eom_id, self.unk_id, self.pad_id, self.sep_id = (vocabulary.eom_id, vocabulary.unk_id,
                                                              vocabulary.pad_id, vocabulary.sep_id)
        self.fim_ids = vocabulary.fim_ids
        self.eog_ids = vocabulary.eog_ids
        self._pieces: list[bytes | None] = [None] * vocabulary.size

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, object]) -> Tokenizer:
        """Build from a GGUF metadata dict (`tokenizer.ggml.*` keys; arrays as lists, strings as str)."""
        model = field(metadata, "model")
        if not isinstance(model, str):
            raise TokenizerError("the GGUF has no tokenizer.ggml.model: it carries no vocabulary")
        found = _kind(metadata)
        if found is None:
            raise TokenizerError(f"unsupported tokenizer.ggml.model={model!r}; supported: gpt2 (byte-level BPE), "
                                 f"llama (SentencePiece BPE), gemma4 (BPE over SentencePiece-style text), "
                                 f"bert (WordPiece), t5 (SentencePiece unigram)")
        kind, pre = found
        vocabulary = Vocabulary.from_metadata(metadata, kind.special_defaults)
        add_eos = flag(metadata, "add_eos_token")
        return cls(vocabulary, kind(vocabulary, metadata, pre), model=model, pre=pre,
                   add_bos=kind.adds_bos(pre, flag(metadata, "add_bos_token")),
                   add_eos=kind.eos_by_default if add_eos is None else add_eos)

    # ----------------------------------------------------------------------------------------------- encoding

    def encode(self, text: str, add_bos: bool = False, parse_special: bool = False,
               add_eos: bool = False) -> list[int]:
        """Token ids for `text`. `add_bos`/`add_eos` put BOS/EOS around them (callers usually pass
        `tokenizer.add_bos`); `parse_special` lets CONTROL tokens such as `<|im_start|>` be written in the text."""
        ids: list[int] = []
        if add_bos:
            ids.append(self._require(self.bos_id, "BOS"))
        if _SURROGATE.search(text):
            # A lone surrogate cannot be UTF-8; llama.cpp reads undecodable input as U+FFFD, so do we.
            text = _SURROGATE.sub("\ufffd", text)
        encode = self._algorithm.encode
        for fragment in self._vocab.split_special(text, parse_special):
            if isinstance(fragment, int):
                ids.append(fragment)
            else:
                encode(fragment, ids)
        if add_bos and self._algorithm.separator_after_bos:
            ids.append(self._require(self.sep_id, "separator"))
        if add_eos:
            ids.append(self._require(self.eos_id, "EOS"))
        return ids

    def _require(self, tid: int | None, what: str) -> int:
        if tid is None:
            raise TokenizerError(f"this vocabulary has no {what} token")
        return tid

    # ----------------------------------------------------------------------------------------------- decoding

    def token_text(self, token_id: int) -> str:
        """The token as stored in the vocabulary (byte-level or ▁-spelled; not the decoded text)."""
        self._check_id(token_id)
        return self._vocab.tokens[token_id]

    def max_token_bytes(self) -> int:
        """The longest text any one token decodes to, in bytes: a text of N bytes is at least N / this tokens."""
        return max((len(self.token_bytes(i)) for i in range(self.vocab_size)), default=1)

    def token_id(self, text: str) -> int | None:
        """The id of the token stored as `text`, if any (the inverse of `token_text`)."""
        return self._vocab.ids.get(text)

    def is_control(self, token_id: int) -> bool:
        """Whether the token is CONTROL or UNKNOWN: hidden by `skip_special`, matched only with `parse_special`."""
        self._check_id(token_id)
        return bool(self._vocab.attrs[token_id] & Attr.HIDDEN_UNLESS_SPECIAL)

    def token_bytes(self, token_id: int, skip_special: bool = False) -> bytes:
        """The bytes this token contributes to decoded text (may be part of a UTF-8 character)."""
        self._check_id(token_id)
        if skip_special and self._vocab.attrs[token_id] & Attr.HIDDEN_UNLESS_SPECIAL:
            return b""
        piece = self._pieces[token_id]
        if piece is None:
            piece = self._pieces[token_id] = self._piece(token_id)
        return piece

    def _piece(self, tid: int) -> bytes:
        attr, text = self._vocab.attrs[tid], self._vocab.tokens[tid]
        if attr & (Attr.HIDDEN_UNLESS_SPECIAL | Attr.USER_DEFINED):
            return text.encode("utf-8")
        if attr & Attr.NORMAL:
            return self._algorithm.normal_bytes(text)
        if attr & Attr.BYTE:
            m = _BYTE_TOKEN.fullmatch(text)
            return bytes([int(m.group(1), 16)]) if m else b""
        return b""

    def decode(self, ids: Iterable[int], skip_special: bool = False) -> str:
        """Text for `ids`; invalid or truncated UTF-8 becomes U+FFFD. CONTROL tokens are written as their text
        unless `skip_special`. With `add_space_prefix` the space that `encode` put in front of the text (at the
        start, or after a leading BOS) is removed again."""
        ids = list(ids)
        parts = [self.token_bytes(tid, skip_special) for tid in ids]
        if self.add_space_prefix and parts:
            first = 1 if ids[0] == self.bos_id and len(ids) > 1 else 0
            if parts[first].startswith(b" ") and self._vocab.attrs[ids[first]] & Attr.NORMAL:
                parts[first] = parts[first][1:]
        return b"".join(parts).decode("utf-8", errors="replace")

    def stream_decoder(self, skip_special: bool = False) -> StreamDecoder:
        """An incremental decoder for generated tokens (no prefix space is removed: they continue a prompt)."""
        return StreamDecoder(self, skip_special)

    def _check_id(self, token_id: int) -> None:
        if not 0 <= token_id < self.vocab_size:
            raise TokenizerError(f"token id {token_id} is outside the vocabulary (size {self.vocab_size})")

    def __repr__(self) -> str:
        return f"Tokenizer({self._algorithm!r}, {self.vocab_size} tokens, bos={self.bos_id}, eos={self.eos_id})"
