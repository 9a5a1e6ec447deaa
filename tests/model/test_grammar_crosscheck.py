"""llmchat's allowed tokens against llguidance's token masks, at states of JSON-schema walks where they agreed.

tests/data/grammar_crosscheck.json comes from tools/bench/grammar_bench.py --test-data (llguidance is not needed here):
each sample is a grammar (schema_to_gbnf's output when the data was made), a token prefix of a valid document on
SmolLM2's or Gemma 3's vocabulary, and llguidance's mask after that prefix. Here llmchat walks the same prefix and
its allowed set, plus the end-of-generation ids when the grammar can end, must equal the stored mask exactly.
"""
from __future__ import annotations

import base64
import json
import zlib
from pathlib import Path

import pytest

from llmchat.gguf.file import open_gguf
from llmchat.grammar import Grammar, VocabIndex
from llmchat.tokenizer.tokenizer import Tokenizer

DATA = json.loads((Path(__file__).parents[1] / "data" / "grammar_crosscheck.json").read_text())
SAMPLES = DATA["samples"]


def _ids(bitset: bytes, n_vocab: int) -> set[int]:
    return {i for i in range(n_vocab) if bitset[i >> 3] >> (i & 7) & 1}


@pytest.fixture(scope="module")
def vocabularies(smollm2_path, gemma3_path) -> dict:
    out = {}
    for name, path in (("smollm2", smollm2_path), ("gemma3", gemma3_path)):
        with open_gguf(path) as gguf:
            tok = Tokenizer.from_metadata(gguf.metadata)
        out[name] = (tok, VocabIndex.for_tokenizer(tok))
    return out


def test_the_data_covers_both_vocabularies_and_both_llguidance_front_ends():
    seen = {(s["vocab"], s["source"]) for s in SAMPLES}
    assert seen == {(v, s) for v in ("smollm2", "gemma3") for s in ("llguidance:gbnf", "llguidance:schema")}
    assert len({s["schema"] for s in SAMPLES}) >= 5
    # Both kinds of state: small sets (structure) and large ones (inside strings).
    sizes = [s["n_allowed"] for s in SAMPLES]
    assert min(sizes) < 50 and max(sizes) > 10_000


@pytest.mark.parametrize("i", range(len(SAMPLES)),
                         ids=[f"{s['vocab']}-{s['schema']}-{s['source'].split(':')[1]}-{len(s['prefix'])}"
                              for s in SAMPLES])
def test_allowed_set_equals_llguidance_mask(i, vocabularies):
    sample = SAMPLES[i]
    tok, index = vocabularies[sample["vocab"]]
    matcher = Grammar.parse(DATA["grammars"][sample["schema"]]).matcher()
    for step, token in enumerate(sample["prefix"]):
        assert index.advance(matcher, token), f"the grammar rejects token {token} at step {step}"
    ours = set(index.allowed(matcher))
    if matcher.can_end:
        ours |= tok.eog_ids
    theirs = _ids(zlib.decompress(base64.b64decode(sample["mask_zlib_b64"])), tok.vocab_size)
    assert len(theirs) == sample["n_allowed"]
    only_ours, only_theirs = sorted(ours - theirs), sorted(theirs - ours)
    assert not only_ours and not only_theirs, (
        f"only llmchat allows {[(t, tok.token_bytes(t)) for t in only_ours[:10]]} ({len(only_ours)}); "
        f"only llguidance allows {[(t, tok.token_bytes(t)) for t in only_theirs[:10]]} ({len(only_theirs)})")
