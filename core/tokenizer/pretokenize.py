"""Pre-tokenizers: the regex splits that cut text into words before byte-level BPE merges inside each word.

A GGUF names its pre-tokenizer in `tokenizer.ggml.pre`; llama.cpp maps that name to a list of regexes applied one
after another, each splitting every piece left by the previous one into its matches and the gaps between them (HF
`Split(..., behavior="isolated")` chained). We reproduce llama.cpp, not the original Python tokenizers, because
llama.cpp is what users compare against on the same GGUF.

Python's `re` has neither `\\p{L}` nor Unicode's `\\s`, and its character sets are only fast (a bitmap) when
they hold no code point beyond U+FFFF. So every regex runs on a "probe": a copy of the text of the same length in
which

- every non-ASCII White_Space character is U+000B, and patterns are compiled with re.ASCII, so `\\s` is exactly
  White_Space. That is also how llama.cpp runs its std::regex fallback, which makes literal non-ASCII whitespace
  in a character class (U+3000 in `deepseek-llm`) behave as there: never matched as itself;
- every character beyond U+FFFF is a private-use stand-in for its class (letter, number, punctuation, mark,
  symbol, other), and the stand-ins U+E000..U+E005 that occur in the text itself become "other" (their class).
  `\\p{X}` expands to the BMP ranges of the class plus its stand-in. Pre-tokenizers whose patterns name
  characters beyond U+FFFF literally (`deepseek-llm`) skip this step and use full ranges, at some cost in speed.

Match offsets in the probe cut the original text. llama.cpp's hand-written splitters for the GPT-2, Llama 3 and
Qwen2 regexes have exactly the regex semantics, so the regexes themselves serve for those too. Patterns are written
with `\\p{L}`, `\\p{N}`, `\\p{P}`, `\\p{M}`, `\\p{S}` inside brackets only (the expansion is a class body).

Known, deliberate differences from HF tokenizers (llama.cpp is the reference): contractions such as `'s` in the
Llama 3/Qwen2 family are matched ASCII-case-insensitively (HF's `(?i:...)` also folds U+017F LATIN SMALL LETTER
LONG S into `s`), and in `\\p{S}` the ASCII tilde is missing because llama.cpp's ASCII table for symbols omits it.
Characters assigned after the pinned Unicode version count as unassigned (neither letter nor number).
"""
from __future__ import annotations

import bisect
import functools
import re
from dataclasses import dataclass

from . import unicode_classes as uc
from ..errors import TokenizerError

# The contraction alternatives shared by the GPT-2 family (case-sensitive) and the Llama 3 family (ASCII
# case-insensitive, as llama.cpp adapted `(?i:...)`).
_CONTRACTIONS = r"'s|'t|'re|'ve|'m|'ll|'d"
_CONTRACTIONS_ANY_CASE = r"'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]"

_GPT2 = _CONTRACTIONS + r"| ?[\p{L}]+| ?[\p{N}]+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
_LLAMA3 = (_CONTRACTIONS_ANY_CASE + r"|[^\r\n\p{L}\p{N}]?[\p{L}]+|[\p{N}]{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
           r"|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2 = (_CONTRACTIONS_ANY_CASE + r"|[^\r\n\p{L}\p{N}]?[\p{L}]+|[\p{N}]| ?[^\s\p{L}\p{N}]+[\r\n]*"
          r"|\s*[\r\n]+|\s+(?!\S)|\s+")
# Qwen3.5: marks join letter runs and leave the punctuation runs.
_QWEN35 = (_CONTRACTIONS_ANY_CASE + r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|[\p{N}]| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
           r"|\s*[\r\n]+|\s+(?!\S)|\s+")
# Upper-then-lower letter runs as llama.cpp adapted them: "a letter that is not a-z" / "not A-Z", so every
# non-ASCII letter counts as both cases (HF's original distinguishes \p{Lu} from \p{Ll} there).

def _cased_words(suffix: str) -> str:
    return (r"[^\r\n\p{L}\p{N}]?(?:(?=[\p{L}])[^a-z])*(?:(?=[\p{L}])[^A-Z])+" + suffix
            + r"|[^\r\n\p{L}\p{N}]?(?:(?=[\p{L}])[^a-z])+(?:(?=[\p{L}])[^A-Z])*" + suffix)


