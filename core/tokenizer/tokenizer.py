"""Text <-> token ids from the vocabulary stored in a GGUF file, producing the same ids as llama.cpp.

Five vocabulary kinds are supported, named by `tokenizer.ggml.model` (and `.pre`):

- "gpt2": byte-level BPE. Text is cut into words by the pre-tokenizer named in `tokenizer.ggml.pre` (see
  pretokenize.py), each word is spelled in GPT-2's byte characters and merged by `tokenizer.ggml.merges` ranks.
- "llama": SentencePiece-style BPE (Llama 2, Gemma 3, Phi-3...). Spaces become U+2581 "▁", a space is put in
  front of the text (and after each special token) when `add_space_prefix` says so, pairs merge by the score of
  the token they form, and characters without a token fall back to `<0xNN>` byte tokens.
- "gemma4" (or "gpt2" with pre "gemma4"/"sarvam-moe"): BPE by merge ranks over ▁-escaped raw UTF-8, one line at
  a time, with `<0xNN>` byte fallback (Gemma 4). A run of newlines that is a token is taken whole (Gemma 4 only),
  and llama.cpp always adds BOS for Gemma 4 whatever the file says.
- "bert": WordPiece (BERT-style embedding models), see wordpiece.py. As in llama.cpp, BOS frames the text as
  [CLS] ... [SEP]: `encode(add_bos=True)` appends the separator token too.
- "t5": SentencePiece unigram (T5, XLM-R based embedding models), see unigram.py.

The two ▁-escaped kinds merge over whole lines; `bpe.SpaceCutter` cuts lines into independent pieces where the
vocabulary allows it, so that long texts stay fast and pieces are cached like words.

Special tokens. Tokens of type CONTROL (3) and UNKNOWN (2) are recognised in the text only when
`parse_special=True`; USER_DEFINED (4) tokens are always recognised (Gemma's whitespace runs and HTML tags are
USER_DEFINED: "<b>" in plain text is one token). That is llama.cpp's rule, and HF's, where added tokens that are
not "special" are always split out first. Recognition follows llama.cpp (see special_tokens.py).

End of generation. `eog_ids` holds EOS, EOT and EOM, FIM pad/repo/separator tokens, and every token whose text is
one of llama.cpp's end-of-generation spellings (`<|im_end|>`, `<|eot_id|>`, `<end_of_turn>`, `</s>`...). As in
llama.cpp, a token found by such a spelling is treated as CONTROL even if the file typed it otherwise, so with
`parse_special=False` the text "</s>" is not Gemma 3's USER_DEFINED token 212 but plain text. When the file names
no EOT token, the first spelling in `_EOT_TEXTS` order that exists is used (llama.cpp takes whichever its hash
map yields first). llama.cpp's family exceptions are reproduced: gpt-oss's `<|channel|>`, `<|message|>`,
`<|start|>`, `<|constrain|>` are plain USER_DEFINED text; `<|end|>` does not end generation next to
`<|return|>`+`<|call|>` (gpt-oss) or `<|calls|>`+`<|flush|>` (Solar Open); `</s>` is a normal token where
`<|tool_response>` (Gemma 4) or `<|plamo:eos|>` exists; Phi-3's special tokens swallow the whitespace after them.

Decoding writes each token's bytes (CONTROL/UNKNOWN tokens as their text unless `skip_special`) and turns the
bytes into text once, so a character split across tokens comes out whole; `stream_decoder()` does the same
incrementally and never emits part of a character. Unlike llama.cpp's `llama_detokenize` we never "clean up"
spaces before punctuation, so `decode(encode(s)) == s`.
"""
from __future__ import annotations

import codecs
import functools
import re
from collections.abc import Iterable, Mapping
from enum import IntEnum

from .bpe import UNICODE_TO_BYTE, SpaceCutter, byte_level, merge_by_rank, merge_by_score
from ..errors import TokenizerError
from .pretokenize import get_pre_tokenizer
from .special_tokens import SpecialSplitter
from .unigram import Unigram
from .wordpiece import WordPiece, split_words


class TokenType(IntEnum):
    """Values of `tokenizer.ggml.token_type`."""

    UNDEFINED = 0
    NORMAL = 1
    UNKNOWN = 2
    CONTROL = 3
    USER_DEFINED = 4
    UNUSED = 5
    BYTE = 6


