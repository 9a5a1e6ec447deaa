"""The shortcuts that keep large vocabularies fast give exactly the slow results, and llama.cpp's per-family
token rules: special-token splitting through the candidate trie, ▁-escaped text cut into independent pieces,
BPE over ▁-escaped text (Gemma 4), and the end-of-generation exceptions."""
from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizer_vocabs import train_spm

from llmchat.tokenizer.bpe import SpaceCutter, merge_by_score
from llmchat.tokenizer.special_tokens import SpecialSplitter, split_on
from llmchat.tokenizer.tokenizer import Tokenizer

ROOT = Path(__file__).resolve().parents[2]
TEXTS = json.loads((ROOT / "tests/data/texts.json").read_text(encoding="utf-8"))
SPACE = "\u2581"

# Special tokens that overlap each other in every way: prefixes, suffixes, one inside another, equal lengths.
SPECIALS = ["<a>", "<ab>", "<a", "b>", "ab", "ba", "<<", "  ", "   ", "\n", "\n\n", "<start_of_turn>", "turn>",
            "<s>", "</s>", "s>"]


def split_by_every_token(text: str, tokens: list[str], skip: set[int]) -> list[str | int]:
    """The literal algorithm: every special token, longest first, splits every remaining text fragment."""
    fragments: list[str | int] = [text] if text else []
    for tid in sorted(range(len(tokens)), key=lambda i: (-len(tokens[i]), i)):
        if tid in skip:
            continue
        out: list[str | int] = []
        for fragment in fragments:
            if isinstance(fragment, int):
                out.append(fragment)
            else:
                split_on(fragment, tokens[tid], tid, False, False, out)
        fragments = out
    return fragments


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from([*SPECIALS, "a", "b", "<", ">", "s", "/", " ", "x", "turn", "_of_"]), max_size=14),
       st.sets(st.integers(0, len(SPECIALS) - 1), max_size=4))
def test_candidate_trie_splits_like_trying_every_token(pieces: list[str], skip: set[int]) -> None:
    text = "".join(pieces)
    splitter = SpecialSplitter(SPECIALS, range(len(SPECIALS)), [(-len(t), i) for i, t in enumerate(SPECIALS)],
                               lstrip=frozenset(), rstrip=frozenset())
    assert splitter.split(text, frozenset(skip)) == split_by_every_token(text, SPECIALS, skip)
    assert set(splitter.candidates(text)) == {i for i, t in enumerate(SPECIALS) if t in text}


def glued_vocabulary() -> dict[str, object]:
    # Pieces with "▁" after another character make merges cross word starts; scores favour them.
    metadata = train_spm(TEXTS["perplexity_text"], 150, extra_chars="Z.")
    tokens: list[str] = list(metadata["tokenizer.ggml.tokens"])  # type: ignore[arg-type]
    scores: list[float] = list(metadata["tokenizer.ggml.scores"])  # type: ignore[arg-type]
    types: list[int] = list(metadata["tokenizer.ggml.token_type"])  # type: ignore[arg-type]
    for glued in ("Z" + SPACE, "." + SPACE, "e" + SPACE + SPACE, "Z" + SPACE + "Z", "." + SPACE + "T"):
        tokens.append(glued)
        scores.append(10.0)
        types.append(1)
    return {**metadata, "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.scores": scores,
            "tokenizer.ggml.token_type": types}


GLUED = glued_vocabulary()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["Z", ".", "e", " ", "  ", "the", "T", "he", "keeper", "Z Z", ". T", "e  "]),
                max_size=16))
def test_space_cutter_pieces_merge_like_the_whole_text(pieces: list[str]) -> None:
    tokens: list[str] = GLUED["tokenizer.ggml.tokens"]  # type: ignore[assignment]
    scores: list[float] = GLUED["tokenizer.ggml.scores"]  # type: ignore[assignment]
    ids = {t: i for i, t in enumerate(tokens)}
    text = "".join(pieces).replace(" ", SPACE)
    cutter = SpaceCutter([t for t in tokens if any(a != SPACE and b == SPACE for a, b in zip(t, t[1:]))])
    cut = cutter.split(text)
    assert "".join(cut) == text
    assert [s for piece in cut for s in merge_by_score(list(piece), ids, scores)] == \
        merge_by_score(list(text), ids, scores)


