"""Phi-3 / Phi-3.5-mini and Phi-4-mini as one recorded forward pass.

A Llama-shaped pre-norm decoder with its projections fused in the file:
    q | k | v = Wqkv · norm(x)                          one tensor, attn_qkv
    x += Wo · attention(rope(q), rope(k), v)
    gate | up = Wup · norm(x)                           one tensor of 2 * n_ff rows, ffn_up
    x += Wdown · (silu(gate) * up)
    logits = Woutput · norm(x)

RoPE is NeoX-style, possibly over part of each head (Phi-4-mini rotates 96 of 128 dimensions). The 128k-context
models carry LongRoPE: per-dimension divisors of the rotation frequencies, `rope_factors_short` for contexts up to
the original training length and `rope_factors_long` beyond it (chosen by the context the cache was sized for,
as llama.cpp does), and an attention factor that scales the rotated elements of q and k.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..gguf.config import AttentionShape, Metadata, ModelConfig
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
class Phi3Config(ModelConfig):
    original_context: int  # LongRoPE: contexts beyond this use the long factors
    rope_mscale: float  # LongRoPE's attention factor (1 without)

    @classmethod
    def from_metadata(cls, md: dict, where: str = "model") -> "Phi3Config":
        m = Metadata(md, where)
        common = cls.common(m)
        return cls(**common,
                   original_context=m.get("rope.scaling.original_context_length", common["context_length"],
                                          minimum=1),
                   rope_mscale=m.get("rope.scaling.attn_factor", 1.0, float, above=0.0))

    def attention_shape(self, layer: int) -> AttentionShape:
        shape = super().attention_shape(layer)
        return replace(shape, rope=replace(shape.rope, mscale=self.rope_mscale))

    def tensor_shapes(self) -> dict[str, tuple[Dim, ...]]:
        embd, ff, head = self.dim("n_embd"), self.dim("n_ff"), self.dim("head_dim")
        q, kv = self.dim("n_head") * head, self.dim("n_kv_head") * head
        factors = (self.dim("rope_dim") // 2,)
        shapes = super().tensor_shapes() | {"rope_factors_short.weight": factors, "rope_factors_long.weight": factors}
        for i in range(self.n_layer):
            p = f"blk.{i}."
            shapes |= {p + "attn_qkv.weight": (embd, q + kv * 2), p + "ffn_up.weight": (embd, ff * 2)}
        return shapes


@dataclass
class Block:
    attn_norm: Buffer
    attn_qkv: list[Weight]  # the fused tensor, or q, k, v (stacked where their types agree) in older files
    attn_qkv_bias: Buffer | None
    attn_output: Weight
    ffn_norm: Buffer
    ffn_up: Weight  # [gate; up]
    ffn_down: Weight


@register("phi3")
class Phi3:
    Config = Phi3Config

    def __init__(self, config: Phi3Config, weights: WeightLoader, *, fold_norms: bool | None = None):
        self.config = config
        self.fold_norms = weights.fold_norms if fold_norms is None else fold_norms
        self.token_embd = weights.weight(["token_embd.weight"])
        self.blk = []
        for i in range(config.n_layer):
            p = f"blk.{i}."
            fused = weights.has(p + "attn_qkv.weight")
            separate = [p + "attn_q.weight", p + "attn_k.weight", p + "attn_v.weight"]
            self.blk.append(Block(
                attn_norm=weights.vector(p + "attn_norm.weight"),
                attn_qkv=[weights.weight([p + "attn_qkv.weight"])] if fused else weights.stacked(separate),
                attn_qkv_bias=None if fused else weights.bias([n.replace(".weight", ".bias") for n in separate]),
                attn_output=weights.weight([p + "attn_output.weight"]),
                ffn_norm=weights.vector(p + "ffn_norm.weight"),
                ffn_up=weights.weight([p + "ffn_up.weight"]),
                ffn_down=weights.weight([p + "ffn_down.weight"])))
        self.output_norm = weights.vector("output_norm.weight")
        self.output = output_weight(weights, self.token_embd)
        self.rope_factors_short = weights.optional_vector("rope_factors_short.weight")
        self.rope_factors_long = weights.optional_vector("rope_factors_long.weight")
        self.weight_bytes = weights.bytes
        weights.check_all_read()

    def activations(self) -> list[ActivationSpec]:
        return decoder_activations(self.config, fold_norms=self.fold_norms, split_ffn=False)

    def kv_widths(self) -> list[int]:
        return [self.config.kv_dim] * self.config.n_layer

    def record(self, rec: Recorder, acts: Activations, kv, logits_out: Act, context: int | None = None) -> None:
        c = self.config
        x, qkv, attn, ff = acts.x, acts.qkv, acts.attn, acts.ff
        norm = Norm(rec, None if self.fold_norms else acts.h, c.norm_eps)
        long = kv.max_context > c.original_context
        factors = self.rope_factors_long if long else self.rope_factors_short
        ops.embed(rec, self.token_embd, acts.tokens, x)
        for i, blk in enumerate(self.blk):
            shape = c.attention_shape(i)
            project(rec, blk.attn_qkv, x, qkv, bias=blk.attn_qkv_bias, norm=norm(x, blk.attn_norm))
            ops.rope_store(rec, qkv, acts.tokens, kv.layer(i), shape, freqs=factors)
            ops.attention(rec, qkv, acts.tokens, kv.layer(i), attn, shape, context=context)
            ops.matmul(rec, blk.attn_output, attn, x, mode=ops.ADD)
            gated(rec, [blk.ffn_up], x, ff, None, norm=norm(x, blk.ffn_norm))
            ops.matmul(rec, blk.ffn_down, ff, x, mode=ops.ADD)
        logits(rec, x, acts, self.output, self.output_norm, c.norm_eps, logits_out, fold=self.fold_norms)
