"""A numpy forward pass of the llama family, straight from the paper, for checking the GPU model end to end.

Weights are dequantized with the `gguf` package (the external reference), maths in float64.
"""
from __future__ import annotations

import gguf
import numpy as np


def _rope(x: np.ndarray, pos: np.ndarray, rope_dim: int, base: float, neox: bool) -> np.ndarray:
    """x: [T, heads, head_dim]; rotates the first rope_dim dims by pos * base^(-2i/rope_dim)."""
    half = rope_dim // 2
    inv = base ** (-np.arange(half, dtype=np.float64) * 2 / rope_dim)
    ang = pos[:, None].astype(np.float64) * inv[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    out = x.copy()
    if neox:
        a, b = x[..., :half], x[..., half:rope_dim]
    else:
        a, b = x[..., 0:rope_dim:2], x[..., 1:rope_dim:2]
    ra, rb = a * cos - b * sin, a * sin + b * cos
    if neox:
        out[..., :half], out[..., half:rope_dim] = ra, rb
    else:
        out[..., 0:rope_dim:2], out[..., 1:rope_dim:2] = ra, rb
    return out


class ReferenceLlama:
    def __init__(self, path: str, kv_type: str = "f32"):
        """`kv_type` "f16" rounds k and v to f16 where the GPU's KV cache stores them (kvlayout.cache_type)."""
        self.kv_round = np.float16 if kv_type == "f16" else None
        r = gguf.GGUFReader(path)
        self.t = {}
        for t in r.tensors:
            shape = [int(s) for s in reversed(t.shape)]  # rows first
            self.t[t.name] = gguf.quants.dequantize(t.data, t.tensor_type).reshape(shape).astype(np.float64)
        f = {k: v.contents() for k, v in r.fields.items() if not k.startswith("tokenizer.")}
        arch = f["general.architecture"]
        self.arch = arch
        self.n_layer = f[f"{arch}.block_count"]
        self.n_head = f[f"{arch}.attention.head_count"]
        self.n_kv = f.get(f"{arch}.attention.head_count_kv", self.n_head)
        self.n_embd = f[f"{arch}.embedding_length"]
        self.head_dim = self.n_embd // self.n_head
        self.rope_dim = f.get(f"{arch}.rope.dimension_count", self.head_dim)
        self.base = f.get(f"{arch}.rope.freq_base", 10000.0)
        self.eps = f[f"{arch}.attention.layer_norm_rms_epsilon"]
        self.neox = arch in ("qwen2",)

    def norm(self, x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + self.eps) * w

    def forward(self, ids: list[int]) -> np.ndarray:
        """Logits [T, vocab] for the tokens `ids` at positions 0..T-1."""
        t, T, hd = self.t, len(ids), self.head_dim
        pos = np.arange(T)
        x = t["token_embd.weight"][ids]
        mask = np.triu(np.full((T, T), -np.inf), 1)
        for i in range(self.n_layer):
            p = f"blk.{i}."
            h = self.norm(x, t[p + "attn_norm.weight"])
            q, k, v = (h @ t[p + f"attn_{n}.weight"].T + t.get(p + f"attn_{n}.bias", 0) for n in "qkv")
            q = _rope(q.reshape(T, self.n_head, hd), pos, self.rope_dim, self.base, self.neox)
            k = _rope(k.reshape(T, self.n_kv, hd), pos, self.rope_dim, self.base, self.neox)
            v = v.reshape(T, self.n_kv, hd)
            if self.kv_round is not None:
                k, v = (a.astype(self.kv_round).astype(np.float64) for a in (k, v))
            rep = self.n_head // self.n_kv
            k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
            s = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(hd) + mask
            a = np.exp(s - s.max(-1, keepdims=True))
            a /= a.sum(-1, keepdims=True)
            o = np.einsum("hqk,khd->qhd", a, v).reshape(T, -1)
            x = x + o @ t[p + "attn_output.weight"].T
            h = self.norm(x, t[p + "ffn_norm.weight"])
            g = h @ t[p + "ffn_gate.weight"].T
            u = h @ t[p + "ffn_up.weight"].T
            x = x + (g / (1 + np.exp(-g)) * u) @ t[p + "ffn_down.weight"].T
        out = t.get("output.weight", t["token_embd.weight"])
        return self.norm(x, t["output_norm.weight"]) @ out.T