# What a token does: a bit set derived from its type plus the by-text rules above (a token can gain CONTROL).
# Plain ints rather than an IntFlag: they are tested for every token when loading a 262k-token vocabulary.
_UNKNOWN, _NORMAL, _CONTROL, _USER_DEFINED, _BYTE, _UNUSED = 1, 2, 4, 8, 16, 32
_LSTRIP, _RSTRIP = 64, 128  # a match of this special token eats the whitespace before / after it
_TYPE_ATTR = {TokenType.NORMAL: _NORMAL, TokenType.UNKNOWN: _UNKNOWN, TokenType.CONTROL: _CONTROL,
              TokenType.USER_DEFINED: _USER_DEFINED, TokenType.UNUSED: _UNUSED, TokenType.BYTE: _BYTE}
# Tokens matched in the text before pre-tokenization; with parse_special=False only USER_DEFINED ones.
_SPECIAL = _CONTROL | _USER_DEFINED | _UNKNOWN
_HIDDEN_UNLESS_SPECIAL = _CONTROL | _UNKNOWN

# Spellings llama.cpp recognises when the file does not name the token (first match in this order wins).
_EOT_TEXTS = ("<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>",
              "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>")
_EOM_TEXTS = ("<|eom_id|>",)
_FIM_TEXTS = {
    "fim_pre": ("<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>",
                "<|code_prefix|>", "<|prefix|>"),
    "fim_suf": ("<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>",
                "<|code_suffix|>", "<|suffix|>"),
    "fim_mid": ("<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>",
                "<|code_middle|>", "<|middle|>"),
    "fim_pad": ("<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"),
    "fim_rep": ("<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"),
    "fim_sep": ("<|file_sep|>",),
}
# Every token spelled like this ends generation (and is CONTROL).
_EOG_TEXTS = frozenset({"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
                        "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]",
                        "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
                        "<｜end▁of▁sentence｜>", "[e~["})
# gpt-oss's structural tokens, which llama.cpp always renders and matches as plain USER_DEFINED text.
_ALWAYS_TEXT = ("<|channel|>", "<|message|>", "<|start|>", "<|constrain|>")

# Pre-tokenizer names for which llama.cpp adds BOS by default, and those for which a whole word that is itself a
# token is taken as is instead of being merged (HF `ignore_merges`).
_BOS_BY_DEFAULT = frozenset({"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0",
                             "lfm2", "tekken"})
_IGNORE_MERGES = _BOS_BY_DEFAULT
_NO_BOS = frozenset({"chatglm-bpe", "glm4"})
# Byte-pair vocabularies over ▁-escaped UTF-8 (no byte-level spelling), by `tokenizer.ggml.pre`.
_ESCAPED_BPE = frozenset({"gemma4", "granite-embed-multi-311m", "sarvam-moe"})
_GEMMA4 = frozenset({"gemma4", "granite-embed-multi-311m"})

_SPACE_MARK = "\u2581"  # SentencePiece's visible space
_SURROGATE = re.compile("[\ud800-\udfff]")
_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")
_GLUED = re.compile("[^" + _SPACE_MARK + "]" + _SPACE_MARK)
_LINES = re.compile("[^\n]+|\n+")
_WORD_CACHE_SIZE = 1 << 16
# Longer pieces (CJK text has no spaces to cut at) are merged without going through the cache.
_CACHED_PIECE_CHARS = 64


def adds_bos(metadata: Mapping[str, object]) -> bool:
    """Whether llama.cpp puts BOS in front of prompts for this vocabulary (without building the tokenizer)."""
    model, pre, flag = (metadata.get("tokenizer.ggml." + key) for key in ("model", "pre", "add_bos_token"))
    return _adds_bos(str(model), "gemma4" if model == "gemma4" else str(pre or ""),
                     flag if isinstance(flag, bool) else None)


