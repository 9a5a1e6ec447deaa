"""llama.cpp's GBNF dialect parsed into rules over bytes (see grammar.py for what is checked and compiled).

    root  ::= "{" ws pair ("," ws pair)* "}"      # a rule; a newline ends it unless inside ( ) or after | or ::=
    pair  ::= [a-z]+ ":" ws ([0-9]{1,3} | "\\u00e9" | .)
    ws    ::= [ \\t\\n]*
    stop  ::= <|im_end|> | <[2]>                 # special tokens, by text (needs `special=`) or by id

The result is a plain data structure: each rule is a list of alternatives, each a list of items, an item being
("b", mask) a set of bytes as a 256-bit int, ("t", id) a special token, or ("r", name) a rule reference. Literals
become one byte item per UTF-8 byte; a character class becomes a byte item when it only holds ASCII, else a
reference to a helper rule whose alternatives are the UTF-8 byte-range sequences of its characters.
Repetitions expand as llama.cpp expands them: `x{2,4}` is `x x x'`, `x' ::= x x'' |`, `x'' ::= x |` (linear in
the bound). Helper rules are named `rule/N`, a name GBNF cannot spell, so they never collide with the user's.

Deliberate differences from llama.cpp: rule names may also contain `_`; a rule defined twice is an error (llama.cpp
keeps the last definition silently); a repetition bound above MAX_REPEAT is an error (llama.cpp quietly makes a
bound above 2000 unbounded); `!<token>` (any token but one) is refused, since this matcher works on bytes.
"""
from __future__ import annotations

from collections.abc import Mapping

from ..errors import GrammarError
from . import utf8

Item = tuple  # ("b", int) | ("t", int) | ("r", str)
MAX_REPEAT = 10000
MAX_ITEMS = 2_000_000  # bytes of literals and copies made by repetition, all rules together
MAX_GROUP_DEPTH = 100  # parentheses inside parentheses; the parser reads each level with a few Python frames

_ESCAPES = {"t": 9, "r": 13, "n": 10, "\\": 92, '"': 34, "[": 91, "]": 93, "-": 45}
_HEX_LEN = {"x": 2, "u": 4, "U": 8}


def _is_word(ch: str) -> bool:
    return ch.isascii() and (ch.isalnum() or ch in "-_")


def location(text: str, pos: int) -> str:
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return f"line {line}, column {column}"


