"""GBNF parsing (what it accepts, how it refuses) and the byte-level matcher (what it matches)."""
from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmchat.errors import GrammarError
from llmchat.grammar import Grammar
from llmchat.grammar import gbnf


def full(grammar: Grammar, data: bytes | str) -> bool:
    m = grammar.matcher()
    return m.advance(data.encode() if isinstance(data, str) else data) and m.can_end


# ------------------------------------------------------------------------------------------------ refusals
@pytest.mark.parametrize("text, pattern", [
    ('root ::= foo\n', r"undefined rule 'foo' referenced at line 1, column 10"),
    ('root ::= "a"\n  x ::= "b" y\n', r"undefined rule 'y' referenced at line 2, column 13"),
    ('root ::= "a\\q"\n', r"unknown escape \\q at line 1, column 12 \(in rule 'root'\)"),
    ('root ::= "\\x4"\n', r"\\x needs 2 hex digits"),
    ('root ::= "\\uD800"\n', r"not a Unicode scalar value"),
    ('root ::= "abc\n', r"unterminated string literal at line 1, column 10"),
    ('root ::= [abc\n', r"unterminated character class"),
    ('root ::= [z-a]\n', r"reversed"),
    ('root ::= ("a" | "b"\n', r"expected '\)' to close the group opened at line 1, column 10"),
    ('root ::= expr\nexpr ::= expr "+" "1" | "1"\n', r"rule 'expr' is left-recursive \(expr -> expr\)"),
    ('root ::= a\na ::= b "x" | "y"\nb ::= "z"? a\n', r"rule '[ab]' is left-recursive"),
    ('root ::= "a" root\n', r"matches no input at all: rule 'root' can never complete"),
    ('root ::= []\n', r"matches no input at all"),
    ('root ::= "a" x\nx ::= "b" x\n', r"never complete: root, x"),
    ('item ::= "a"\n', r"no rule named 'root'.*rules defined: item"),
    ('root ::= "a"\nroot ::= "b"\n', r"rule 'root' is defined twice \(first at line 1, column 1\)"),
    ('root "a"\n', r"expected '::=' after the rule name 'root'"),
    ('root ::= * "a"\n', r"'\*' has nothing before it to repeat"),
    ('root ::= "a"{3,1}\n', r"maximum below its minimum"),
    ('root ::= "a"{2\n', r"expected '}' or ','"),
    ('root ::= "a"{99999}\n', r"exceeds the limit"),
    ('root ::= "a" ) "b"\n', r"unexpected '\)' at line 1, column 14"),
    ('root ::= <|end|>\n', r"not bound to a vocabulary"),
    ('root ::= !<[5]>\n', r"negated tokens"),
    ('root ::= "a"\n  | "b"\n', r"expected a rule name, found '\|' at line 2, column 3"),  # as llama.cpp
])
def test_refusals_say_what_and_where(text: str, pattern: str) -> None:
    with pytest.raises(GrammarError, match=pattern):
        Grammar.parse(text)


def test_unknown_special_token_when_bound() -> None:
    with pytest.raises(GrammarError, match=r"<\|nope\|> is not a special token"):
        Grammar.parse("root ::= <|nope|>\n", special={"<|end|>": 3})


def test_ambiguity_cap_raises_instead_of_hanging() -> None:
    # Each "a" doubles the parses (close with "b" or "c" later): exponential without a cap.
    g = Grammar.parse('root ::= "a" root "b" | "a" root "c" | ""\n')
    m = g.matcher()
    with pytest.raises(GrammarError, match="too ambiguous"):
        m.advance(b"a" * 20)


# ------------------------------------------------------------------------------------------------ syntax
def test_syntax_features_and_layout() -> None:
    g = Grammar.parse(r'''
# a comment line
root ::= greeting ws name (
    "!" |       # groups may span lines
    "?"
  )
greeting ::= "hi" | "hello" |  # trailing comment; a rule goes on after | or ::=
  "hey"
ws ::= [ \t]+
name ::= [A-Z] [a-z_\-]*
''')
    assert full(g, "hello Ada!")
    assert full(g, "hey\t\tBob-by_x?")
    assert not full(g, "hey bob!")
    assert not full(g, "hello Ada")


