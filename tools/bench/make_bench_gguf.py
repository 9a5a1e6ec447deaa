"""Random-weight GGUFs shaped like released 1B-class models, for speed measurements: SmolLM2-135M is bound by
dispatches, at 1B the weight stream decides.

    .venv/bin/python tools/bench/make_bench_gguf.py                              # llama-3.2-1b, Q4_0 and Q4_K_M
    .venv/bin/python tools/bench/make_bench_gguf.py --shape qwen3-1.7b --type q4_k_m
    .venv/bin/llmchat bench ~/.cache/llmchat/bench/llama-3.2-1b.Q4_K_M.gguf --roofline

Each file is written once into $LLMCHAT_HOME/bench (default ~/.cache/llmchat/bench; --out elsewhere) and reused
while its name (shape and type) and GENERATOR (in `general.name`) match; the path of each is printed.

- Shapes: the hyperparameters of the released models (their config.json): layers, widths, heads, vocabulary size,
  RoPE base and llama3 RoPE scaling, tied embeddings, Qwen3's per-head q/k norms.
- Types: per tensor what llama.cpp's quantizer gives that file type. Checked against llama_model_quantize
  (llama-cpp-python 0.3.36) on random F32 models with 16 and 28 layers: the tied embedding table is Q6_K in
  both Q4_0 and Q4_K_M; in Q4_K_M, attn_v and ffn_down are Q6_K in the layers `more_bits` picks, all other
  matrices Q4_K.
- Weights: random blocks whose f16 scales give values the spread of a trained layer's (about 1/sqrt(row length);
  the embedding table about 1; `llmchat.quant.random_weights`), norms near 1, so activations stay finite and
  ordinary (CPU adapters run NaN and subnormal numbers at other speeds). Generated, not quantized: a 1B file takes
  seconds.
- Vocabulary: tests/support/model_factory.py's byte-level BPE (256 byte symbols, a few merges, ChatML control tokens),
  padded with unused tokens to the model's vocabulary size, so llmchat and llama.cpp both load and tokenize it.

Needs llmchat, numpy and gguf only (what tools/gpu_report.sh installs on a bare machine).
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import gguf
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "support"))
from llmchat.paths import llmchat_home  # noqa: E402
from llmchat.quant import random_weights  # noqa: E402
from model_factory import MERGES, SPECIALS, llama3_rope_factors, vocabulary  # noqa: E402

Q = gguf.GGMLQuantizationType
GENERATOR = "llmchat random bench model v1"
FILE_TYPES = {"Q4_0": gguf.LlamaFileType.MOSTLY_Q4_0, "Q4_K_M": gguf.LlamaFileType.MOSTLY_Q4_K_M}


@dataclass(frozen=True)
class Shape:
    arch: str  # general.architecture
    n_layer: int
    n_embd: int
    n_head: int
    n_kv_head: int
    head_dim: int
    n_ff: int
    vocab: int
    context: int
    rope_base: float
    norm_eps: float
    llama3_rope: dict | None = None  # rope_scaling of type "llama3": rope_freqs.weight


SHAPES = {
    "llama-3.2-1b": Shape("llama", n_layer=16, n_embd=2048, n_head=32, n_kv_head=8, head_dim=64, n_ff=8192,
                          vocab=128256, context=131072, rope_base=500000.0, norm_eps=1e-5,
                          llama3_rope=dict(factor=32.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                           original_context=8192)),
    "qwen3-1.7b": Shape("qwen3", n_layer=28, n_embd=2048, n_head=16, n_kv_head=8, head_dim=128, n_ff=6144,
                        vocab=151936, context=40960, rope_base=1000000.0, norm_eps=1e-6),
}


def tiny(shape: Shape) -> Shape:
    """The same layout (architecture, layer count, head ratios, types per layer) at widths a test runs in seconds;
    rows stay whole 256-element K-quant blocks."""
    return replace(shape, n_embd=256, n_head=shape.n_head // 8, n_kv_head=max(1, shape.n_kv_head // 8),
                   head_dim=shape.head_dim, n_ff=512, vocab=1024, context=2048)


def more_bits(layer: int, n_layer: int) -> bool:
    """The layers whose attn_v and ffn_down llama.cpp's Q4_K_M keeps in Q6_K: the first and last eighth, and every
    third layer between."""
    return layer < n_layer // 8 or layer >= 7 * n_layer // 8 or (layer - n_layer // 8) % 3 == 2


def tensor_type(name: str, file_type: str, n_layer: int) -> Q:
    """The type llama.cpp's quantizer gives weight matrix `name` in a file of `file_type` with tied embeddings."""
    if name == "token_embd.weight":  # the output projection too: llama.cpp gives it the output's Q6_K
        return Q.Q6_K
    if file_type == "Q4_0":
        return Q.Q4_0
    if file_type != "Q4_K_M":
        raise ValueError(f"no mix for file type {file_type}; known: {', '.join(FILE_TYPES)}")
    layer = int(name.split(".")[1])
    if name.endswith(("attn_v.weight", "ffn_down.weight")) and more_bits(layer, n_layer):
        return Q.Q6_K
    return Q.Q4_K


