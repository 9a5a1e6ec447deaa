"""Helpers shared by the scripts that record llama.cpp's answers as test data (run with llama-cpp-python 0.3.36).

`detokenize` calls llama.cpp's `llama_detokenize` directly (llama-cpp-python's Llama.detokenize goes token by token
through a 32-byte buffer and mangles longer pieces); `vocab_facts` records what llama.cpp decided about a
vocabulary: its BOS/EOS/EOT ids and flags, its end-of-generation set, and which tokens it treats as CONTROL or
UNKNOWN and as USER_DEFINED (as runs of ids, after its by-text rules, not the file's token types).
"""
from __future__ import annotations

import ctypes

import llama_cpp


def detokenize(vocab: object, ids: list[int], special: bool) -> bytes:
    """llama.cpp's text for `ids`; `special` renders CONTROL tokens as their text."""
    array = (llama_cpp.llama_token * max(1, len(ids)))(*ids)
    size = 64 + 64 * len(ids)
    while True:
        buf = ctypes.create_string_buffer(size)
        n = llama_cpp.llama_detokenize(vocab, array, len(ids), buf, size, False, special)
        if n >= 0:
            return buf.raw[:n]
        size = -n


def text_field(entry: dict, key: str, raw: bytes) -> None:
    """Store `raw` as text under `key`, or as hex under `key + "_hex"` when it is not UTF-8."""
    try:
        entry[key] = raw.decode("utf-8")
    except UnicodeDecodeError:
        entry[key + "_hex"] = raw.hex()


def runs(ids: list[int]) -> list[list[int]]:
    """Sorted ids as [first, last] runs of consecutive values."""
    out: list[list[int]] = []
    for i in sorted(ids):
        if out and out[-1][1] == i - 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return out


def vocab_facts(vocab: object) -> dict:
    def token(value: int) -> int | None:
        return None if value < 0 else value

    n = llama_cpp.llama_vocab_n_tokens(vocab)
    attrs = [llama_cpp.llama_vocab_get_attr(vocab, i) for i in range(n)]
    hidden = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_UNKNOWN
    return {
        "n_tokens": n,
        "bos": token(llama_cpp.llama_vocab_bos(vocab)),
        "eos": token(llama_cpp.llama_vocab_eos(vocab)),
        "eot": token(llama_cpp.llama_vocab_eot(vocab)),
        "add_bos": bool(llama_cpp.llama_vocab_get_add_bos(vocab)),
        "add_eos": bool(llama_cpp.llama_vocab_get_add_eos(vocab)),
        "eog_ids": [i for i in range(n) if llama_cpp.llama_vocab_is_eog(vocab, i)],
        "control_or_unknown": runs([i for i, a in enumerate(attrs) if a & hidden]),
        "user_defined": runs([i for i, a in enumerate(attrs) if a & llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED]),
    }
