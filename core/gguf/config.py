"""Reading a model's shape from GGUF metadata: typed access to `{arch}.*` keys, and the fields every decoder has.

Each model file (llmchat.models.*) owns its frozen config dataclass: it subclasses `ModelConfig`, reads its own
extra keys with `Metadata`, and builds itself with `ModelConfig.common(md)` for the shared ones. Derived fields are
properties here, so no caller recomputes them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..errors import GGUFError, ModelMetadataError, UnsupportedModelError
from .shapes import Dim, check_blocks, check_shapes

_MISSING = object()
MAX_LAYERS = 1 << 16  # far beyond any model; configs build per-layer tuples, so a corrupt count must stop here


class Metadata:
    """Typed reads of `{arch}.key` with clear errors naming the file and the key."""

    def __init__(self, md: dict, where: str = "model"):
        arch = md.get("general.architecture")
        if not isinstance(arch, str):
            raise GGUFError(f"{where}: general.architecture is missing")
        self.md, self.where, self.arch = md, where, arch

    def get(self, key: str, default=_MISSING, kind=int, minimum=None, above=None, maximum=None):
        """`{arch}.{key}` as `kind`; a per-layer array must hold one value (use `per_layer` where it may vary).
        Floats must be finite; `minimum`, `maximum` (inclusive) and `above` (exclusive) bound the value, default
        included."""
        value = self._raw(key, default)
        if isinstance(value, list):
            if not value or len(set(map(repr, value))) != 1:
                raise UnsupportedModelError(f"{self.where}: {self.arch}.{key} varies per layer, which this "
                                            f"architecture does not support")
            value = value[0]
        value = self._cast(key, value, kind)
        bounds = [(minimum is None or value >= minimum, f"at least {minimum}"),
                  (above is None or value > above, f"greater than {above}"),
                  (maximum is None or value <= maximum, f"at most {maximum}")]
        bound = next((text for ok, text in bounds if not ok), None)
        if bound is not None:
            raise ModelMetadataError(f"{self.where}: metadata {self.arch}.{key} = {value!r} is invalid: it must be "
                                     f"{bound}")
        return value

    def per_layer(self, key: str, n_layer: int, default=_MISSING, kind=int) -> tuple:
        """`{arch}.{key}` for each layer: an array of n_layer values, or one value for all."""
        value = self._raw(key, default)
        values = value if isinstance(value, list) else [value] * n_layer
        if len(values) != n_layer:
            raise ModelMetadataError(f"{self.where}: metadata {self.arch}.{key} has {len(values)} values, but "
                                     f"{self.arch}.block_count = {n_layer} layers")
        return tuple(self._cast(key, v, kind) for v in values)

    def has(self, key: str) -> bool:
        return f"{self.arch}.{key}" in self.md

    def _raw(self, key: str, default):
        value = self.md.get(f"{self.arch}.{key}", default)
        if value is _MISSING or value is None:
            raise ModelMetadataError(f"{self.where}: metadata {self.arch}.{key} is missing")
        return value

    def _cast(self, key: str, value, kind):
        """`value` as `kind`: an int only from an integral number (never a bool), a float only when finite."""
        if kind is bool:
            if isinstance(value, bool):
                return value
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            if kind is int and (isinstance(value, int) or (math.isfinite(value) and value.is_integer())):
                return int(value)
            if kind is float and math.isfinite(value):
                return float(value)
        elif kind is str and isinstance(value, str):
            return value
        raise ModelMetadataError(f"{self.where}: metadata {self.arch}.{key} = {value!r} is not a finite "
                                 f"{kind.__name__}" if kind is float else
                                 f"{self.where}: metadata {self.arch}.{key} = {value!r} is not a {kind.__name__}")


@dataclass(frozen=True)
class Rope:
    """Rotary position embedding of q and k heads."""

    dim: int  # leading dimensions of each head rotated
    base: float
    freq_scale: float = 1.0  # positions are multiplied by this
    neox: bool = True  # rotate pairs (i, i + dim/2) instead of (2i, 2i + 1)
    mscale: float = 1.0  # scales the rotated elements (LongRoPE's attention factor)


class _Heads:
    """q and k/v widths of attention heads, for the classes with n_head, n_kv_head and head_dim fields."""

    n_head: int
    n_kv_head: int
    head_dim: int

    @property
    def q_dim(self) -> int:
        return self.n_head * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.n_kv_head * self.head_dim


@dataclass(frozen=True)
class AttentionShape(_Heads):
    """One layer's attention as its kernels are recorded: heads, RoPE and how scores are formed."""

    n_head: int
    n_kv_head: int  # each shared by n_head / n_kv_head query heads
    head_dim: int  # key and value length
    scale: float  # applied to q·k
    rope: Rope | None = None  # None: q and k are not rotated
    window: int = 0  # positions a token sees, its own included (0: all)
    softcap: float = 0.0  # scores squashed to softcap * tanh(score / softcap) (0: none)

    @property
    def qkv_width(self) -> int:
        """Values per token of q | k | v side by side, as the attention kernels read them."""
        return self.q_dim + 2 * self.kv_dim


