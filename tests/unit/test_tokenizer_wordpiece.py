"""WordPiece ("bert") vocabularies: the normaliser and the longest-match cut on a small vocabulary of our own.
(llama.cpp's own BERT test vocabulary is checked in test_tokenizer_llama_vocabs.py.)"""
from __future__ import annotations

import importlib.util
import unicodedata
from pathlib import Path

import pytest

from llmchat.tokenizer import unicode_classes
from llmchat.tokenizer.tokenizer import Tokenizer, adds_bos
from llmchat.tokenizer.wordpiece import split_words

ROOT = Path(__file__).resolve().parents[2]
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
PIECES = ["▁hello", "▁world", "▁un", "aff", "able", "▁!", "▁,", "▁的", "▁$", "▁apfel", "▁Apfel", "▁äpfel", "▁e"]


def bert(**options) -> Tokenizer:
    tokens = SPECIAL + PIECES
    metadata = {"tokenizer.ggml.model": "bert", "tokenizer.ggml.tokens": tokens,
                "tokenizer.ggml.token_type": [3] * len(SPECIAL) + [1] * len(PIECES),
                "tokenizer.ggml.cls_token_id": 2, "tokenizer.ggml.bos_token_id": 2,
                "tokenizer.ggml.unknown_token_id": 1, "tokenizer.ggml.seperator_token_id": 3,
                "tokenizer.ggml.padding_token_id": 0}
    metadata.update({f"tokenizer.ggml.normalizer.{k}": v for k, v in options.items()})
    return Tokenizer.from_metadata(metadata)


def ids(tok: Tokenizer, *texts: str) -> list[int]:
    return [tok.token_id(t) for t in texts]


def test_words_are_cut_longest_first_and_unknown_words_are_one_token() -> None:
    tok = bert()
    assert tok.encode("unaffable hello") == ids(tok, "▁un", "aff", "able", "▁hello")
    assert tok.encode("unaffablex world") == [tok.unk_id, tok.token_id("▁world")]  # no piece for "x": whole word


def test_punctuation_ascii_symbols_and_cjk_are_words_of_their_own() -> None:
    tok = bert()
    assert tok.encode("hello,world!") == ids(tok, "▁hello", "▁,", "▁world", "▁!")
    assert tok.encode("hello的world") == ids(tok, "▁hello", "▁的", "▁world")
    assert split_words("a$b€c", lowercase=False, strip_accents=False) == ["a", "$", "b€c"]  # € is not ASCII


def test_normaliser_defaults_lowercase_and_strip_accents() -> None:
    tok = bert()
    assert tok.encode("HeLLo Äpfel") == ids(tok, "▁hello", "▁apfel")
    assert tok.encode("He\u0301llo") == ids(tok, "▁hello")  # a combining accent is dropped
    assert tok.encode("hel\x00lo\u200b \ufffd") == ids(tok, "▁hello")  # NUL, U+FFFD and \p{C} are dropped


@pytest.mark.parametrize("options,text,pieces", [
    ({"lowercase": False}, "Apfel", ["▁Apfel"]),
    ({"lowercase": True, "strip_accents": False}, "Äpfel", ["▁äpfel"]),
    ({"lowercase": False, "strip_accents": True}, "Äpfel", ["▁Apfel"]),
])
def test_normaliser_options_from_the_file(options: dict, text: str, pieces: list[str]) -> None:
    tok = bert(**options)
    assert tok.encode(text) == ids(tok, *pieces)


def test_bos_frames_the_text_with_cls_and_sep_and_specials_parse() -> None:
    tok = bert()
    assert tok.add_bos and adds_bos({"tokenizer.ggml.model": "bert"})
    assert tok.encode("hello", add_bos=True) == [2, tok.token_id("▁hello"), 3]
    assert tok.encode("[CLS] hello", parse_special=True) == [2, tok.token_id("▁hello")]
    assert tok.decode(tok.encode("hello world")) == " hello world"  # pieces keep their word-initial space
    assert "WordPiece" in repr(tok)


def test_case_maps_equal_unicodedata() -> None:
    """The maps were generated from Unicode 15.1; every code point this Python knows maps the same way."""
    spec = importlib.util.spec_from_file_location("gen_unicode_classes", ROOT / "tools/build/gen_unicode_classes.py")
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    maps = generator.case_maps()
    if unicodedata.unidata_version == unicode_classes.UNICODE_VERSION:
        assert unicode_classes.LOWERCASE == tuple(v for run in maps["LOWERCASE"] for v in run)
        assert unicode_classes.NFD_FIRST == tuple(v for run in maps["NFD_FIRST"] for v in run)
        return

    def assigned(cp: int) -> bool:
        return unicodedata.category(chr(cp)) != "Cn"

    def expand_lower(flat: tuple[int, ...]) -> dict[int, int]:
        return {cp: cp + flat[i + 3] for i in range(0, len(flat), 4)
                for cp in range(flat[i], flat[i + 1] + 1, flat[i + 2] or 1)}

    def expand_nfd(flat: tuple[int, ...]) -> dict[int, int]:
        return {cp: flat[i + 2] for i in range(0, len(flat), 3) for cp in range(flat[i], flat[i + 1] + 1)}

    here_lower = expand_lower(tuple(v for run in maps["LOWERCASE"] for v in run))
    here_nfd = expand_nfd(tuple(v for run in maps["NFD_FIRST"] for v in run))
    ours_lower = {cp: v for cp, v in expand_lower(unicode_classes.LOWERCASE).items() if assigned(cp)}
    ours_nfd = {cp: v for cp, v in expand_nfd(unicode_classes.NFD_FIRST).items() if assigned(cp)}
    assert ours_lower == here_lower
    assert ours_nfd == here_nfd