_TEKKEN = (_cased_words("") + r"|[\p{N}]| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_GPT4O = (_cased_words("(?:" + _CONTRACTIONS_ANY_CASE + ")?")
          + r"|[\p{N}]{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# Written with escapes: several of these characters have canonical equivalents that editors silently normalize.
_BLOOM = r" ?[^(\s|.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c)]+"
_CJK_RUNS = r"[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"
_DEEPSEEK_LETTERS = (
    r"\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af"
    r"\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5"
    r"\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba"
    r"\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45"
    r"\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe"
    r"\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc"
    r"\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139"
    r"\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3"
    r"\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06"
    r"\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3"
    r"\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df"
    r"\U0001e900-\U0001e943]+"
)

# name -> regexes, applied in order. Names and grouping follow llama.cpp's `tokenizer.ggml.pre` table.
_FAMILIES: dict[tuple[str, ...], tuple[str, ...]] = {
    ("default",): (r"[\p{P}$+<=>^~|]+", _GPT2, r"[\p{N}]+", r"[0-9][0-9][0-9]"),
    # "gpt2" is not a name llama.cpp knows ("gpt-2" is); accepted because it cannot mean anything else.
    ("gpt-2", "gpt2", "phi-2", "mpt", "olmo", "jais", "exaone4", "trillion", "granite-docling"): (_GPT2,),
    ("llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
     "dbrx", "smaug-bpe", "chatglm-bpe", "glm4"): (_LLAMA3,),
    ("qwen2", "deepseek-r1-qwen", "megrez", "stablelm2"): (_QWEN2,),
    ("qwen35",): (_QWEN35,),
    ("smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"): (r"[\p{N}]", _GPT2),
    ("deepseek-llm",): (r"[\r\n]", _DEEPSEEK_LETTERS,
                        r"\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+", r"\s+\Z", _CJK_RUNS,
                        r"[\p{N}]+"),
    ("deepseek-coder",): (r"[\r\n]", r"\s?[\p{L}]+", r"\s?[\p{P}]+", _CJK_RUNS, r"[\p{N}]"),
    ("deepseek-v3",): (r"[\p{N}]{1,3}", r"[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
                       r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"
                       r"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"),
    ("falcon",): (r"[\p{P}$+<=>^~|`]+", _GPT2, r"[0-9][0-9][0-9]"),
    ("bloom", "poro-chat", "gpt3-finnish"): (_BLOOM,),
    ("viking",): (_BLOOM, r"[\p{N}]"),
    ("tekken",): (_TEKKEN,),
    ("gpt-4o", "llama4"): (_GPT4O,),
}
PATTERNS: dict[str, tuple[str, ...]] = {name: regexes for names, regexes in _FAMILIES.items() for name in names}
SUPPORTED = tuple(sorted(PATTERNS))


_BMP_END = 0xFFFF
# Stand-ins for characters beyond U+FFFF in the probe, by class; "other" also covers unassigned code points.
_STAND_IN = {"L": 0xE000, "N": 0xE001, "P": 0xE002, "M": 0xE003, "S": 0xE004, "other": 0xE005}
_CLASSES = {"L": uc.LETTER, "N": uc.NUMBER, "P": uc.PUNCTUATION, "M": uc.MARK, "S": uc.SYMBOL}
# llama.cpp matches these classes on ASCII through its own short tables, which agree with Unicode except that the
# symbol table lacks "~" (U+007E, Sm).
_DROPPED = {"S": frozenset({0x7E})}


def _class_body(flat: tuple[int, ...], drop: frozenset[int], limit: int) -> str:
    """A character class body for flat (first, last) ranges, cut at `limit` and minus the code points in `drop`."""
    parts = []
    for first, last in zip(flat[0::2], flat[1::2]):
        if first > limit:
            break
        last = min(last, limit)
        start = first
        for cut in [*sorted(cp for cp in drop if first <= cp <= last), last + 1]:
            if start < cut:
                parts.append(f"\\U{start:08x}" if start == cut - 1 else f"\\U{start:08x}-\\U{cut - 1:08x}")
            start = cut + 1
    return "".join(parts)


_BODIES_WITH_STAND_INS = {
    f"\\p{{{key}}}": _class_body(flat, _DROPPED.get(key, frozenset()), _BMP_END) + f"\\u{_STAND_IN[key]:04x}"
    for key, flat in _CLASSES.items()}
_BODIES_FULL = {f"\\p{{{key}}}": _class_body(flat, _DROPPED.get(key, frozenset()), 0x10FFFF)
                for key, flat in _CLASSES.items()}
_CLASS_REF = re.compile(r"\\p\{[A-Za-z]+\}")
_BEYOND_BMP_LITERAL = re.compile(r"\\U0*(?:[1-9a-fA-F][0-9a-fA-F]{4}|10[0-9a-fA-F]{4})(?![0-9a-fA-F])")


def expand(pattern: str, stand_ins: bool = True) -> str:
    """Replace each `\\p{X}` (written inside brackets) by the code point ranges of its class: the BMP part plus the
    class's stand-in when matching a probe with stand-ins, else all of it."""
    bodies = _BODIES_WITH_STAND_INS if stand_ins else _BODIES_FULL

    def body(m: re.Match[str]) -> str:
        try:
            return bodies[m.group(0)]
        except KeyError:
            raise ValueError(f"unsupported class {m.group(0)} in pre-tokenizer pattern") from None
    return _CLASS_REF.sub(body, pattern)


def _flat_ranges(flat: tuple[int, ...]) -> list[tuple[int, int]]:
    return list(zip(flat[0::2], flat[1::2]))


# What the probe replaces: non-ASCII White_Space by U+000B; with stand-ins also the stand-ins' own code points (by
# "other", their class) and every character beyond U+FFFF (by its class's stand-in).
_WHITESPACE_TO_VT = {chr(cp): "\x0b" for first, last in _flat_ranges(uc.WHITESPACE) for cp in range(first, last + 1)
                     if cp >= 0x80}
_STAND_IN_TO_OTHER = {chr(cp): chr(_STAND_IN["other"]) for cp in _STAND_IN.values()}
_WHITESPACE_CHARS = "".join(f"\\U{ord(ch):08x}" for ch in _WHITESPACE_TO_VT)
_WHITESPACE_ONLY = re.compile(f"[{_WHITESPACE_CHARS}]")
_WHITESPACE_OR_BEYOND_BMP = re.compile(f"[{_WHITESPACE_CHARS}\\ue000-\\ue005\\U00010000-\\U0010ffff]")
# Sorted (first, last, stand-in) for the classes beyond the BMP, for bisection.
_BEYOND_BMP_RANGES = sorted((first, last, _STAND_IN[key]) for key, flat in _CLASSES.items()
                            for first, last in _flat_ranges(flat) if last > _BMP_END)
_BEYOND_BMP_FIRSTS = [first for first, _, _ in _BEYOND_BMP_RANGES]


@functools.lru_cache(maxsize=4096)
def _probe_char(ch: str) -> str:
    """The probe's replacement for one character matched by _WHITESPACE_OR_BEYOND_BMP."""
    fixed = _WHITESPACE_TO_VT.get(ch) or _STAND_IN_TO_OTHER.get(ch)
    if fixed is not None:
        return fixed
    cp = ord(ch)
    at = bisect.bisect_right(_BEYOND_BMP_FIRSTS, cp) - 1
    if at >= 0:
        first, last, stand_in = _BEYOND_BMP_RANGES[at]
        if first <= cp <= last:
            return chr(stand_in)
    return chr(_STAND_IN["other"])


@dataclass(frozen=True)
class PreTokenizer:
    """The word splitter for one `tokenizer.ggml.pre` name."""

    name: str
    # Each pattern wrapped in one capturing group, so that `split` returns gaps and matches alternately.
    regexes: tuple[re.Pattern[str], ...]
    # Whether the regexes expect stand-ins for characters beyond U+FFFF (see the module docstring).
    stand_ins: bool

    def probe(self, text: str) -> str:
        """The text the regexes run on, of the same length as `text` (`text` itself when nothing changes)."""
        if text.isascii():
            return text
        if self.stand_ins:
            return _WHITESPACE_OR_BEYOND_BMP.sub(lambda m: _probe_char(m.group()), text)
        return _WHITESPACE_ONLY.sub(lambda m: _WHITESPACE_TO_VT[m.group()], text)

    def split(self, text: str) -> list[str]:
        """Cut `text` into consecutive pieces whose concatenation is `text` (empty pieces are never returned)."""
        probe = self.probe(text)
        pieces = [probe]
        for rx in self.regexes:
            pieces = [part for piece in pieces for part in rx.split(piece) if part]
        if probe == text:
            return pieces
        # The probe has the same length as the text: cut the text where the probe was cut.
        out, pos = [], 0
        for piece in pieces:
            end = pos + len(piece)
            out.append(text[pos:end])
            pos = end
        return out


_CACHE: dict[str, PreTokenizer] = {}


def get_pre_tokenizer(name: str) -> PreTokenizer:
    """The pre-tokenizer llama.cpp uses for `tokenizer.ggml.pre == name`; compiled once per process."""
    found = _CACHE.get(name)
    if found is not None:
        return found
    patterns = PATTERNS.get(name)
    if patterns is None:
        raise TokenizerError(f"unsupported pre-tokenizer tokenizer.ggml.pre={name!r}; supported: "
                             f"{', '.join(SUPPORTED)}")
    stand_ins = not any(_BEYOND_BMP_LITERAL.search(p) for p in patterns)
    found = PreTokenizer(name, tuple(re.compile("(" + expand(p, stand_ins) + ")", re.ASCII) for p in patterns),
                         stand_ins)
    _CACHE[name] = found
    return found
