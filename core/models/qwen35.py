"""Qwen3.5 (the dense 0.8B, 2B, 4B, 9B, 27B) as one recorded forward pass: gated DeltaNet linear-attention layers
interleaved with gated full-attention layers, each followed by a SwiGLU feed-forward.

    x = embed(tokens)
    per block:
        h = norm(x)
        linear attention (gated delta rule), per value head:
            q, k, v = split(silu(causal_conv(Wqkv · h)))          depthwise over the last conv_kernel positions
            z = Wgate · h
            g = a * softplus(Walpha · h + dt_bias)               a = -exp(A_log), so the decay exp(g) < 1
            beta = sigmoid(Wbeta · h)
            q, k = q / sqrt(|q|^2 + eps), k / sqrt(|k|^2 + eps)
            S = exp(g) S;  S += beta (v - S k) k^T;  o = S q / sqrt(head_dim)
            x += Wout · (norm(o) * silu(z))                       RMSNorm per head with one shared weight
        full attention:
            q | gate = Wq · h                                    per head: head_dim of q, then head_dim of gate
            k, v = Wk · h, Wv · h
            x += Wo · (attention(rope(q_norm(q)), rope(k_norm(k)), v) * sigmoid(gate))
        x += Wdown · (silu(Wgate · norm'(x)) * (Wup · norm'(x)))  norm' = post_attention_norm
    logits = Woutput · norm(x)                                  (output tied to the embedding table when absent)

As llama.cpp runs it: a value head h reads query/key head h % n_k_heads (the converter reorders value heads so
this tiling matches the checkpoint's grouping); the full-attention layers rotate the first rope.dimension_count
dimensions of each head NeoX-style. llama.cpp applies interleaved multi-section RoPE (IMROPE) there, which for text
(the same position in the t, h and w sections) is plain RoPE on every pair the sections cover; sections leaving a
rotated pair uncovered would rotate it by the fourth (zero) position, which is refused. Which layers are linear is
read as llama.cpp reads it: `attention.recurrent_layers` if present, else every layer but each
`full_attention_interval`-th.

Files converted with their multi-token-prediction blocks (`nextn_predict_layers`, the converter's default) hold
them after the trunk's blocks; like llama.cpp by default, the trunk runs alone and those blocks are skipped (their
bytes never read): they only draft tokens for speculative decoding.

Each linear layer keeps per sequence the last conv_kernel - 1 inputs of its convolution and one head_dim x head_dim
matrix per value head (`state_widths`); a full-attention layer its KV cache.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..gguf.config import MAX_LAYERS, Metadata, ModelConfig
from ..errors import ModelMetadataError, UnsupportedModelError
from ..gpu import ops, state_ops
from ..gpu.device import Buffer
from ..gpu.recorder import Act, Recorder
from ..gpu.tensors import Weight
from ..gguf.shapes import Dim, block_index
from . import register
from .base import Activations, ActivationSpec
from .layers import Norm, decoder_activations, gated, logits, output_weight, project
from .weights import WeightLoader


def imrope_covers(sections: tuple[int, ...], pairs: int) -> bool:
    """Whether interleaved multi-section RoPE rotates each of the first `pairs` pairs by a text position (one of
    the t, h, w sections) rather than by the fourth section's position: pair i falls in section i mod 3, up to
    3 x that section's size, cycling every sum(sections) pairs."""
    period = sum(sections)
    return period > 0 and all((i % period) < 3 * sections[(i % period) % 3] for i in range(pairs))


