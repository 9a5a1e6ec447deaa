"""VocabIndex: the tokens a grammar state allows equal a token-by-token check of the whole vocabulary."""
from __future__ import annotations

from pathlib import Path

import pytest

from llmchat.gguf.file import open_gguf
from llmchat.grammar import AllowedSet, Grammar, VocabIndex
from llmchat.tokenizer.tokenizer import Tokenizer
from llmchat.tokenizer.vocabulary import TokenType

JSONISH = r'''
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= "-"? ([0-9] | [1-9] [0-9]{0,15}) ("." [0-9]+)? ([eE] [-+]? [0-9]{1,4})? ws
ws     ::= | " " | "\n" [ \t]{0,20}
'''

DOC = ('{"name": "Ada Lovelace", "born": 1815, "tags": ["math", "poetry"],\n  "nested": {"a": [1, 2.5, -3e10, '
       'true, null], "b": "caf\u00e9 \\"quoted\\" \u00fcber \U0001F600"}, "empty": {}, "list": []}')


def brute_force(tokenizer: Tokenizer, matcher) -> list[int]:
    """Every token checked on its own, straight from the tokenizer (no trie, no VocabIndex)."""
    out = []
    named = matcher.grammar.special_ids
    for tid in range(tokenizer.vocab_size):
        if tokenizer.is_control(tid) or tid in tokenizer.eog_ids:
            ok = matcher.accepts([256 + tid])
        else:
            piece = tokenizer.token_bytes(tid)
            ok = bool(piece) and matcher.accepts(piece) or (tid in named and matcher.accepts([256 + tid]))
        if ok:
            out.append(tid)
    return out


def check_state(index: VocabIndex, tokenizer: Tokenizer, matcher) -> AllowedSet:
    allowed = index.allowed(matcher)
    expected = brute_force(tokenizer, matcher)
    assert list(allowed) == expected
    assert len(allowed) == len(expected)
    bits = allowed.bitset()
    assert len(bits) == (tokenizer.vocab_size + 7) // 8
    assert [i for i in range(tokenizer.vocab_size) if bits[i >> 3] >> (i & 7) & 1] == expected
    return allowed


# ------------------------------------------------------------------------------------------------ synthetic
def synthetic() -> Tokenizer:
    entries = [("<unk>", TokenType.UNKNOWN), ("<s>", TokenType.CONTROL), ("</s>", TokenType.CONTROL),
               ("<|end|>", TokenType.CONTROL), ("<unused0>", TokenType.UNUSED), ("<b>", TokenType.USER_DEFINED)]
    entries += [(f"<0x{b:02X}>", TokenType.BYTE) for b in range(256)]
    pieces = ["▁", "a", "b", "▁a", "{", "}", '"', '{"', '":', "1", "12", "123", "é", "\\", '\\"', "▁{", "true",
              "tr", "ue", ",▁", ":▁", "▁\"", "\"}", "[", "]", "[]", "{}", "null", "nu", "ll", "-", ".", "5", "e",
              "\n", "▁▁", "ab", "abc", "€", "😀", "}}", "\"]", "1.5", "]}", "a\"", "▁true"]
    entries += [(p, TokenType.NORMAL) for p in pieces]
    tokens = [t for t, _ in entries]
    return Tokenizer.from_metadata({"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": tokens,
                                    "tokenizer.ggml.token_type": [int(k) for _, k in entries],
                                    "tokenizer.ggml.add_space_prefix": False})


def test_synthetic_vocabulary_matches_brute_force() -> None:
    tok = synthetic()
    index = VocabIndex(tok)
    g = Grammar.parse(JSONISH)
    for prefix in ["", "{", '{"', '{"a', '{"a":', '{"a": ', '{"a": 1', '{"a": "é', '{"a": tr', '{"a": [1, {}',
                   '{"a": "\\', '{"a": "\\u00', '{"a": "\xe2\x82', '{"a": 1}', '{"a": ["x', '{"a": {"b": "x',
                   '{"a": [[1, ["x', '{"a": [1', '{"a": {"b": 1']:
        m = g.matcher()
        assert m.advance(prefix.encode("latin-1") if "\xe2" in prefix else prefix.encode())
        allowed = check_state(index, tok, m)
        for tid in range(tok.vocab_size):
            assert index.allows(m, tid) == (tid in allowed)
    m = g.matcher()
    assert tok.token_id("<0x41>") not in index.allowed(m)  # "A" cannot open an object
    assert tok.token_id("{") in index.allowed(m) and tok.token_id("<0x7B>") in index.allowed(m)


