"""regex -> GBNF: the grammar accepts exactly the strings re.fullmatch accepts, with ECMA-262's classes (ASCII \\d and
\\w, Unicode's white space for \\s)."""
from __future__ import annotations

import random
import re

import pytest
from hypothesis import given, settings, strategies as st

from llmchat.errors import GrammarError
from llmchat.grammar import Grammar
from llmchat.grammar.regex import parse_regex, regex_to_gbnf

from schema_corpus import regex_sample

PATTERNS = [
    r"^\d{3}-\d{4}$", r"[a-z]+(?:\.[a-z]+)*@example\.com", r"(ab|cd)*x?", r"[^abc]\w\s\.", r"a|b|",
    r"^[A-Z]{2}[0-9]{8,12}$", r"(?P<year>\d{4})-(?P<m>0[1-9]|1[0-2])", r"[\d\-+]{2,}", r"colou?r",
    r"\"[^\"\\]*\"", r"[\x41-\x46\u00e9]+", r"(a|ab)(c|bcd)(d*)", r"x{2}y{0,3}z{1,}", r"[\]\[]+", r".{1,4}",
    r"[-a]\t\n", r"a+?b*?c??", r"\W\D\S", r"(?:(?:a|b)c){1,3}",
]


# ECMA-262's \s, which Python's re (ASCII or Unicode) does not have as a class of its own.
ECMA_SPACE = "\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"


def fullmatch(pattern: str, text: str) -> bool:
    """ECMA-262's answer, from re in ASCII mode with \\s and \\S spelled out (the patterns here use them outside
    classes only)."""
    spelled = pattern.replace(r"\s", f"[{ECMA_SPACE}]").replace(r"\S", f"[^{ECMA_SPACE}]")
    return re.fullmatch(spelled, text, re.ASCII) is not None


def accepts(grammar: Grammar, text: str) -> bool:
    m = grammar.matcher()
    return m.advance(text.encode("utf-8")) and m.can_end


GRAMMARS = {p: Grammar.parse(regex_to_gbnf(p)) for p in PATTERNS}
ALPHABET = "abcdxyzr0159-+.@ \t\n\"\\[]ABCFéü日_:\u00a0\u2028"


@pytest.mark.parametrize("pattern", PATTERNS)
def test_matching_strings_accepted(pattern):
    rng = random.Random(pattern)
    tree = parse_regex(pattern)
    for _ in range(60):
        s = regex_sample(tree, rng, ascii_only=rng.random() < 0.7)
        assert fullmatch(pattern, s), (pattern, s)
        assert accepts(GRAMMARS[pattern], s), (pattern, s)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(PATTERNS), st.text(alphabet=ALPHABET, max_size=12))
def test_agrees_with_re_on_random_strings(pattern, s):
    assert accepts(GRAMMARS[pattern], s) == fullmatch(pattern, s), (pattern, s)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(PATTERNS), st.data())
def test_mutated_matches(pattern, data):
    """Near misses: one character of a matching string changed, added or removed."""
    rng = random.Random(data.draw(st.integers(0, 10 ** 6)))
    s = regex_sample(parse_regex(pattern), rng)
    i = data.draw(st.integers(0, len(s)))
    op = data.draw(st.sampled_from(["ins", "del", "sub"]))
    c = data.draw(st.sampled_from(ALPHABET))
    t = s[:i] + c + s[i:] if op == "ins" else s[:i] + s[i + 1:] if op == "del" else s[:i] + c + s[i + 1:]
    assert accepts(GRAMMARS[pattern], t) == fullmatch(pattern, t), (pattern, t)


@pytest.mark.parametrize("pattern,fragment", [
    (r"(a)\1", "backreference"), (r"(?P<x>a)(?P=x)", "backreference"), (r"a(?=b)", "lookahead"),
    (r"a(?!b)", "lookahead"), (r"(?<=a)b", "lookbehind"), (r"(?<!a)b", "lookbehind"), (r"\bword", "word boundary"),
    (r"(?i)abc", "inline flags"), (r"a^b", "anchor"), (r"a$b", "anchor"), (r"(?>a)", "atomic"), (r"a++", "possessive"),
    (r"(a", "missing ')'"), (r"a)", "unbalanced"), (r"[a", "unterminated"), (r"*a", "nothing to repeat"),
    (r"\k<x>", "backreference"), (r"[z-a]", "reversed"), (r"\q", "unknown escape"),
])
def test_refused(pattern, fragment):
    with pytest.raises(GrammarError) as info:
        regex_to_gbnf(pattern)
    assert fragment in str(info.value)


def test_json_schema_pattern_search_semantics():
    """A JSON Schema pattern without anchors matches anywhere in the string (re.search)."""
    from llmchat.grammar.json_schema import schema_to_gbnf
    import json
    g = Grammar.parse(schema_to_gbnf({"type": "string", "pattern": "b[0-9]"}))
    for s in ["b1", "xxb2yy", "ab", "b", "", 'q"b3\\', "\nb4"]:
        assert accepts(g, json.dumps(s)) == bool(re.search("b[0-9]", s)), s