@dataclass(frozen=True)
class Qwen35Config(ModelConfig):
    recurrent: tuple[bool, ...]  # per layer: a gated DeltaNet layer (else full attention)
    conv_kernel: int  # taps of the convolution: the current position and the conv_kernel - 1 before it
    n_k_heads: int  # query/key heads of the linear layers (ssm.group_count)
    n_v_heads: int  # value heads of the linear layers (ssm.time_step_rank)
    ssm_head_dim: int  # key and value head size of the linear layers (ssm.state_size)
    mtp_layers: int  # multi-token-prediction blocks after the trunk's n_layer (skipped)

    @property
    def ssm_key_dim(self) -> int:
        return self.n_k_heads * self.ssm_head_dim

    @property
    def ssm_value_dim(self) -> int:
        return self.n_v_heads * self.ssm_head_dim

    @property
    def conv_dim(self) -> int:
        return 2 * self.ssm_key_dim + self.ssm_value_dim

    @classmethod
    def from_metadata(cls, md: dict, where: str = "model") -> "Qwen35Config":
        m = Metadata(md, where)
        common = cls.common(m)
        blocks = common["n_layer"]
        mtp = m.get("nextn_predict_layers", 0, minimum=0)
        if mtp >= blocks:
            raise UnsupportedModelError(f"{where}: metadata {m.arch}.nextn_predict_layers = {mtp} of {m.arch}."
                                        f"block_count = {blocks} blocks leaves no trunk: a file of "
                                        "multi-token-prediction blocks alone only drafts for another model")
        n_layer = common["n_layer"] = blocks - mtp
        if mtp:
            common["sources"] = tuple((f, f"{m.arch}.block_count - {m.arch}.nextn_predict_layers" if f == "n_layer"
                                       else s) for f, s in common["sources"])
        if m.has("attention.recurrent_layers"):  # an array over every block, prediction blocks included
            recurrent = m.per_layer("attention.recurrent_layers", blocks, kind=bool)[:n_layer]
            layout = f"{m.arch}.attention.recurrent_layers"
        else:
            interval = m.get("full_attention_interval", 4, minimum=1, maximum=MAX_LAYERS)
            recurrent = tuple((i + 1) % interval != 0 for i in range(n_layer))
            layout = f"{m.arch}.full_attention_interval = {interval} with {m.arch}.block_count = {blocks}"
        if all(recurrent):
            raise ModelMetadataError(f"{where}: metadata {layout} leaves no full-attention layer among the "
                                     f"{n_layer} trunk layers")
        head = m.get("ssm.state_size", minimum=4)
        n_k, n_v = m.get("ssm.group_count", minimum=1), m.get("ssm.time_step_rank", minimum=1)
        inner = m.get("ssm.inner_size", minimum=1)
        if inner != n_v * head:
            raise UnsupportedModelError(f"{where}: value heads of {inner} / {n_v} dimensions differ from the key heads' "
                                        f"{head} ({m.arch}.ssm.inner_size, time_step_rank, state_size); llama.cpp "
                                        "needs them equal too")
        if n_v % n_k:
            raise ModelMetadataError(f"{where}: metadata {m.arch}.ssm.time_step_rank = {n_v} value heads cannot share "
                                     f"{m.arch}.ssm.group_count = {n_k} key heads")
        sections = m.md.get(f"{m.arch}.rope.dimension_sections")
        if not isinstance(sections, list) or not all(isinstance(s, int) and s >= 0 for s in sections):
            raise ModelMetadataError(f"{where}: metadata {m.arch}.rope.dimension_sections is missing or not a list "
                                     "of section sizes (llama.cpp requires it)")
        sections = tuple(sections[:4])
        if not imrope_covers(sections, common["rope_dim"] // 2):
            raise UnsupportedModelError(f"{where}: RoPE sections {list(sections)} "
                                        f"({m.arch}.rope.dimension_sections) leave some of the "
                                        f"{common['rope_dim']} rotated dimensions to the fourth (non-text) position; "
                                        "not supported")
        return cls(**common, recurrent=recurrent, conv_kernel=m.get("ssm.conv_kernel", minimum=2, maximum=64),
                   n_k_heads=n_k, n_v_heads=n_v, ssm_head_dim=head, mtp_layers=mtp)

    def in_trunk(self, name: str) -> bool:
        """Whether tensor `name` is not one of the multi-token-prediction blocks'."""
        return (block_index(name) or 0) < self.n_layer

    def check_tensors(self, tensors: dict, where: str = "model") -> None:
        super().check_tensors({n: t for n, t in tensors.items() if self.in_trunk(n)}, where)

    def tensor_shapes(self) -> dict[str, tuple[Dim, ...]]:
        embd, ff, head = self.dim("n_embd"), self.dim("n_ff"), self.dim("head_dim")
        q, kv = self.dim("n_head") * head, self.dim("n_kv_head") * head
        d, n_v = self.dim("ssm_head_dim"), self.dim("n_v_heads")
        key, value = self.dim("n_k_heads") * d, n_v * d
        conv = key * 2 + value
        shapes = {name: s for name, s in super().tensor_shapes().items() if not name.startswith("blk.")}
        for i in range(self.n_layer):
            p = f"blk.{i}."
            shapes |= {p + "attn_norm.weight": (embd,), p + "post_attention_norm.weight": (embd,),
                       p + "ffn_gate.weight": (embd, ff), p + "ffn_up.weight": (embd, ff),
                       p + "ffn_down.weight": (ff, embd)}
            if self.recurrent[i]:
                shapes |= {p + "attn_qkv.weight": (embd, conv), p + "attn_gate.weight": (embd, value),
                           p + "ssm_conv1d.weight": (self.dim("conv_kernel"), conv), p + "ssm_dt.bias": (n_v,),
                           p + "ssm_a": (n_v,), p + "ssm_beta.weight": (embd, n_v),
                           p + "ssm_alpha.weight": (embd, n_v), p + "ssm_norm.weight": (d,),
                           p + "ssm_out.weight": (value, embd)}
            else:
                shapes |= {p + "attn_q.weight": (embd, q * 2), p + "attn_k.weight": (embd, kv),
                           p + "attn_v.weight": (embd, kv), p + "attn_output.weight": (q, embd),
                           p + "attn_q_norm.weight": (head,), p + "attn_k_norm.weight": (head,)}
        return shapes


@dataclass
class DeltaBlock:
    attn_qkv: list[Weight]  # the mixed q|k|v projection the convolution runs over
    attn_gate: list[Weight]  # z, the output gate
    ssm_alpha_beta: list[Weight]  # [alpha; beta], one value per value head each
    ssm_conv1d: Buffer  # [conv_dim][conv_kernel] f32 taps
    ssm_a: Buffer  # -exp(A_log) per value head
    ssm_dt: Buffer  # the bias of alpha per value head
    ssm_norm: Buffer  # RMSNorm weight of one head, shared by all
    ssm_out: Weight


@dataclass
class AttnBlock:
    attn_qkv: list[Weight]  # the query rows of attn_q (its gate rows left out), attn_k, attn_v
    attn_gate: list[Weight]  # the gate rows of attn_q
    attn_q_norm: Buffer
    attn_k_norm: Buffer
    attn_output: Weight


@dataclass
class Block:
    attn_norm: Buffer
    mixer: DeltaBlock | AttnBlock
    post_attention_norm: Buffer  # the norm ahead of the feed-forward
    ffn_gate_up: list[Weight]
    ffn_down: Weight


@register("qwen35")
class Qwen35:
    Config = Qwen35Config

    def __init__(self, config: Qwen35Config, weights: WeightLoader, *, fold_norms: bool | None = None):
        self.config = c = config
        self.fold_norms = weights.fold_norms if fold_norms is None else fold_norms
        self.token_embd = weights.weight(["token_embd.weight"])
        # attn_q holds per head head_dim query rows then head_dim gate rows.
        d = c.head_dim
        query_rows = [(2 * h * d, d) for h in range(c.n_head)]
        gate_rows = [(2 * h * d + d, d) for h in range(c.n_head)]
        self.blk = []
        for i in range(c.n_layer):
            p = f"blk.{i}."
            if c.recurrent[i]:
                mixer = DeltaBlock(attn_qkv=weights.stacked([p + "attn_qkv.weight"]),
                                   attn_gate=weights.stacked([p + "attn_gate.weight"]),
                                   ssm_alpha_beta=weights.stacked([p + "ssm_alpha.weight", p + "ssm_beta.weight"]),
                                   ssm_conv1d=weights.vector(p + "ssm_conv1d.weight"),
                                   ssm_a=weights.vector(p + "ssm_a"), ssm_dt=weights.vector(p + "ssm_dt.bias"),
                                   ssm_norm=weights.vector(p + "ssm_norm.weight"),
                                   ssm_out=weights.weight([p + "ssm_out.weight"]))
            else:
                q = p + "attn_q.weight"
                mixer = AttnBlock(
                    attn_qkv=weights.stacked([q, p + "attn_k.weight", p + "attn_v.weight"], rows={q: query_rows}),
                    attn_gate=weights.stacked([q], rows={q: gate_rows}),
                    attn_q_norm=weights.vector(p + "attn_q_norm.weight"),
                    attn_k_norm=weights.vector(p + "attn_k_norm.weight"),
                    attn_output=weights.weight([p + "attn_output.weight"]))
            self.blk.append(Block(attn_norm=weights.vector(p + "attn_norm.weight"), mixer=mixer,
                                  post_attention_norm=weights.vector(p + "post_attention_norm.weight"),
                                  ffn_gate_up=weights.gate_up(p),
                                  ffn_down=weights.weight([p + "ffn_down.weight"])))
        self.output_norm = weights.vector("output_norm.weight")
        self.output = output_weight(weights, self.token_embd)
        self.weight_bytes = weights.bytes
        weights.skip([n for n in weights.gguf.tensors if not c.in_trunk(n)])
        weights.check_all_read()

    def activations(self) -> list[ActivationSpec]:
        # `gate`: the attention output's gate; `mix` and `conv`: the linear layers' q|k|v before and after the
        # convolution; `z` their output gate; `gb` their per-head [g | beta]; `delta` the delta rule's output.
        c = self.config
        return decoder_activations(c, fold_norms=self.fold_norms,
                                   split_ffn=any(len(b.ffn_gate_up) > 1 for b in self.blk)) + [
            ActivationSpec("gate", c.q_dim), ActivationSpec("mix", c.conv_dim), ActivationSpec("conv", c.conv_dim),
            ActivationSpec("z", c.ssm_value_dim), ActivationSpec("gb", 2 * c.n_v_heads),
            ActivationSpec("delta", c.ssm_value_dim)]

    def kv_widths(self) -> list[int]:
        return [0 if r else self.config.kv_dim for r in self.config.recurrent]

    def state_widths(self) -> list[int]:
        """Layer i's delta-rule matrices at `kv.state[i]`, its convolution's last inputs at `kv.state[n_layer + i]`
        (two buffers, as each kernel indexes its own state by slot from the binding's start)."""
        c = self.config
        delta = [c.n_v_heads * c.ssm_head_dim ** 2 if r else 0 for r in c.recurrent]
        conv = [(c.conv_kernel - 1) * c.conv_dim if r else 0 for r in c.recurrent]
        return delta + conv

    def record(self, rec: Recorder, acts: Activations, kv, logits_out: Act, context: int | None = None) -> None:
        c = self.config
        x, qkv, attn, ff = acts.x, acts.qkv, acts.attn, acts.ff
        norm = Norm(rec, None if self.fold_norms else acts.h, c.norm_eps)
        up = acts.up if "up" in acts else None
        ops.embed(rec, self.token_embd, acts.tokens, x)
        for i, blk in enumerate(self.blk):
            mix = blk.mixer
            h = norm(x, blk.attn_norm)
            if isinstance(mix, DeltaBlock):
                project(rec, mix.attn_qkv, x, acts.mix, norm=h)
                project(rec, mix.attn_gate, x, acts.z, norm=h)
                project(rec, mix.ssm_alpha_beta, x, acts.gb, norm=h)
                state_ops.delta_gates(rec, acts.gb, mix.ssm_a, mix.ssm_dt, n_heads=c.n_v_heads)
                state_ops.conv_silu(rec, acts.mix, acts.tokens, mix.ssm_conv1d, kv.state[c.n_layer + i], acts.conv,
                                    channels=c.conv_dim, taps=c.conv_kernel)
                state_ops.gated_delta(rec, acts.conv, acts.gb, acts.tokens, kv.state[i], acts.delta,
                                      n_k_heads=c.n_k_heads, n_v_heads=c.n_v_heads, head_dim=c.ssm_head_dim,
                                      eps=c.norm_eps)
                ops.rmsnorm(rec, acts.delta, mix.ssm_norm, acts.delta, c.norm_eps, dim=c.ssm_head_dim,
                            groups=c.n_v_heads)
                ops.mul_gate(rec, acts.z, acts.delta, act="silu")
                ops.matmul(rec, mix.ssm_out, acts.z, x, mode=ops.ADD)
            else:
                shape = c.attention_shape(i)
                project(rec, mix.attn_qkv, x, qkv, norm=h)
                project(rec, mix.attn_gate, x, acts.gate, norm=h)
                ops.qk_norm(rec, qkv, mix.attn_q_norm, mix.attn_k_norm, c.norm_eps, shape)
                ops.rope_store(rec, qkv, acts.tokens, kv.layer(i), shape)
                ops.attention(rec, qkv, acts.tokens, kv.layer(i), attn, shape, context=context)
                ops.mul_gate(rec, acts.gate, attn, act="sigmoid")
                ops.matmul(rec, mix.attn_output, acts.gate, x, mode=ops.ADD)
            gated(rec, blk.ffn_gate_up, x, ff, up, norm=norm(x, blk.post_attention_norm))
            ops.matmul(rec, blk.ffn_down, ff, x, mode=ops.ADD)
        logits(rec, x, acts, self.output, self.output_norm, c.norm_eps, logits_out, fold=self.fold_norms)
