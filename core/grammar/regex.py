"""Regular expressions to GBNF: the practical subset that a grammar can express exactly.

Supported: literals, escapes (\\d \\w \\s and their negations, \\t \\n \\r \\f \\v \\xHH \\uHHHH, escaped punctuation),
classes with ranges and negation, `.` (any character but a newline), groups (capturing, named, non-capturing),
alternation, * + ? {m} {m,} {m,n} (lazy forms too: with a whole-string match they accept the same strings), and
^ / $ at the very start / end. As in ECMA-262 (JSON Schema's patterns), \\d and \\w are ASCII and \\s is Unicode's
white space and line terminators (NBSP, U+2028, the BOM...). Refused with a GrammarError that names the construct:
backreferences, lookaround, word boundaries, inline flags, atomic groups, possessive quantifiers, conditionals,
anchors in the middle.

A pattern is parsed once into a small tree; two emitters write it: as raw text (`regex_to_gbnf`, the whole reply
matches the pattern) and as the content of a JSON string (JSON Schema `pattern`, where `"` `\\` and control
characters must be escaped inside the document).
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from ..errors import GrammarError
from .utf8 import MAX_CODE_POINT, normalize

Ranges = tuple[tuple[int, int], ...]

MAX_REPEAT = 10000  # the GBNF parser's own bound on {m,n}
_DIGIT: Ranges = ((0x30, 0x39),)
_WORD: Ranges = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
# ECMA-262's WhiteSpace and LineTerminator: Unicode's space separators, no-break spaces and the BOM with them.
_SPACE: Ranges = ((0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029),
                  (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF))
_CLASS_ESCAPES = {"d": _DIGIT, "w": _WORD, "s": _SPACE}
_CHAR_ESCAPES = {"t": 9, "n": 10, "r": 13, "f": 12, "v": 11, "a": 7, "0": 0}
_REFUSED_ESCAPES = {
    "b": "word boundary \\b", "B": "word boundary \\B", "A": "anchor \\A", "Z": "anchor \\Z", "z": "anchor \\z",
    "G": "anchor \\G", "k": "named backreference \\k", "p": "Unicode property \\p", "P": "Unicode property \\P",
    "N": "named character \\N",
}


# Set operations are cached: a pattern's characters repeat a few small sets, and each operation normalizes.
@functools.lru_cache(maxsize=4096)
def _complement(ranges: Ranges) -> Ranges:
    return tuple(normalize(list(ranges), negate=True))


def complement(ranges: Ranges) -> Ranges:
    """Every code point that is not in `ranges`."""
    return _complement(tuple(normalize(list(ranges))))


def _union(*sets: Ranges) -> Ranges:
    return tuple(normalize([r for s in sets for r in s]))


def minus(a: Ranges, b: Ranges) -> Ranges:
    return _intersect(a, _complement(b))


@functools.lru_cache(maxsize=4096)
def _intersect(a: Ranges, b: Ranges) -> Ranges:
    return _complement(_union(_complement(a), _complement(b))) if a and b else ()


# ------------------------------------------------------------------------------------------------------ tree
@dataclass(frozen=True)
class Chars:
    ranges: Ranges  # one character from this set


@dataclass(frozen=True)
class Seq:
    items: tuple


@dataclass(frozen=True)
class Alt:
    options: tuple


@dataclass(frozen=True)
class Repeat:
    item: object
    lo: int
    hi: int | None


ANY_BUT_NEWLINE: Ranges = _complement(((0x0A, 0x0A),))
ANY: Ranges = _complement(())


@dataclass(frozen=True)
class Regex:
    tree: object
    anchored_start: bool  # the pattern began with ^ (JSON Schema patterns otherwise match anywhere)
    anchored_end: bool


_QUANT_RE = re.compile(r"\{(\d*)(,(\d*))?\}")


class _Parser:
    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0

    def fail(self, message: str, at: int | None = None) -> GrammarError:
        at = self.i if at is None else at
        return GrammarError(f"regex {self.p!r}: {message} at position {at}")

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.p[j] if j < len(self.p) else ""

    def parse(self) -> Regex:
        start = end = False
        if self.peek() == "^":
            start = True
            self.i += 1
        tree = self.alternation(depth=0)
        if self.i < len(self.p) and self.peek() == "$":
            end = True
            self.i += 1
        if self.i < len(self.p):
            if self.peek() == ")":
                raise self.fail("unbalanced ')'")
            raise self.fail(f"unexpected {self.peek()!r}")
        return Regex(tree, start, end)

    def alternation(self, depth: int):
        options = [self.sequence(depth)]
        while self.peek() == "|":
            self.i += 1
            options.append(self.sequence(depth))
        return options[0] if len(options) == 1 else Alt(tuple(options))

    def sequence(self, depth: int):
        items = []
        while self.i < len(self.p) and self.peek() not in "|)":
            c = self.peek()
            if c == "$":
                if depth == 0 and self.i == len(self.p) - 1:
                    break  # the closing anchor; parse() takes it
                raise self.fail("anchor '$' is only supported at the end of the pattern")
            if c == "^":
                raise self.fail("anchor '^' is only supported at the start of the pattern")
            if c in "*+?":
                raise self.fail(f"nothing to repeat before {c!r}")
            atom_at = self.i
            atom = self.atom(depth)
            items.append(self.quantified(atom, atom_at))
        return items[0] if len(items) == 1 else Seq(tuple(items))

    def quantified(self, atom, atom_at: int):
        while True:
            c = self.peek()
            if c in ("*", "+", "?"):
                lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
                self.i += 1
            elif c == "{" and (m := _QUANT_RE.match(self.p, self.i)) and (m.group(1) or m.group(2)):
                lo = int(m.group(1) or 0)
                hi = lo if m.group(2) is None else (int(m.group(3)) if m.group(3) else None)
                if hi is not None and hi < lo:
                    raise self.fail(f"repetition {m.group(0)} has its bounds reversed")
                if max(lo, hi or 0) > MAX_REPEAT:
                    raise self.fail(f"repetition {m.group(0)} is above the limit of {MAX_REPEAT}")
                self.i = m.end()
            else:
                return atom
            if self.peek() == "?":
                self.i += 1  # lazy: the same set of whole-string matches
            elif self.peek() == "+":
                raise self.fail("possessive quantifiers are not supported")
            if isinstance(atom, Repeat):
                raise self.fail("multiple repeat (a quantifier on a quantifier)", atom_at)
            atom = Repeat(atom, lo, hi)

    def atom(self, depth: int):
        c = self.peek()
        if c == "(":
            return self.group(depth)
        if c == "[":
            return Chars(self.char_class())
        if c == ".":
            self.i += 1
            return Chars(ANY_BUT_NEWLINE)
        if c == "\\":
            return Chars(self.escape(in_class=False))
        self.i += 1
        return Chars(((ord(c), ord(c)),))

    def group(self, depth: int):
        start = self.i
        self.i += 1
        if self.peek() == "?":
            head = self.p[self.i:self.i + 3]
            if head.startswith("?:"):
                self.i += 2
            elif head.startswith("?P<") or (head.startswith("?<") and head[2:3] not in ("=", "!")):
                close = self.p.find(">", self.i)
                if close < 0:
                    raise self.fail("unterminated group name", start)
                self.i = close + 1
            else:
                what = {"?=": "lookahead", "?!": "lookahead", "?<": "lookbehind", "?P": "backreference (?P=...)",
                        "?>": "atomic group", "?(": "conditional group", "?#": "comment group"}
                kind = what.get(head[:2], "inline flags")
                raise self.fail(f"{kind} {self.p[start:start + 4]!r}... is not supported", start)
        if depth >= 100:
            raise self.fail("groups nested too deep", start)
        tree = self.alternation(depth + 1)
        if self.peek() != ")":
            raise self.fail("missing ')'", start)
        self.i += 1
        return tree

    def escape(self, in_class: bool) -> Ranges:
        at = self.i
        c = self.peek(1)
        if not c:
            raise self.fail("trailing backslash", at)
        self.i += 2
        if c.lower() in _CLASS_ESCAPES:
            ranges = _CLASS_ESCAPES[c.lower()]
            return _complement(ranges) if c.isupper() else ranges
        if c in "xuU":
            k = {"x": 2, "u": 4, "U": 8}[c]
            digits = self.p[self.i:self.i + k]
            if len(digits) != k or any(h not in "0123456789abcdefABCDEF" for h in digits):
                raise self.fail(f"\\{c} needs {k} hex digits", at)
            self.i += k
            cp = int(digits, 16)
            if cp > MAX_CODE_POINT or 0xD800 <= cp <= 0xDFFF:
                raise self.fail(f"\\{c}{digits} is not a Unicode scalar value", at)
            return ((cp, cp),)
        if in_class and c == "b":
            return ((8, 8),)
        if c == "c" and self.peek().isascii() and self.peek().isalpha():  # ECMA-262's control escape: \cJ is \n
            cp = ord(self.peek()) % 32
            self.i += 1
            return ((cp, cp),)
        if c in _CHAR_ESCAPES and not (c == "0" and self.peek().isdigit()):
            cp = _CHAR_ESCAPES[c]
            return ((cp, cp),)
        if c.isdigit():
            raise self.fail(f"backreference \\{c} is not supported", at)
        if c in _REFUSED_ESCAPES:
            raise self.fail(f"{_REFUSED_ESCAPES[c]} is not supported", at)
        if c.isascii() and c.isalnum():
            raise self.fail(f"unknown escape \\{c}", at)
        return ((ord(c), ord(c)),)

    def char_class(self) -> Ranges:
        start = self.i
        self.i += 1
        negate = self.peek() == "^"
        if negate:
            self.i += 1
        parts: list[tuple[int, int]] = []
        first = True
        while True:
            if self.i >= len(self.p):
                raise self.fail("unterminated character class", start)
            c = self.peek()
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            lo_set = self.class_atom()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.i += 1
                hi_at = self.i
                hi_set = self.class_atom()
                if len(lo_set) != 1 or lo_set[0][0] != lo_set[0][1] or len(hi_set) != 1 or hi_set[0][0] != hi_set[0][1]:
                    raise self.fail("a class escape cannot bound a range", hi_at)
                lo, hi = lo_set[0][0], hi_set[0][0]
                if hi < lo:
                    raise self.fail("bad character range (reversed)", hi_at)
                parts.append((lo, hi))
            else:
                parts.extend(lo_set)
        ranges = tuple(normalize(parts, negate))
        if not ranges:
            raise self.fail("character class matches no character", start)
        return ranges

    def class_atom(self) -> Ranges:
        c = self.peek()
        if c == "\\":
            return self.escape(in_class=True)
        if c == "[" and self.peek(1) in (":", "=", "."):
            raise self.fail("POSIX classes like [:alpha:] are not supported")
        self.i += 1
        return ((ord(c), ord(c)),)


def parse_regex(pattern: str) -> Regex:
    if not isinstance(pattern, str):
        raise GrammarError(f"a regex must be a string, not {type(pattern).__name__}")
    return _Parser(pattern).parse()


# ------------------------------------------------------------------------------------------------------ emitters
_CLASS_SPECIAL = set('\\]-"[')
_LITERAL_SPECIAL = set('\\"')


def _gbnf_char(cp: int, special: set) -> str:
    ch = chr(cp)
    if ch in special:
        return "\\" + ch
    if ch == "^" and special is _CLASS_SPECIAL:
        return "\\x5E"  # a class's first `^` negates it, and GBNF (llama.cpp's too) has no `\^` escape
    if ch == "\n":
        return "\\n"
    if ch == "\t":
        return "\\t"
    if ch == "\r":
        return "\\r"
    if cp < 0x20 or cp == 0x7F:
        return f"\\x{cp:02X}"
    if cp < 0x7F:
        return ch
    return f"\\u{cp:04X}" if cp <= 0xFFFF else f"\\U{cp:08X}"


def literal(text: str) -> str:
    """`text` as a GBNF string literal, every character that needs it escaped."""
    return '"' + "".join(_gbnf_char(ord(c), _LITERAL_SPECIAL) for c in text) + '"'


def char_class(ranges: Ranges) -> str:
    """A GBNF character class for these code point ranges (a negated form when that is shorter)."""
    ranges = tuple(normalize(list(ranges)))
    if not ranges:
        raise GrammarError("internal: empty character class")
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return literal(chr(ranges[0][0]))
    neg = _complement(ranges)
    body, use = ("^", neg) if neg and len(neg) < len(ranges) else ("", ranges)

    def part(lo: int, hi: int) -> str:
        a = _gbnf_char(lo, _CLASS_SPECIAL)
        if lo == hi:
            return a
        if hi == lo + 1:
            return a + _gbnf_char(hi, _CLASS_SPECIAL)
        return f"{a}-{_gbnf_char(hi, _CLASS_SPECIAL)}"
    return "[" + body + "".join(part(lo, hi) for lo, hi in use) + "]"


# Inside a JSON string: which characters may appear raw, and how they are escaped.
JSON_RAW: Ranges = _complement(((0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C), (0x7F, 0x7F)))
_SHORT_ESCAPES = {0x22: '\\"', 0x5C: "\\\\", 0x2F: "\\/", 0x08: "\\b", 0x0C: "\\f", 0x0A: "\\n", 0x0D: "\\r",
                  0x09: "\\t"}
_U = '"\\\\u"'  # GBNF for the two characters \u


def _hex_digits(a: int, b: int) -> str:
    """One hex digit from a to b, letters in either case."""
    ranges = [(ord("0") + x, ord("0") + x) for x in range(a, min(b, 9) + 1)]
    ranges += [(c + x - 10, c + x - 10) for x in range(max(a, 10), b + 1) for c in (ord("a"), ord("A"))]
    return char_class(tuple(ranges))


@functools.lru_cache(maxsize=4096)
def _hex(lo: int, hi: int, width: int) -> str:
    """`width` hex digits spelling a number from lo to hi, as unambiguous alternatives."""
    if width == 1:
        return _hex_digits(lo, hi)
    unit = 16 ** (width - 1)
    (a, ra), (b, rb) = divmod(lo, unit), divmod(hi, unit)
    if a == b:
        return f"{_hex_digits(a, a)} {_group(_hex(ra, rb, width - 1))}"
    alts = []
    if ra:  # the first digit's partial range, then the whole ones between, then the last digit's
        alts.append(f"{_hex_digits(a, a)} {_group(_hex(ra, unit - 1, width - 1))}")
        a += 1
    whole_b = b if rb == unit - 1 else b - 1
    if a <= whole_b:
        alts.append(f"{_hex_digits(a, whole_b)} {_hex_digits(0, 15)}{{{width - 1}}}")
    if whole_b < b:
        alts.append(f"{_hex_digits(b, b)} {_group(_hex(0, rb, width - 1))}")
    return " | ".join(alts)


def _group(expr: str) -> str:
    return f"({expr})" if "|" in expr else expr


def _unicode_escapes(ranges: Ranges) -> list[str]:
    """The \\uXXXX spellings of the code points in `ranges`: surrogate pairs past U+FFFF."""
    out = []
    for lo, hi in minus(ranges, ((0xD800, 0xDFFF),)):
        if lo <= 0xFFFF:
            out.append(f"{_U} {_group(_hex(lo, min(hi, 0xFFFF), 4))}")
        if hi < 0x10000:
            continue
        (ha, la), (hb, lb) = (divmod(max(lo, 0x10000) - 0x10000, 0x400), divmod(hi - 0x10000, 0x400))
        pairs = [(ha, ha, la, lb)] if ha == hb else [(ha, ha, la, 0x3FF), (ha + 1, hb - 1, 0, 0x3FF), (hb, hb, 0, lb)]
        for h0, h1, l0, l1 in pairs:
            if h0 <= h1:
                out.append(f"{_U} {_group(_hex(0xD800 + h0, 0xD800 + h1, 4))} "
                           f"{_U} {_group(_hex(0xDC00 + l0, 0xDC00 + l1, 4))}")
    return out


def json_chars(ranges: Ranges) -> str:
    """One character from `ranges` as a JSON string may spell it: raw where JSON allows, short escapes
    (\\n, \\", \\/ ...), and \\u escapes in either case (a surrogate pair past U+FFFF). Exact: every spelling
    of those characters and of no other."""
    alts = []
    raw = _intersect(ranges, JSON_RAW)
    if raw:
        alts.append(char_class(raw))
    alts += [literal(_SHORT_ESCAPES[cp]) for cp in sorted(_SHORT_ESCAPES) if _intersect(ranges, ((cp, cp),))]
    alts += _unicode_escapes(ranges)
    return alts[0] if len(alts) == 1 else "(" + " | ".join(alts) + ")"


def _single(node) -> str | None:
    if isinstance(node, Chars) and len(node.ranges) == 1 and node.ranges[0][0] == node.ranges[0][1]:
        return chr(node.ranges[0][0])
    return None


def emit(node, json_string: bool) -> str:
    """GBNF for the tree: raw text, or (json_string) the characters as written inside a JSON string."""
    if isinstance(node, Chars):
        return json_chars(node.ranges) if json_string else char_class(node.ranges)
    if isinstance(node, Alt):
        return "(" + " | ".join(emit(o, json_string) or '""' for o in node.options) + ")"
    if isinstance(node, Repeat):
        inner = emit(node.item, json_string)
        if not inner or inner == '""':
            return ""
        if not (inner.startswith("(") and inner.endswith(")") and _balanced_group(inner)) and " " in inner:
            inner = "(" + inner + ")"
        lo, hi = node.lo, node.hi
        if (lo, hi) == (0, None):
            return inner + "*"
        if (lo, hi) == (1, None):
            return inner + "+"
        if (lo, hi) == (0, 1):
            return inner + "?"
        if hi == lo:
            return inner + "{" + str(lo) + "}"
        return inner + "{" + str(lo) + "," + ("" if hi is None else str(hi)) + "}"
    if isinstance(node, Seq):
        out: list[str] = []
        run: list[str] = []  # characters written as one literal
        for item in node.items:
            ch = _single(item)
            if ch is not None and (not json_string or JSON_RAW and _in(ord(ch), JSON_RAW)):
                run.append(ch)
                continue
            if run:
                out.append(literal("".join(run)))
                run = []
            text = emit(item, json_string)
            if text:
                out.append(text)
        if run:
            out.append(literal("".join(run)))
        return " ".join(out)
    raise GrammarError(f"internal: unknown regex node {node!r}")


def _in(cp: int, ranges: Ranges) -> bool:
    return any(lo <= cp <= hi for lo, hi in ranges)


def _balanced_group(text: str) -> bool:
    """Whether `text` is one parenthesised group (not `(a) (b)`), ignoring parentheses in literals and classes."""
    depth, i, n = 0, 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c == "[":
            i += 1
            while i < n and text[i] != "]":
                i += 2 if text[i] == "\\" else 1
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0 and i != n - 1:
                return False
        i += 1
    return True


def regex_to_gbnf(pattern: str) -> str:
    """A grammar (rule `root`) whose language is the strings `re.fullmatch(pattern, s, re.ASCII)` accepts."""
    tree = parse_regex(pattern).tree
    body = emit(tree, json_string=False)
    return f"root ::= {body or chr(34) * 2}\n"
