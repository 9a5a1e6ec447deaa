"""Gemma 4 (E2B, E4B and the other dense text decoders) as one recorded forward pass.

    x = embed(tokens) * sqrt(n_embd)
    per-layer inputs (n_layer slices of n_pl values per token, n_pl = embedding_length_per_layer_input):
        P = (per_layer_token_embd(tokens) * sqrt(n_pl) + proj_norm(Wpl · x / sqrt(n_embd))) / sqrt(2)
    per block l:
        q = rope(q_norm(Wq · norm(x)))                    per-head RMSNorm, then NeoX RoPE
        k, v = rope(k_norm(Wk · norm(x))), rmsnorm(Wv · norm(x))        the value norm has no weight
        x += post_attention_norm(Wo · attention(q, K, V))  scores q·k unscaled (the norms fix their size)
        x += post_ffw_norm(Wdown · (gelu(Wgate · norm(x)) * (Wup · norm(x))))
        x += post_norm(Wproj · (gelu(Winp_gate · x) * P[l]))
        x *= layer_output_scale                            a one-element tensor, where present
    logits = cap * tanh(Woutput · norm(x) / cap)          cap = final_logit_softcapping (30 where absent)

Layers are sliding-window (local: `attention.sliding_window` positions, heads of `key_length_swa`, RoPE over
`rope.dimension_count_swa` with base `rope.freq_base_swa`) or global (heads of `key_length`, base `rope.freq_base`,
and the "proportional" RoPE: frequencies over the whole head, the unrotated pairs' frequencies divided by 1e30 in
`rope_freqs.weight`), one flag per layer in `attention.sliding_window_pattern`. The last
`attention.shared_kv_layers` layers compute no K/V of their own: as llama.cpp wires them, a local one attends over
the cache of the last-but-one layer that has a cache, a global one over the last's (the file must make those a
local and a global layer). Norm weights are applied as stored (this converter adds no 1).

Two constant factors ahead of an RMSNorm fold into its epsilon, since RMSNorm(c·z, eps) = RMSNorm(z, eps/c²):
the 1/sqrt(n_embd) of the per-layer projection, and the 1/sqrt(2) of P, which reaches `post_norm` through a
product and a matmul, both linear in P.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..gguf.config import MAX_LAYERS, AttentionShape, Metadata, ModelConfig, Rope
from ..errors import ModelMetadataError, UnsupportedModelError
from ..gpu import ops
from ..gpu.device import Buffer
from ..gpu.recorder import Act, Recorder
from ..gpu.tensors import Weight
from ..gguf.shapes import Dim
from . import register
from .base import Activations, ActivationSpec
from .layers import Norm, gated, logits, output_weight, project
from .weights import WeightLoader


@dataclass(frozen=True)
class Gemma4Config(ModelConfig):
    # The shared fields describe the global layers (head_dim, rope_dim, n_kv_head); n_ff is the largest layer's.
    local_layers: tuple[bool, ...]  # per layer: sliding-window attention (else global)
    sliding_window: int  # positions a local layer sees, its own included
    head_dim_local: int  # key and value length of the local layers
    rope_dim_local: int
    rope_base_local: float
    kv_heads: tuple[int, ...]  # per layer
    ffn_lengths: tuple[int, ...]  # per layer
    kv_source: tuple[int, ...]  # per layer: the layer whose K/V cache it attends over (itself, or a shared one)
    n_embd_per_layer: int  # values of each layer's per-layer input (0: none)
    final_logit_softcapping: float  # 0: none; 30 where the file sets none, as llama.cpp reads it

    @classmethod
    def from_metadata(cls, md: dict, where: str = "model") -> "Gemma4Config":
        m = Metadata(md, where)
        n_layer = m.get("block_count", minimum=1, maximum=MAX_LAYERS)
        if m.get("expert_count", 0, minimum=0):
            raise UnsupportedModelError(f"{where}: Gemma 4 with mixture-of-experts feed-forward layers "
                                        f"({m.arch}.expert_count = {m.get('expert_count')}) is not supported yet")
        kv_heads = m.per_layer("attention.head_count_kv", n_layer, m.md.get(f"{m.arch}.attention.head_count"))
        ffn = m.per_layer("feed_forward_length", n_layer)
        local = m.per_layer("attention.sliding_window_pattern", n_layer, kind=bool)
        # The shared fields, checked with the largest of the per-layer values, then each of them.
        common = cls.common(Metadata(md | {f"{m.arch}.attention.head_count_kv": max(kv_heads),
                                           f"{m.arch}.feed_forward_length": max(ffn)}, where))
        n_head = common["n_head"]
        if any(h < 1 or n_head % h for h in kv_heads):
            raise ModelMetadataError(f"{where}: metadata {m.arch}.attention.head_count_kv = {list(kv_heads)} is "
                                     f"invalid: each layer's count must divide the {n_head} query heads")
        if min(ffn) < 1:
            raise ModelMetadataError(f"{where}: metadata {m.arch}.feed_forward_length = {list(ffn)} is invalid: "
                                     "each layer's must be at least 1")
        head_local = m.get("attention.key_length_swa", minimum=4)
        if m.get("attention.value_length_swa", head_local) != head_local or head_local % 4:
            raise UnsupportedModelError(f"{where}: local heads of key length {head_local} and value length "
                                        f"{m.get('attention.value_length_swa', head_local)} are not supported (they "
                                        "must be equal and a multiple of 4)")
        rope_local = m.get("rope.dimension_count_swa", head_local, minimum=2)
        if rope_local % 2 or rope_local > head_local:
            raise ModelMetadataError(f"{where}: metadata {m.arch}.rope.dimension_count_swa = {rope_local} must be "
                                     f"even and at most the local head size {head_local}")
        shared = m.get("attention.shared_kv_layers", 0, minimum=0, maximum=n_layer)
        with_kv = n_layer - shared
        sources = []
        for i in range(n_layer):
            src = i if i < with_kv else with_kv - (2 if local[i] else 1)
            if src < 0 or local[src] != local[i] or kv_heads[src] != kv_heads[i]:
                raise UnsupportedModelError(
                    f"{where}: layer {i} would attend over layer {src}'s K/V cache ({m.arch}.attention."
                    f"shared_kv_layers = {shared}), which is not a {'local' if local[i] else 'global'} layer with "
                    f"{kv_heads[i]} K/V heads")
            sources.append(src)
        return cls(**common, local_layers=local, sliding_window=m.get("attention.sliding_window", minimum=1),
                   head_dim_local=head_local, rope_dim_local=rope_local,
                   rope_base_local=m.get("rope.freq_base_swa", 10000.0, float, above=0.0),
                   kv_heads=kv_heads, ffn_lengths=ffn, kv_source=tuple(sources),
                   n_embd_per_layer=m.get("embedding_length_per_layer_input", minimum=0),
                   # llama.cpp caps at 30 when the file names no cap (Gemma 4's value)
                   final_logit_softcapping=m.get("final_logit_softcapping", 30.0, float, minimum=0.0))

    def attention_shape(self, layer: int) -> AttentionShape:
        # Scores unscaled: the per-head norms of q and k fix their size.
        if self.local_layers[layer]:
            return AttentionShape(self.n_head, self.kv_heads[layer], self.head_dim_local, scale=1.0,
                                  rope=Rope(self.rope_dim_local, self.rope_base_local), window=self.sliding_window)
        return AttentionShape(self.n_head, self.kv_heads[layer], self.head_dim, scale=1.0,
                              rope=Rope(self.rope_dim, self.rope_base, self.rope_freq_scale))

    def tensor_shapes(self) -> dict[str, tuple[Dim, ...]]:
        key = lambda k: f"{self.arch}.{k}"  # noqa: E731
        embd, n_head = self.dim("n_embd"), self.dim("n_head")
        per_layer = Dim(self.n_embd_per_layer, f"{key('embedding_length_per_layer_input')} = {self.n_embd_per_layer}")
        shapes = {"token_embd.weight": (embd, self.dim("vocab_size")),
                  "output.weight": (embd, self.dim("vocab_size")), "output_norm.weight": (embd,),
                  "rope_freqs.weight": (self.dim("head_dim") // 2,),
                  "per_layer_token_embd.weight": (per_layer * self.n_layer, self.dim("vocab_size")),
                  "per_layer_model_proj.weight": (embd, per_layer * self.n_layer),
                  "per_layer_proj_norm.weight": (per_layer,)}
        for i in range(self.n_layer):
            p = f"blk.{i}."
            local = self.local_layers[i]
            head = (Dim(self.head_dim_local, f"{key('attention.key_length_swa')} = {self.head_dim_local}") if local
                    else self.dim("head_dim"))
            kv = Dim(self.kv_heads[i], f"{key('attention.head_count_kv')}[{i}] = {self.kv_heads[i]}") * head
            ff = Dim(self.ffn_lengths[i], f"{key('feed_forward_length')}[{i}] = {self.ffn_lengths[i]}")
            shapes |= {p + "attn_norm.weight": (embd,), p + "attn_q.weight": (embd, n_head * head),
                       p + "attn_k.weight": (embd, kv), p + "attn_v.weight": (embd, kv),
                       p + "attn_q_norm.weight": (head,), p + "attn_k_norm.weight": (head,),
                       p + "attn_output.weight": (n_head * head, embd), p + "post_attention_norm.weight": (embd,),
                       p + "ffn_norm.weight": (embd,), p + "ffn_gate.weight": (embd, ff),
                       p + "ffn_up.weight": (embd, ff), p + "ffn_down.weight": (ff, embd),
                       p + "post_ffw_norm.weight": (embd,), p + "layer_output_scale.weight": (Dim(1, "one value"),),
                       p + "inp_gate.weight": (embd, per_layer), p + "proj.weight": (per_layer, embd),
                       p + "post_norm.weight": (embd,)}
        return shapes


@dataclass
class PerLayerInput:
    inp_gate: Weight
    proj: Weight
    post_norm: Buffer


@dataclass
class Block:
    attn_norm: Buffer
    attn_qkv: list[Weight]  # q, k, v (stacked where they can be); q alone in a layer reading another's cache
    attn_q_norm: Buffer
    attn_k_norm: Buffer | None
    attn_output: Weight
    post_attention_norm: Buffer
    ffn_norm: Buffer
    ffn_gate_up: list[Weight]
    ffn_down: Weight
    post_ffw_norm: Buffer
    per_layer: PerLayerInput | None
    layer_output_scale: Buffer | None


@register("gemma4")
class Gemma4:
    Config = Gemma4Config

    def __init__(self, config: Gemma4Config, weights: WeightLoader, *, fold_norms: bool | None = None):
        c = self.config = config
        self.fold_norms = weights.fold_norms if fold_norms is None else fold_norms
        if any(weights.has(f"blk.{i}.ffn_gate_inp.weight") for i in range(c.n_layer)):
            raise UnsupportedModelError(f"{weights.gguf.name}: Gemma 4 with mixture-of-experts feed-forward layers "
                                        "is not supported yet")
        self.token_embd = weights.weight(["token_embd.weight"])
        self.per_layer_token_embd = self.per_layer_model_proj = self.per_layer_proj_norm = None
        if c.n_embd_per_layer:
            self.per_layer_token_embd = weights.weight(["per_layer_token_embd.weight"])
            self.per_layer_model_proj = weights.weight(["per_layer_model_proj.weight"])
            self.per_layer_proj_norm = weights.vector("per_layer_proj_norm.weight")
        self.rope_freqs = weights.vector("rope_freqs.weight") if not all(c.local_layers) else None
        self.blk = []
        for i in range(c.n_layer):
            p = f"blk.{i}."
            own_kv = c.kv_source[i] == i
            if not weights.has(p + "attn_v.weight") and own_kv:
                raise UnsupportedModelError(f"{weights.gguf.name}: layer {i} has no attn_v.weight (values from the "
                                            "key projection), which is not supported yet")
            if not own_kv:  # loaded by llama.cpp where present, never computed with
                weights.skip([p + "attn_k.weight", p + "attn_v.weight", p + "attn_k_norm.weight"])
            per_layer = None
            if c.n_embd_per_layer:
                per_layer = PerLayerInput(inp_gate=weights.weight([p + "inp_gate.weight"]),
                                          proj=weights.weight([p + "proj.weight"]),
                                          post_norm=weights.vector(p + "post_norm.weight"))
            self.blk.append(Block(
                attn_norm=weights.vector(p + "attn_norm.weight"),
                attn_qkv=(weights.stacked([p + "attn_q.weight", p + "attn_k.weight", p + "attn_v.weight"]) if own_kv
                          else [weights.weight([p + "attn_q.weight"])]),
                attn_q_norm=weights.vector(p + "attn_q_norm.weight"),
                attn_k_norm=weights.vector(p + "attn_k_norm.weight") if own_kv else None,
                attn_output=weights.weight([p + "attn_output.weight"]),
                post_attention_norm=weights.vector(p + "post_attention_norm.weight"),
                ffn_norm=weights.vector(p + "ffn_norm.weight"),
                ffn_gate_up=weights.gate_up(p),
                ffn_down=weights.weight([p + "ffn_down.weight"]),
                post_ffw_norm=weights.vector(p + "post_ffw_norm.weight"),
                per_layer=per_layer,
                layer_output_scale=weights.optional_vector(p + "layer_output_scale.weight")))
        self.output_norm = weights.vector("output_norm.weight")
        self.output = output_weight(weights, self.token_embd)
        self.weight_bytes = weights.bytes
        weights.check_all_read()

    def activations(self) -> list[ActivationSpec]:
        # `branch`: a sub-block's output before its post-norm joins the residual stream; `ple`: every layer's
        # per-layer input side by side, `ple_proj` its projected part, `pl` one layer's gated per-layer input.
        c = self.config
        shapes = [c.attention_shape(i) for i in range(c.n_layer)]
        specs = [ActivationSpec("x", c.n_embd), ActivationSpec("qkv", max(s.qkv_width for s in shapes)),
                 ActivationSpec("attn", max(s.q_dim for s in shapes)),
                 ActivationSpec("ff", c.n_ff), ActivationSpec("last", c.n_embd, per_out_row=True),
                 ActivationSpec("branch", c.n_embd)]
        if not self.fold_norms:
            specs.append(ActivationSpec("h", c.n_embd))
        if any(len(b.ffn_gate_up) > 1 for b in self.blk):
            specs.append(ActivationSpec("up", c.n_ff))
        if c.n_embd_per_layer:
            specs += [ActivationSpec("ple", c.n_layer * c.n_embd_per_layer),
                      ActivationSpec("ple_proj", c.n_layer * c.n_embd_per_layer),
                      ActivationSpec("pl", c.n_embd_per_layer)]
        return specs

    def kv_widths(self) -> list[int]:
        c = self.config
        return [c.attention_shape(i).kv_dim if c.kv_source[i] == i else 0 for i in range(c.n_layer)]

    def record(self, rec: Recorder, acts: Activations, kv, logits_out: Act, context: int | None = None) -> None:
        c = self.config
        x, branch, rows = acts.x, acts.branch, acts.x.rows
        norm = Norm(rec, None if self.fold_norms else acts.h, c.norm_eps)
        n_pl = c.n_embd_per_layer
        ops.embed(rec, self.token_embd, acts.tokens, x, scale=math.sqrt(c.n_embd))
        if n_pl:
            ops.embed(rec, self.per_layer_token_embd, acts.tokens, acts.ple, scale=math.sqrt(n_pl))
            ops.matmul(rec, self.per_layer_model_proj, x, acts.ple_proj)
            ops.rmsnorm(rec, acts.ple_proj, self.per_layer_proj_norm, acts.ple, c.norm_eps * c.n_embd, dim=n_pl,
                        groups=c.n_layer, add=True)
        for i, blk in enumerate(self.blk):
            shape, src = c.attention_shape(i), c.kv_source[i]
            qkv = Act(acts.qkv.buffer, rows, shape.qkv_width)
            attn = Act(acts.attn.buffer, rows, shape.q_dim)
            project(rec, blk.attn_qkv, x, qkv, norm=norm(x, blk.attn_norm))
            if src == i:
                ops.qk_norm(rec, qkv, blk.attn_q_norm, blk.attn_k_norm, c.norm_eps, shape)
                ops.rmsnorm(rec, qkv, None, qkv, c.norm_eps, dim=shape.head_dim, groups=shape.n_kv_head,
                            offset=shape.q_dim + shape.kv_dim)
            else:
                ops.rmsnorm(rec, qkv, blk.attn_q_norm, qkv, c.norm_eps, dim=shape.head_dim, groups=shape.n_head)
            # A layer without a cache of its own rotates q only and attends over its source layer's.
            ops.rope_store(rec, qkv, acts.tokens, kv.layer(src), shape,
                           freqs=None if c.local_layers[i] else self.rope_freqs, store=src == i)
            ops.attention(rec, qkv, acts.tokens, kv.layer(src), attn, shape, context=context)
            ops.matmul(rec, blk.attn_output, attn, branch)
            ops.rmsnorm(rec, branch, blk.post_attention_norm, x, c.norm_eps, add=True)
            ff = Act(acts.ff.buffer, rows, c.ffn_lengths[i])
            up = Act(acts.up.buffer, rows, c.ffn_lengths[i]) if "up" in acts else None
            gated(rec, blk.ffn_gate_up, x, ff, up, norm=norm(x, blk.ffn_norm), act="gelu")
            ops.matmul(rec, blk.ffn_down, ff, branch)
            ops.rmsnorm(rec, branch, blk.post_ffw_norm, x, c.norm_eps, add=True)
            if blk.per_layer is not None:
                pl = blk.per_layer
                ops.matmul(rec, pl.inp_gate, x, acts.pl)
                ops.mul_gate(rec, acts.pl, acts.ple, act="gelu", up_offset=i * n_pl)
                ops.matmul(rec, pl.proj, acts.pl, branch)
                ops.rmsnorm(rec, branch, pl.post_norm, x, c.norm_eps * 2, add=True)
            if blk.layer_output_scale is not None:
                ops.scale_by(rec, x, blk.layer_output_scale)
        logits(rec, x, acts, self.output, self.output_norm, c.norm_eps, logits_out, fold=self.fold_norms)
        if c.final_logit_softcapping:
            ops.softcap(rec, logits_out, c.final_logit_softcapping, rows_from=rec.out_step)