@pytest.mark.parametrize("text, prefixes", [
    ('root ::= "\\"" [^"\\\\]* "\\"" "}"\n', ["", '"', '"ab', '"\xc3']),     # a text loop: subtrees skipped whole
    ('root ::= "\\"" [^"\\\\\u00e9]* "\\""\n', ['"', '"a']),                # é excluded: no loop
    ('root ::= [^"]*\n', ["", "a"]),                                           # a loop that can end
    ('root ::= "\\"" ([a-z ] | [^\\x00-\\x7f])* "\\""\n', ['"', '"ab']),      # plain ASCII not all taken
    ('root ::= "[" ("\\"" [^"]* "\\"" ("," "\\"" [^"]* "\\"")*)? "]"\n', ['["', '["a","']),
])
def test_text_loops_match_brute_force(text: str, prefixes: list[str]) -> None:
    tok = synthetic()
    index = VocabIndex(tok)
    g = Grammar.parse(text)
    for prefix in prefixes:
        m = g.matcher()
        assert m.advance(prefix.encode("latin-1")), prefix
        check_state(index, tok, m)


def test_special_and_empty_tokens_only_when_named() -> None:
    tok = synthetic()
    index = VocabIndex(tok)
    unnamed = Grammar.parse('root ::= [a-z<>|/]+\n')
    m = unnamed.matcher()
    allowed = index.allowed(m)
    for text in ("<s>", "</s>", "<|end|>", "<unk>", "<unused0>"):
        assert tok.token_id(text) not in allowed, text
    assert tok.token_id("<b>") in allowed  # USER_DEFINED tokens are text
    end = tok.token_id("<|end|>")
    named = Grammar.parse('root ::= "a"+ <|end|>\n', special={"<|end|>": end})
    m = named.matcher()
    assert end not in index.allowed(m)
    assert m.advance(b"a")
    allowed = check_state(index, tok, m)
    assert end in allowed and tok.token_id("</s>") not in allowed
    assert index.advance(m, end) and m.finished


def test_context_free_part_is_shared_across_depths() -> None:
    # Inside a string the allowed tokens differ only by what may follow the closing quote: `"]` in an array,
    # `"}` in an object. The part decided inside the string is walked once and shared.
    tok = synthetic()
    index = VocabIndex(tok)
    g = Grammar.parse(JSONISH)
    in_array, in_object = g.matcher(), g.matcher()
    assert in_array.advance(b'{"a": ["x') and in_object.advance(b'{"a": {"b": "x')
    a, o = index.allowed(in_array), index.allowed(in_object)
    assert in_array.state.relative() is in_object.state.relative()
    assert tok.token_id('"]') in a and tok.token_id('"]') not in o
    assert tok.token_id('"}') in o and tok.token_id('"}') not in a
    assert tok.token_id("abc") in a and tok.token_id("abc") in o
    assert index.stats["misses"] == 2 and len(index._cache) == 3  # two states, one shared relative walk


def test_named_normal_token_by_id() -> None:
    tok = synthetic()
    index = VocabIndex(tok)
    abc = tok.token_id("abc")
    g = Grammar.parse(f"root ::= <[{abc}]> \"!\"\n")
    m = g.matcher()
    assert list(index.allowed(m)) == [abc]
    assert not index.allows(m, tok.token_id("a"))
    assert index.advance(m, abc) and m.advance(b"!") and m.finished


def test_cache_hits_and_bounded_size() -> None:
    tok = synthetic()
    index = VocabIndex(tok, cache_ids=60)
    g = Grammar.parse(JSONISH)
    m = g.matcher()
    first = index.allowed(m)
    assert index.allowed(g.matcher()) is first  # same grammar, same state: cached
    assert index.stats["hits"] == 1
    for prefix in ['{"', '{"a', '{"a":', '{"a": 1']:
        m = g.matcher()
        m.advance(prefix.encode())
        index.allowed(m)
    assert index._cached_ids <= 60 or len(index._cache) == 1


# ------------------------------------------------------------------------------------------------ real vocabularies
def walk_document(tokenizer: Tokenizer, every: int) -> None:
    index = VocabIndex.for_tokenizer(tokenizer)
    assert VocabIndex.for_tokenizer(tokenizer) is index
    g = Grammar.parse(JSONISH)
    m = g.matcher()
    ids = tokenizer.encode(DOC)
    assert tokenizer.decode(ids) == DOC
    checked = 0
    for i, tid in enumerate(ids):
        if i % every == 0:
            allowed = check_state(index, tokenizer, m)
            checked += 1
        else:
            allowed = index.allowed(m)
        assert tid in allowed and index.allows(m, tid)
        assert index.advance(m, tid)
        assert not allowed.bitset() == b"" and not any(e in allowed for e in tokenizer.eog_ids)
    assert m.can_end
    assert checked >= 4


@pytest.mark.model
def test_smollm2_vocabulary(smollm2_path: Path) -> None:
    with open_gguf(smollm2_path) as f:
        tok = Tokenizer.from_metadata(f.metadata)
    walk_document(tok, every=6)


@pytest.mark.model
def test_gemma3_vocabulary(gemma3_path: Path) -> None:
    with open_gguf(gemma3_path) as f:
        tok = Tokenizer.from_metadata(f.metadata)
    walk_document(tok, every=15)