def test_escapes_in_literals_and_classes() -> None:
    g = Grammar.parse(r'root ::= "\x41\u00e9\U0001F600\t\n\r\\\"" [\[\]\-] "\[\]"' + "\n")
    assert full(g, "Aé😀\t\n\r\\\"-[]")
    assert full(g, "Aé😀\t\n\r\\\"][]")
    assert not full(g, "Aé😀\t\n\r\\\"x[]")


def test_repetition_bounds() -> None:
    cases = {
        '"a"{2,4}': (["aa", "aaa", "aaaa"], ["", "a", "aaaaa"]),
        '"a"{3}': (["aaa"], ["aa", "aaaa"]),
        '"a"{2,}': (["aa", "a" * 50], ["a", ""]),
        '"a"{0,2}': (["", "a", "aa"], ["aaa"]),
        '"ab"*': (["", "ab", "abab"], ["a", "aba", "ba"]),
        '"ab"+': (["ab", "abab"], [""]),
        '"ab"?': (["", "ab"], ["abab"]),
        '("a" "b"{2}){3}': (["abbabbabb"], ["abbabb", "ababab"]),
        '(("x"{1,2}) ","){2,3}': (["x,xx,", "xx,x,x,"], ["x,", "xxx,x,", "x,x,x,x,"]),
        '[0-9]{1,3} ("." [0-9]+)?': (["1", "123", "12.5", "1.25"], ["1234", "1.", ".5"]),
    }
    for body, (good, bad) in cases.items():
        g = Grammar.parse(f"root ::= {body}\n")
        for s in good:
            assert full(g, s), (body, s)
        for s in bad:
            assert not full(g, s), (body, s)


def test_large_bounds_stay_linear() -> None:
    g = Grammar.parse('root ::= "ab"{0,5000} "c"\n')
    assert full(g, "ab" * 5000 + "c")
    assert not full(g, "ab" * 5001 + "c")


def test_nested_and_recursive_rules() -> None:
    g = Grammar.parse(r'''
root ::= list
list ::= "(" ws (item (ws "," ws item)*)? ws ")"
item ::= list | [a-z]+
ws ::= " "*
''')
    for s in ["()", "(a)", "(a, (b, c), ((d)))", "( ( ) )"]:
        assert full(g, s), s
    for s in ["(", "(a,)", "(a b)", "((a)", "a"]:
        assert not full(g, s), s