def _adds_bos(model: str, pre: str, flag: bool | None) -> bool:
    if model != "llama" and pre in _GEMMA4:
        return True  # llama.cpp overrides Gemma 4 files that say otherwise
    if flag is not None:
        return flag
    return model in ("llama", "bert") or pre in _BOS_BY_DEFAULT


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

    `model` and `pre` echo `tokenizer.ggml.model`/`.pre`; the `*_id` attributes are None where the vocabulary has
    no such token; `fim_ids` maps fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep to ids (or None).
    """

    vocab_size: int
    bos_id: int | None
    eos_id: int | None
    eot_id: int | None
    eom_id: int | None
    unk_id: int | None
    pad_id: int | None
    sep_id: int | None
    eog_ids: frozenset[int]
    add_bos: bool
    add_eos: bool
    add_space_prefix: bool

    def __init__(self, *, model: str, tokens: list[str], token_types: list[int], scores: list[float],
                 merges: list[str], pre: str, special_ids: Mapping[str, int | None], add_bos: bool | None,
                 add_eos: bool | None, add_space_prefix: bool | None, model_name: str = "",
                 lowercase: bool | None = None, strip_accents: bool | None = None,
                 charsmap: bytes | None = None, remove_extra_whitespaces: bool = False) -> None:
        """Prefer `from_metadata`; this takes the already-extracted fields. `special_ids` maps bos, eos, eot, eom,
        unk, pad, sep, fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep to ids (None or absent: not given).
        `lowercase` (default on) and `strip_accents` (default: as `lowercase`) are WordPiece's normaliser options;
        `charsmap` (SentencePiece's precompiled_charsmap) and `remove_extra_whitespaces` the unigram model's."""
        if model not in ("gpt2", "llama", "gemma4", "bert", "t5"):
            raise TokenizerError(f"unsupported tokenizer.ggml.model={model!r}; supported: gpt2 (byte-level BPE), "
                                 f"llama (SentencePiece BPE), gemma4 (BPE over SentencePiece-style text), "
                                 f"bert (WordPiece), t5 (SentencePiece unigram)")
        n = len(tokens)
        if n == 0:
            raise TokenizerError("tokenizer.ggml.tokens is empty")
        for key, values in (("token_type", token_types), ("scores", scores)):
            if len(values) != n:
                raise TokenizerError(f"tokenizer.ggml.{key} has {len(values)} entries for {n} tokens")
        if model == "gemma4":
            pre = "gemma4"  # what llama.cpp assumes for this tokenizer model, whatever the file says
        self._spm = model == "llama"
        self._wpm = model == "bert"
        self._ugm = model == "t5"
        self._escaped_bpe = model in ("gpt2", "gemma4") and pre in _ESCAPED_BPE
        self.model = model
        self.pre = pre
        self.vocab_size = n
        # llama.cpp refuses empty token texts by renaming them; that keeps them from matching everywhere.
        self._tokens = tokens if "" not in tokens else [t or f"[EMPTY_{i}]" for i, t in enumerate(tokens)]
        self._ids = dict(zip(self._tokens, range(n)))  # a repeated text maps to its last id, as there
        self._scores = [float(s) for s in scores]
        self._attrs = [_TYPE_ATTR.get(t, 0) for t in token_types]
        self._pieces: list[bytes | None] = [None] * n

        self._ranks: dict[str, int] = {}
        self._pre = None
        self._cutter: SpaceCutter | None = None
        if self._spm:
            defaults = {"bos": 1, "eos": 2, "unk": 0}
            self.add_space_prefix = True if add_space_prefix is None else bool(add_space_prefix)
            self._byte_ids = self._find_byte_tokens(ascii_fallback=True)
            self._cutter = SpaceCutter([t for t in self._tokens if _GLUED.search(t)])
        elif self._ugm:
            defaults = {"eos": 1, "unk": 2, "pad": 0}  # T5's ids, llama.cpp's defaults
            self.add_space_prefix = bool(add_space_prefix)
        elif self._wpm:
            defaults = {"bos": 101, "unk": 100, "pad": 0, "sep": 102}  # BERT's ids, llama.cpp's defaults
            self.add_space_prefix = False
            lowercase = True if lowercase is None else lowercase
            self._normalizer = {"lowercase": lowercase,
                                "strip_accents": lowercase if strip_accents is None else strip_accents}
        else:
            defaults = {}
            self.add_space_prefix = False  # BPE never prepends a space in llama.cpp's encoder
            self._ranks = self._parse_merges(merges)
            if self._escaped_bpe:
                self._byte_ids = self._find_byte_tokens(ascii_fallback=False)
                self._cutter = SpaceCutter([m.replace(" ", "", 1) for m in merges if _GLUED.search(m)])
            else:
                self._pre = get_pre_tokenizer(pre)
            if pre in _NO_BOS:
                defaults["bos"] = None
        self.add_bos = _adds_bos(model, pre, add_bos)
        self.add_eos = self._ugm if add_eos is None else bool(add_eos)
        self._ignore_merges = (not self._spm) and pre in _IGNORE_MERGES

        ids = {role: self._checked_id(special_ids.get(role), defaults.get(role))
               for role in ("bos", "eos", "eot", "eom", "unk", "pad", "sep", *_FIM_TEXTS)}
        if ids["eot"] is None:
            ids["eot"] = self._find_by_text(_EOT_TEXTS)
        if ids["eom"] is None:
            ids["eom"] = self._find_by_text(_EOM_TEXTS)
        for role, texts in _FIM_TEXTS.items():
            if ids[role] is None:
                ids[role] = self._find_by_text(texts)
        self.bos_id, self.eos_id, self.eot_id, self.eom_id = ids["bos"], ids["eos"], ids["eot"], ids["eom"]
        self.unk_id, self.pad_id, self.sep_id = ids["unk"], ids["pad"], ids["sep"]
        self.fim_ids = {role: ids[role] for role in _FIM_TEXTS}
        self.eog_ids = self._end_of_generation_ids(ids)
        if "phi-3" in model_name.lower() or "phi3" in model_name.lower():
            self._phi3_strip_rules()
        self._splitter = self._special_splitter()
        self._hidden = frozenset(i for i in range(n) if self._attrs[i] & _HIDDEN_UNLESS_SPECIAL)
        if self._wpm:
            self._wordpiece = WordPiece(self._tokens, self.unk_id)
        if self._ugm:
            attrs = self._attrs
            self._unigram = Unigram(self._tokens, self._scores, normal=[bool(a & _NORMAL) for a in attrs],
                                    user_defined=[bool(a & _USER_DEFINED) for a in attrs],
                                    unused=[bool(a & _UNUSED) for a in attrs], unk_id=self.unk_id,
                                    charsmap=charsmap, add_space_prefix=self.add_space_prefix,
                                    remove_extra_whitespaces=remove_extra_whitespaces)
        self._word_ids = functools.lru_cache(maxsize=_WORD_CACHE_SIZE)(
            self._spm_chunk_ids if self._spm else self._wordpiece.word_ids if self._wpm
            else self._escaped_word_ids if self._escaped_bpe else self._bpe_word_ids)

    # ----------------------------------------------------------------------------------------------- building

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, object]) -> Tokenizer:
        """Build from a GGUF metadata dict (`tokenizer.ggml.*` keys; arrays as lists, strings as str)."""
        def get(key: str, default: object = None) -> object:
            return metadata.get("tokenizer.ggml." + key, default)

        model = get("model")
        tokens = get("tokens")
        if not isinstance(model, str):
            raise TokenizerError("the GGUF has no tokenizer.ggml.model: it carries no vocabulary")
        if not isinstance(tokens, list):
            raise TokenizerError("the GGUF has no tokenizer.ggml.tokens array")
        n = len(tokens)
        merges = get("merges")
        if model in ("gpt2", "gemma4") and not isinstance(merges, list):
            raise TokenizerError(f"tokenizer.ggml.model is {model} but tokenizer.ggml.merges is missing")
        pre = get("pre")
        if model == "gpt2" and not pre:
            pre = "default"  # what llama.cpp falls back to (with a loud warning about degraded quality)
        special_keys = {"bos": "bos_token_id", "eos": "eos_token_id", "eot": "eot_token_id",
                        "eom": "eom_token_id", "unk": "unknown_token_id", "pad": "padding_token_id",
                        "sep": "seperator_token_id",  # llama.cpp's spelling
                        "fim_pre": "fim_pre_token_id", "fim_suf": "fim_suf_token_id",
                        "fim_mid": "fim_mid_token_id", "fim_pad": "fim_pad_token_id",
                        "fim_rep": "fim_rep_token_id", "fim_sep": "fim_sep_token_id"}
        legacy_fim = {"fim_pre": "prefix_token_id", "fim_suf": "suffix_token_id", "fim_mid": "middle_token_id"}
        special_ids: dict[str, int | None] = {}
        for role, key in special_keys.items():
            value = get(key, get(legacy_fim[role]) if role in legacy_fim else None)
            special_ids[role] = value if isinstance(value, int) and not isinstance(value, bool) else None

        def flag(key: str) -> bool | None:
            value = get(key)
            return value if isinstance(value, bool) else None

        name = metadata.get("general.name")
        charsmap = get("precompiled_charsmap")
        return cls(model=model, tokens=[str(t) for t in tokens],
                   token_types=list(get("token_type") or [TokenType.NORMAL] * n),
                   scores=list(get("scores") or [0.0] * n),
                   merges=list(merges) if isinstance(merges, list) else [], pre=str(pre or ""),
                   special_ids=special_ids, add_bos=flag("add_bos_token"), add_eos=flag("add_eos_token"),
                   add_space_prefix=flag("add_space_prefix"), model_name=name if isinstance(name, str) else "",
                   lowercase=flag("normalizer.lowercase"), strip_accents=flag("normalizer.strip_accents"),
                   charsmap=bytes(v & 0xFF for v in charsmap) if isinstance(charsmap, list) else None,
                   remove_extra_whitespaces=bool(flag("remove_extra_whitespaces")))

    def _checked_id(self, value: int | None, default: int | None) -> int | None:
        # llama.cpp ignores an out-of-range id and keeps its default; so do we.
        if value is not None and 0 <= value < self.vocab_size:
            return value
        return default if default is not None and default < self.vocab_size else None

    def _find_by_text(self, texts: Iterable[str]) -> int | None:
        for text in texts:
            tid = self._ids.get(text)
            if tid is not None:
                self._attrs[tid] |= _CONTROL
                return tid
        return None

    def _end_of_generation_ids(self, ids: Mapping[str, int | None]) -> frozenset[int]:
        """llama.cpp's end-of-generation set, with the attribute changes it makes on the way (in its order)."""
        eog = {ids[role] for role in ("fim_pad", "fim_rep", "fim_sep")}
        for text in _EOG_TEXTS:
            tid = self._ids.get(text)
            if tid is not None:
                self._attrs[tid] |= _CONTROL
                eog.add(tid)
        for text in _ALWAYS_TEXT:
            tid = self._ids.get(text)
            if tid is not None:
                self._attrs[tid] = _USER_DEFINED
        eog |= {ids["eos"], ids["eot"], ids["eom"]}
        eog.discard(None)
        texts = {self._tokens[tid]: tid for tid in eog}  # type: ignore[index]  # None was discarded
        end = texts.get("<|end|>")
        has = texts.keys()
        if end is not None and ({"<|return|>", "<|call|>"} <= has or {"<|calls|>", "<|flush|>"} <= has):
            eog.discard(end)
            self._attrs[end] = _USER_DEFINED
        closing = texts.get("</s>")
        if closing is not None and ("<|tool_response>" in texts or "<|plamo:eos|>" in texts):
            eog.discard(closing)
            self._attrs[closing] = _NORMAL
        return frozenset(eog)  # type: ignore[arg-type]  # None was discarded

    def _phi3_strip_rules(self) -> None:
        # Phi-3's special tokens swallow the whitespace after them (except <unk>, <s>, <|endoftext|>).
        for tid in range(self.vocab_size):
            if self._attrs[tid] & _SPECIAL:
                self._attrs[tid] |= _RSTRIP
        for text, on in (("</s>", True), ("<unk>", False), ("<s>", False), ("<|endoftext|>", False)):
            tid = self._ids.get(text)
            if tid is not None:
                self._attrs[tid] = (self._attrs[tid] | _RSTRIP) if on else (self._attrs[tid] & ~_RSTRIP)

    def _special_splitter(self) -> SpecialSplitter:
        special = [i for i in range(self.vocab_size) if self._attrs[i] & _SPECIAL]
        texts = [self._tokens[i] for i in special]
        # Longest first; ties by id so the order is deterministic.
        order = [(-len(t), i) for t, i in zip(texts, special)]
        return SpecialSplitter(texts, special, order,
                               lstrip=frozenset(i for i in special if self._attrs[i] & _LSTRIP),
                               rstrip=frozenset(i for i in special if self._attrs[i] & _RSTRIP))

    @staticmethod
    def _parse_merges(merges: list[str]) -> dict[str, int]:
        """Merge line -> rank, the first occurrence winning.

        Keyed by the line itself and looked up as `left + " " + right`: symbols never contain a space (byte-level
        spelling, or ▁-escaped text), so that finds exactly the pairs llama.cpp finds by splitting each line at its
        first space after the first character, without splitting 50k-500k lines at load time."""
        return dict(zip(reversed(merges), range(len(merges) - 1, -1, -1)))

    def _find_byte_tokens(self, ascii_fallback: bool) -> list[int | None]:
        """For each byte, the token that spells it: `<0xNN>`, else (SentencePiece) the one-character token for an
        ASCII byte."""
        out: list[int | None] = []
        for b in range(256):
            tid = self._ids.get(f"<0x{b:02X}>")
            if tid is None and ascii_fallback and b < 0x80:
                tid = self._ids.get(chr(b))
            out.append(tid)
        return out

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
        prev_special = True
        fragments = self._splitter.split(text, frozenset() if parse_special else self._hidden)
        for fragment in fragments:
            if isinstance(fragment, int):
                ids.append(fragment)
                prev_special = True
            elif self._spm:
                if self.add_space_prefix and prev_special:
                    fragment = " " + fragment
                self._encode_escaped(fragment.replace(" ", _SPACE_MARK), ids)
                prev_special = False
            elif self._escaped_bpe:
                for line in _LINES.findall(fragment.replace(" ", _SPACE_MARK)):
                    self._encode_escaped(line, ids)
            elif self._wpm:
                for word in split_words(fragment, **self._normalizer):
                    ids.extend(self._word_ids(word))
            elif self._ugm:
                ids.extend(self._unigram.encode(fragment))
            else:
                word_ids = self._word_ids
                for word in self._pre.split(fragment):  # type: ignore[union-attr]  # set for gpt2
                    ids.extend(word_ids(word))
        if add_bos and self._wpm:
            ids.append(self._require(self.sep_id, "separator"))
        if add_eos:
            ids.append(self._require(self.eos_id, "EOS"))
        return ids

    def _require(self, tid: int | None, what: str) -> int:
        if tid is None:
            raise TokenizerError(f"this vocabulary has no {what} token")
        return tid

    def _encode_escaped(self, text: str, ids: list[int]) -> None:
        """Encode ▁-escaped text (one line for the BPE kind) piece by piece."""
        word_ids = self._word_ids
        for piece in self._cutter.split(text):  # type: ignore[union-attr]  # set for both escaped kinds
            ids.extend(word_ids(piece) if len(piece) <= _CACHED_PIECE_CHARS else word_ids.__wrapped__(piece))

    def _bpe_word_ids(self, word: str) -> tuple[int, ...]:
        spelled = byte_level(word)
        ids = self._ids
        if self._ignore_merges:
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

    def _escaped_word_ids(self, word: str) -> tuple[int, ...]:
        ids = self._ids
        if word[0] == "\n" and self.pre in _GEMMA4:
            whole = ids.get(word)  # a newline run that is a token is taken whole (llama.cpp's Gemma 4 rule)
            if whole is not None:
                return (whole,)
        out: list[int] = []
        for symbol in merge_by_rank(list(word), self._ranks):
            tid = ids.get(symbol)
            if tid is not None:
                out.append(tid)
            else:
                # Bytes without a <0xNN> token are dropped, as llama.cpp does.
                out.extend(b for b in map(self._byte_ids.__getitem__, symbol.encode("utf-8")) if b is not None)
        return tuple(out)

    def _spm_chunk_ids(self, text: str) -> tuple[int, ...]:
        out: list[int] = []
        for symbol in merge_by_score(list(text), self._ids, self._scores):
            tid = self._ids.get(symbol)
            if tid is not None:
                out.append(tid)
                continue
            for b in symbol.encode("utf-8"):
                byte_id = self._byte_ids[b]
                if byte_id is None:
                    byte_id = self.unk_id
                if byte_id is None:
                    raise TokenizerError(f"cannot encode {symbol!r}: the vocabulary has neither a <0x{b:02X}> "
                                         f"byte token nor an unknown token")
                out.append(byte_id)
        return tuple(out)

    # ----------------------------------------------------------------------------------------------- decoding

    def token_text(self, token_id: int) -> str:
        """The token as stored in the vocabulary (byte-level or ▁-spelled; not the decoded text)."""
        self._check_id(token_id)
        return self._tokens[token_id]

    def max_token_bytes(self) -> int:
        """The longest text any one token decodes to, in bytes: a text of N bytes is at least N / this tokens."""
        return max((len(self.token_bytes(i)) for i in range(self.vocab_size)), default=1)

    def token_id(self, text: str) -> int | None:
        """The id of the token stored as `text`, if any (the inverse of `token_text`)."""
        return self._ids.get(text)

    def is_control(self, token_id: int) -> bool:
        """Whether the token is CONTROL or UNKNOWN: hidden by `skip_special`, matched only with `parse_special`."""
        self._check_id(token_id)
        return bool(self._attrs[token_id] & _HIDDEN_UNLESS_SPECIAL)

    def token_bytes(self, token_id: int, skip_special: bool = False) -> bytes:
        """The bytes this token contributes to decoded text (may be part of a UTF-8 character)."""
        self._check_id(token_id)
        if skip_special and self._attrs[token_id] & _HIDDEN_UNLESS_SPECIAL:
            return b""
        piece = self._pieces[token_id]
        if piece is None:
            piece = self._pieces[token_id] = self._piece(token_id)
        return piece

    def _piece(self, tid: int) -> bytes:
        attr, text = self._attrs[tid], self._tokens[tid]
        if attr & (_HIDDEN_UNLESS_SPECIAL | _USER_DEFINED):
            return text.encode("utf-8")
        if self._spm or self._escaped_bpe or self._wpm or self._ugm:
            if attr & _NORMAL:
                return text.replace(_SPACE_MARK, " ").encode("utf-8")
            if attr & _BYTE:
                m = _BYTE_TOKEN.fullmatch(text)
                return bytes([int(m.group(1), 16)]) if m else b""
            return b""
        if attr & _NORMAL:
            # A character outside GPT-2's byte alphabet cannot come from our encoder; keep it as its own UTF-8.
            return b"".join(bytes([UNICODE_TO_BYTE[ch]]) if ch in UNICODE_TO_BYTE else ch.encode("utf-8")
                            for ch in text)
        if attr & _BYTE:
            m = _BYTE_TOKEN.fullmatch(text)
            return bytes([int(m.group(1), 16)]) if m else b""
        return b""

    def decode(self, ids: Iterable[int], skip_special: bool = False) -> str:
        """Text for `ids`; invalid or truncated UTF-8 becomes U+FFFD. CONTROL tokens are written as their text
        unless `skip_special`. For SentencePiece vocabularies with `add_space_prefix` the space that `encode` put
        in front of the text (at the start, or after a leading BOS) is removed again."""
        ids = list(ids)
        parts = [self.token_bytes(tid, skip_special) for tid in ids]
        if (self._spm or self._ugm) and self.add_space_prefix and parts:
            first = 1 if ids[0] == self.bos_id and len(ids) > 1 else 0
            if parts[first].startswith(b" ") and self._attrs[ids[first]] & _NORMAL:
                parts[first] = parts[first][1:]
        return b"".join(parts).decode("utf-8", errors="replace")

    def stream_decoder(self, skip_special: bool = False) -> StreamDecoder:
        """An incremental decoder for generated tokens (no prefix space is removed: they continue a prompt)."""
        return StreamDecoder(self, skip_special)

    def _check_id(self, token_id: int) -> None:
        if not 0 <= token_id < self.vocab_size:
            raise TokenizerError(f"token id {token_id} is outside the vocabulary (size {self.vocab_size})")

    def __repr__(self) -> str:
        kind = ("SentencePiece BPE" if self._spm else "WordPiece" if self._wpm else "SentencePiece unigram" if self._ugm
                else f"BPE over ▁-escaped text, pre={self.pre!r}" if self._escaped_bpe else f"byte-level BPE, pre={self.pre!r}")
        return f"Tokenizer({kind}, {self.vocab_size} tokens, bos={self.bos_id}, eos={self.eos_id})"
