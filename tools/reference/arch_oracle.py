"""llama.cpp's logits for a tiny random model of every supported architecture, stored as test data.

Run with a Python that has llama-cpp-python (and numpy, gguf==0.19.0), never from `make test`:

    ~/.cache/llmchat-peers/llamacpp-venv/bin/python tools/reference/arch_oracle.py [VARIANT ...]

For each variant below it writes the model with tests/support/model_factory.py, runs llama.cpp (CPU) on a few prompts of
token ids with the same context size the test gives llmchat, and writes tests/data/oracle/<variant>.json: the
generator's arguments, the sha256 of the file llama.cpp read, and llama.cpp's full logits rows at a few positions.
tests/gpu/test_arch_oracle.py regenerates each file (checking the sha256) and compares llmchat's logits with these.

llama.cpp keeps K and V in f32 here (type_k/type_v) and runs without flash attention, so the K/V cache adds no
rounding of its own; what remains is its f16 activations for F16 weights, its 8-bit activations for quantized
ones, and its f16 GELU table (Gemma).
"""
from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "support"))

from model_factory import vocabulary, write_model  # noqa: E402

OUT = ROOT / "tests" / "data" / "oracle"
GGML_TYPE_F32 = 0

SMALL = dict(n_embd=64, n_head=4, n_kv_head=2, n_ff=96)

