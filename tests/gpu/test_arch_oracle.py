"""Every supported architecture against llama.cpp: tiny random models with the converter's tensor names and
metadata, llmchat's logits against those llama.cpp computed for the same file (tests/data/oracle, written by
tools/reference/arch_oracle.py with llama-cpp-python; see there for what each variant covers).

Tolerances: llama.cpp here keeps K/V in f32 (as llmchat does on CPU emulators; with an f16 cache forced these
tolerances held too), so with F32 weights the two differ only by summation order (and by
llama.cpp's f16 GELU table for Gemma); with F16 weights llama.cpp also rounds activations to f16 before each
product, with Q8_0 weights to 8 bits. The bound is on max |diff| over a row, relative to the row's largest logit.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import gguf
import numpy as np
import pytest

from gpu_util import adapter_gpu  # noqa: F401 (a fixture)
from llmchat.api import LLM
from llmchat.runtime.engine import Feed
from llmchat.errors import UnsupportedModelError
from llmchat.models import supported
from model_factory import ARCHES, SPECIALS, vocabulary, write_model

DATA = Path(__file__).parents[1] / "data" / "oracle"
VARIANTS = {p.stem: json.loads(p.read_text()) for p in sorted(DATA.glob("*.json"))}
# Relative tolerance by weight type. Measured on lavapipe: at most 4e-5 with F32 weights, 7e-4 with F16, 1.4e-2
# with Q8_0 (where llama.cpp is as far from a float64 numpy forward pass: its 8-bit activations).
TOLERANCE = {"F32": 1e-3, "F16": 1e-2, "Q8_0": 3e-2}
# Gemma 4's seven layers with two GELUs each (feed-forward and per-layer input gate) carry llama.cpp's f16 GELU table
# further: against a float64 numpy forward pass with the exact GELU, llama.cpp is 7.6e-4 off on this file (1.3e-4
# with its table emulated), llmchat 1.5e-3; the two 1.6e-3 apart at most. (On one-layer files llmchat is 1-2e-5 off
# for Gemma 3 and Gemma 4 alike; unscaled attention scores and logits capped to +-15 make Gemma 4's grow faster.)
VARIANT_TOLERANCE = {"gemma4": 3e-3}
STEP = 16  # tokens per step: prompts are fed in several chunks

CASES = [(name, label) for name, v in VARIANTS.items() for label in [None, *v["labels"]]]


def test_every_architecture_has_oracle_data():
    covered = {v["params"]["arch"] for v in VARIANTS.values()} | {lb for v in VARIANTS.values() for lb in v["labels"]}
    assert set(ARCHES) == set(supported()) <= covered


def _compare(got: np.ndarray, want: np.ndarray, tol: float, what: str) -> float:
    """Max |got - want| relative to max |want|, asserted within `tol`; the top token must agree wherever
    llama.cpp's own top two are further apart than the tolerance."""
    assert got.shape == want.shape and np.isfinite(got).all(), what
    scale = np.abs(want).max()
    err = float(np.abs(got - want).max() / scale)
    assert err <= tol, f"{what}: max |diff| / max |logit| = {err:.2e} > {tol:.0e}"
    top2 = np.sort(want)[-2:]
    if top2[1] - top2[0] > 2 * tol * scale:
        assert got.argmax() == want.argmax(), f"{what}: argmax {got.argmax()} != llama.cpp's {want.argmax()}"
    return err


@pytest.mark.parametrize("name,label", CASES, ids=[n + (f"-as-{lb}" if lb else "") for n, lb in CASES])
def test_logits_match_llama_cpp(tmp_path, adapter_gpu, name, label):  # noqa: F811 (adapter_gpu is a fixture)
    v = VARIANTS[name]
    path = write_model(tmp_path / "m.gguf", **v["params"], label=label)
    if label is None:  # the file llama.cpp read, byte for byte
        assert hashlib.sha256(path.read_bytes()).hexdigest() == v["sha256"], "the gguf writer's output drifted"
    tol = VARIANT_TOLERANCE.get(name, TOLERANCE[v["params"]["qtype"]])
    _check_logits(LLM(str(path), context=v["context"], device=adapter_gpu.device, max_tokens_per_step=STEP), v,
                  name, tol)