# ------------------------------------------------------------------------------------------------ UTF-8
def test_utf8_classes_are_whole_characters() -> None:
    g = Grammar.parse('root ::= [^"\\\\]+\n')
    for s in ["a", "é", "€", "😀", "aé€😀\x7f", "\x00"]:
        assert full(g, s), s
    for s in ['"', "\\", 'a"']:
        assert not full(g, s), s
    for raw in [b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80"]:  # invalid UTF-8
        assert not full(g, raw), raw
    m = g.matcher()
    assert m.advance(b"\xe2\x82")  # a partial character is a viable prefix, not a match
    assert not m.can_end
    assert m.advance(b"\xac") and m.can_end


def test_ranges_across_encoded_lengths() -> None:
    g = Grammar.parse("root ::= [\\x7e-\\u0801\\U0010FFF0-\\U0010FFFF]\n")
    for cp in [0x7E, 0x7F, 0x80, 0x7FF, 0x800, 0x801, 0x10FFF0, 0x10FFFF]:
        assert full(g, chr(cp)), hex(cp)
    for cp in [0x7D, 0x802, 0xFFFF, 0x10000, 0x10FFEF]:
        assert not full(g, chr(cp)), hex(cp)


def test_negated_class_and_any() -> None:
    g = Grammar.parse("root ::= [^a-zé] . \n")
    assert full(g, "A😀")
    assert full(g, "€\n")
    assert not full(g, "éx")
    assert not full(g, "qx")
    assert not full(g, b"A\xff")
    assert not full(g, "A")


def test_utf8_sequences_match_python_encoder() -> None:
    # Each code point in a sample is accepted by exactly one sequence, and points outside by none.
    from llmchat.grammar import utf8
    ranges = utf8.normalize([(0x41, 0x5A), (0x3B1, 0x3C9), (0x4E00, 0x9FFF), (0x1F600, 0x1F64F)], negate=True)
    seqs = utf8.byte_sequences(ranges)
    inside = lambda cp: not (0x41 <= cp <= 0x5A or 0x3B1 <= cp <= 0x3C9 or 0x4E00 <= cp <= 0x9FFF  # noqa: E731
                             or 0x1F600 <= cp <= 0x1F64F or 0xD800 <= cp <= 0xDFFF)
    for cp in list(range(0, 0x1000)) + list(range(0x4DF0, 0x4E10)) + list(range(0xD7F0, 0xE010)) + \
            list(range(0x1F5F0, 0x1F660)) + [0xFFFF, 0x10000, 0x10FFFF]:
        if 0xD800 <= cp <= 0xDFFF:
            continue
        enc = chr(cp).encode()
        hits = sum(1 for s in seqs if len(s) == len(enc) and all(lo <= b <= hi for b, (lo, hi) in zip(enc, s)))
        assert hits == (1 if inside(cp) else 0), hex(cp)


# ------------------------------------------------------------------------------------------------ matcher
def test_special_tokens_are_symbols_not_text() -> None:
    g = Grammar.parse('root ::= "x"+ <|end|> | "y" <[5]>\n', special={"<|end|>": 7})
    assert g.special_ids == {5, 7}
    m = g.matcher()
    assert m.advance(b"xx")
    assert not m.accepts(b"<|end|>")
    assert not m.accepts([256 + 5])
    assert m.advance([256 + 7]) and m.finished
    m = g.matcher()
    assert m.advance([ord("y"), 256 + 5]) and m.finished


def test_reject_leaves_state_unchanged_and_finished() -> None:
    g = Grammar.parse('root ::= "ab" ("c" | "")\n')
    m = g.matcher()
    key = m.key
    assert not m.advance(b"ax")
    assert m.key == key and not m.can_end
    assert m.advance(b"ab") and m.can_end and not m.finished
    assert m.advance(b"c") and m.finished
    assert not m.accepts(b"c")
    assert Grammar.parse('root ::= ""\n').matcher().finished


def test_parse_is_cached() -> None:
    text = 'root ::= "cached"\n'
    assert Grammar.parse(text) is Grammar.parse(text)
    assert Grammar.parse(text) is not Grammar.parse(text, special={"<x>": 1})


def test_equal_keys_for_equal_futures() -> None:
    g = Grammar.parse('root ::= ("a" | "b")* "."\n')
    m1, m2 = g.matcher(), g.matcher()
    m1.advance(b"ab")
    m2.advance(b"bbba")
    assert m1.key == m2.key
    assert hash(m1.key) == hash(m2.key)


# ------------------------------------------------------------------------------------------------ properties
_PROPERTY_GRAMMAR = r'''
root   ::= value
value  ::= object | array | string | number | ("true" | "false" | "null")
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? ws "}"
array  ::= "[" ws ( value ("," ws value)* )? ws "]"
string ::= "\"" ( [^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) ){0,8} "\""
number ::= "-"? ([0-9] | [1-9] [0-9]{1,5}) ("." [0-9]{1,3})? ([eE] [-+]? [0-9]{1,2})?
ws     ::= [ \t\n]{0,2}
'''


@st.composite
def sentences(draw: st.DrawFn, text: str = _PROPERTY_GRAMMAR, max_depth: int = 4) -> bytes:
    """A random member of the grammar's language, drawn from the parsed rules."""
    rules = gbnf.parse(text).rules
    depth_needed = _min_depths(rules)
    out = bytearray()

    def expand(name: str, depth: int) -> None:
        alts = rules[name]
        if depth >= max_depth:  # only alternatives that finish fastest
            best = min(_alt_depth(a, depth_needed) for a in alts)
            alts = [a for a in alts if _alt_depth(a, depth_needed) == best]
        alt = draw(st.sampled_from(alts))
        for tag, value in alt:
            if tag == "b":
                out.append(draw(st.sampled_from([b for b in range(256) if value >> b & 1])))
            else:
                expand(value, depth + 1)

    expand("root", 0)
    return bytes(out)


def _alt_depth(alt: list, depths: dict[str, float]) -> float:
    return max([depths[v] for t, v in alt if t == "r"], default=0)


def _min_depths(rules: dict) -> dict[str, float]:
    depths = {name: float("inf") for name in rules}
    for _ in range(len(rules) + 1):
        for name, alts in rules.items():
            depths[name] = min(depths[name], min(_alt_depth(a, depths) + 1 for a in alts))
    return depths


_JSONISH = Grammar.parse(_PROPERTY_GRAMMAR)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sentences())
def test_sentences_of_the_grammar_are_accepted_byte_by_byte(doc: bytes) -> None:
    m = _JSONISH.matcher()
    for b in doc:
        assert m.advance([b]), doc
    assert m.can_end, doc


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sentences(), st.data())
def test_accepts_equals_advance_and_clones_are_independent(doc: bytes, data: st.DataObject) -> None:
    cut = data.draw(st.integers(0, len(doc)))
    m = _JSONISH.matcher()
    assert m.advance(doc[:cut])
    tail = data.draw(st.one_of(st.just(doc[cut:]), st.binary(max_size=6), st.just(doc[cut:cut + 3] + b"}")))
    key = m.key
    expected = m.accepts(tail)
    assert m.key == key
    twin = m.clone()
    assert twin.advance(tail) == expected
    assert m.key == key  # the clone moved, the original did not
    assert m.advance(tail) == expected


