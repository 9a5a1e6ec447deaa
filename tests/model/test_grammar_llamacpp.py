"""llmchat.grammar against llama.cpp's recorded answers (tests/data/grammar_llamacpp.json, made by
tools/reference/grammar_llamacpp_oracle.py): which grammars parse, and which SmolLM2 tokens each state allows."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmchat.errors import GrammarError
from llmchat.gguf.file import open_gguf
from llmchat.grammar import Grammar, VocabIndex
from llmchat.tokenizer.tokenizer import Tokenizer

DATA = json.loads((Path(__file__).parents[1] / "data" / "grammar_llamacpp.json").read_text())

# Where we decide otherwise on purpose (see core/grammar/gbnf.py and grammar.py).
PARSE_DIFFERENCES = {
    "underscore_name": "accepts",     # `_` is allowed in rule names here
    "duplicate_rule": "refuses",      # llama.cpp silently keeps the second definition
    "never_completes": "refuses",     # a grammar that matches nothing is refused, not left to block generation
    "empty_class": "refuses",         # likewise
    "reversed_range": "refuses",      # [z-a] matches nothing: almost surely a typo
    "max_below_min": "refuses",       # llama.cpp runs out of memory on {3,1}
    "negated_token": "refuses",       # !<token> has no meaning for a byte-level matcher
}


@pytest.mark.parametrize("name", sorted(DATA["parse"]))
def test_parses_and_refuses_like_llama_cpp(name: str) -> None:
    case = DATA["parse"][name]
    try:
        Grammar.parse(case["grammar"], special={"<|im_end|>": 2})
        ours = "accepts"
    except GrammarError:
        ours = "refuses"
    assert ours == PARSE_DIFFERENCES.get(name, case["llama_cpp"])
    if name in PARSE_DIFFERENCES:
        assert case["llama_cpp"] != ours  # a listed difference that no longer differs should leave the list


def _explained_extra(piece: bytes) -> bool:
    """Tokens llama.cpp refuses where we allow them: it treats a leading NUL byte as an empty piece, and refuses
    a token ending in an incomplete character when a negated class excludes any character it could become."""
    if piece[:1] == b"\0":
        return True
    try:
        piece.decode("utf-8")
        return False
    except UnicodeDecodeError as exc:
        return exc.reason == "unexpected end of data"


@pytest.mark.model
def test_allowed_tokens_match_llama_cpp(smollm2_path: Path) -> None:
    with open_gguf(smollm2_path) as f:
        tok = Tokenizer.from_metadata(f.metadata)
    assert DATA["vocabulary"] == smollm2_path.name
    index = VocabIndex.for_tokenizer(tok)
    # llama.cpp matches CONTROL tokens by their text (`<|im_start|>` inside a JSON string); here they are symbols
    # of their own that only a grammar naming them allows.
    text_controls = {t for t in range(tok.vocab_size) if tok.is_control(t)} - tok.eog_ids
    states = 0
    for walk in DATA["walks"]:
        g = Grammar.parse(walk["grammar"])
        assert tok.encode(walk["text"]) == walk["tokens"]
        m = g.matcher()
        for k, state in enumerate(walk["states"]):
            assert state["prefix"] == walk["tokens"][:k]
            ours = set(index.allowed(m)) | (set(tok.eog_ids) if m.can_end else set())
            theirs = {i for lo, hi in state["allowed_ranges"] for i in range(lo, hi + 1)} - text_controls
            assert not theirs - ours, (walk["name"], k, sorted(theirs - ours)[:10])
            extra = [t for t in ours - theirs if not _explained_extra(tok.token_bytes(t))]
            assert not extra, (walk["name"], k, [(t, tok.token_bytes(t)) for t in extra[:10]])
            states += 1
            if k < len(walk["tokens"]):
                assert index.advance(m, walk["tokens"][k])
    assert states == sum(len(w["states"]) for w in DATA["walks"]) >= 40
