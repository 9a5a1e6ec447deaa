"""Small vocabularies for tokenizer tests, each as GGUF metadata plus an equivalent HF `tokenizers` tokenizer.

The SentencePiece one is trained here by plain BPE (merge the most frequent pair, score = -merge number), which is
how SentencePiece BPE vocabularies come about; its HF twin gets one merge rule per way of splitting a piece into
two pieces, ranked by the score of the piece, as HF's converter for Llama vocabularies does. The byte-level one is
trained by HF itself.
"""
from __future__ import annotations

import json
from collections import Counter

from tokenizers import AddedToken, Regex, decoders, models, normalizers, pre_tokenizers, trainers
from tokenizers import Tokenizer as HFTokenizer

SPACE_MARK = "\u2581"

# HF spellings of llama.cpp's pre-tokenizer regexes (HF and llama.cpp run these as a chain of isolating splits).
HF_PATTERNS = {
    "gpt2": [r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"],
    "llama3": [r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+"],
    "qwen2": [r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
              r"|\s*[\r\n]+|\s+(?!\S)|\s+"],
}
HF_PATTERNS["smollm"] = [r"\p{N}", *HF_PATTERNS["gpt2"]]


def train_spm(corpus: str, n_merges: int, extra_chars: str = "", glue: str | None = None) -> dict[str, object]:
    """GGUF metadata of a SentencePiece-style BPE vocabulary trained on `corpus` (whitespace-separated words).

    Ids 0-2 are <unk>, <s>, </s>, then the 256 byte tokens, then pieces by descending score: merges first, then
    single characters. `glue`, if given, is added as an extra piece (e.g. one with "▁" inside)."""
    words = Counter(SPACE_MARK + w for w in corpus.split())
    chars = sorted({ch for w in words for ch in w} | set(extra_chars))
    seqs = {w: list(w) for w in words}
    merged: list[str] = []
    for _ in range(n_merges):
        pairs: Counter[tuple[str, str]] = Counter()
        for w, seq in seqs.items():
            for a, b in zip(seq, seq[1:]):
                pairs[(a, b)] += words[w]
        if not pairs:
            break
        (a, b), _ = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        piece = a + b
        merged.append(piece)
        for w, seq in seqs.items():
            out, i = [], 0
            while i < len(seq):
                if i + 1 < len(seq) and seq[i] == a and seq[i + 1] == b:
                    out.append(piece)
                    i += 2
                else:
                    out.append(seq[i])
                    i += 1
            seqs[w] = out
    pieces = merged + ([glue] if glue else [])
    tokens = ["<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(256)), *pieces,
              *(c for c in chars if c not in pieces)]
    scores = [0.0] * 259 + [-float(i) for i in range(len(tokens) - 259)]
    types = [2, 3, 3] + [6] * 256 + [1] * (len(tokens) - 259)
    return {"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.scores": scores,
            "tokenizer.ggml.token_type": types, "tokenizer.ggml.bos_token_id": 1,
            "tokenizer.ggml.eos_token_id": 2, "tokenizer.ggml.unknown_token_id": 0}


def hf_spm_twin(metadata: dict[str, object]) -> HFTokenizer:
    """HF's Llama-style tokenizer for a `train_spm` vocabulary (plain text only: no special tokens parsed)."""
    tokens: list[str] = metadata["tokenizer.ggml.tokens"]  # type: ignore[assignment]
    scores: list[float] = metadata["tokenizer.ggml.scores"]  # type: ignore[assignment]
    types: list[int] = metadata["tokenizer.ggml.token_type"]  # type: ignore[assignment]
    vocab = {t: i for i, t in enumerate(tokens)}
    normal = {t for t, ty in zip(tokens, types) if ty == 1}
    merges = sorted(((t[:k], t[k:]) for t in normal for k in range(1, len(t))
                     if t[:k] in normal and t[k:] in normal),
                    key=lambda ab: (-scores[vocab[ab[0] + ab[1]]], vocab[ab[0]]))
    hf = HFTokenizer(models.BPE(vocab, merges, unk_token="<unk>", byte_fallback=True))
    hf.normalizer = normalizers.Sequence([normalizers.Prepend(SPACE_MARK), normalizers.Replace(" ", SPACE_MARK)])
    hf.decoder = decoders.Sequence([decoders.Replace(SPACE_MARK, " "), decoders.ByteFallback(), decoders.Fuse(),
                                    decoders.Strip(" ", 1, 0)])
    return hf


def hf_pre_tokenizer(pre: str) -> pre_tokenizers.PreTokenizer:
    """HF pre-tokenizer equivalent to llama.cpp's for a byte-level vocabulary with `tokenizer.ggml.pre = pre`."""
    splits = [pre_tokenizers.Split(Regex(p), behavior="isolated") for p in HF_PATTERNS[pre]]
    return pre_tokenizers.Sequence([*splits, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])


def train_byte_level(corpus: list[str], pre: str, vocab_size: int,
                     user_defined: tuple[str, ...] = ()) -> tuple[dict[str, object], HFTokenizer]:
    """A byte-level BPE vocabulary trained by HF on `corpus`, as GGUF metadata plus its HF tokenizer.

    Token 0 is the CONTROL token <|endoftext|>; `user_defined` tokens are appended as USER_DEFINED (type 4)."""
    hf = HFTokenizer(models.BPE(ignore_merges=pre == "llama3"))
    hf.pre_tokenizer = hf_pre_tokenizer(pre)
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    hf.train_from_iterator(corpus, trainer)
    hf.add_special_tokens(["<|endoftext|>"])
    hf.add_tokens([AddedToken(t, special=False, normalized=False) for t in user_defined])
    model = json.loads(hf.to_str())["model"]
    vocab: dict[str, int] = {**model["vocab"], **{t: hf.token_to_id(t) for t in user_defined}}
    tokens = sorted(vocab, key=vocab.__getitem__)
    assert [vocab[t] for t in tokens] == list(range(len(tokens)))
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    types = [3 if t == "<|endoftext|>" else 4 if t in user_defined else 1 for t in tokens]
    metadata: dict[str, object] = {
        "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": pre, "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": types, "tokenizer.ggml.merges": merges,
        "tokenizer.ggml.eos_token_id": 0, "tokenizer.ggml.bos_token_id": 0}
    return metadata, hf
