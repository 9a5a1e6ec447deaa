"""JSON text in GBNF, whatever the schema: the primitive rules (whitespace, strings, numbers, the formats), the
table of rules the schemas of one grammar share, string literals in each spelling a serializer writes, and the
numerals between bounds (unambiguous alternatives of digits, one length at a time).
"""
from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from functools import partial

from ..errors import GrammarError, NoDocumentError
from .regex import complement, json_chars, literal

WS = '([ \\t] | "\\r"? "\\n" [ \\t]{0,40})?'
# Digits are bounded, so that a model cannot loop on a number: the integer part of an unbounded number has at most
# NUMBER_DIGITS (every integer a double can hold, bignums too), a bounded one INT_DIGITS, the fraction FRAC_DIGITS.
NUMBER_DIGITS = 309
INT_DIGITS = 16
MAX_INT = 10 ** INT_DIGITS - 1
FRAC_DIGITS = 18

def _leap_hour(h: int) -> str:
    return " | ".join(_leap_minute(h, m) for m in range(60))


def _leap_minute(h: int, m: int) -> str:
    """Second 60 of local minute h:m, and the offsets that put it at 23:59:60 UTC."""
    t = 60 * h + m
    ahead, behind = (t + 1) % 1440, 1439 - t
    offsets = [f'"+{ahead // 60:02d}:{ahead % 60:02d}"', f'"-{behind // 60:02d}:{behind % 60:02d}"']
    if t == 1439:
        offsets.append("[Zz]")
    return f'"{m:02d}:60" secfrac? ({" | ".join(offsets)})'


# name -> body, or a function that writes it when a grammar first needs it (so that importing costs nothing for
# the large ones: a Python snapshot in the browser must fit Pyodide's initial memory); bodies name other primitives
# by these exact names (reserved: schema-derived names avoid them).
_PRIMITIVES = {
    "ws": WS,
    "hex": "[0-9a-fA-F]",
    # a \u escape: any code point but a lone surrogate; a high surrogate must be followed by a low one
    "uescape": '[0-9a-cA-Ce-fE-F] hex{3} | [dD] [0-7] hex{2} | [dD] [89abAB] hex{2} "\\\\u" [dD] [c-fC-F] hex{2}',
    "char": '[^"\\\\\\x00-\\x1F\\x7F] | "\\\\" (["\\\\/bfnrt] | "u" uescape)',
    "string": '"\\"" char* "\\""',
    "int-part": '"0" | [1-9] [0-9]{0,%d}' % (NUMBER_DIGITS - 1),
    "frac": '"." [0-9]{1,%d}' % FRAC_DIGITS,
    "zero-frac": '"." "0"{1,%d}' % FRAC_DIGITS,  # 1.0 is an integer too (Python writes a whole float so)
    "integer": '"-"? int-part zero-frac?',
    "number": '"-"? int-part frac? ([eE] [-+]? [0-9]{1,4})?',
    "boolean": '"true" | "false"',
    "null": '"null"',
    "value": "object | array | string | number | boolean | null",
    "member": 'string ws ":" ws value',
    "object": '"{" ws (member ("," ws member)* ws)? "}"',
    "array": '"[" ws (value ("," ws value)* ws)? "]"',
    # February 29 only in leap years: the last two digits a multiple of 4 but not 00, or 00 after a multiple of 4.
    "date": ('[0-9]{4} "-" (("0" [13578] | "1" [02]) "-" ("0" [1-9] | [12] [0-9] | "3" [01])'
             ' | ("0" [469] | "11") "-" ("0" [1-9] | [12] [0-9] | "30") | "02" "-" ("0" [1-9] | "1" [0-9] | "2" [0-8]))'
             ' | ([0-9]{2} ([02468] [48] | [2468] "0" | [13579] [26]) | ([02468] [048] | [13579] [26]) "00") "-02-29"'),
    "secfrac": '"." [0-9]{1,9}',
    "time": ('([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] secfrac?'
             ' ([Zz] | [-+] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]) | leap-second'),
    # A leap second is 23:59:60 UTC: at local time hh:mm only with the offset that makes it so (one ahead of UTC,
    # one behind, for each minute of the day), so each hour's minutes are a rule of their own.
    "leap-second": " | ".join(f'"{h:02d}:" leap-second-{h:02d}' for h in range(24)),
    **{f"leap-second-{h:02d}": partial(_leap_hour, h) for h in range(24)},
    "date-time": "date [Tt] time",
    "uuid": 'hex{8} "-" hex{4} "-" hex{4} "-" hex{4} "-" hex{12}',
    # Dotted quads without leading zeros (087 would be octal to some parsers).
    "ipv4": 'ipv4-octet "." ipv4-octet "." ipv4-octet "." ipv4-octet',
    "ipv4-octet": '"25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9] [0-9] | [0-9]',
    # RFC 6901: "/"-prefixed reference tokens, "~" only as ~0 or ~1; RFC draft-bhutton-relative-json-pointer-00:
    # a non-negative integer (at most 16 digits here), then "#" or a JSON pointer.
    "json-pointer": '("/" (json-pointer-char | "~" [01])*)*',
    "json-pointer-char": partial(json_chars, complement(((0x2F, 0x2F), (0x7E, 0x7E)))),
    "relative-json-pointer": '("0" | [1-9] [0-9]{0,15}) ("#" | json-pointer)',
}
_DEPS = {
    "uescape": ["hex"], "char": ["uescape"], "string": ["char"], "integer": ["int-part", "zero-frac"],
    "number": ["int-part", "frac"], "value": ["object", "array", "string", "number", "boolean", "null"],
    "member": ["string", "ws", "value"], "object": ["ws", "member"], "array": ["ws", "value"],
    "date-time": ["date", "time"], "uuid": ["hex"], "time": ["secfrac", "leap-second"], "ipv4": ["ipv4-octet"],
    "json-pointer": ["json-pointer-char"], "relative-json-pointer": ["json-pointer"],
    "leap-second": [f"leap-second-{h:02d}" for h in range(24)],
}
FORMATS = {"date", "time", "date-time", "uuid", "ipv4", "json-pointer", "relative-json-pointer"}
RESERVED = set(_PRIMITIVES) | {"root"}


