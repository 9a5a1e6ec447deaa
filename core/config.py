"""The model's shape and hyper-parameters, built once from GGUF metadata: every derived field lives here."""
from __future__ import annotations

from dataclasses import dataclass

from .errors import GGUFError, UnsupportedModelError

# Architectures whose GGUF tensor names and maths the llama model file covers.
LLAMA_FAMILY = ("llama", "mistral", "qwen2")
# RoPE pairs (i, i + d/2) instead of (2i, 2i + 1) for these (llama.cpp's LLAMA_ROPE_TYPE_NEOX).
NEOX_ROPE = ("qwen2", "qwen3", "gemma", "gemma2", "gemma3", "phi3", "stablelm", "falcon", "gptneox")


@dataclass(frozen=True)
class ModelConfig:
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
    rope_neox: bool
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
        arch = md.get("general.architecture")
        if not isinstance(arch, str):
            raise GGUFError(f"{where}: general.architecture is missing")
        if arch not in LLAMA_FAMILY:
            raise UnsupportedModelError(f"{where}: architecture '{arch}' is not supported yet "
                                        f"(supported: {', '.join(LLAMA_FAMILY)})")

        def get(key: str, default=None, kind=int):
            value = md.get(f"{arch}.{key}", default)
            if value is None:
                raise GGUFError(f"{where}: metadata {arch}.{key} is missing")
            if isinstance(value, list):  # per-layer arrays: this model file needs them uniform
                if len(set(value)) != 1:
                    raise UnsupportedModelError(f"{where}: {arch}.{key} varies per layer, which is not supported")
                value = value[0]
            try:
                return kind(value)
            except (TypeError, ValueError):
                raise GGUFError(f"{where}: metadata {arch}.{key} = {value!r} is not a {kind.__name__}") from None

        n_embd = get("embedding_length")
        n_head = get("attention.head_count")
        if n_head <= 0 or n_embd <= 0:
            raise GGUFError(f"{where}: head count and embedding length must be positive")
        head_dim = get("attention.key_length", n_embd // n_head)
        n_kv_head = get("attention.head_count_kv", n_head)
        if n_kv_head <= 0 or n_head % n_kv_head:
            raise GGUFError(f"{where}: {n_head} query heads cannot share {n_kv_head} key/value heads")
        tokens = md.get("tokenizer.ggml.tokens")
        vocab = get("vocab_size", len(tokens) if isinstance(tokens, list) else None)
        scaling = md.get(f"{arch}.rope.scaling.type", "none")
        factor = float(md.get(f"{arch}.rope.scaling.factor", 1.0) or 1.0)
        if scaling not in ("none", "linear") and factor != 1.0:
            raise UnsupportedModelError(f"{where}: RoPE scaling '{scaling}' is not supported yet")
        return cls(
            arch=arch, name=str(md.get("general.name", "")),
            n_layer=get("block_count"), n_embd=n_embd, n_ff=get("feed_forward_length"),
            n_head=n_head, n_kv_head=n_kv_head, head_dim=head_dim,
            rope_dim=get("rope.dimension_count", head_dim),
            rope_base=get("rope.freq_base", 10000.0, float),
            rope_freq_scale=1.0 / factor if scaling == "linear" else 1.0,
            rope_neox=arch in NEOX_ROPE,
            norm_eps=get("attention.layer_norm_rms_epsilon", 1e-5, float),
            vocab_size=vocab, context_length=get("context_length", 2048))
