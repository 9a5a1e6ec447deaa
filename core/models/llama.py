"""The Llama family (Llama 2/3.x, SmolLM2/3, TinyLlama, Mistral, Qwen2/3) as one recorded forward pass.

Pre-norm decoder: x = embed(tokens); per block
    x += Wo · attention(rope(Wq · norm(x)), rope(Wk · norm(x)), Wv · norm(x))
    x += Wdown · (silu(Wgate · norm(x)) * (Wup · norm(x)))
then logits = Woutput · norm(x). Attribute names are the GGUF tensor names. The members differ in small ways:
Qwen2 adds biases to q, k and v; Qwen3 normalises each q and k head (RMSNorm) before RoPE; SmolLM3 leaves every
fourth layer without RoPE (a fixed step, as llama.cpp has it: no metadata key carries it); Qwen2/3 rotate NeoX-style.

Q, K and V are stacked into one weight (one dispatch) when they share a quant type, as are gate and up.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..gguf.config import AttentionShape, Metadata, ModelConfig, Rope
from ..gpu import ops
from ..gpu.device import Buffer
from ..gpu.recorder import Act, Recorder
from ..gpu.tensors import Weight
from ..gguf.shapes import Dim
from . import register
from .base import Activations, ActivationSpec
from .layers import Norm, decoder_activations, gated, logits, output_weight, project
from .weights import WeightLoader


@dataclass(frozen=True)
class LlamaConfig(ModelConfig):
    rope_neox: bool  # rotate pairs (i, i + d/2) instead of (2i, 2i + 1): Qwen2/3
    qk_norm: bool  # per-head RMSNorm of q and k before RoPE: Qwen3
    rope_layers: tuple[bool, ...]  # per layer: whether q and k are rotated (SmolLM3 skips every fourth)

    @classmethod
    def from_metadata(cls, md: dict, where: str = "model") -> "LlamaConfig":
        m = Metadata(md, where)
        common = cls.common(m)
        n_layer = common["n_layer"]
        nope_step = 4 if m.arch == "smollm3" else 0
        return cls(**common, rope_neox=m.arch in ("qwen2", "qwen3"), qk_norm=m.arch == "qwen3",
                   rope_layers=tuple(not nope_step or (i + 1) % nope_step != 0 for i in range(n_layer)))

    def attention_shape(self, layer: int) -> AttentionShape:
        rope = Rope(self.rope_dim, self.rope_base, self.rope_freq_scale, neox=self.rope_neox)
        return replace(super().attention_shape(layer), rope=rope if self.rope_layers[layer] else None)

    def tensor_shapes(self) -> dict[str, tuple[Dim, ...]]:
        head = self.dim("head_dim")
        shapes = super().tensor_shapes() | {"rope_freqs.weight": (self.dim("rope_dim") // 2,)}
        for i in range(self.n_layer):
            shapes |= {f"blk.{i}.attn_q_norm.weight": (head,), f"blk.{i}.attn_k_norm.weight": (head,)}
        return shapes


@dataclass
class Block:
    attn_norm: Buffer
    attn_qkv: list[Weight]  # one stacked weight, or q, k, v apart when their types differ
    attn_qkv_bias: Buffer | None
    attn_q_norm: Buffer | None  # Qwen3
    attn_k_norm: Buffer | None
    attn_output: Weight
    ffn_norm: Buffer
    ffn_gate_up: list[Weight]  # one stacked [gate; up] weight, or gate and up apart
    ffn_down: Weight


@register("llama", "mistral", "qwen2", "qwen3", "smollm3")
class Llama:
    Config = LlamaConfig

    def __init__(self, config: LlamaConfig, weights: WeightLoader, *, fold_norms: bool | None = None):
        self.config = config
        self.fold_norms = weights.fold_norms if fold_norms is None else fold_norms
        self.token_embd = weights.weight(["token_embd.weight"])
        self.blk = []
        for i in range(config.n_layer):
            p = f"blk.{i}."
            self.blk.append(Block(
                attn_norm=weights.vector(p + "attn_norm.weight"),
                attn_qkv=weights.stacked([p + "attn_q.weight", p + "attn_k.weight", p + "attn_v.weight"]),
                attn_qkv_bias=weights.bias([p + "attn_q.bias", p + "attn_k.bias", p + "attn_v.bias"]),
                attn_q_norm=weights.vector(p + "attn_q_norm.weight") if config.qk_norm else None,
                attn_k_norm=weights.vector(p + "attn_k_norm.weight") if config.qk_norm else None,
                attn_output=weights.weight([p + "attn_output.weight"]),
                ffn_norm=weights.vector(p + "ffn_norm.weight"),
                ffn_gate_up=weights.gate_up(p),
                ffn_down=weights.weight([p + "ffn_down.weight"])))
        self.output_norm = weights.vector("output_norm.weight")
        self.output = output_weight(weights, self.token_embd)
        self.rope_freqs = weights.optional_vector("rope_freqs.weight")
        self.weight_bytes = weights.bytes
        weights.check_all_read()

    def activations(self) -> list[ActivationSpec]:
        return decoder_activations(self.config, fold_norms=self.fold_norms,
                                   split_ffn=any(len(b.ffn_gate_up) > 1 for b in self.blk))

    def kv_widths(self) -> list[int]:
        return [self.config.kv_dim] * self.config.n_layer

    def record(self, rec: Recorder, acts: Activations, kv, logits_out: Act, context: int | None = None) -> None:
        """Record the forward pass for `acts.x.rows` tokens; logits for the rows listed in `acts.out_rows`.
        `context` bounds the positions any token sees (default: the cache's whole context)."""
        c = self.config
        x, qkv, attn, ff = acts.x, acts.qkv, acts.attn, acts.ff
        norm = Norm(rec, None if self.fold_norms else acts.h, c.norm_eps)
        up = acts.up if "up" in acts else None
        ops.embed(rec, self.token_embd, acts.tokens, x)
        for i, blk in enumerate(self.blk):
            shape = c.attention_shape(i)
            project(rec, blk.attn_qkv, x, qkv, bias=blk.attn_qkv_bias, norm=norm(x, blk.attn_norm))
            if c.qk_norm:
                ops.qk_norm(rec, qkv, blk.attn_q_norm, blk.attn_k_norm, c.norm_eps, shape)
            ops.rope_store(rec, qkv, acts.tokens, kv.layer(i), shape, freqs=self.rope_freqs)
            ops.attention(rec, qkv, acts.tokens, kv.layer(i), attn, shape, context=context)
            ops.matmul(rec, blk.attn_output, attn, x, mode=ops.ADD)
            gated(rec, blk.ffn_gate_up, x, ff, up, norm=norm(x, blk.ffn_norm))
            ops.matmul(rec, blk.ffn_down, ff, x, mode=ops.ADD)
        logits(rec, x, acts, self.output, self.output_norm, c.norm_eps, logits_out, fold=self.fold_norms)