class Rules:
    """The rule table shared by every schema of one grammar."""

    def __init__(self) -> None:
        self.rules: dict[str, str] = {}
        # Names are found without probing one by one (thousands of hints can normalise to one name): the rule
        # made for each (name, body), and the next free suffix of each name.
        self._made: dict[tuple[str, str], str] = {}
        self._next: dict[str, int] = {}

    def primitive(self, name: str) -> str:
        if name not in self.rules:
            body = _PRIMITIVES[name]
            self.rules[name] = body() if callable(body) else body
            for dep in _DEPS.get(name, ()):
                self.primitive(dep)
        return name

    def add(self, hint: str, body: str) -> str:
        name = re.sub(r"[^a-zA-Z0-9-]+", "-", hint).strip("-") or "schema"
        if name in RESERVED:
            name += "-"
        made = self._made.get((name, body))
        if made is not None and self.rules.get(made) == body:
            return made
        i = self._next.get(name, 0)
        candidate = f"{name}{i}" if i else name
        while candidate in self.rules:
            i += 1
            candidate = f"{name}{i}"
        self._next[name] = i + 1
        self.rules[candidate] = body
        self._made[name, body] = candidate
        return candidate

    def reserve(self, hint: str, key: str) -> str:
        """A fresh rule name whose body comes later (a recursive $ref)."""
        return self.add(hint, "\0pending " + key)

    def gbnf(self) -> str:
        pending = [n for n, b in self.rules.items() if b.startswith("\0")]
        if pending:
            raise GrammarError(f"internal: rules never defined: {pending}")
        return "".join(f"{name} ::= {body}\n" for name, body in self.rules.items())


def repeat(item: str, lo: int, hi: int | None) -> str:
    """`item` lo to hi times (hi None: no limit), in GBNF's shortest spelling."""
    if hi is None:
        return f"{item}*" if lo == 0 else f"{item}+" if lo == 1 else f"{item}{{{lo},}}"
    if (lo, hi) == (0, 1):
        return f"{item}?"
    if lo == hi:
        return f"{item}{{{lo}}}"
    return f"{item}{{{lo},{hi}}}"


