"""tools/bench/make_bench_gguf.py: the 1B-class benchmark models' layout and type mix, written at tiny widths, load and run
in llmchat. (The full-size files are for `llmchat bench` and tools/gpu_report.sh, not for the test suite.)"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import gguf
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "bench"))
import make_bench_gguf as mb  # noqa: E402

from llmchat.api import LLM  # noqa: E402


def test_more_bits_picks_llama_cpp_layers():
    # What llama_model_quantize (llama-cpp-python 0.3.36) kept in Q6_K for Q4_K_M at these layer counts.
    assert [i for i in range(16) if mb.more_bits(i, 16)] == [0, 1, 4, 7, 10, 13, 14, 15]
    assert [i for i in range(28) if mb.more_bits(i, 28)] == [0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 24, 25, 26, 27]


def test_full_shapes_are_the_released_models():
    llama, qwen = mb.SHAPES["llama-3.2-1b"], mb.SHAPES["qwen3-1.7b"]
    # parameters without norms: embedding (tied) + per layer q, k, v, o, gate, up, down
    def params(s: mb.Shape) -> int:
        per_layer = s.n_embd * (2 * s.n_head * s.head_dim + 2 * s.n_kv_head * s.head_dim) + 3 * s.n_embd * s.n_ff
        return s.vocab * s.n_embd + s.n_layer * per_layer
    assert math.isclose(params(llama), 1.236e9, rel_tol=0.01)  # Llama-3.2-1B: 1.24 B
    assert math.isclose(params(qwen), 1.72e9, rel_tol=0.01)  # Qwen3-1.7B: 1.7 B (1.4 B without the embedding)


@pytest.mark.parametrize("shape,file_type", [("llama-3.2-1b", "Q4_K_M"), ("qwen3-1.7b", "Q4_0")])
def test_tiny_model_has_the_layout_and_loads(tmp_path, shape, file_type):
    s = mb.tiny(mb.SHAPES[shape])
    path = mb.write(tmp_path / f"{shape}.{file_type}.gguf", s, file_type)
    reader = gguf.GGUFReader(str(path))
    types = {t.name: t.tensor_type for t in reader.tensors}
    assert types["token_embd.weight"] == gguf.GGMLQuantizationType.Q6_K
    assert "output.weight" not in types  # tied, as in the released models
    for i in range(s.n_layer):
        v, down, q = (types[f"blk.{i}.{n}.weight"] for n in ("attn_v", "ffn_down", "attn_q"))
        if file_type == "Q4_0":
            assert v == down == q == gguf.GGMLQuantizationType.Q4_0
        else:
            assert q == gguf.GGMLQuantizationType.Q4_K
            assert v == down == (gguf.GGMLQuantizationType.Q6_K if mb.more_bits(i, s.n_layer)
                                 else gguf.GGMLQuantizationType.Q4_K)
    assert ("blk.0.attn_q_norm.weight" in types) == (s.arch == "qwen3")
    assert ("rope_freqs.weight" in types) == (s.arch == "llama")

    llm = LLM(str(path), context=256)
    assert llm.runtime.config.vocab_size == s.vocab and llm.runtime.config.n_layer == s.n_layer
    ids = llm.runtime.encode_prompt("The history of Paris")
    assert ids and all(0 <= i < 264 for i in ids)  # byte-level tokens, never the padding
    [logits] = llm.runtime.engine.step([llm_feed(llm, ids)])
    assert len(logits) == s.vocab and all(math.isfinite(x) for x in logits)
    assert max(logits) - min(logits) > 1e-3  # random weights, not zeros


def llm_feed(llm, ids):
    from llmchat.runtime.engine import Feed
    slot = llm.runtime.engine.kv.new_slot()
    return Feed(slot, ids, 0)