# name -> generator arguments, context (llama.cpp's n_ctx: a multiple of 256, which llama.cpp rounds up to),
# prompt lengths, and other architecture names the same file must run under in llmchat.
VARIANTS: dict[str, dict] = {
    "llama": dict(params=dict(arch="llama", qtype="F32", **SMALL, tied=False, seed=1),
                  context=256, prompts=[48, 17]),
    # llama3-style rope_freqs: with a 64-position original context and 16-wide heads, pairs 0, 1-2 and 3-7 get
    # factors of 1, blended, and 8.
    "llama-rope-freqs": dict(params=dict(arch="llama", qtype="F16", **SMALL, tied=True, seed=2, rope_base=10000.0,
                                         llama3_rope=dict(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                                          original_context=64)),
                             context=256, prompts=[120, 9]),
    # Linear RoPE scaling (positions divided by 4), as in context-extended Llama fine-tunes.
    "llama-linear": dict(params=dict(arch="llama", qtype="F32", **SMALL, tied=False, seed=13, rope_linear=4.0),
                         context=256, prompts=[100, 9]),
    "llama-q8_0": dict(params=dict(arch="llama", qtype="Q8_0", **SMALL, tied=False, seed=3,
                                   types={"token_embd": "F32"}),
                       context=256, prompts=[48, 17]),
    # Mistral-Nemo-like: heads wider than n_embd / n_head, one K/V head for four queries, base 1e6. The converter
    # writes Mistral as llama; llmchat also registers the "mistral" name, checked on the same tensors.
    "mistral": dict(params=dict(arch="mistral", qtype="F32", n_embd=96, n_head=4, n_kv_head=1, head_dim=32,
                                n_ff=128, tied=False, seed=4, rope_base=1e6),
                    context=256, prompts=[64, 13], labels=["mistral"]),
    "qwen2": dict(params=dict(arch="qwen2", qtype="F16", **SMALL, tied=True, seed=5, rope_base=1e6, norm_eps=1e-6),
                  context=256, prompts=[48, 17]),
    "qwen3": dict(params=dict(arch="qwen3", qtype="F32", **SMALL, head_dim=32, tied=False, seed=6, rope_base=1e6,
                              norm_eps=1e-6),
                  context=256, prompts=[48, 17]),
    # Layer 3 (every fourth) has no RoPE.
    "smollm3": dict(params=dict(arch="smollm3", qtype="F32", **SMALL, n_layer=4, tied=True, seed=7,
                                rope_base=5e6),
                    context=256, prompts=[80, 17]),
    # Five sliding-window layers of 8 positions (local base 1e4), then a global one (base 1e6).
    "gemma3": dict(params=dict(arch="gemma3", qtype="F32", **SMALL, head_dim=32, n_layer=6, tied=True, seed=8,
                               rope_base=1e6, rope_base_swa=1e4, sliding_window=8, norm_eps=1e-6,
                               context_length=32768),
                   context=256, prompts=[40, 6]),
    # The larger Gemma 3 models scale the global layers' positions linearly (factor 8); 7 layers: local after global.
    "gemma3-linear": dict(params=dict(arch="gemma3", qtype="F16", **SMALL, head_dim=32, n_layer=7, tied=True, seed=9,
                                      rope_base=1e6, rope_base_swa=1e4, sliding_window=8, norm_eps=1e-6,
                                      rope_linear=8.0, context_length=32768),
                          context=256, prompts=[64, 11]),
    # Without a sliding window (the converter then writes none) every layer is global, with the global base.
    "gemma3-global": dict(params=dict(arch="gemma3", qtype="F32", **SMALL, head_dim=32, n_layer=3, tied=True,
                                      seed=12, rope_base=1e6, rope_base_swa=1e4, norm_eps=1e-6,
                                      context_length=32768),
                          context=256, prompts=[40, 6]),
    # Local layers (heads of 16, two K/V heads, an 8-position window, base 1e4) and global ones (heads of 32, one
    # K/V head, proportional RoPE over a quarter of the head, base 1e6); the last three layers read the caches of
    # layers 2 (local) and 3 (global); per-layer inputs of 32 values, layer output scales, soft-capped logits.
    "gemma4": dict(params=dict(arch="gemma4", qtype="F32", n_embd=64, n_head=4, n_kv_head=2, n_kv_head_global=1,
                               head_dim=32, head_dim_swa=16, n_ff=96, n_layer=7,
                               local_layers=(True, False, True, False, True, True, False), shared_kv_layers=3,
                               n_embd_per_layer=32, tied=True, seed=14, rope_base=1e6, rope_base_swa=1e4,
                               sliding_window=8, norm_eps=1e-6, softcap=15.0, context_length=32768),
                   context=256, prompts=[40, 6]),
    # F16 weights, double-width feed-forward in the shared layers, its own output projection, no per-layer inputs.
    "gemma4-f16": dict(params=dict(arch="gemma4", qtype="F16", n_embd=64, n_head=4, n_kv_head=1, head_dim=32,
                                   head_dim_swa=32, n_ff=96, n_layer=6,
                                   local_layers=(True, True, True, False, True, False), shared_kv_layers=2,
                                   double_wide_mlp=True, tied=False, seed=15, rope_base=1e6, rope_base_swa=1e4,
                                   sliding_window=8, norm_eps=1e-6, softcap=30.0, context_length=32768),
                       context=256, prompts=[64, 11]),
    # Final logit soft-capping (the converter writes it where the checkpoint has one).
    "gemma3-softcap": dict(params=dict(arch="gemma3", qtype="F32", **SMALL, head_dim=32, n_layer=3, tied=True,
                                       seed=16, rope_base=1e6, rope_base_swa=1e4, sliding_window=8, norm_eps=1e-6,
                                       softcap=10.0, context_length=32768),
                           context=256, prompts=[40, 6]),
    # LongRoPE, trained for 256 positions and extended to 1024. llama.cpp rounds contexts up to 256, so the
    # original length is 256: a 256-position context uses the short factors, a 512-position one the long factors.
    "phi3-short": dict(params=dict(arch="phi3", qtype="F32", n_embd=64, n_head=4, n_kv_head=4, n_ff=96, tied=False,
                                   seed=10, context_length=1024, original_context=256),
                       context=256, prompts=[200, 16]),
    "phi3-long": dict(params=dict(arch="phi3", qtype="F32", n_embd=64, n_head=4, n_kv_head=4, n_ff=96, tied=False,
                                  seed=10, context_length=1024, original_context=256),
                      context=512, prompts=[300, 16]),
    # Phi-4-mini-like: 12 of 16 dimensions rotated, grouped K/V heads, tied output.
    "phi3-partial": dict(params=dict(arch="phi3", qtype="F16", **SMALL, rope_dim=12, tied=True, seed=11,
                                     context_length=1024, original_context=256),
                         context=512, prompts=[300, 16]),
    # Short-convolution layers (3 taps, as every LFM2 has) around one attention layer; prompts cross the window
    # many times and span chunks. Tied output, final norm named token_embd_norm.
    "lfm2": dict(params=dict(arch="lfm2", qtype="F32", **SMALL, n_layer=4, conv_layers=(True, True, False, True),
                             seed=21, norm_eps=1e-5),
                 context=256, prompts=[48, 17]),
    # Wider convolution (4 taps), two attention layers with an 8-position sliding window, F16 weights.
    "lfm2-swa": dict(params=dict(arch="lfm2", qtype="F16", **SMALL, n_layer=5,
                                 conv_layers=(True, False, True, True, False), l_cache=4, sliding_window=8, seed=22,
                                 rope_base=1e6),
                     context=256, prompts=[64, 11]),
    # Qwen3.5: three gated DeltaNet layers (4-tap convolution, 2 key heads tiled over 4 value heads of 16) then a
    # gated full-attention layer (heads of 32, 16 of them rotated, IMROPE sections 3/3/2); prompts run the
    # recurrence over many steps and cross the convolution's window in every chunk. Tied output.
    "qwen35": dict(params=dict(arch="qwen35", qtype="F32", **SMALL, head_dim=32, n_layer=4, rope_dim=16,
                               rope_sections=(3, 3, 2, 0), seed=31, rope_base=1e7, norm_eps=1e-6),
                   context=256, prompts=[64, 17]),
    # F16 weights, the layer kinds from attention.recurrent_layers (attention second and fifth), as many key as
    # value heads (of 32), an output matrix of its own. (With Q8_0 weights llama.cpp's 8-bit activations put its
    # logits up to 4e-2 from a float64 forward pass of the same file, past what the test tolerates.)
    "qwen35-f16": dict(params=dict(arch="qwen35", qtype="F16", **SMALL, head_dim=32, n_layer=6, rope_dim=16,
                                   rope_sections=(3, 3, 2, 0), recurrent_layers=(True, False, True, True, False, True),
                                   ssm_heads=(2, 2), ssm_head_dim=32, tied=False, seed=32, norm_eps=1e-6),
                       context=256, prompts=[48, 17]),
    # A file converted with its multi-token-prediction block (the converter's default): llama.cpp skips it.
    "qwen35-mtp": dict(params=dict(arch="qwen35", qtype="F32", **SMALL, head_dim=32, n_layer=4, rope_dim=16,
                                   rope_sections=(3, 3, 2, 0), seed=33, norm_eps=1e-6, mtp_layers=1),
                       context=256, prompts=[24]),
}