# ---------------------------------------------------------------------------------------------------- numbers
def number_spellings(value: int | float) -> list[str]:
    """The spellings serializers write for a number equal to `value`: Python's (`1.0` for a float one, `1e+16`),
    JavaScript's (`1`, `1e+21`, `1e-7`) and the integer's digits, each only where it means exactly `value`."""
    if isinstance(value, float) and not math.isfinite(value):
        raise GrammarError(f"not a JSON number: {value!r}")
    as_float = float(value)
    if isinstance(value, float):  # a float equals every spelling that parses to it
        forms = [repr(value), js_number(value)]
    else:
        forms = [str(value)] + [f for f in (repr(as_float), js_number(as_float)) if Decimal(f) == value]
    if as_float.is_integer() and (isinstance(value, int) or abs(value) < 2 ** 53):
        whole = int(value)
        forms += [str(whole), f"{whole}.0"]
    return list(dict.fromkeys(forms))


def js_number(x: float) -> str:
    """JavaScript's Number.prototype.toString: the shortest digits that round-trip, in exponent form from 1e21 up
    and below 1e-6."""
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    _, digits, exp = Decimal(repr(abs(x))).normalize().as_tuple()
    ds = "".join(map(str, digits))
    k, n = len(ds), len(ds) + exp
    if k <= n <= 21:
        return sign + ds + "0" * (n - k)
    if 0 < n <= 21:
        return sign + ds[:n] + "." + ds[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * -n + ds
    e = n - 1
    return sign + ds[0] + ("." + ds[1:] if k > 1 else "") + ("e+" if e >= 0 else "e-") + str(abs(e))


# ---------------------------------------------------------------------------------------------------- strings
def string_literal(text: str) -> str:
    """GBNF for the JSON string `text` in each way a serializer commonly writes it: plain characters raw,
    `"` `\\` and controls escaped as json.dumps does (or as \\u00XX), non-ASCII raw or as \\uXXXX escapes."""
    parts: list[str] = []
    run = '"'
    for ch in text:
        if 0x20 <= ord(ch) < 0x7F and ch not in '"\\':
            run += ch
            continue
        parts += [literal(run), _spelled(ch)]
        run = ""
    parts.append(literal(run + '"'))
    return " ".join(p for p in parts if p != '""')


def _spelled(ch: str) -> str:
    """One character of a string literal: printable ASCII raw, the others in each of their spellings."""
    cp = ord(ch)
    if 0x20 <= cp < 0x7F and ch not in '"\\':
        return literal(ch)
    return json_chars(((cp, cp),))


NEST_LEVELS = 32  # levels of string_except's trie written as nested groups before one becomes a rule


def string_except(names: list[str], rules: Rules) -> str:
    """A JSON string whose content is none of `names`, however it is spelled: a trie of the names' characters
    that the string may leave at any point, by any spelling of any other character (\\u0061 leaves the trie
    only where "a" would)."""
    char = rules.primitive("char")
    trie: dict = {}
    for n in names:
        node = trie
        for ch in n:
            node = node.setdefault(ch, {})
        node[None] = True
    # Each node's expression once its children's are known, without recursion (a name can be thousands of
    # characters long). Each level nests one group in the next: every NEST_LEVELS levels become a rule of their
    # own, which keeps the grammar's parentheses shallow.
    order, pending = [], [trie]
    while pending:
        node = pending.pop()
        order.append(node)
        pending.extend(sub for ch, sub in node.items() if ch is not None)
    expression: dict[int, str] = {}
    height: dict[int, int] = {}
    for node in reversed(order):
        children = [(ch, sub) for ch, sub in node.items() if ch is not None]
        if not children:
            expression[id(node)], height[id(node)] = f"{char}+", 0  # a whole name: at least one more character
            continue
        alts = [f"{json_chars(((ord(ch), ord(ch)),))} {expression[id(sub)]}" for ch, sub in children]
        others = complement(tuple((ord(ch), ord(ch)) for ch, _ in children))
        alts.append(f"{json_chars(others)} {char}*")
        body = "(" + " | ".join(alts) + ")"
        body = body if None in node else body + "?"
        level = 1 + max(height[id(sub)] for _, sub in children)
        if level % NEST_LEVELS == 0:
            body, level = rules.add("key-except", body), 0
        expression[id(node)], height[id(node)] = body, level
    return f'"\\"" {expression[id(trie)]} "\\""'


# ---------------------------------------------------------------------------------------------------- numbers
def _digits(lo: int, hi: int) -> str:
    return f"[{lo}]" if lo == hi else f"[{lo}-{hi}]"


def _fixed_range(x: str, y: str) -> str:
    """Digit strings of one length from x to y (x <= y), as unambiguous alternatives."""
    if x == y:
        return literal(x)
    k = 0
    while x[k] == y[k]:
        k += 1
    if k:
        inner = _fixed_range(x[k:], y[k:])
        return f"{literal(x[:k])} ({inner})" if "|" in inner else f"{literal(x[:k])} {inner}"
    n = len(x)
    if n == 1:
        return _digits(int(x), int(y))
    x0, y0, xr, yr = int(x[0]), int(y[0]), x[1:], y[1:]
    zeros, nines = "0" * (n - 1), "9" * (n - 1)
    alts = []
    if xr != zeros:
        inner = _fixed_range(xr, nines)
        alts.append(f'"{x0}" ({inner})' if "|" in inner else f'"{x0}" {inner}')
    lo_d = x0 if xr == zeros else x0 + 1
    hi_d = y0 if yr == nines else y0 - 1
    if lo_d <= hi_d:
        alts.append(f"{_digits(lo_d, hi_d)} " + repeat("[0-9]", n - 1, n - 1).replace("{1}", ""))
    if yr != nines:
        inner = _fixed_range(zeros, yr)
        alts.append(f'"{y0}" ({inner})' if "|" in inner else f'"{y0}" {inner}')
    return " | ".join(alts)


def uint_range(a: int, b: int) -> str:
    """Decimal numerals (no leading zeros) of the integers a..b, 0 <= a <= b."""
    alts, full = [], []
    for length in range(len(str(a)), len(str(b)) + 1):
        first = 10 ** (length - 1) if length > 1 else 0
        last = 10 ** length - 1
        lo, hi = max(a, first), min(b, last)
        if lo > hi:
            continue
        if length > 1 and (lo, hi) == (first, last):
            full.append(length)
            continue
        alts.append(_fixed_range(str(lo), str(hi)))
    if full:  # consecutive whole lengths fold into one repetition
        alts.append("[1-9] " + repeat("[0-9]", full[0] - 1, full[-1] - 1).replace("{1}", ""))
    return " | ".join(f"({x})" if "|" in x and len(alts) > 1 else x for x in alts)


def int_range(lo: int, hi: int) -> str:
    """Integer numerals from lo to hi; no "-0"."""
    alts = []
    if lo < 0:
        alts.append(f'"-" ({uint_range(max(1, -hi), -lo)})')
    if hi >= 0:
        alts.append(uint_range(max(0, lo), hi))
    return " | ".join(f"({x})" if "|" in x and len(alts) > 1 else x for x in alts)


def _split(x) -> tuple[int, str]:
    """A non-negative bound's integer part and its fraction's digits, without trailing zeros."""
    whole = int(x)
    digits = format(Decimal(x) - whole, "f").partition(".")[2].rstrip("0")
    return whole, digits


def _fraction(lo: str, lo_x: bool, hi: str | None, hi_x: bool) -> str | None:
    """An optional fraction `.ddd` (at most FRAC_DIGITS digits, none meaning .0) whose value lies between 0.lo and
    0.hi (hi None: below 1), exclusive where flagged; None if no fraction does. Digit by digit, each position
    knowing whether the digits so far equal lo's and hi's (a digit-wise comparison, so trailing zeros are equal)."""
    def digit(s: str, i: int) -> int:
        return int(s[i]) if i < len(s) else 0

    def stop_ok(i: int, tight_lo: bool, tight_hi: bool) -> bool:  # the digits end here: the rest are zeros
        if tight_lo and (lo[i:].strip("0") or lo_x):
            return False  # below lo, or equal to an exclusive lo
        return not (tight_hi and hi is not None and not hi[i:].strip("0") and hi_x)

    def after(i: int, tight_lo: bool, tight_hi: bool) -> str | None:
        """The digits from position i on (at least one when i is 0), or None where none satisfy the bounds."""
        if not tight_lo and not tight_hi:
            return repeat("[0-9]", 1 if i == 0 else 0, FRAC_DIGITS - i) if i < FRAC_DIGITS else ""
        options = []
        if i < FRAC_DIGITS:
            d_lo = digit(lo, i) if tight_lo else 0
            d_hi = digit(hi, i) if tight_hi else 9
            if d_lo > d_hi:
                groups = []
            elif d_lo == d_hi:
                groups = [(d_lo, d_lo, tight_lo, tight_hi)]
            else:  # lo's digit (still tight on lo), the digits between (free), hi's digit (still tight on hi)
                groups = [(d_lo, d_lo, tight_lo, False), (d_lo + 1, d_hi - 1, False, False), (d_hi, d_hi, False, tight_hi)]
            for d0, d1, next_lo, next_hi in groups:
                if d0 > d1:
                    continue
                tail = after(i + 1, next_lo, next_hi)
                if tail is not None:
                    head = f"[{d0}]" if d0 == d1 else f"[{d0}-{d1}]"
                    options.append(f"{head} {tail}".strip() if "|" not in tail else f"{head} ({tail})")
        stop = i > 0 and stop_ok(i, tight_lo, tight_hi)
        if not options:
            return "" if stop else None
        body = " | ".join(options)
        return f"({body})?" if stop else body

    digits = after(0, True, hi is not None)
    zero_ok = stop_ok(0, True, hi is not None)
    if digits is None:
        return "" if zero_ok else None
    return f'("." ({digits}))?' if zero_ok else f'"." ({digits})'


def _magnitudes(a, a_x: bool, b, b_x: bool, rules: Rules) -> list[str]:
    """Plain decimals m (no sign, no exponent) with a <= m <= b (exclusive where flagged; b None: unbounded up to
    MAX_INT's digits); a and b are integers or Decimals."""
    frac = rules.primitive("frac")
    (whole_a, frac_a), alts = _split(a), []
    if b is None:
        alts.append(f"{literal(str(whole_a))} {_fraction(frac_a, a_x, None, False)}".strip())
        if whole_a < MAX_INT:
            alts.append(f"({uint_range(whole_a + 1, MAX_INT)}) {frac}?")
        return alts
    whole_b, frac_b = _split(b)
    if whole_a == whole_b:
        part = _fraction(frac_a, a_x, frac_b, b_x)
        return [] if part is None else [f"{literal(str(whole_a))} {part}".strip()]
    alts.append(f"{literal(str(whole_a))} {_fraction(frac_a, a_x, None, False)}".strip())
    if whole_a + 1 <= whole_b - 1:
        alts.append(f"({uint_range(whole_a + 1, whole_b - 1)}) {frac}?")
    top = _fraction("", False, frac_b, b_x)
    if top is not None:
        alts.append(f"{literal(str(whole_b))} {top}".strip())
    return alts


def number_range(lo, lo_x, hi, hi_x, rules: Rules) -> str:
    alts = []
    if lo is None or lo < 0:  # negatives: -m with m from max(-hi, 0) to -lo
        m_lo, m_lo_x = (0, False) if hi is None or hi > 0 else (-hi, hi_x)
        m_hi = None if lo is None else -lo
        if m_hi is None or m_lo < m_hi or (m_lo == m_hi and not m_lo_x and not lo_x):
            mags = _magnitudes(m_lo, m_lo_x, m_hi, bool(lo_x), rules)
            if mags:
                alts.append('"-" (' + " | ".join(mags) + ")")
    if hi is None or hi > 0 or (hi == 0 and not hi_x):
        a, a_x = (0, False) if lo is None or lo < 0 else (lo, lo_x)
        if hi is None or a < hi or (a == hi and not a_x and not hi_x):
            alts += _magnitudes(a, a_x, hi, bool(hi_x), rules)
    if not alts:
        raise NoDocumentError("JSON schema: the number bounds admit no value")
    return " | ".join(alts)