@dataclass(frozen=True)
class ModelConfig(_Heads):
    """What every decoder-only transformer here has. Model files add their own fields in a subclass, and the
    tensors they read in `tensor_shapes`."""

    arch: str
    name: str
    n_layer: int
    n_embd: int
    n_ff: int
    n_head: int
    n_kv_head: int
    head_dim: int
    rope_dim: int
    rope_base: float
    rope_freq_scale: float  # positions are multiplied by this (1 / linear scaling factor)
    norm_eps: float
    vocab_size: int
    context_length: int  # what the model was trained for
    # Where each shape field came from, for messages: (field, "llama.embedding_length"), ...
    sources: tuple[tuple[str, str], ...] = field(default=(), kw_only=True, compare=False, repr=False)


    def attention_shape(self, layer: int) -> AttentionShape:
        """Layer `layer`'s attention; here every layer's: scores scaled by 1/sqrt(head_dim), NeoX RoPE over rope_dim.
        Model files whose layers or RoPE differ override it."""
        return AttentionShape(self.n_head, self.n_kv_head, self.head_dim, scale=self.head_dim ** -0.5,
                              rope=Rope(self.rope_dim, self.rope_base, self.rope_freq_scale))

    def dim(self, name: str) -> Dim:
        """The field `name` as a tensor dimension that remembers its metadata key."""
        value = getattr(self, name)
        return Dim(value, f"{dict(self.sources).get(name, name)} = {value}")

    def tensor_shapes(self) -> dict[str, tuple[Dim, ...]]:
        """Every tensor the forward pass may read, by GGUF name, with its shape (GGUF order: row length first).
        These are a pre-norm decoder's; model files add or replace their own."""
        embd, ff, vocab = self.dim("n_embd"), self.dim("n_ff"), self.dim("vocab_size")
        q, kv = self.dim("n_head") * self.dim("head_dim"), self.dim("n_kv_head") * self.dim("head_dim")
        shapes = {"token_embd.weight": (embd, vocab), "output.weight": (embd, vocab), "output_norm.weight": (embd,)}
        for i in range(self.n_layer):
            p = f"blk.{i}."
            shapes |= {p + "attn_norm.weight": (embd,), p + "attn_q.weight": (embd, q),
                       p + "attn_k.weight": (embd, kv), p + "attn_v.weight": (embd, kv),
                       p + "attn_q.bias": (q,), p + "attn_k.bias": (kv,), p + "attn_v.bias": (kv,),
                       p + "attn_output.weight": (q, embd), p + "ffn_norm.weight": (embd,),
                       p + "ffn_gate.weight": (embd, ff), p + "ffn_up.weight": (embd, ff),
                       p + "ffn_down.weight": (ff, embd)}
        return shapes

    def check_tensors(self, tensors: dict, where: str = "model") -> None:
        """Refuse tensors whose shapes disagree with this config (see llmchat.gguf.shapes)."""
        check_blocks(self.dim("n_layer"), tensors, where)
        check_shapes(self.tensor_shapes(), tensors, where)

    @classmethod
    def from_metadata(cls, md: dict, where: str = "model") -> "ModelConfig":
        return cls(**cls.common(Metadata(md, where)))

    @staticmethod
    def common(m: Metadata) -> dict:
        """The shared fields, read and checked once for every architecture."""
        key = lambda k: f"{m.arch}.{k}"  # noqa: E731
        sources = {"n_layer": key("block_count"), "n_embd": key("embedding_length"),
                   "n_ff": key("feed_forward_length"), "n_head": key("attention.head_count"),
                   "n_kv_head": key("attention.head_count_kv"), "head_dim": key("attention.key_length"),
                   "vocab_size": key("vocab_size"), "rope_dim": key("rope.dimension_count")}
        n_layer = m.get("block_count", minimum=1, maximum=MAX_LAYERS)
        n_embd = m.get("embedding_length", minimum=1)
        n_head = m.get("attention.head_count", minimum=1)
        if not m.has("attention.key_length"):
            sources["head_dim"] = f"({key('embedding_length')} = {n_embd}) / ({key('attention.head_count')} = {n_head})"
            if n_embd % n_head:
                raise ModelMetadataError(f"{m.where}: metadata {key('embedding_length')} = {n_embd} is not a multiple "
                                         f"of {key('attention.head_count')} = {n_head}, and no "
                                         f"{key('attention.key_length')} gives the head size")
        head_dim = m.get("attention.key_length", n_embd // n_head, minimum=1)
        value_length = m.get("attention.value_length", head_dim, minimum=1)
        if value_length != head_dim:
            raise UnsupportedModelError(f"{m.where}: metadata {key('attention.value_length')} = {value_length} differs "
                                        f"from the key length {head_dim}: keys and values of different lengths are "
                                        "not supported")
        if head_dim % 4:  # the attention kernel reads heads as vec4s, and RoPE rotates pairs
            raise UnsupportedModelError(f"{m.where}: heads of {head_dim} dimensions ({sources['head_dim']}) are not "
                                        "supported: the head size must be a multiple of 4")
        if not m.has("attention.head_count_kv"):
            sources["n_kv_head"] = f"{key('attention.head_count')} (no head_count_kv)"
        n_kv_head = m.get("attention.head_count_kv", n_head, minimum=1)
        if n_head % n_kv_head:
            raise ModelMetadataError(f"{m.where}: metadata {key('attention.head_count')} = {n_head} query heads "
                                     f"cannot share {key('attention.head_count_kv')} = {n_kv_head} key/value heads")
        n_ff = m.get("feed_forward_length", minimum=1)
        tokens = m.md.get("tokenizer.ggml.tokens")
        if not m.has("vocab_size"):
            sources["vocab_size"] = "the number of tokenizer.ggml.tokens"
        vocab = m.get("vocab_size", len(tokens) if isinstance(tokens, list) else _MISSING, minimum=1)
        if isinstance(tokens, list) and len(tokens) > vocab:
            raise ModelMetadataError(f"{m.where}: metadata {key('vocab_size')} = {vocab}, but tokenizer.ggml.tokens "
                                     f"holds {len(tokens)} tokens: the tokenizer would produce ids the model has "
                                     "no embedding for")
        if not m.has("rope.dimension_count"):
            sources["rope_dim"] = f"the head size, {sources['head_dim']} (no rope.dimension_count)"
        rope_dim = m.get("rope.dimension_count", head_dim, minimum=2)
        if rope_dim % 2 or rope_dim > head_dim:
            raise ModelMetadataError(f"{m.where}: metadata {key('rope.dimension_count')} = {rope_dim} is invalid: "
                                     "RoPE rotates an even number of dimensions, at most the head size "
                                     f"({sources['head_dim']} = {head_dim})")
        scaling = m.md.get(key("rope.scaling.type"), "none")
        factor = m.get("rope.scaling.factor", 1.0, float, minimum=0.0) or 1.0
        if scaling not in ("none", "linear") and factor != 1.0:
            raise UnsupportedModelError(f"{m.where}: RoPE scaling '{scaling}' is not supported yet")
        return dict(
            arch=m.arch, name=str(m.md.get("general.name", "")),
            n_layer=n_layer, n_embd=n_embd, n_ff=n_ff, n_head=n_head, n_kv_head=n_kv_head, head_dim=head_dim,
            rope_dim=rope_dim,
            rope_base=m.get("rope.freq_base", 10000.0, float, above=0.0),
            rope_freq_scale=1.0 / factor if scaling == "linear" else 1.0,
            norm_eps=m.get("attention.layer_norm_rms_epsilon", 1e-5, float, above=0.0),
            vocab_size=vocab, context_length=m.get("context_length", 2048, minimum=1),
            sources=tuple(sources.items()))
