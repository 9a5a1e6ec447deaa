"""LFM2 (Liquid AI's 350M, 700M, 1.2B, 2.6B) as one recorded forward pass: short-convolution blocks interleaved
with attention blocks, each followed by a SwiGLU feed-forward.

    x = embed(tokens)
    per block:
        h = norm(x)
        convolution block:  b, c, v = split(Win · h)                 (in_proj, 3 x n_embd)
                            x += Wout · (c * causal_conv(b * v))     depthwise over the last l_cache positions
        attention block:    q, k, v = Wq · h, Wk · h, Wv · h
                            x += Wo · attention(rope(q_norm(q)), rope(k_norm(k)), v)   per-head RMSNorms, NeoX RoPE
        x += Wdown · (silu(Wgate · norm(x)) * (Wup · norm(x)))
    logits = Woutput · norm(x)                                      (output tied to the embedding table)

Which layers are attention is read as llama.cpp reads it: the per-layer `attention.head_count_kv` array, 0 for a
convolution layer. A convolution layer keeps the last l_cache - 1 values of b * v per channel as per-sequence state
(`state_widths`), an attention layer its KV cache. The final norm is stored as `token_embd_norm.weight` (the name
llama.cpp's LFM2 loader expects). With `attention.sliding_window` set, the attention layers see only that many
positions (their own included), as llama.cpp runs them.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..gguf.config import MAX_LAYERS, AttentionShape, Metadata, ModelConfig
from ..errors import ModelMetadataError, UnsupportedModelError
from ..gpu import ops, state_ops
from ..gpu.device import Buffer
from ..gpu.recorder import Act, Recorder
from ..gpu.tensors import Weight
from ..gguf.shapes import Dim
from . import register
from .base import Activations, ActivationSpec
from .layers import Norm, decoder_activations, gated, logits, output_weight, project
from .weights import WeightLoader


@dataclass(frozen=True)
class Lfm2Config(ModelConfig):
    conv_layers: tuple[bool, ...]  # per layer: a short-convolution block (else attention)
    l_cache: int  # taps of the convolution: the current position and the l_cache - 1 before it
    sliding_window: int  # positions an attention layer sees, its own included (0: all)

    @classmethod
    def from_metadata(cls, md: dict, where: str = "model") -> "Lfm2Config":
        m = Metadata(md, where)
        n_layer = m.get("block_count", minimum=1, maximum=MAX_LAYERS)
        kv_heads = m.per_layer("attention.head_count_kv", n_layer, m.md.get(f"{m.arch}.attention.head_count"))
        attn_heads = {h for h in kv_heads if h}
        if len(attn_heads) > 1:
            raise UnsupportedModelError(f"{where}: attention layers with different numbers of K/V heads "
                                        f"({sorted(attn_heads)}) are not supported")
        if not m.md.get(f"{m.arch}.attention.causal", True):
            raise UnsupportedModelError(f"{where}: a bidirectional (non-causal) LFM2 is an embedding model; "
                                        "llmchat runs causal language models only")
        # The shared fields, with the attention layers' K/V head count standing for the array.
        common = cls.common(Metadata(md | {f"{m.arch}.attention.head_count_kv": next(iter(attn_heads), 1)}, where))
        if common["n_head"] * common["head_dim"] != common["n_embd"]:
            raise ModelMetadataError(f"{where}: LFM2's attention output projection is n_embd x n_embd, but "
                                     f"{common['n_head']} heads of {common['head_dim']} are not n_embd = "
                                     f"{common['n_embd']}")
        l_cache = m.get("shortconv.l_cache", minimum=2, maximum=64)
        conv = tuple(h == 0 for h in kv_heads)
        if all(conv):
            raise ModelMetadataError(f"{where}: metadata {m.arch}.attention.head_count_kv has no attention layer")
        return cls(**common, conv_layers=conv, l_cache=l_cache,
                   sliding_window=m.get("attention.sliding_window", 0, minimum=0))

    def attention_shape(self, layer: int) -> AttentionShape:
        return replace(super().attention_shape(layer), window=self.sliding_window)

    def tensor_shapes(self) -> dict[str, tuple[Dim, ...]]:
        head, embd = self.dim("head_dim"), self.dim("n_embd")
        shapes = super().tensor_shapes() | {"token_embd_norm.weight": (embd,)}
        for i in range(self.n_layer):
            p = f"blk.{i}."
            shapes |= {p + "attn_q_norm.weight": (head,), p + "attn_k_norm.weight": (head,),
                       p + "shortconv.conv.weight": (self.dim("l_cache"), embd),
                       p + "shortconv.in_proj.weight": (embd, embd * 3),
                       p + "shortconv.out_proj.weight": (embd, embd)}
        return shapes


@dataclass
class ConvBlock:
    in_proj: Weight
    conv: Buffer  # [n_embd][l_cache] f32 taps
    out_proj: Weight


@dataclass
class AttnBlock:
    attn_qkv: list[Weight]
    attn_q_norm: Buffer
    attn_k_norm: Buffer
    attn_output: Weight


@dataclass
class Block:
    attn_norm: Buffer  # the norm ahead of either kind of block
    mixer: ConvBlock | AttnBlock
    ffn_norm: Buffer
    ffn_gate_up: list[Weight]
    ffn_down: Weight


@register("lfm2")
class Lfm2:
    Config = Lfm2Config

    def __init__(self, config: Lfm2Config, weights: WeightLoader, *, fold_norms: bool | None = None):
        self.config = config
        self.fold_norms = weights.fold_norms if fold_norms is None else fold_norms
        self.token_embd = weights.weight(["token_embd.weight"])
        self.blk = []
        for i in range(config.n_layer):
            p = f"blk.{i}."
            if config.conv_layers[i]:
                mixer = ConvBlock(in_proj=weights.weight([p + "shortconv.in_proj.weight"]),
                                  conv=weights.vector(p + "shortconv.conv.weight"),
                                  out_proj=weights.weight([p + "shortconv.out_proj.weight"]))
            else:
                mixer = AttnBlock(
                    attn_qkv=weights.stacked([p + "attn_q.weight", p + "attn_k.weight", p + "attn_v.weight"]),
                    attn_q_norm=weights.vector(p + "attn_q_norm.weight"),
                    attn_k_norm=weights.vector(p + "attn_k_norm.weight"),
                    attn_output=weights.weight([p + "attn_output.weight"]))
            self.blk.append(Block(attn_norm=weights.vector(p + "attn_norm.weight"), mixer=mixer,
                                  ffn_norm=weights.vector(p + "ffn_norm.weight"),
                                  ffn_gate_up=weights.gate_up(p),
                                  ffn_down=weights.weight([p + "ffn_down.weight"])))
        self.output_norm = weights.vector("token_embd_norm.weight")
        self.output = output_weight(weights, self.token_embd)
        self.weight_bytes = weights.bytes
        weights.check_all_read()

    def activations(self) -> list[ActivationSpec]:
        # `bcx`: the convolution block's input projection; its gated output goes to `attn`, as attention's does.
        return decoder_activations(self.config, fold_norms=self.fold_norms,
                                   split_ffn=any(len(b.ffn_gate_up) > 1 for b in self.blk)) + [
            ActivationSpec("bcx", 3 * self.config.n_embd)]

    def kv_widths(self) -> list[int]:
        return [0 if conv else self.config.kv_dim for conv in self.config.conv_layers]

    def state_widths(self) -> list[int]:
        c = self.config
        return [(c.l_cache - 1) * c.n_embd if conv else 0 for conv in c.conv_layers]

    def record(self, rec: Recorder, acts: Activations, kv, logits_out: Act, context: int | None = None) -> None:
        c = self.config
        x, qkv, attn, ff, bcx = acts.x, acts.qkv, acts.attn, acts.ff, acts.bcx
        norm = Norm(rec, None if self.fold_norms else acts.h, c.norm_eps)
        up = acts.up if "up" in acts else None
        ops.embed(rec, self.token_embd, acts.tokens, x)
        for i, blk in enumerate(self.blk):
            mix = blk.mixer
            if isinstance(mix, ConvBlock):
                project(rec, [mix.in_proj], x, bcx, norm=norm(x, blk.attn_norm))
                state_ops.shortconv(rec, bcx, acts.tokens, mix.conv, kv.state[i], attn, n_embd=c.n_embd,
                                    l_cache=c.l_cache)
                ops.matmul(rec, mix.out_proj, attn, x, mode=ops.ADD)
            else:
                shape = c.attention_shape(i)
                project(rec, mix.attn_qkv, x, qkv, norm=norm(x, blk.attn_norm))
                ops.qk_norm(rec, qkv, mix.attn_q_norm, mix.attn_k_norm, c.norm_eps, shape)
                ops.rope_store(rec, qkv, acts.tokens, kv.layer(i), shape)
                ops.attention(rec, qkv, acts.tokens, kv.layer(i), attn, shape, context=context)
                ops.matmul(rec, mix.attn_output, attn, x, mode=ops.ADD)
            gated(rec, blk.ffn_gate_up, x, ff, up, norm=norm(x, blk.ffn_norm))
            ops.matmul(rec, blk.ffn_down, ff, x, mode=ops.ADD)
        logits(rec, x, acts, self.output, self.output_norm, c.norm_eps, logits_out, fold=self.fold_norms)
