"""Reading a model's shape from GGUF metadata: typed access to `{arch}.*` keys, and the fields every decoder has.

Each model file (llmchat.models.*) owns its frozen config dataclass: it subclasses `ModelConfig`, reads its own
extra keys with `Metadata`, and builds itself with `ModelConfig.common(md)` for the shared ones. Derived fields are
properties here, so no caller recomputes them.
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import GGUFError, UnsupportedModelError

_MISSING = object()


class Metadata:
    """Typed reads of `{arch}.key` with clear errors naming the file and the key."""

    def __init__(self, md: dict, where: str = "model"):
        arch = md.get("general.architecture")
        if not isinstance(arch, str):
            raise GGUFError(f"{where}: general.architecture is missing")
        self.md, self.where, self.arch = md, where, arch

    def get(self, key: str, default=_MISSING, kind=int):
        """`{arch}.{key}` as `kind`; a per-layer array must hold one value (use `per_layer` where it may vary)."""
        value = self._raw(key, default)
        if isinstance(value, list):
            if len(set(value)) != 1:
                raise UnsupportedModelError(f"{self.where}: {self.arch}.{key} varies per layer, which this "
                                            f"architecture does not support")
            value = value[0]
        return value if value is default else self._cast(key, value, kind)

    def per_layer(self, key: str, n_layer: int, default=_MISSING, kind=int) -> tuple:
        """`{arch}.{key}` for each layer: an array of n_layer values, or one value for all."""
        value = self._raw(key, default)
        values = value if isinstance(value, list) else [value] * n_layer
        if len(values) != n_layer:
            raise GGUFError(f"{self.where}: {self.arch}.{key} has {len(values)} values for {n_layer} layers")
        return tuple(self._cast(key, v, kind) for v in values)

    def has(self, key: str) -> bool:
        return f"{self.arch}.{key}" in self.md

    def _raw(self, key: str, default):
        value = self.md.get(f"{self.arch}.{key}", default)
        if value is _MISSING or value is None:
            raise GGUFError(f"{self.where}: metadata {self.arch}.{key} is missing")
        return value

    def _cast(self, key: str, value, kind):
        if kind is bool:
            if isinstance(value, bool):
                return value
        elif not isinstance(value, (bool, list)):
            try:
                return kind(value)
            except (TypeError, ValueError):
                pass
        raise GGUFError(f"{self.where}: metadata {self.arch}.{key} = {value!r} is not a {kind.__name__}")


@dataclass(frozen=True)
class ModelConfig:
    """What every decoder-only transformer here has. Model files add their own fields in a subclass."""

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

    @property
    def q_dim(self) -> int:
        return self.n_head * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.n_kv_head * self.head_dim

    @classmethod
    def from_metadata(cls, md: dict, where: str = "model") -> "ModelConfig":
        return cls(**cls.common(Metadata(md, where)))

    @staticmethod
    def common(m: Metadata) -> dict:
        """The shared fields, read and checked once for every architecture."""
        n_layer = m.get("block_count")
        n_embd = m.get("embedding_length")
        n_head = m.get("attention.head_count")
        if n_head <= 0 or n_embd <= 0 or n_layer <= 0:
            raise GGUFError(f"{m.where}: block count, head count and embedding length must be positive")
        head_dim = m.get("attention.key_length", n_embd // n_head)
        if m.get("attention.value_length", head_dim) != head_dim:
            raise UnsupportedModelError(f"{m.where}: keys and values of different lengths are not supported")
        n_kv_head = m.get("attention.head_count_kv", n_head)
        if n_kv_head <= 0 or n_head % n_kv_head:
            raise GGUFError(f"{m.where}: {n_head} query heads cannot share {n_kv_head} key/value heads")
        n_ff = m.get("feed_forward_length")
        if head_dim <= 0 or n_ff <= 0:
            raise GGUFError(f"{m.where}: head size and feed-forward length must be positive")
        tokens = m.md.get("tokenizer.ggml.tokens")
        vocab = m.get("vocab_size", len(tokens) if isinstance(tokens, list) else _MISSING)
        if vocab <= 0:
            raise GGUFError(f"{m.where}: the vocabulary is empty")
        scaling = m.md.get(f"{m.arch}.rope.scaling.type", "none")
        factor = m.get("rope.scaling.factor", 1.0, float) or 1.0
        if scaling not in ("none", "linear") and factor != 1.0:
            raise UnsupportedModelError(f"{m.where}: RoPE scaling '{scaling}' is not supported yet")
        return dict(
            arch=m.arch, name=str(m.md.get("general.name", "")),
            n_layer=n_layer, n_embd=n_embd, n_ff=n_ff, n_head=n_head, n_kv_head=n_kv_head, head_dim=head_dim,
            rope_dim=m.get("rope.dimension_count", head_dim),
            rope_base=m.get("rope.freq_base", 10000.0, float),
            rope_freq_scale=1.0 / factor if scaling == "linear" else 1.0,
            norm_eps=m.get("attention.layer_norm_rms_epsilon", 1e-5, float),
            vocab_size=vocab, context_length=m.get("context_length", 2048))