@pytest.mark.parametrize("name", VARIANTS)
def test_the_cpu_engine_computes_llama_cpp_s_logits(tmp_path, name):
    """The same files on the cpu engine (llama.cpp's own kernels, with llmchat's steps and slots around them),
    held to the same bounds: fed in steps of STEP tokens rather than the oracle's one of 512, llama.cpp rounds
    differently (up to 4.5e-4 with F16 weights here), and the oracle keeps five digits."""
    pytest.importorskip("llama_cpp", reason="the cpu engine is not installed (make test installs it)")
    v = VARIANTS[name]
    path = write_model(tmp_path / "m.gguf", **v["params"])
    llm = LLM(str(path), context=v["context"], engine="cpu", kv_type="f32", max_tokens_per_step=STEP)
    _check_logits(llm, v, name, VARIANT_TOLERANCE.get(name, TOLERANCE[v["params"]["qtype"]]))


def _check_logits(llm: LLM, v: dict, name: str, tol: float) -> None:
    """Each of the variant's prompts: one prefill in chunks of STEP tokens, then token by token, against the
    oracle's logits at its positions."""
    assert llm.context == v["context"]
    vocab = llm.runtime.config.vocab_size
    for k, prompt in enumerate(v["prompts"]):
        tokens, positions = prompt["tokens"], prompt["positions"]
        want = np.array(prompt["logits"])
        with llm.runtime.slot() as slot:
            rows = llm.runtime.prefill(slot, tokens, all_logits=True)
        got = np.array([list(rows[p]) for p in positions])
        assert got.shape == (len(positions), vocab)
        for p, g, w in zip(positions, got, want):
            _compare(g, w, tol, f"{name} prompt {k} prefill position {p}")
        with llm.runtime.slot() as slot:
            for i, tok in enumerate(tokens):
                row = llm.runtime.engine.step([Feed(slot, [tok], i)])[0]
                if i in positions:
                    _compare(np.array(list(row)), want[positions.index(i)], tol,
                             f"{name} prompt {k} decode position {i}")


@pytest.mark.parametrize("arch", ["starcoder2", "olmo2", "qwen35moe", "gemma3n", "lfm2moe"])
def test_unsupported_architecture_is_refused_by_name(tmp_path, adapter_gpu, arch):  # noqa: F811
    """A file llama.cpp runs but llmchat does not: refused up front, naming the architecture and what is supported."""
    path = tmp_path / f"{arch}.gguf"
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(1)
    w.add_context_length(256)
    w.add_embedding_length(32)
    w.add_feed_forward_length(64)
    w.add_head_count(2)
    vocab = vocabulary()
    w.add_tokenizer_model("gpt2")
    w.add_token_list(vocab)
    w.add_token_types([gguf.TokenType.CONTROL] * len(SPECIALS) + [gguf.TokenType.NORMAL] * (len(vocab) - len(SPECIALS)))
    w.add_tensor("token_embd.weight", np.zeros((len(vocab), 32), np.float32))
    w.add_tensor("output_norm.weight", np.ones(32, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(UnsupportedModelError) as info:
        LLM(str(path), device=adapter_gpu.device)
    message = str(info.value)
    assert f"'{arch}'" in message and "not supported" in message
    assert all(name in message for name in supported())


def test_what_llama_cpp_would_compute_differently_is_refused(tmp_path, adapter_gpu):  # noqa: F811
    # A tensor the architecture's file never reads (llama.cpp adds this output-projection bias).
    path = write_model(tmp_path / "bias.gguf", arch="llama", qtype="F32", n_embd=64, n_head=4, n_kv_head=2, n_ff=96,
                       attention_bias=True)
    with pytest.raises(UnsupportedModelError, match=r"blk\.0\.attn_output\.bias"):
        LLM(str(path), device=adapter_gpu.device)
