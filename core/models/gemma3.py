"""Gemma 3 (270M, 1B, 4B, 12B, 27B; the text decoder) as one recorded forward pass.

    x = embed(tokens) * sqrt(n_embd)
    per block:
        q, k, v = Wq · norm(x), Wk · norm(x), Wv · norm(x)
        q, k = rope(q_norm(q)), rope(k_norm(k))          per-head RMSNorms, then RoPE
        x += post_attention_norm(Wo · attention(q * scale, k, v))
        x += post_ffw_norm(Wdown · (gelu(Wgate · norm(x)) * (Wup · norm(x))))
    logits = Woutput · norm(x)                           (output tied to the embedding table)
    logits = cap * tanh(logits / cap)                    where the file sets final_logit_softcapping

Layers alternate between sliding-window (local) attention over the last `sliding_window` positions, with their
own RoPE base, and global attention: five local layers, then one global, by default (all global when the file has
no window). The converter stores Gemma's norm weights with the 1 already added, so they are applied like any
RMSNorm weight. The query scale comes from the key length (the 27B model, whose heads are narrower than
n_embd / n_head, scales by n_embd / n_head instead).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..gguf.config import AttentionShape, Metadata, ModelConfig, Rope
from ..errors import ModelMetadataError
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
class Gemma3Config(ModelConfig):
    sliding_window: int  # positions a local layer sees, its own included (0: no local layers)
    local_layers: tuple[bool, ...]  # per layer: sliding-window attention (else global)
    rope_base_local: float  # RoPE base of the local layers; global ones use rope_base (and rope_freq_scale)
    attention_scale: float  # applied to q·k
    final_logit_softcapping: float  # 0: none

    @classmethod
    def from_metadata(cls, md: dict, where: str = "model") -> "Gemma3Config":
        m = Metadata(md, where)
        common = cls.common(m)
        n_layer = common["n_layer"]
        # The converter writes no window when every layer is global (sliding_window_pattern 1 in the checkpoint).
        window = m.get("attention.sliding_window", 0, minimum=0)
        pattern = m.md.get(f"{m.arch}.attention.sliding_window_pattern", 6)
        if not window:
            local = (False,) * n_layer
        elif isinstance(pattern, list):  # one flag per layer: true where the layer is local
            local = tuple(bool(v) for v in pattern)
            if len(local) != n_layer:
                raise ModelMetadataError(f"{where}: metadata {m.arch}.attention.sliding_window_pattern has "
                                         f"{len(local)} flags for {n_layer} layers")
        else:
            # Every period-th layer is global; a period of 0 makes them all local (as llama.cpp reads it).
            period = m.get("attention.sliding_window_pattern", 6, minimum=0)
            local = tuple(period == 0 or i % period < period - 1 for i in range(n_layer))
        # llama.cpp recognises the 27B model by its 62 layers; its heads are narrower than n_embd / n_head.
        query_length = common["n_embd"] // common["n_head"] if n_layer == 62 else common["head_dim"]
        return cls(**common, sliding_window=window, local_layers=local,
                   rope_base_local=m.get("rope.freq_base_swa", 10000.0, float, above=0.0),
                   attention_scale=query_length ** -0.5,
                   final_logit_softcapping=m.get("final_logit_softcapping", 0.0, float, minimum=0.0))

    def attention_shape(self, layer: int) -> AttentionShape:
        shape = replace(super().attention_shape(layer), scale=self.attention_scale)
        if self.local_layers[layer]:  # RoPE of their own base, without the global layers' scaling
            shape = replace(shape, rope=Rope(self.rope_dim, self.rope_base_local), window=self.sliding_window)
        return shape

    def tensor_shapes(self) -> dict[str, tuple[Dim, ...]]:
        head, embd = self.dim("head_dim"), self.dim("n_embd")
        shapes = super().tensor_shapes()
        for i in range(self.n_layer):
            p = f"blk.{i}."
            shapes |= {p + "attn_q_norm.weight": (head,), p + "attn_k_norm.weight": (head,),
                       p + "post_attention_norm.weight": (embd,), p + "post_ffw_norm.weight": (embd,)}
        return shapes


@dataclass
class Block:
    attn_norm: Buffer
    attn_qkv: list[Weight]
    attn_q_norm: Buffer
    attn_k_norm: Buffer
    attn_output: Weight
    post_attention_norm: Buffer
    ffn_norm: Buffer
    ffn_gate_up: list[Weight]
    ffn_down: Weight
    post_ffw_norm: Buffer


@register("gemma3")
class Gemma3:
    Config = Gemma3Config

    def __init__(self, config: Gemma3Config, weights: WeightLoader, *, fold_norms: bool | None = None):
        self.config = config
        self.fold_norms = weights.fold_norms if fold_norms is None else fold_norms
        self.token_embd = weights.weight(["token_embd.weight"])
        self.blk = []
        for i in range(config.n_layer):
            p = f"blk.{i}."
            self.blk.append(Block(
                attn_norm=weights.vector(p + "attn_norm.weight"),
                attn_qkv=weights.stacked([p + "attn_q.weight", p + "attn_k.weight", p + "attn_v.weight"]),
                attn_q_norm=weights.vector(p + "attn_q_norm.weight"),
                attn_k_norm=weights.vector(p + "attn_k_norm.weight"),
                attn_output=weights.weight([p + "attn_output.weight"]),
                post_attention_norm=weights.vector(p + "post_attention_norm.weight"),
                ffn_norm=weights.vector(p + "ffn_norm.weight"),
                ffn_gate_up=weights.gate_up(p),
                ffn_down=weights.weight([p + "ffn_down.weight"]),
                post_ffw_norm=weights.vector(p + "post_ffw_norm.weight")))
        self.output_norm = weights.vector("output_norm.weight")
        self.output = output_weight(weights, self.token_embd)
        self.weight_bytes = weights.bytes
        weights.check_all_read()

    def activations(self) -> list[ActivationSpec]:
        # `branch`: an attention or feed-forward output before its post-norm joins the residual stream
        return decoder_activations(self.config, fold_norms=self.fold_norms,
                                   split_ffn=any(len(b.ffn_gate_up) > 1 for b in self.blk)) + [
            ActivationSpec("branch", self.config.n_embd)]

    def kv_widths(self) -> list[int]:
        return [self.config.kv_dim] * self.config.n_layer

    def record(self, rec: Recorder, acts: Activations, kv, logits_out: Act, context: int | None = None) -> None:
        c = self.config
        x, qkv, attn, ff, branch = acts.x, acts.qkv, acts.attn, acts.ff, acts.branch
        norm = Norm(rec, None if self.fold_norms else acts.h, c.norm_eps)
        up = acts.up if "up" in acts else None
        ops.embed(rec, self.token_embd, acts.tokens, x, scale=math.sqrt(c.n_embd))
        for i, blk in enumerate(self.blk):
            shape = c.attention_shape(i)
            project(rec, blk.attn_qkv, x, qkv, norm=norm(x, blk.attn_norm))
            ops.qk_norm(rec, qkv, blk.attn_q_norm, blk.attn_k_norm, c.norm_eps, shape)
            ops.rope_store(rec, qkv, acts.tokens, kv.layer(i), shape)
            ops.attention(rec, qkv, acts.tokens, kv.layer(i), attn, shape, context=context)
            ops.matmul(rec, blk.attn_output, attn, branch)
            ops.rmsnorm(rec, branch, blk.post_attention_norm, x, c.norm_eps, add=True)
            gated(rec, blk.ffn_gate_up, x, ff, up, norm=norm(x, blk.ffn_norm), act="gelu")
            ops.matmul(rec, blk.ffn_down, ff, branch)
            ops.rmsnorm(rec, branch, blk.post_ffw_norm, x, c.norm_eps, add=True)
        logits(rec, x, acts, self.output, self.output_norm, c.norm_eps, logits_out, fold=self.fold_norms)
        if c.final_logit_softcapping:
            ops.softcap(rec, logits_out, c.final_logit_softcapping, rows_from=rec.out_step)
