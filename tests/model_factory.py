"""Tiny random models of each supported architecture, written with the `gguf` package's writer.

The vocabulary is byte-level BPE: the 256 byte symbols, a few merges, and ChatML control tokens, so the full
load → tokenize → generate path runs on them. Tensors of types the `gguf` package cannot quantize (K-quants, IQ4)
are random blocks scaled to the wanted spread (see `random_blocks`).
"""
from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MERGES = ["h e", "l l", "he ll", "Ġ t", "Ġt h"]


def _byte_symbols() -> list[str]:
    """GPT-2's printable stand-ins for the 256 bytes."""
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    extra = [b for b in range(256) if b not in keep]
    table = {b: chr(b) for b in keep} | {b: chr(256 + i) for i, b in enumerate(extra)}
    return [table[b] for b in range(256)]


# Byte offsets of the f16 fields (scales, mins) in one block of the types written as random blocks.
F16_FIELDS = {
    gguf.GGMLQuantizationType.Q2_K: (80, 82), gguf.GGMLQuantizationType.Q3_K: (108,),
    gguf.GGMLQuantizationType.Q4_K: (0, 2), gguf.GGMLQuantizationType.Q5_K: (0, 2),
    gguf.GGMLQuantizationType.Q6_K: (208,), gguf.GGMLQuantizationType.IQ4_NL: (0,),
    gguf.GGMLQuantizationType.IQ4_XS: (0,),
}


def random_blocks(rng: np.random.Generator, qtype: gguf.GGMLQuantizationType, shape: tuple[int, ...],
                  scale: float) -> np.ndarray:
    """Random blocks of `qtype` for a tensor of numpy shape `shape` whose values have a standard deviation of about
    `scale`: every value is linear in the block's f16 fields, so the fields are set to 1, the values measured, and
    the fields set again to scale / that spread."""
    elems, nbytes = gguf.GGML_QUANT_SIZES[qtype]
    blocks = rng.integers(0, 256, (int(np.prod(shape)) // elems, nbytes), dtype=np.uint8)
    for factor in (1.0, None):
        if factor is None:
            factor = scale / gguf.quants.dequantize(blocks, qtype).std()
        for offset in F16_FIELDS[qtype]:
            blocks[:, offset:offset + 2] = np.full((len(blocks), 1), factor, np.float16).view(np.uint8)
    return blocks.reshape(*shape[:-1], shape[-1] // elems * nbytes)


def vocabulary() -> list[str]:
    merged = ["".join(m.split()) for m in MERGES]
    return SPECIALS + _byte_symbols() + merged


def write_model(path: Path, *, arch: str = "llama", qtype=gguf.GGMLQuantizationType.Q8_0, n_layer: int = 2,
                n_embd: int = 128, n_head: int = 2, n_kv_head: int = 1, n_ff: int = 192, tied: bool = True,
                seed: int = 0, types: dict[str, gguf.GGMLQuantizationType] | None = None) -> Path:
    """Write a random model; `types` overrides the quant type of tensors whose name contains a key."""
    rng = np.random.default_rng(seed)
    vocab = vocabulary()
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"tiny-{arch}")
    w.add_block_count(n_layer)
    w.add_context_length(512)
    w.add_embedding_length(n_embd)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv_head)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(len(vocab))
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(vocab)
    w.add_token_types([gguf.TokenType.CONTROL] * len(SPECIALS) + [gguf.TokenType.NORMAL] * (len(vocab) - len(SPECIALS)))
    w.add_token_merges(MERGES)
    w.add_bos_token_id(0)
    w.add_eos_token_id(2)
    w.add_add_bos_token(False)
    w.add_chat_template("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")

    def tensor(name: str, shape: tuple[int, ...], scale: float, quantize: bool = True):
        x = (rng.standard_normal(shape) * scale).astype(np.float32)
        t = qtype
        for key, override in (types or {}).items():
            if key in name:
                t = override
        if quantize and t in F16_FIELDS:
            q = random_blocks(rng, t, shape, scale)
            w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=t)
        elif quantize and t != gguf.GGMLQuantizationType.F32:
            q = gguf.quants.quantize(x, t)
            w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=t)
        else:
            w.add_tensor(name, x)

    head_dim = n_embd // n_head
    tensor("token_embd.weight", (len(vocab), n_embd), 1.0)
    for i in range(n_layer):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", (1 + 0.1 * rng.standard_normal(n_embd)).astype(np.float32))
        tensor(p + "attn_q.weight", (n_head * head_dim, n_embd), n_embd ** -0.5)
        tensor(p + "attn_k.weight", (n_kv_head * head_dim, n_embd), n_embd ** -0.5)
        tensor(p + "attn_v.weight", (n_kv_head * head_dim, n_embd), n_embd ** -0.5)
        if arch == "qwen2":
            for n, rows in (("q", n_head), ("k", n_kv_head), ("v", n_kv_head)):
                w.add_tensor(p + f"attn_{n}.bias", (0.1 * rng.standard_normal(rows * head_dim)).astype(np.float32))
        tensor(p + "attn_output.weight", (n_embd, n_head * head_dim), n_embd ** -0.5)
        w.add_tensor(p + "ffn_norm.weight", (1 + 0.1 * rng.standard_normal(n_embd)).astype(np.float32))
        tensor(p + "ffn_gate.weight", (n_ff, n_embd), n_embd ** -0.5)
        tensor(p + "ffn_up.weight", (n_ff, n_embd), n_embd ** -0.5)
        tensor(p + "ffn_down.weight", (n_embd, n_ff), n_ff ** -0.5)
    w.add_tensor("output_norm.weight", (1 + 0.1 * rng.standard_normal(n_embd)).astype(np.float32))
    if not tied:
        tensor("output.weight", (len(vocab), n_embd), n_embd ** -0.5)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
