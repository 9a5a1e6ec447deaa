"""The Llama family (Llama 2/3.x, SmolLM, TinyLlama, Mistral, Qwen2) as one recorded forward pass.

Pre-norm decoder: x = embed(tokens); per block
    x += Wo · attention(rope(Wq · norm(x)), rope(Wk · norm(x)), Wv · norm(x))
    x += Wdown · (silu(Wgate · norm(x)) * (Wup · norm(x)))
then logits = Woutput · norm(x). Qwen2 adds biases to q, k and v. Attribute names are the GGUF tensor names.

Q, K and V are stacked into one weight (one dispatch) when they share a quant type, as are gate and up.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..config import ModelConfig
from ..errors import GGUFError
from ..gguf import GGUFFile
from ..gpu import ops
from ..gpu.device import Buffer, Device, View
from ..gpu.recorder import Act, Recorder
from ..gpu.kernels import Kernels
from ..gpu.tensors import SPLIT_TYPES, Piece, Weight, split_row_bytes, split_weight, upload_weight
from ..gpu.variants import variants


@dataclass
class Block:
    attn_norm: Buffer
    attn_qkv: list[Weight]  # one stacked weight, or q, k, v apart when their types differ
    attn_qkv_bias: Buffer | None
    attn_output: Weight
    ffn_norm: Buffer
    ffn_gate_up: list[Weight]  # one stacked [gate; up] weight, or gate and up apart
    ffn_down: Weight


class Llama:
    def __init__(self, config: ModelConfig, gguf: GGUFFile, device: Device, *, fold_norms: bool | None = None):
        self.config = config
        self.device = device
        self.fold_norms = default_fold_norms(device) if fold_norms is None else fold_norms
        loader = _Loader(gguf, device)
        self.token_embd = loader.weight(["token_embd.weight"])
        self.blk = []
        for i in range(config.n_layer):
            p = f"blk.{i}."
            self.blk.append(Block(
                attn_norm=loader.vector(p + "attn_norm.weight"),
                attn_qkv=loader.stacked([p + "attn_q.weight", p + "attn_k.weight", p + "attn_v.weight"]),
                attn_qkv_bias=loader.bias([p + "attn_q.bias", p + "attn_k.bias", p + "attn_v.bias"]),
                attn_output=loader.weight([p + "attn_output.weight"]),
                ffn_norm=loader.vector(p + "ffn_norm.weight"),
                ffn_gate_up=loader.stacked([p + "ffn_gate.weight", p + "ffn_up.weight"]),
                ffn_down=loader.weight([p + "ffn_down.weight"])))
        self.output_norm = loader.vector("output_norm.weight")
        # Tied embeddings: without output.weight the embedding table is the output projection (same buffers).
        self.output = loader.weight(["output.weight"]) if "output.weight" in gguf.tensors else self.token_embd
        self.rope_freqs = loader.vector("rope_freqs.weight") if "rope_freqs.weight" in gguf.tensors else None
        self.weight_bytes = loader.bytes

    def record(self, rec: Recorder, acts: "Activations", kv, logits: Act, context: int | None = None) -> None:
        """Record the forward pass for `acts.x.rows` tokens; logits for the rows listed in `acts.out_rows`.
        `context` bounds the positions any token sees (default: the cache's whole context)."""
        c = self.config
        x, qkv, attn, ff = acts.x, acts.qkv, acts.attn, acts.ff
        norm = _Norm(rec, None if self.fold_norms else acts.h, c.norm_eps)
        ops.embed(rec, self.token_embd, acts.tokens, x)
        for i, blk in enumerate(self.blk):
            _project(rec, blk.attn_qkv, x, qkv, bias=blk.attn_qkv_bias, norm=norm(x, blk.attn_norm))
            ops.rope_store(rec, qkv, acts.tokens, kv.k[i], kv.v[i], kv.table, n_head=c.n_head,
                           n_kv_head=c.n_kv_head, head_dim=c.head_dim, rope_dim=c.rope_dim, freq_base=c.rope_base,
                           freq_scale=c.rope_freq_scale, neox=c.rope_neox, freqs=self.rope_freqs,
                           max_blocks=kv.max_blocks)
            ops.attention(rec, qkv, acts.tokens, kv.k[i], kv.v[i], kv.table, attn, n_head=c.n_head,
                          n_kv_head=c.n_kv_head, head_dim=c.head_dim, scale=c.head_dim ** -0.5,
                          max_blocks=kv.max_blocks, max_context=context or kv.max_context)
            ops.matmul(rec, blk.attn_output, attn, x, mode=ops.ADD)
            _gated(rec, blk.ffn_gate_up, x, ff, acts.up, norm=norm(x, blk.ffn_norm))
            ops.matmul(rec, blk.ffn_down, ff, x, mode=ops.ADD)
        if self.fold_norms:
            # A one-token step's only row is the one whose logits are wanted: no gather.
            last = x if x.rows == 1 and acts.last.rows == 1 else acts.last
            if last is not x:
                ops.gather_rows(rec, x, acts.out_rows, last)
            ops.matmul(rec, self.output, last, logits, rows_from=rec.out_step, norm=self.output_norm,
                       eps=c.norm_eps)
        else:
            ops.gather_rows(rec, x, acts.out_rows, acts.last)
            ops.rmsnorm(rec, acts.last, self.output_norm, acts.last, c.norm_eps)  # rows bounded by the grid
            ops.matmul(rec, self.output, acts.last, logits, rows_from=rec.out_step)


BINDING_ALIGN = 256  # bytes: offsets of bindings within one buffer (WebGPU's largest minimum alignment)


@dataclass
class Activations:
    """Buffers of one forward pass for up to `x.rows` tokens, `last.rows` of which produce logits."""

    tokens: View  # (id, position, sequence slot, 0) per token
    out_rows: View  # token rows whose logits are wanted, in order (in the same buffer as `tokens`)
    x: Act  # residual stream
    h: Act | None  # the normed residual stream, where norms are not folded into the projections
    qkv: Act
    attn: Act
    ff: Act
    up: Act | None  # the up projection when gate and up cannot be stacked
    last: Act  # the rows of x whose logits are wanted

    @classmethod
    def create(cls, rec: Recorder, config: ModelConfig, rows: int, out_rows: int, *, split_ffn: bool,
               fold_norms: bool) -> "Activations":
        c = config
        dev = rec.device
        # Token records and logits rows in one buffer, so a step uploads them with one write.
        tokens_end = -(-rows * 16 // BINDING_ALIGN) * BINDING_ALIGN
        inputs = dev.buffer(tokens_end + out_rows * 4, "step inputs")
        return cls(
            tokens=View(inputs, 0, rows * 16), out_rows=View(inputs, tokens_end, out_rows * 4),
            x=rec.act("x", rows, c.n_embd), h=None if fold_norms else rec.act("h", rows, c.n_embd),
            qkv=rec.act("qkv", rows, c.q_dim + 2 * c.kv_dim), attn=rec.act("attn", rows, c.q_dim),
            ff=rec.act("ff", rows, c.n_ff), up=rec.act("up", rows, c.n_ff) if split_ffn else None,
            last=rec.act("last", out_rows, c.n_embd))


def default_fold_norms(device: Device) -> bool:
    """Whether RMSNorms are folded into the projections after them (ops.matmul's `norm`): the adapter's choice
    (llmchat.gpu.variants). The matmul accumulates the sum of squares from the blocks of x it loads anyway, so
    folding saves two dispatches per layer everywhere."""
    return variants(device).fold_norms


class _Norm:
    """RMSNorm ahead of a projection: returns what the projection's matmul takes (folded or already applied)."""

    def __init__(self, rec: Recorder, h: Act | None, eps: float):
        self.rec, self.h, self.eps = rec, h, eps

    def __call__(self, x: Act, weight: Buffer) -> tuple[Act, dict]:
        if self.h is None:
            return x, {"norm": weight, "eps": self.eps}
        h = Act(self.h.buffer, x.rows, x.cols)
        ops.rmsnorm(self.rec, x, weight, h, self.eps)
        return h, {}


def _project(rec: Recorder, weights: list[Weight], x: Act, y: Act, bias: Buffer | None,
             norm: tuple[Act, dict]) -> None:
    """y = rmsnorm(x) · [W1; W2; ...]^T (+ bias): one dispatch per weight, each filling its own columns of y."""
    x, fold = norm
    col = 0
    for w in weights:
        ops.matmul(rec, w, x, y, y_offset=col, bias=bias, bias_offset=col, **fold)
        col += w.rows


def _gated(rec: Recorder, weights: list[Weight], x: Act, y: Act, up: Act | None, norm: tuple[Act, dict]) -> None:
    """y = silu(rmsnorm(x) · Wgate^T) * (rmsnorm(x) · Wup^T)."""
    x, fold = norm
    if len(weights) == 1:
        ops.matmul(rec, weights[0], x, y, mode=ops.GLU, **fold)
    else:
        gate, upw = weights
        ops.matmul(rec, gate, x, y, **fold)
        ops.matmul(rec, upw, x, up, **fold)
        ops.mul_silu(rec, y, up)


class _Loader:
    """Uploads tensors by GGUF name; stacks same-typed weights so one dispatch computes them together."""

    def __init__(self, gguf: GGUFFile, device: Device):
        self.gguf, self.device, self.bytes = gguf, device, 0
        self.split = variants(device).split_weights
        self.kernels = Kernels(device) if self.split else None

    def _info(self, name: str):
        info = self.gguf.tensors.get(name)
        if info is None:
            raise GGUFError(f"{self.gguf.name}: tensor '{name}' is missing")
        return info

    def weight(self, names: list[str]) -> Weight:
        infos = [self._info(n) for n in names]
        k = infos[0].shape[0]
        if any(len(i.shape) != 2 or i.shape[0] != k or i.type != infos[0].type for i in infos):
            raise GGUFError(f"{self.gguf.name}: tensors {names} cannot be stacked (shapes or types differ)")
        pieces = [Piece(i.shape[1], self.gguf.sources[i.shard], i.offset) for i in infos]
        w = upload_weight(self.device, "+".join(names), infos[0].type, k, pieces)
        self.bytes += w.nbytes
        if self.split and w.type in SPLIT_TYPES:
            w = split_weight(self.device, self.kernels, w)
        return w

    def stacked(self, names: list[str]) -> list[Weight]:
        infos = [self._info(n) for n in names]
        stack_bytes = sum(self._stored_bytes(i) for i in infos)
        if len({i.type for i in infos}) == 1 and stack_bytes <= self.device.info.max_binding_size:
            return [self.weight(names)]
        return [self.weight([n]) for n in names]

    def _stored_bytes(self, info) -> int:
        """Bytes the tensor takes on the GPU: as in the file, or in the split layout."""
        if self.split and info.type in SPLIT_TYPES and len(info.shape) == 2:
            return info.shape[1] * split_row_bytes(info.type, info.shape[0])
        return info.nbytes

    def vector(self, name: str) -> Buffer:
        info = self._info(name)
        if info.type.name != "F32":
            raise GGUFError(f"{self.gguf.name}: '{name}' is {info.type.name}; norm weights must be F32")
        return self._raw([name])

    def bias(self, names: list[str]) -> Buffer | None:
        present = [n in self.gguf.tensors for n in names]
        if not any(present):
            return None
        if not all(present):
            raise GGUFError(f"{self.gguf.name}: some but not all of {names} are present")
        return self._raw(names)

    def _raw(self, names: list[str]) -> Buffer:
        """The tensors' bytes back to back in one buffer (f32 vectors: norms, biases)."""
        infos = [self._info(n) for n in names]
        buf = self.device.buffer(sum(i.nbytes for i in infos), names[0])
        offset = 0
        for i in infos:
            self.device.write_from(buf, offset, self.gguf.sources[i.shard], i.offset, i.nbytes)
            offset += i.nbytes
        self.bytes += offset
        return buf
