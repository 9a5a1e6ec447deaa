"""Gemma 3's SentencePiece vocabulary (262,144 tokens) against llama.cpp on a broad corpus.

The reference ids, detokenizations and vocabulary facts come from llama.cpp itself
(tools/reference/make_gemma_reference.py, corpus from tools/reference/tokenizer_corpus.py) and are stored in tests/data; the golden
file that no one here wrote (`.golden.json`, copied from the shared reference) is checked against them too.
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from llmchat.gguf.file import open_gguf
from llmchat.tokenizer.tokenizer import Tokenizer

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests/data"
REFERENCE = json.loads((DATA / "gemma-3-270m-q4_k_m.json").read_text(encoding="utf-8"))
GOLDEN = json.loads((DATA / "gemma-3-270m-q4_k_m.golden.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def gemma(gemma3_path: Path) -> Tokenizer:
    with open_gguf(gemma3_path) as model:
        return Tokenizer.from_metadata(model.metadata)


def expected_text(entry: dict, key: str) -> str:
    """llama.cpp's detokenization stored under `key`, which defaults to the original text where absent."""
    if key + "_hex" in entry:
        return bytes.fromhex(entry[key + "_hex"]).decode("utf-8", errors="replace")
    return entry.get(key, entry["text"])


def mismatches(cases: list[dict], got: list[object], want: list[object]) -> str:
    bad = [f"{c['text'][:50]!r}: got {g!r:.120} want {w!r:.120}" for c, g, w in zip(cases, got, want) if g != w]
    return f"{len(bad)} of {len(cases)} differ:\n" + "\n".join(bad[:15])


def test_corpus_is_broad_and_matches_its_script() -> None:
    spec = importlib.util.spec_from_file_location("tokenizer_corpus", ROOT / "tools/reference/tokenizer_corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    texts = [e["text"] for e in REFERENCE["tokenize"]]
    for part, strings in module.corpus().items():
        assert set(strings) <= set(texts), f"corpus part {part} changed since the reference was made"
    assert [e["text"] for e in REFERENCE["tokenize_special"]] == module.special_subset()
    assert len(texts) >= 600 and "" in texts


def test_every_corpus_string_gets_llama_cpp_ids(gemma: Tokenizer) -> None:
    cases = REFERENCE["tokenize"]
    got = [gemma.encode(c["text"]) for c in cases]
    assert got == [c["ids"] for c in cases], mismatches(cases, got, [c["ids"] for c in cases])


def test_special_parsing_subset_gets_llama_cpp_ids(gemma: Tokenizer) -> None:
    cases = REFERENCE["tokenize_special"]
    got = [gemma.encode(c["text"], parse_special=True) for c in cases]
    assert got == [c["ids"] for c in cases], mismatches(cases, got, [c["ids"] for c in cases])


def test_decoding_matches_llama_cpp_detokenize(gemma: Tokenizer) -> None:
    cases = REFERENCE["tokenize"]
    got = [gemma.decode(c["ids"]) for c in cases]
    want = [expected_text(c, "detok") for c in cases]
    assert got == want, mismatches(cases, got, want)
    # llama.cpp gives back the text itself except where the text holds a literal "▁", which reads as a space.
    assert all(w == c["text"] for c, w in zip(cases, want) if "\u2581" not in c["text"])
    special = REFERENCE["tokenize_special"]
    got = [gemma.decode(c["ids"]) for c in special]
    want = [expected_text(c, "detok_special") for c in special]
    assert got == want, mismatches(special, got, want)
    got = [gemma.decode(c["ids"], skip_special=True) for c in special]
    want = [expected_text(c, "detok") for c in special]
    assert got == want, mismatches(special, got, want)


def test_round_trip_and_streaming(gemma: Tokenizer) -> None:
    for case in REFERENCE["tokenize"]:
        text = case["text"]
        ids = gemma.encode(text)
        decoder = gemma.stream_decoder()
        streamed = "".join(decoder.feed(i) for i in ids) + decoder.flush()
        assert streamed == gemma.decode(ids), text
        if "\u2581" not in text:
            assert streamed == text


def test_prompts_with_bos_and_special_tokens(gemma: Tokenizer) -> None:
    for case in REFERENCE["prompts"]:
        assert gemma.encode(case["text"], add_bos=gemma.add_bos, parse_special=True) == case["ids"]


def test_vocabulary_facts_match_llama_cpp(gemma: Tokenizer) -> None:
    facts = REFERENCE["vocab"]
    assert gemma.vocab_size == facts["n_tokens"] == 262_144
    assert (gemma.bos_id, gemma.eos_id, gemma.eot_id) == (facts["bos"], facts["eos"], facts["eot"]) == (2, 1, 106)
    assert (gemma.add_bos, gemma.add_eos, gemma.add_space_prefix) == (facts["add_bos"], facts["add_eos"], False)
    # <eos>, <end_of_turn>, and "</s>" (an HTML tag here, but one of llama.cpp's end-of-generation spellings).
    assert sorted(gemma.eog_ids) == facts["eog_ids"] == [1, 106, 212]
    control = {i for first, last in facts["control_or_unknown"] for i in range(first, last + 1)}
    assert {i for i in range(gemma.vocab_size) if gemma.is_control(i)} == control


def test_gemma_special_tokens_in_text(gemma: Tokenizer) -> None:
    turn = "<start_of_turn>user\nHi<end_of_turn>\n"
    assert gemma.encode(turn, parse_special=True)[0] == 105 and 106 in gemma.encode(turn, parse_special=True)
    assert 105 not in gemma.encode(turn)  # CONTROL: plain text unless parsed
    assert gemma.encode("<b>x</b>") == [200, gemma.token_id("x"), 209]  # USER_DEFINED HTML tags: always
    assert gemma.encode("a    b")[1] == 140  # runs of spaces are USER_DEFINED tokens too
    assert gemma.encode("</s>") != [212] and gemma.encode("</s>", parse_special=True) == [212]


def test_reference_agrees_with_the_external_golden_file() -> None:
    # The golden file was made elsewhere from the same model; our reference run must reproduce it.
    ours = {e["text"]: e for e in REFERENCE["tokenize"]}
    for case in GOLDEN["tokenize"]:
        assert ours[case["text"]]["ids"] == case["ids"], case["text"]
    prompts = {e["text"]: e for e in REFERENCE["prompts"]}
    for case in GOLDEN["prompts"]:
        mine = prompts[case["text"]]
        assert mine["ids"] == case["ids"] and mine["top_ids"] == case["top_ids"]
        assert mine["greedy_ids"] == case["greedy_ids"]
        assert max(abs(a - b) for a, b in zip(mine["top_logits"], case["top_logits"])) < 1e-3
    assert REFERENCE["perplexity"]["scored_tokens"] == GOLDEN["perplexity"]["scored_tokens"]
    assert abs(REFERENCE["perplexity"]["ppl"] - GOLDEN["perplexity"]["ppl"]) < 1e-3
    assert REFERENCE["add_bos"] is GOLDEN["add_bos"] is True