N_POSITIONS = 4  # logits rows kept per prompt, spread over it, the last included


def positions(n: int) -> list[int]:
    return sorted({round(i * (n - 1) / (N_POSITIONS - 1)) for i in range(N_POSITIONS)})


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run(name: str, spec: dict, workdir: Path) -> dict:
    from llama_cpp import Llama, __version__

    path = write_model(workdir / f"{name}.gguf", **spec["params"])
    llm = Llama(str(path), n_ctx=spec["context"], n_batch=512, n_ubatch=512, logits_all=True, flash_attn=False,
                type_k=GGML_TYPE_F32, type_v=GGML_TYPE_F32, n_threads=2, verbose=False)
    if llm.n_ctx() != spec["context"]:
        raise SystemExit(f"{name}: llama.cpp runs n_ctx {llm.n_ctx()}, not {spec['context']}")
    rng = np.random.default_rng(1000 + spec["params"]["seed"])
    n_vocab = len(vocabulary())
    prompts = []
    for n in spec["prompts"]:
        tokens = [int(t) for t in rng.integers(0, n_vocab, n)]
        llm.reset()
        llm.eval(tokens)
        scores = np.asarray(llm.scores[:n], dtype=np.float64)
        assert scores.shape == (n, n_vocab) and np.isfinite(scores).all()
        keep = positions(n)
        prompts.append({"tokens": tokens, "positions": keep,
                        "logits": [[float(f"{v:.5g}") for v in scores[p]] for p in keep]})
    del llm
    return {"variant": name, "params": spec["params"], "labels": spec.get("labels", []),
            "context": spec["context"], "sha256": sha256(path),
            "oracle": f"llama-cpp-python {__version__}, CPU, f32 K/V cache, no flash attention",
            "prompts": prompts}


def main(names: list[str]) -> None:
    unknown = set(names) - set(VARIANTS)
    if unknown:
        raise SystemExit(f"unknown variants: {sorted(unknown)} (known: {', '.join(VARIANTS)})")
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in names or VARIANTS:
            data = run(name, VARIANTS[name], Path(tmp))
            out = OUT / f"{name}.json"
            out.write_text(json.dumps(data, separators=(",", ":")) + "\n")
            print(f"{name}: {out.relative_to(ROOT)} ({out.stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main(sys.argv[1:])
