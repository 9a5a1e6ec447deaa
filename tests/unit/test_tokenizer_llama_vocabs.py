"""Our tokenizer on every test vocabulary llama.cpp ships (models/ggml-vocab-*.gguf in its source tree).

Two checks per vocabulary: llama.cpp's own test cases (`.gguf.inp` / `.gguf.out`, as test-tokenizer-0 runs them:
no BOS, special-token text not parsed), and the broad corpus of tools/reference/tokenizer_corpus.py against llama.cpp's ids
recorded by tools/reference/make_vocab_reference.py, with llama.cpp's end-of-generation set and CONTROL tokens. Vocabulary
kinds we do not implement would be expected failures that name the kind.

The vocabularies (about 60 MB) are not part of the repository: `tools/build/fetch_llama_vocabs.py` unpacks them from
the llama-cpp-python source distribution (`make test` runs it); without them a bare `pytest` skips these tests.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from pathlib import Path

import pytest

from llmchat.paths import llmchat_home
from llmchat.errors import TokenizerError
from llmchat.gguf.file import open_gguf
from llmchat.tokenizer.tokenizer import Tokenizer, adds_bos

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = json.loads((ROOT / "tests/data/llama-vocabs-corpus.json").read_text(encoding="utf-8"))
SEPARATOR = b"\n__ggml_vocab_test__\n"


def corpus_texts() -> list[str]:
    spec = importlib.util.spec_from_file_location("tokenizer_corpus", ROOT / "tools/reference/tokenizer_corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    texts: list[str] = []
    for part in module.corpus().values():
        texts += [t for t in part if t not in texts]
    return texts


TEXTS = corpus_texts()


@pytest.fixture(scope="module")
def vocab_dir() -> Path:
    configured = os.environ.get("LLMCHAT_LLAMA_VOCABS")
    path = Path(configured) if configured else llmchat_home() / "llama.cpp-vocabs"
    if not any(path.glob("ggml-vocab-*.gguf")):
        message = f"llama.cpp's test vocabularies are not in {path}; run tools/build/fetch_llama_vocabs.py"
        if os.environ.get("LLMCHAT_REQUIRE_MODEL") == "1":  # `make test` fetched them
            pytest.fail(message)
        pytest.skip(message)
    return path


def load(vocab_dir: Path, name: str) -> tuple[Tokenizer, dict]:
    path = vocab_dir / f"ggml-vocab-{name}.gguf"
    if not path.is_file():
        pytest.skip(f"{path} is missing")
    with open_gguf(path) as model:
        metadata = model.metadata
    try:
        return Tokenizer.from_metadata(metadata), metadata
    except TokenizerError as exc:
        if "unsupported" not in str(exc):
            raise
        pytest.xfail(f"{name}: {exc}")


def llama_cpp_cases(vocab_dir: Path, name: str) -> list[tuple[str, list[int]]]:
    inp = vocab_dir / f"ggml-vocab-{name}.gguf.inp"
    out = vocab_dir / f"ggml-vocab-{name}.gguf.out"
    if not inp.is_file():
        return []
    texts = inp.read_bytes().split(SEPARATOR)
    if texts and texts[-1] == b"":
        texts.pop()  # the file ends with a separator
    ids = [[int(x) for x in line.split()] for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(texts) == len(ids), f"{inp.name}: {len(texts)} inputs, {len(ids)} outputs"
    return [(t.decode("utf-8"), i) for t, i in zip(texts, ids)]


def ids_hash(ids: list[int]) -> str:
    return hashlib.sha1(" ".join(map(str, ids)).encode()).hexdigest()[:16]


@pytest.mark.parametrize("name", sorted(REFERENCE["vocabs"]))
def test_vocabulary_matches_llama_cpp(vocab_dir: Path, name: str) -> None:
    reference = REFERENCE["vocabs"][name]
    if "error" in reference:
        pytest.xfail(f"llama.cpp itself cannot load it: {reference['error']}")
    tok, metadata = load(vocab_dir, name)

    cases = llama_cpp_cases(vocab_dir, name)
    bad = [(text, tok.encode(text), ids) for text, ids in cases if tok.encode(text) != ids]
    assert not bad, f"{len(bad)} of llama.cpp's {len(cases)} cases differ, first: {bad[0]}"

    assert len(reference["ids_sha1"]) == len(TEXTS) == REFERENCE["texts"]
    got = [tok.encode(text) for text in TEXTS]
    bad_corpus = [(text, len(ids), n) for text, ids, n, want in
                  zip(TEXTS, got, reference["n_ids"], reference["ids_sha1"]) if ids_hash(ids) != want]
    assert not bad_corpus, f"{len(bad_corpus)} of {len(TEXTS)} corpus strings differ, first: {bad_corpus[:3]}"

    facts = reference["facts"]
    assert tok.vocab_size == facts["n_tokens"]
    assert (tok.bos_id, tok.eos_id, tok.eot_id) == (facts["bos"], facts["eos"], facts["eot"])
    assert (tok.add_bos, tok.add_eos) == (facts["add_bos"], facts["add_eos"])
    assert adds_bos(metadata) == tok.add_bos  # what chat templates are told without building the tokenizer
    assert sorted(tok.eog_ids) == facts["eog_ids"]
    control = {i for first, last in facts["control_or_unknown"] for i in range(first, last + 1)}
    assert {i for i in range(tok.vocab_size) if tok.is_control(i)} == control