_REGEX_PAIRS = [
    ('root ::= [a-c]{1,3} ("x" | [^a-z]+)?\n', r"[a-c]{1,3}(?:x|[^a-z]+)?"),
    ('root ::= ("ab" | "a") "b"* [0-9]?\n', r"(?:ab|a)b*[0-9]?"),
    ('root ::= ([é-ü] | "\\n" | .)+ "!"\n', r"(?:[é-ü]|\n|.|\n)+!"),
]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(range(len(_REGEX_PAIRS))),
       st.text(alphabet=st.sampled_from(list("abcx09!\né€Zq")), max_size=8))
def test_matches_python_re_on_equivalent_patterns(which: int, text: str) -> None:
    gbnf_text, pattern = _REGEX_PAIRS[which]
    assert full(Grammar.parse(gbnf_text), text) == bool(re.fullmatch(pattern, text, re.DOTALL)), text


def test_state_table_restarts_when_full(monkeypatch: pytest.MonkeyPatch) -> None:
    from llmchat.grammar import grammar as grammar_module
    monkeypatch.setattr(grammar_module, "MAX_STATES", 8)
    g = grammar_module.Grammar(gbnf.parse('root ::= "(" root ")" | [a-z]{0,30}\n'), "root")
    text = b"((((" + b"abcdefghijklmnopqrstuvwxyz" + b"))))"
    m = g.matcher()
    for b in text:
        assert m.advance([b])
        assert len(g._states) <= 8
    assert m.can_end
    assert full(g, text) and not full(g, text + b")")
    fresh = g.matcher()
    assert g._states.get(fresh.key) is fresh.state  # new matchers start from the current table
