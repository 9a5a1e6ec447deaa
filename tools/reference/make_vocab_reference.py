"""Record llama.cpp's ids for the tokenizer corpus on each of its own test vocabularies (models/ggml-vocab-*.gguf,
unpacked by tools/build/fetch_llama_vocabs.py) in tests/data/llama-vocabs-corpus.json.

    ~/.cache/llmchat-peers/llamacpp-venv/bin/python tools/reference/make_vocab_reference.py [VOCAB_DIR]

For each vocabulary llama.cpp can load: its `vocab_facts` (tools/reference/llama_reference.py) and, for every string of
tools/reference/tokenizer_corpus.py (no BOS, special-token text not parsed), the number of ids and a short hash of them
(sha1 of the ids joined by spaces, 16 hex digits), which keeps the file small for 17 vocabularies; rerun this
script against a suspect vocabulary to see the ids themselves.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import llama_cpp
from llama_reference import vocab_facts
from tokenizer_corpus import corpus

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests/data/llama-vocabs-corpus.json"


def default_dir() -> Path:
    home = os.environ.get("LLMCHAT_HOME")
    return (Path(home).expanduser() if home else Path.home() / ".cache/llmchat") / "llama.cpp-vocabs"


def ids_hash(ids: list[int]) -> str:
    return hashlib.sha1(" ".join(map(str, ids)).encode()).hexdigest()[:16]


def main() -> int:
    vocab_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else default_dir()
    texts: list[str] = []
    for part in corpus().values():
        texts += [t for t in part if t not in texts]
    record: dict = {"reference": f"llama.cpp via llama-cpp-python {llama_cpp.__version__}",
                    "made_by": "tools/reference/make_vocab_reference.py (corpus: tools/reference/tokenizer_corpus.py)",
                    "texts": len(texts), "vocabs": {}}
    for path in sorted(vocab_dir.glob("ggml-vocab-*.gguf")):
        name = path.name[len("ggml-vocab-"):-len(".gguf")]
        try:
            llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
        except Exception as exc:  # llama.cpp refuses some of its own files (e.g. without a tokenizer model)
            record["vocabs"][name] = {"error": f"{type(exc).__name__}: {exc}"}
            print(f"{name:18} llama.cpp cannot load it: {exc}", file=sys.stderr)
            continue
        ids = [llm.tokenize(t.encode("utf-8"), add_bos=False, special=False) for t in texts]
        record["vocabs"][name] = {"facts": vocab_facts(llm._model.vocab), "n_ids": [len(i) for i in ids],
                                  "ids_sha1": [ids_hash(i) for i in ids]}
        print(f"{name:18} {sum(map(len, ids))} ids", file=sys.stderr)
    OUT.write_text(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"wrote {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