class ParsedGrammar:
    """Rules as parsed, with where each was defined and first referenced (for error messages)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.rules: dict[str, list[list[Item]]] = {}
        self.defined_at: dict[str, int] = {}
        self.referenced_at: dict[str, int] = {}

    def where(self, pos: int) -> str:
        return location(self.text, pos)


class _Parser:
    def __init__(self, text: str, special: Mapping[str, int] | None) -> None:
        self.text = text
        self.n = len(text)
        self.special = special
        self.out = ParsedGrammar(text)
        self.counter = 0
        self.items = 0
        self.class_rules: dict[tuple, str] = {}
        self.depth = 0  # of the parenthesised groups being read

    # -------------------------------------------------------------------------------------------- helpers
    def error(self, message: str, pos: int, rule: str | None = None) -> GrammarError:
        where = location(self.text, pos)
        return GrammarError(f"grammar: {message} at {where}" + (f" (in rule '{rule}')" if rule else ""))

    def peek(self, pos: int) -> str:
        return self.text[pos] if pos < self.n else ""

    def space(self, pos: int, newline_ok: bool) -> int:
        text, n = self.text, self.n
        while pos < n:
            ch = text[pos]
            if ch == " " or ch == "\t" or (newline_ok and ch in "\r\n"):
                pos += 1
            elif ch == "#":
                while pos < n and text[pos] not in "\r\n":
                    pos += 1
            else:
                break
        return pos

    def name(self, pos: int) -> int:
        end = pos
        while end < self.n and _is_word(self.text[end]):
            end += 1
        if end == pos:
            raise self.error(f"expected a rule name, found {self._found(pos)}", pos)
        return end

    def _found(self, pos: int) -> str:
        return repr(self.text[pos]) if pos < self.n else "the end of the grammar"

    def new_rule(self, base: str, alts: list[list[Item]]) -> str:
        self.counter += 1
        name = f"{base}/{self.counter}"
        self.out.rules[name] = alts
        return name

    def count(self, k: int, pos: int, rule: str) -> None:
        self.items += k
        if self.items > MAX_ITEMS:
            raise self.error(f"the grammar expands to more than {MAX_ITEMS} elements (repetition bounds too large)",
                             pos, rule)

    # -------------------------------------------------------------------------------------------- characters
    def char(self, pos: int, rule: str) -> tuple[int, int]:
        """One (possibly escaped) character of a literal or class: (code point, next position)."""
        if pos >= self.n:
            raise self.error("unexpected end of the grammar", pos, rule)
        ch = self.text[pos]
        if ch != "\\":
            return ord(ch), pos + 1
        esc = self.peek(pos + 1)
        if esc in _ESCAPES:
            return _ESCAPES[esc], pos + 2
        if esc in _HEX_LEN:
            k = _HEX_LEN[esc]
            digits = self.text[pos + 2:pos + 2 + k]
            if len(digits) != k or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise self.error(f"\\{esc} needs {k} hex digits", pos, rule)
            value = int(digits, 16)
            if value > utf8.MAX_CODE_POINT or 0xD800 <= value <= 0xDFFF:
                raise self.error(f"\\{esc}{digits} is not a Unicode scalar value", pos, rule)
            return value, pos + 2 + k
        raise self.error(f"unknown escape \\{esc}" if esc else "unexpected end of the grammar", pos, rule)

    def char_class(self, pos: int, rule: str) -> tuple[Item, int]:
        start = pos
        pos += 1
        negate = self.peek(pos) == "^"
        if negate:
            pos += 1
        ranges: list[tuple[int, int]] = []
        while self.peek(pos) != "]":
            if pos >= self.n:
                raise self.error("unterminated character class", start, rule)
            lo, pos = self.char(pos, rule)
            hi = lo
            if self.peek(pos) == "-" and self.peek(pos + 1) not in ("]", ""):
                hi, pos = self.char(pos + 1, rule)
                if hi < lo:
                    raise self.error(f"character range {chr(lo)!r}-{chr(hi)!r} is reversed", start, rule)
            ranges.append((lo, hi))
        return self.char_set(utf8.normalize(ranges, negate), rule), pos + 1

    def char_set(self, ranges: list[tuple[int, int]], rule: str) -> Item:
        if not ranges or ranges[-1][1] < 0x80:
            mask = 0
            for lo, hi in ranges:
                mask |= ((1 << (hi + 1)) - 1) ^ ((1 << lo) - 1)
            return ("b", mask)
        key = tuple(ranges)
        name = self.class_rules.get(key)
        if name is None:
            alts = [[("b", ((1 << (hi + 1)) - 1) ^ ((1 << lo) - 1)) for lo, hi in seq]
                    for seq in utf8.byte_sequences(ranges)]
            name = self.class_rules[key] = self.new_rule(rule, _merge_single_bytes(alts))
        return ("r", name)

    # -------------------------------------------------------------------------------------------- structure
    def token(self, pos: int, rule: str) -> tuple[Item, int]:
        start = pos
        if self.peek(pos) == "!":
            raise self.error("negated tokens (!<...>) are not supported", start, rule)
        end = self.text.find(">", pos + 1)
        if end < 0:
            raise self.error("unterminated token (missing '>')", start, rule)
        body = self.text[pos + 1:end]
        if body.startswith("["):
            if not (body.endswith("]") and body[1:-1].isdigit() and body[1:-1].isascii()):
                raise self.error(f"expected a token id as <[123]>, found <{body}>", start, rule)
            return ("t", int(body[1:-1])), end + 1
        text = "<" + body + ">"
        if self.special is None:
            raise self.error(f"the grammar names the special token {text} but is not bound to a vocabulary "
                             f"(pass special=...)", start, rule)
        tid = self.special.get(text)
        if tid is None:
            raise self.error(f"{text} is not a special token of this vocabulary", start, rule)
        return ("t", int(tid)), end + 1

    def alternatives(self, pos: int, rule: str, nested: bool) -> tuple[list[list[Item]], int]:
        alts = []
        seq, pos = self.sequence(pos, rule, nested)
        alts.append(seq)
        while self.peek(pos) == "|":
            pos = self.space(pos + 1, True)
            seq, pos = self.sequence(pos, rule, nested)
            alts.append(seq)
        return alts, pos

    def sequence(self, pos: int, rule: str, nested: bool) -> tuple[list[Item], int]:
        seq: list[Item] = []
        last = None  # where the item a repetition applies to starts in seq
        while pos < self.n:
            ch = self.text[pos]
            start = pos
            if ch == '"':
                last = len(seq)
                pos += 1
                while self.peek(pos) != '"':
                    if pos >= self.n:
                        raise self.error("unterminated string literal", start, rule)
                    cp, pos = self.char(pos, rule)
                    encoded = chr(cp).encode("utf-8")
                    seq.extend(("b", 1 << b) for b in encoded)
                    self.count(len(encoded), start, rule)
                pos = self.space(pos + 1, nested)
            elif ch == "[":
                last = len(seq)
                item, pos = self.char_class(pos, rule)
                seq.append(item)
                pos = self.space(pos, nested)
            elif ch == "<" or ch == "!":
                last = len(seq)
                item, pos = self.token(pos, rule)
                seq.append(item)
                pos = self.space(pos, nested)
            elif _is_word(ch):
                end = self.name(pos)
                name = self.text[pos:end]
                self.out.referenced_at.setdefault(name, pos)
                last = len(seq)
                seq.append(("r", name))
                pos = self.space(end, nested)
            elif ch == "(":
                self.depth += 1
                if self.depth > MAX_GROUP_DEPTH:  # refused before Python's own recursion limit is near
                    raise self.error(f"groups nest more than {MAX_GROUP_DEPTH} deep", pos, rule)
                alts, pos = self.alternatives(self.space(pos + 1, True), rule, True)
                self.depth -= 1
                if self.peek(pos) != ")":
                    raise self.error(f"expected ')' to close the group opened at {location(self.text, start)}, "
                                     f"found {self._found(pos)}", pos, rule)
                last = len(seq)
                seq.append(("r", self.new_rule(rule, alts)))
                pos = self.space(pos + 1, nested)
            elif ch == ".":
                last = len(seq)
                seq.append(self.char_set(utf8.normalize([], negate=True), rule))
                pos = self.space(pos + 1, nested)
            elif ch in "*+?{":
                if last is None:
                    raise self.error(f"'{ch}' has nothing before it to repeat", pos, rule)
                if ch == "{":
                    lo, hi, pos = self.bounds(pos, rule)
                else:
                    lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[ch]
                    pos += 1
                self.repeat(seq, last, lo, hi, rule, start)  # `x*?` then repeats the expansion, as llama.cpp
                pos = self.space(pos, nested)
            else:
                break
        return seq, pos

    def bounds(self, pos: int, rule: str) -> tuple[int, int | None, int]:
        start = pos
        pos = self.space(pos + 1, True)
        lo, pos = self.integer(pos, rule)
        pos = self.space(pos, True)
        hi: int | None = lo
        if self.peek(pos) == ",":
            pos = self.space(pos + 1, True)
            hi = None
            if self.peek(pos).isdigit():
                hi, pos = self.integer(pos, rule)
                pos = self.space(pos, True)
        if self.peek(pos) != "}":
            raise self.error(f"expected '}}' or ',' in the repetition, found {self._found(pos)}", pos, rule)
        for bound in (lo, hi):
            if bound is not None and bound > MAX_REPEAT:
                raise self.error(f"repetition bound {bound} exceeds the limit of {MAX_REPEAT}", start, rule)
        if hi is not None and hi < lo:
            raise self.error(f"repetition {{{lo},{hi}}} has its maximum below its minimum", start, rule)
        return lo, hi, pos + 1

    def integer(self, pos: int, rule: str) -> tuple[int, int]:
        end = pos
        while end < self.n and self.text[end] in "0123456789":
            end += 1
        if end == pos:
            raise self.error(f"expected a number, found {self._found(pos)}", pos, rule)
        return int(self.text[pos:end]), end

    def repeat(self, seq: list[Item], last: int, lo: int, hi: int | None, rule: str, pos: int) -> None:
        item = seq[last:]
        del seq[last:]
        self.count(len(item) * (lo + (1 if hi is None else hi - lo)), pos, rule)
        for _ in range(lo):
            seq.extend(item)
        if hi is None:
            name = f"{rule}/{self.counter + 1}"
            self.new_rule(rule, [item + [("r", name)], []])
            seq.append(("r", name))
            return
        tail = None  # x{0,k}: x' ::= x x'' | "", nested k deep, so the size stays linear in k
        for _ in range(hi - lo):
            tail = self.new_rule(rule, [item + ([("r", tail)] if tail else []), []])
        if tail:
            seq.append(("r", tail))

    def grammar(self) -> ParsedGrammar:
        pos = self.space(0, True)
        while pos < self.n:
            end = self.name(pos)
            name = self.text[pos:end]
            if name in self.out.defined_at:
                raise self.error(f"rule '{name}' is defined twice (first at "
                                 f"{location(self.text, self.out.defined_at[name])})", pos, name)
            self.out.defined_at[name] = pos
            p = self.space(end, False)
            if self.text[p:p + 3] != "::=":
                raise self.error(f"expected '::=' after the rule name '{name}', found {self._found(p)}", p, name)
            alts, p = self.alternatives(self.space(p + 3, True), name, False)
            self.out.rules[name] = alts
            if p < self.n and self.text[p] not in "\r\n":
                raise self.error(f"unexpected {self._found(p)}", p, name)
            pos = self.space(p, True)
        return self.out


def _merge_single_bytes(alts: list[list[Item]]) -> list[list[Item]]:
    # One-byte alternatives (the ASCII part of a class) fold into one byte item: fewer stacks at run time.
    mask = 0
    rest = []
    for alt in alts:
        if len(alt) == 1:
            mask |= alt[0][1]
        else:
            rest.append(alt)
    return ([[("b", mask)]] if mask else []) + rest


def parse(text: str, special: Mapping[str, int] | None = None) -> ParsedGrammar:
    """Parse GBNF text into rules (GrammarError with line and column on a syntax error)."""
    return _Parser(text, special).grammar()
