"""One GGUF vocabulary: token texts, scores and types, and which tokens play which role, resolved as llama.cpp
resolves them. Every tokenizer model (byte_level.py, sentencepiece.py, wordpiece.py, unigram.py) runs over one.

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
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import IntEnum

from ..errors import TokenizerError
from .special_tokens import SpecialSplitter


class TokenType(IntEnum):
    """Values of `tokenizer.ggml.token_type`."""

    UNDEFINED = 0
    NORMAL = 1
    UNKNOWN = 2
    CONTROL = 3
    USER_DEFINED = 4
    UNUSED = 5
    BYTE = 6


class Attr:
    """What a token does, as bits: its type plus the by-text rules above (a token can gain CONTROL), and whether a
    match of it swallows the whitespace before / after it. Plain ints rather than an IntFlag: they are tested for
    every token when loading a 262k-token vocabulary."""

    UNKNOWN, NORMAL, CONTROL, USER_DEFINED, BYTE, UNUSED = 1, 2, 4, 8, 16, 32
    LSTRIP, RSTRIP = 64, 128
    # Matched in the text before the merges run; with parse_special=False only USER_DEFINED ones.
    SPECIAL = CONTROL | USER_DEFINED | UNKNOWN
    # Hidden by skip_special and matched only with parse_special.
    HIDDEN_UNLESS_SPECIAL = CONTROL | UNKNOWN


_TYPE_ATTR = {TokenType.NORMAL: Attr.NORMAL, TokenType.UNKNOWN: Attr.UNKNOWN, TokenType.CONTROL: Attr.CONTROL,
              TokenType.USER_DEFINED: Attr.USER_DEFINED, TokenType.UNUSED: Attr.UNUSED, TokenType.BYTE: Attr.BYTE}

# Role -> metadata key of its id (`tokenizer.ggml.<key>`); the fill-in-the-middle roles also have older keys.
_ROLE_KEYS = {"bos": "bos_token_id", "eos": "eos_token_id", "eot": "eot_token_id", "eom": "eom_token_id",
              "unk": "unknown_token_id", "pad": "padding_token_id",
              "sep": "seperator_token_id",  # llama.cpp's spelling
              "fim_pre": "fim_pre_token_id", "fim_suf": "fim_suf_token_id", "fim_mid": "fim_mid_token_id",
              "fim_pad": "fim_pad_token_id", "fim_rep": "fim_rep_token_id", "fim_sep": "fim_sep_token_id"}
_LEGACY_FIM_KEYS = {"fim_pre": "prefix_token_id", "fim_suf": "suffix_token_id", "fim_mid": "middle_token_id"}

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
_BY_TEXT = {"eot": _EOT_TEXTS, "eom": _EOM_TEXTS, **_FIM_TEXTS}
# Every token spelled like this ends generation (and is CONTROL).
_EOG_TEXTS = frozenset({"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
                        "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]",
                        "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
                        "<｜end▁of▁sentence｜>", "[e~["})
# gpt-oss's structural tokens, which llama.cpp always renders and matches as plain USER_DEFINED text.
_ALWAYS_TEXT = ("<|channel|>", "<|message|>", "<|start|>", "<|constrain|>")


class Vocabulary:
    """The tokens of one vocabulary and their roles. Build it with `Vocabulary.from_metadata`.

    `tokens`, `scores` and `attrs` (bits of `Attr`) are indexed by id; `ids` maps a token's text to its id. The
    `*_id` attributes are None where the vocabulary has no such token; `fim_ids` maps fim_pre, fim_suf, fim_mid,
    fim_pad, fim_rep, fim_sep to ids (or None).
    """

    size: int
    tokens: list[str]
    ids: dict[str, int]
    scores: list[float]
    attrs: list[int]
    bos_id: int | None
    eos_id: int | None
    eot_id: int | None
    eom_id: int | None
    unk_id: int | None
    pad_id: int | None
    sep_id: int | None
    fim_ids: dict[str, int | None]
    eog_ids: frozenset[int]

    def __init__(self, tokens: list[str], token_types: list[int], scores: list[float],
                 special_ids: Mapping[str, int | None], defaults: Mapping[str, int], model_name: str = "") -> None:
        """`special_ids` maps the roles of `_ROLE_KEYS` to the ids the file gives (None or absent: not given),
        `defaults` to the ids the tokenizer model assumes where the file gives none."""
        n = len(tokens)
        if n == 0:
            raise TokenizerError("tokenizer.ggml.tokens is empty")
        for key, values in (("token_type", token_types), ("scores", scores)):
            if len(values) != n:
                raise TokenizerError(f"tokenizer.ggml.{key} has {len(values)} entries for {n} tokens")
        self.size = n
        # llama.cpp refuses empty token texts by renaming them; that keeps them from matching everywhere.
        self.tokens = tokens if "" not in tokens else [t or f"[EMPTY_{i}]" for i, t in enumerate(tokens)]
        self.ids = dict(zip(self.tokens, range(n)))  # a repeated text maps to its last id, as there
        self.scores = [float(s) for s in scores]
        self.attrs = [_TYPE_ATTR.get(t, 0) for t in token_types]

        ids = {role: self._checked_id(special_ids.get(role), defaults.get(role)) for role in _ROLE_KEYS}
        for role, texts in _BY_TEXT.items():
            if ids[role] is None:
                ids[role] = self._find_by_text(texts)
        self.bos_id, self.eos_id, self.eot_id, self.eom_id = ids["bos"], ids["eos"], ids["eot"], ids["eom"]
        self.unk_id, self.pad_id, self.sep_id = ids["unk"], ids["pad"], ids["sep"]
        self.fim_ids = {role: ids[role] for role in _FIM_TEXTS}
        self.eog_ids = self._end_of_generation_ids(ids)
        if "phi-3" in model_name.lower() or "phi3" in model_name.lower():
            self._phi3_strip_rules()
        self._splitter = self._special_splitter()
        self._hidden = frozenset(i for i in range(n) if self.attrs[i] & Attr.HIDDEN_UNLESS_SPECIAL)

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, object], defaults: Mapping[str, int]) -> Vocabulary:
        """Read `tokenizer.ggml.*` (arrays as lists) and `general.name`; a role id that is not an int counts as
        not given."""
        def get(key: str) -> object:
            return metadata.get("tokenizer.ggml." + key)

        tokens = get("tokens")
        if not isinstance(tokens, list):
            raise TokenizerError("the GGUF has no tokenizer.ggml.tokens array")
        n = len(tokens)
        special_ids: dict[str, int | None] = {}
        for role, key in _ROLE_KEYS.items():
            value = get(key)
            if value is None and role in _LEGACY_FIM_KEYS:
                value = get(_LEGACY_FIM_KEYS[role])
            special_ids[role] = value if isinstance(value, int) and not isinstance(value, bool) else None
        name = metadata.get("general.name")
        return cls([str(t) for t in tokens], list(get("token_type") or [TokenType.NORMAL] * n),
                   list(get("scores") or [0.0] * n), special_ids, defaults,
                   model_name=name if isinstance(name, str) else "")

    def split_special(self, text: str, parse_special: bool) -> list[str | int]:
        """`text` as plain-text fragments and the ids of the special tokens written in it."""
        return self._splitter.split(text, frozenset() if parse_special else self._hidden)

    def byte_tokens(self, ascii_fallback: bool) -> list[int | None]:
        """For each byte, the token that spells it: `<0xNN>`, else (with `ascii_fallback`) the one-character
        token of an ASCII byte."""
        out: list[int | None] = []
        for b in range(256):
            tid = self.ids.get(f"<0x{b:02X}>")
            if tid is None and ascii_fallback and b < 0x80:
                tid = self.ids.get(chr(b))
            out.append(tid)
        return out

    def _checked_id(self, value: int | None, default: int | None) -> int | None:
        # llama.cpp ignores an out-of-range id and keeps its default; so do we.
        if value is not None and 0 <= value < self.size:
            return value
        return default if default is not None and default < self.size else None

    def _find_by_text(self, texts: Iterable[str]) -> int | None:
        for text in texts:
            tid = self.ids.get(text)
            if tid is not None:
                self.attrs[tid] |= Attr.CONTROL
                return tid
        return None

    def _end_of_generation_ids(self, ids: Mapping[str, int | None]) -> frozenset[int]:
        """llama.cpp's end-of-generation set, with the attribute changes it makes on the way (in its order)."""
        eog = {ids[role] for role in ("fim_pad", "fim_rep", "fim_sep")}
        for text in _EOG_TEXTS:
            tid = self.ids.get(text)
            if tid is not None:
                self.attrs[tid] |= Attr.CONTROL
                eog.add(tid)
        for text in _ALWAYS_TEXT:
            tid = self.ids.get(text)
            if tid is not None:
                self.attrs[tid] = Attr.USER_DEFINED
        eog |= {ids["eos"], ids["eot"], ids["eom"]}
        eog.discard(None)
        texts = {self.tokens[tid]: tid for tid in eog}  # type: ignore[index]  # None was discarded
        end = texts.get("<|end|>")
        has = texts.keys()
        if end is not None and ({"<|return|>", "<|call|>"} <= has or {"<|calls|>", "<|flush|>"} <= has):
            eog.discard(end)
            self.attrs[end] = Attr.USER_DEFINED
        closing = texts.get("</s>")
        if closing is not None and ("<|tool_response>" in texts or "<|plamo:eos|>" in texts):
            eog.discard(closing)
            self.attrs[closing] = Attr.NORMAL
        return frozenset(eog)  # type: ignore[arg-type]  # None was discarded

    def _phi3_strip_rules(self) -> None:
        # Phi-3's special tokens swallow the whitespace after them (except <unk>, <s>, <|endoftext|>).
        for tid in range(self.size):
            if self.attrs[tid] & Attr.SPECIAL:
                self.attrs[tid] |= Attr.RSTRIP
        for text, on in (("</s>", True), ("<unk>", False), ("<s>", False), ("<|endoftext|>", False)):
            tid = self.ids.get(text)
            if tid is not None:
                self.attrs[tid] = (self.attrs[tid] | Attr.RSTRIP) if on else (self.attrs[tid] & ~Attr.RSTRIP)

    def _special_splitter(self) -> SpecialSplitter:
        special = [i for i in range(self.size) if self.attrs[i] & Attr.SPECIAL]
        texts = [self.tokens[i] for i in special]
        # Longest first; ties by id so the order is deterministic.
        order = [(-len(t), i) for t, i in zip(texts, special)]
        return SpecialSplitter(texts, special, order,
                               lstrip=frozenset(i for i in special if self.attrs[i] & Attr.LSTRIP),
                               rstrip=frozenset(i for i in special if self.attrs[i] & Attr.RSTRIP))