def write(path: Path, shape: Shape, file_type: str, seed: int = 0) -> Path:
    """Write the random model of `shape` in `file_type` to `path` (through a temporary name, so a file at `path`
    is always whole)."""
    rng = np.random.default_rng(seed)
    s = shape
    tmp = path.with_name(path.name + ".part")
    w = gguf.GGUFWriter(str(tmp), s.arch)
    w.add_name(GENERATOR)
    w.add_block_count(s.n_layer)
    w.add_context_length(s.context)
    w.add_embedding_length(s.n_embd)
    w.add_feed_forward_length(s.n_ff)
    w.add_head_count(s.n_head)
    w.add_head_count_kv(s.n_kv_head)
    w.add_key_length(s.head_dim)
    w.add_value_length(s.head_dim)
    w.add_layer_norm_rms_eps(s.norm_eps)
    w.add_rope_freq_base(s.rope_base)
    if s.arch == "llama":
        w.add_vocab_size(s.vocab)
        w.add_rope_dimension_count(s.head_dim)
    w.add_file_type(FILE_TYPES[file_type])
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)

    base = vocabulary()
    if s.vocab < len(base):
        raise ValueError(f"a vocabulary of {s.vocab} cannot hold the {len(base)} byte-level tokens")
    tokens = base + [f"<unused_{i}>" for i in range(s.vocab - len(base))]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types([gguf.TokenType.CONTROL] * len(SPECIALS) + [gguf.TokenType.NORMAL] * (len(base) - len(SPECIALS))
                      + [gguf.TokenType.UNUSED] * (s.vocab - len(base)))
    w.add_token_merges(MERGES)
    w.add_bos_token_id(0)
    w.add_eos_token_id(2)
    w.add_add_bos_token(False)

    def matrix(name: str, rows: int, k: int, spread: float | None = None) -> None:
        qtype = tensor_type(name, file_type, s.n_layer)
        data = random_weights(rng, qtype, (rows, k), k ** -0.5 if spread is None else spread)
        w.add_tensor(name, data, raw_shape=data.shape, raw_dtype=qtype)

    def vector(name: str, size: int) -> None:
        w.add_tensor(name, (1 + 0.1 * rng.standard_normal(size)).astype(np.float32))

    q_dim, kv_dim = s.n_head * s.head_dim, s.n_kv_head * s.head_dim
    matrix("token_embd.weight", s.vocab, s.n_embd, spread=1.0)
    if s.llama3_rope:
        w.add_tensor("rope_freqs.weight", llama3_rope_factors(s.head_dim, s.rope_base, **s.llama3_rope))
    for i in range(s.n_layer):
        p = f"blk.{i}."
        vector(p + "attn_norm.weight", s.n_embd)
        matrix(p + "attn_q.weight", q_dim, s.n_embd)
        matrix(p + "attn_k.weight", kv_dim, s.n_embd)
        matrix(p + "attn_v.weight", kv_dim, s.n_embd)
        if s.arch == "qwen3":
            vector(p + "attn_q_norm.weight", s.head_dim)
            vector(p + "attn_k_norm.weight", s.head_dim)
        matrix(p + "attn_output.weight", s.n_embd, q_dim)
        vector(p + "ffn_norm.weight", s.n_embd)
        matrix(p + "ffn_gate.weight", s.n_ff, s.n_embd)
        matrix(p + "ffn_up.weight", s.n_ff, s.n_embd)
        matrix(p + "ffn_down.weight", s.n_embd, s.n_ff)
    vector("output_norm.weight", s.n_embd)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, path)
    return path


def bench_dir() -> Path:
    return llmchat_home() / "bench"


def cached(shape_name: str, file_type: str, out: Path | None = None) -> Path:
    """The path of the model, written first unless a file by this generator is already there."""
    out = out or bench_dir()
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{shape_name}.{file_type}.gguf"
    if path.exists():
        name = gguf.GGUFReader(str(path)).get_field("general.name")
        if name is not None and name.contents() == GENERATOR:
            return path
    return write(path, SHAPES[shape_name], file_type)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", nargs="+", choices=sorted(SHAPES), default=["llama-3.2-1b"])
    parser.add_argument("--type", nargs="+", type=str.upper, choices=sorted(FILE_TYPES), default=["Q4_0", "Q4_K_M"])
    parser.add_argument("--out", type=Path, help="folder for the files (default: $LLMCHAT_HOME/bench)")
    args = parser.parse_args(argv)
    for shape in args.shape:
        for file_type in args.type:
            path = cached(shape, file_type, args.out)
            print(f"{path}  {path.stat().st_size / 2 ** 30:.2f} GiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