def test_space_cutter_keeps_glued_spans_together() -> None:
    cutter = SpaceCutter(["Z" + SPACE])
    assert cutter.split(f"{SPACE}a{SPACE}Z{SPACE}b{SPACE}c") == [f"{SPACE}a", f"{SPACE}Z{SPACE}b", f"{SPACE}c"]
    many = SpaceCutter([f"{chr(0x4E00 + i)}{SPACE}" for i in range(40)])  # found by one regex pass instead
    assert many.split(f"{SPACE}\u4e00{SPACE}x{SPACE}y") == [f"{SPACE}\u4e00{SPACE}x", f"{SPACE}y"]


def test_glued_vocabulary_encodes_like_unsplit_merging() -> None:
    tok = Tokenizer.from_metadata(GLUED)
    text = "the keeper. The Z Z sea  e  Z"
    tokens: list[str] = GLUED["tokenizer.ggml.tokens"]  # type: ignore[assignment]
    scores: list[float] = GLUED["tokenizer.ggml.scores"]  # type: ignore[assignment]
    ids = {t: i for i, t in enumerate(tokens)}
    whole = merge_by_score(list((" " + text).replace(" ", SPACE)), ids, scores)
    assert [tok.token_text(i) for i in tok.encode(text)] == whole


def escaped_bpe(tokens: list[str], merges: list[str], types: dict[str, int] | None = None) -> Tokenizer:
    types = types or {}
    return Tokenizer.from_metadata({
        "tokenizer.ggml.model": "gemma4", "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.merges": merges,
        "tokenizer.ggml.token_type": [types.get(t, 1) for t in tokens], "tokenizer.ggml.bos_token_id": 0,
        "tokenizer.ggml.add_bos_token": False})


def test_bpe_over_escaped_text() -> None:
    bytes_ = [f"<0x{b:02X}>" for b in range(256)]
    tokens = ["<bos>", *bytes_, "a", "b", SPACE, "\n", "\n\n", SPACE + "a", "ab", SPACE + "ab"]
    tok = escaped_bpe(tokens, [f"{SPACE} a", "a b", f"{SPACE}a b"], types={"<bos>": 3, **dict.fromkeys(bytes_, 6)})
    assert tok.add_bos is True  # llama.cpp always adds BOS for Gemma 4
    names = [tok.token_text(i) for i in tok.encode("ab ab\n\n\na é")]
    # Lines merge on their own; a newline run that is a token is taken whole, else merged; é falls back to bytes.
    assert names == ["ab", SPACE + "ab", "\n", "\n", "\n", "a", SPACE, "<0xC3>", "<0xA9>"]
    assert tok.decode(tok.encode("ab ab\n\n\na é")) == "ab ab\n\n\na é"
    assert escaped_bpe(tokens, [f"{SPACE} a", "a b", f"{SPACE}a b", "\n \n"]).encode("\n\n\n") == [
        tok.token_id("\n\n"), tok.token_id("\n")]


def test_end_of_generation_family_rules() -> None:
    def vocab(*tokens: str) -> Tokenizer:
        return Tokenizer.from_metadata({
            "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "gpt2", "tokenizer.ggml.merges": [],
            "tokenizer.ggml.tokens": ["a", *tokens], "tokenizer.ggml.token_type": [1] + [3] * len(tokens)})

    gpt_oss = vocab("<|end|>", "<|return|>", "<|call|>", "<|channel|>", "<|start|>")
    assert gpt_oss.eog_ids == {2, 3} and not gpt_oss.is_control(1)  # <|end|> is plain text there
    assert gpt_oss.encode("<|channel|>a") == [4, 0]  # always matched, even without special parsing
    assert vocab("<|end|>", "<|return|>").eog_ids == {1, 2}
    assert vocab("<|end|>", "<|calls|>", "<|flush|>").eog_ids == {2, 3}
    gemma4 = vocab("</s>", "<|tool_response>")
    assert gemma4.eog_ids == {2} and not gemma4.is_control(1)
    assert vocab("</s>", "<eos>").eog_ids == {1, 2}
