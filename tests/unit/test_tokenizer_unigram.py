"""SentencePiece unigram ("t5") vocabularies on a small vocabulary of our own: the Viterbi search, unknown runs,
the whitespace rules. (llama.cpp's own unigram test vocabulary, with a real precompiled_charsmap, is checked in
test_tokenizer_llama_vocabs.py.)"""
from __future__ import annotations

import pytest

from llmchat.errors import TokenizerError
from llmchat.tokenizer.tokenizer import Tokenizer
from llmchat.tokenizer.unigram import CharsMap

# (text, score, type): 1 NORMAL, 2 UNKNOWN, 3 CONTROL, 4 USER_DEFINED, 5 UNUSED
VOCAB = [("<pad>", 0.0, 3), ("</s>", 0.0, 3), ("<unk>", 0.0, 2), ("▁", -2.0, 1), ("▁ab", -3.0, 1),
         ("▁a", -1.0, 1), ("b", -1.5, 1), ("c", -1.0, 1), ("▁abc", -5.0, 1), ("<x>", -9.0, 4), ("d", -4.0, 5)]


def t5(**flags) -> Tokenizer:
    metadata = {"tokenizer.ggml.model": "t5", "tokenizer.ggml.tokens": [t for t, _, _ in VOCAB],
                "tokenizer.ggml.scores": [s for _, s, _ in VOCAB],
                "tokenizer.ggml.token_type": [k for _, _, k in VOCAB], "tokenizer.ggml.add_space_prefix": True}
    metadata.update({f"tokenizer.ggml.{k}": v for k, v in flags.items()})
    return Tokenizer.from_metadata(metadata)


def ids(tok: Tokenizer, *texts: str) -> list[int]:
    return [tok.token_id(t) for t in texts]


def test_the_best_total_score_wins() -> None:
    tok = t5()
    # ▁a b c = -3.5 beats ▁ab c = -4.0 and ▁abc = -5.0
    assert tok.encode("abc") == ids(tok, "▁a", "b", "c")
    assert tok.encode("ab") == ids(tok, "▁a", "b")  # -2.5 beats ▁ab's -3.0


def test_unknown_code_points_merge_into_one_unknown_token() -> None:
    tok = t5()
    assert tok.encode("aéè c") == [tok.token_id("▁a"), tok.unk_id, tok.token_id("▁"), tok.token_id("c")]


def test_user_defined_tokens_score_zero_and_unused_ones_still_match() -> None:
    tok = t5()
    assert tok.encode("a<x>") == ids(tok, "▁a", "<x>")
    assert tok.encode("ad") == ids(tok, "▁a", "d")


def test_whitespace_rules() -> None:
    assert t5().encode("a  c") == ids(t5(), "▁a", "▁", "▁", "c")
    merged = t5(remove_extra_whitespaces=True)
    assert merged.encode("  a   c ") == ids(merged, "▁a", "▁", "c")
    plain = t5(add_space_prefix=False)
    assert plain.encode("ab") == ids(plain, "<unk>", "b")  # no "▁" in front: "a" alone is unknown


def test_flags_and_decoding() -> None:
    tok = t5()
    assert (tok.bos_id, tok.eos_id, tok.unk_id, tok.add_bos, tok.add_eos) == (None, 1, 2, False, True)
    assert tok.encode("abc", add_eos=True)[-1] == 1
    assert tok.decode(tok.encode("abc c")) == "abc c"
    assert "unigram" in repr(tok)


@pytest.mark.parametrize("blob", [b"", b"\x08\x00\x00\x00\x00", b"\x03\x00\x00\x00abcdefgh"])
def test_a_broken_charsmap_is_refused(blob: bytes) -> None:
    with pytest.raises(TokenizerError, match="precompiled_charsmap"):
        CharsMap(blob)
