"""Tiny random models of each supported architecture, written with the `gguf` package's writer.

Each file carries the metadata keys and tensor names llama.cpp's converter (convert_hf_to_gguf.py) writes for that
architecture, so llama.cpp loads it as it would a converted checkpoint: tensor names come from gguf-py's own
tables and are checked against the architecture's tensor list there. Everything is drawn from one seeded
generator in a fixed order, so the same arguments give the same bytes (tests/data/oracle relies on that).

The vocabulary is byte-level BPE: the 256 byte symbols, a few merges, and ChatML control tokens, so the full
load → tokenize → generate path runs on them. Weights are quantized by llmchat.quant (bit for bit as the `gguf`
package would); the types it has no encoder for (K-quants, IQ4) get random blocks of the wanted spread instead
(`llmchat.quant.random_weights`).

This module needs numpy, gguf and llmchat: tools/reference/arch_oracle.py imports it from llama.cpp's environment.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import gguf
import numpy as np

from llmchat import quant

Q = gguf.GGMLQuantizationType
T = gguf.MODEL_TENSOR

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MERGES = ["h e", "l l", "he ll", "Ġ t", "Ġt h"]

ORACLE = Path(__file__).parents[1] / "data" / "oracle"  # tools/reference/arch_oracle.py's variants, llama.cpp's logits


def oracle_params(variant: str) -> dict:
    """write_model's arguments for one of the oracle's variants (tests/data/oracle/VARIANT.json)."""
    return json.loads((ORACLE / f"{variant}.json").read_text())["params"]


ARCHES = ("llama", "mistral", "qwen2", "qwen3", "smollm3", "gemma3", "gemma4", "phi3", "lfm2", "qwen35")


def _file_type(qtype: Q) -> gguf.LlamaFileType:
    """`general.file_type` for a model mostly of `qtype` (K-quants as their _M mixes, as llama.cpp names them)."""
    if qtype == Q.F32:
        return gguf.LlamaFileType.ALL_F32
    names = gguf.LlamaFileType.__members__
    return names.get(f"MOSTLY_{qtype.name}") or names[f"MOSTLY_{qtype.name}_M"]


def _byte_symbols() -> list[str]:
    """GPT-2's printable stand-ins for the 256 bytes."""
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    extra = [b for b in range(256) if b not in keep]
    table = {b: chr(b) for b in keep} | {b: chr(256 + i) for i, b in enumerate(extra)}
    return [table[b] for b in range(256)]


def vocabulary() -> list[str]:
    merged = ["".join(m.split()) for m in MERGES]
    return SPECIALS + _byte_symbols() + merged


def llama3_rope_factors(head_dim: int, base: float, factor: float, low_freq_factor: float, high_freq_factor: float,
                        original_context: int) -> np.ndarray:
    """The per-pair divisors of the rotation frequencies the converter derives from a "llama3" rope_scaling
    (stored as rope_freqs.weight): 1 for short wavelengths, `factor` for long ones, a smooth blend between."""
    out = []
    for i in range(head_dim // 2):
        wavelen = 2 * math.pi * base ** (2 * i / head_dim)
        if wavelen < original_context / high_freq_factor:
            out.append(1.0)
        elif wavelen > original_context / low_freq_factor:
            out.append(factor)
        else:
            smooth = (original_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, np.float32)


def write_model(path: Path, *, arch: str = "llama", label: str | None = None, qtype: Q | str = Q.Q8_0,
                n_layer: int = 2, n_embd: int = 128, n_head: int = 2, n_kv_head: int = 1, head_dim: int | None = None,
                n_ff: int = 192, tied: bool = True, seed: int = 0, types: dict[str, Q | str] | None = None,
                context_length: int = 512, rope_base: float = 10000.0, norm_eps: float = 1e-5,
                llama3_rope: dict | None = None, sliding_window: int = 0, rope_base_swa: float | None = None,
                rope_linear: float | None = None, rope_dim: int | None = None, original_context: int | None = None,
                attention_bias: bool = False, conv_layers: tuple[bool, ...] | None = None, l_cache: int = 3,
                local_layers: tuple[bool, ...] | None = None, head_dim_swa: int | None = None,
                n_kv_head_global: int | None = None, shared_kv_layers: int = 0, n_embd_per_layer: int = 0,
                partial_rotary: float = 0.25, double_wide_mlp: bool = False, softcap: float = 0.0,
                recurrent_layers: tuple[bool, ...] | None = None, full_attention_interval: int | None = None,
                ssm_heads: tuple[int, int] = (2, 4), ssm_head_dim: int = 16, conv_kernel: int = 4,
                rope_sections: tuple[int, ...] = (11, 11, 10, 0), mtp_layers: int = 0,
                vocab_size: int | None = None, metadata: dict[str, object] | None = None) -> Path:
    """Write a random model of `arch` as the converter would, under `general.architecture` = `label` (default
    `arch`; a different label writes the same tensors and keys under another architecture name).

    `qtype` is the type of the weight matrices; `types` overrides it for tensors whose name contains a key.
    `head_dim` set: heads of that size (written as key/value length), else n_embd / n_head. `rope_linear`: linear
    RoPE scaling by that factor (positions divided by it; Gemma 3: in its global layers only).
    Per architecture:
      llama, smollm3: `llama3_rope` {factor, low_freq_factor, high_freq_factor, original_context} adds rope_freqs;
        `attention_bias` adds biases to q, k, v and the output projection (HF's attention_bias);
      gemma3: `sliding_window` (0: none, every layer global), local RoPE base `rope_base_swa`;
      phi3: `rope_dim` < head_dim rotates part of each head; `original_context` adds LongRoPE (long and short
        factors, attention factor from context_length / original_context);
      lfm2: `conv_layers` (per layer: a short-convolution block, else attention; default: all but the last) with
        `l_cache` taps; `sliding_window` for the attention layers. The output is always tied;
      gemma4: `local_layers` (per layer: sliding-window, else global; default five local, then one global) with
        heads of `head_dim_swa` (default head_dim) and base `rope_base_swa`; global layers with `n_kv_head_global`
        K/V heads (default n_kv_head) and proportional RoPE over `partial_rotary` of the head; the last
        `shared_kv_layers` layers without K/V of their own (their unused k/v tensors written all the same, as the
        converter does; double-width feed-forward there with `double_wide_mlp`); per-layer inputs of
        `n_embd_per_layer` values; final logit soft-capping at `softcap`; a layer_output_scale per layer;
      qwen35: gated DeltaNet layers and gated full-attention layers; `recurrent_layers` (per layer: a linear layer,
        written as attention.recurrent_layers) or else every `full_attention_interval`-th layer full attention (4, or the last layer of fewer);
        `ssm_heads` (key heads, value heads) of `ssm_head_dim`, `conv_kernel` taps; `rope_dim` rotated dimensions
        of each attention head with IMROPE `rope_sections`; `mtp_layers` multi-token-prediction blocks after the
        trunk (counted in block_count, as the converter writes them by default).
    `vocab_size` pads the vocabulary with unreachable tokens to that size (a realistic output projection for speed
    measurements).
    `metadata` overwrites keys after the converter's are written (a value, kept in the type the key had, or a
    `(value, GGUFValueType)` pair) or removes them (None), leaving the tensors as they are: a file whose metadata
    contradicts its tensors.
    """
    if arch not in ARCHES:
        raise ValueError(f"no tiny-model recipe for '{arch}'")
    for option, value, owners in (("llama3_rope", llama3_rope, ("llama", "mistral", "smollm3")),
                                  ("attention_bias", attention_bias, ("llama", "mistral", "smollm3")),
                                  ("sliding_window", sliding_window, ("gemma3", "gemma4", "phi3", "lfm2")),
                                  ("local_layers", local_layers, ("gemma4",)),
                                  ("shared_kv_layers", shared_kv_layers, ("gemma4",)),
                                  ("n_embd_per_layer", n_embd_per_layer, ("gemma4",)),
                                  ("softcap", softcap, ("gemma3", "gemma4")),
                                  ("conv_layers", conv_layers, ("lfm2",)),
                                  ("rope_base_swa", rope_base_swa, ("gemma3", "gemma4")),
                                  ("rope_linear", rope_linear, ARCHES[:-2]),  # not lfm2 or qwen35; Phi-3's converter writes none
                                  ("recurrent_layers", recurrent_layers, ("qwen35",)),
                                  ("mtp_layers", mtp_layers, ("qwen35",)),
                                  ("rope_dim", rope_dim, ("phi3", "qwen35")),
                                  ("original_context", original_context, ("phi3",))):
        if value and arch not in owners:
            raise ValueError(f"{option} does not apply to {arch}")
    if arch in ("phi3", "lfm2") and head_dim not in (None, n_embd // n_head):
        raise ValueError(f"{arch} heads are n_embd / n_head wide")
    if arch == "lfm2":
        conv_layers = tuple(conv_layers or [i < n_layer - 1 for i in range(n_layer)])
        if len(conv_layers) != n_layer or tied is False:
            raise ValueError("lfm2: one conv_layers flag per layer; the output is tied")
    if arch == "gemma4":  # always a window (llama.cpp requires the key); the last layer global by default
        local_layers = tuple(local_layers or [i % 6 < 5 and i < n_layer - 1 for i in range(n_layer)])
        sliding_window = sliding_window or 16
        if len(local_layers) != n_layer or rope_linear:
            raise ValueError("gemma4: one local_layers flag per layer, no linear RoPE scaling")
    qtype = Q[qtype] if isinstance(qtype, str) else qtype
    types = {k: Q[v] if isinstance(v, str) else v for k, v in (types or {}).items()}
    # The converter writes Mistral checkpoints as llama files; `label` can still call them "mistral".
    model_arch = gguf.MODEL_ARCH.LLAMA if arch == "mistral" else gguf.MODEL_ARCH[arch.upper()]
    known = set(gguf.MODEL_TENSORS[model_arch])
    if arch == "qwen35":  # llama.cpp's table has the prediction blocks' tensors; gguf 0.19's lacks them
        known |= {T.NEXTN_EH_PROJ, T.NEXTN_ENORM, T.NEXTN_HNORM, T.NEXTN_SHARED_HEAD_NORM}
    rng = np.random.default_rng(seed)
    vocab = vocabulary()
    vocab += [f"<pad{i}>" for i in range(max(0, (vocab_size or 0) - len(vocab)))]
    hd = head_dim or n_embd // n_head
    w = gguf.GGUFWriter(str(path), label or gguf.MODEL_ARCH_NAMES[model_arch])
    # Not the architecture's name: llama.cpp adjusts the tokens of Phi-3 SentencePiece vocabularies (looking up
    # <s>, </s>, <unk>) when general.name contains "phi3", and this vocabulary has none of them.
    w.add_name("tiny random model")

    # -- metadata, in the converter's terms --------------------------------------------------------------------
    w.add_block_count(n_layer + mtp_layers)
    w.add_context_length(context_length)
    w.add_embedding_length(n_embd)
    gemma4 = arch == "gemma4"
    if gemma4 and double_wide_mlp:
        first_shared = n_layer - shared_kv_layers
        w.add_feed_forward_length([n_ff if i < first_shared else 2 * n_ff for i in range(n_layer)])
    else:
        w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    # LFM2's converter writes one K/V head count per layer, 0 for a convolution layer; Gemma 4's one per layer when
    # global layers have their own count.
    if arch == "lfm2":
        w.add_head_count_kv([0 if c else n_kv_head for c in conv_layers])
    elif gemma4 and n_kv_head_global is not None:
        w.add_head_count_kv([n_kv_head if lc else n_kv_head_global for lc in local_layers])
    else:
        w.add_head_count_kv(n_kv_head)
    w.add_layer_norm_rms_eps(norm_eps)
    w.add_rope_freq_base(rope_base)
    if head_dim is not None or arch in ("gemma3", "gemma4"):  # Gemma's converters always write the head size
        w.add_key_length(hd)
        w.add_value_length(hd)
    if arch in ("llama", "mistral", "smollm3", "lfm2"):
        w.add_vocab_size(len(vocab))
        w.add_rope_dimension_count(hd)
    if arch == "qwen35":
        n_k_ssm, n_v_ssm = ssm_heads
        w.add_ssm_conv_kernel(conv_kernel)
        w.add_ssm_state_size(ssm_head_dim)
        w.add_ssm_group_count(n_k_ssm)
        w.add_ssm_time_step_rank(n_v_ssm)
        w.add_ssm_inner_size(ssm_head_dim * n_v_ssm)
        if recurrent_layers is not None:
            # llama.cpp's key for HF's layer_types; gguf 0.19 has no writer method for it.
            w.add_array(f"{w.arch}.attention.recurrent_layers",
                        [bool(r) for r in recurrent_layers] + [False] * mtp_layers)  # over every block
        # The checkpoints' interval is 4; a model of fewer layers keeps one full-attention layer, as it must.
        full_attention_interval = full_attention_interval or min(4, n_layer)
        if recurrent_layers is None:
            recurrent_layers = tuple((i + 1) % full_attention_interval != 0 for i in range(n_layer))
        w.add_full_attention_interval(full_attention_interval)
        if mtp_layers:
            w.add_uint32(f"{w.arch}.nextn_predict_layers", mtp_layers)
        w.add_rope_dimension_count(rope_dim or hd)
        w.add_rope_dimension_sections(list(rope_sections))
    if arch == "lfm2":
        w.add_shortconv_l_cache(l_cache)
        if sliding_window:
            w.add_sliding_window(sliding_window)
    if arch == "gemma3" and sliding_window:  # absent when every layer is global (sliding_window_pattern 1)
        w.add_sliding_window(sliding_window)
    if arch in ("gemma3", "gemma4") and rope_base_swa is not None:
        w.add_rope_freq_base_swa(rope_base_swa)
    if softcap:
        w.add_final_logit_softcapping(softcap)
    if arch == "gemma4":
        hd_swa = head_dim_swa or hd
        w.add_sliding_window(sliding_window)
        w.add_shared_kv_layers(shared_kv_layers)
        w.add_embedding_length_per_layer_input(n_embd_per_layer)
        w.add_sliding_window_pattern(list(local_layers))
        w.add_key_length_swa(hd_swa)
        w.add_value_length_swa(hd_swa)
        w.add_rope_dimension_count(hd)
        w.add_rope_dimension_count_swa(hd_swa)
    if rope_linear is not None:
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(rope_linear)
    if arch == "phi3":
        rope_dim = rope_dim or hd
        w.add_rope_dimension_count(rope_dim)
        w.add_sliding_window(sliding_window)
        if original_context is not None:
            w.add_rope_scaling_orig_ctx_len(original_context)
            scale = context_length / original_context
            w.add_rope_scaling_attn_factors(math.sqrt(1 + math.log(scale) / math.log(original_context))
                                            if scale > 1 else 1.0)
    w.add_file_type(_file_type(qtype))
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)

    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(vocab)
    w.add_token_types([gguf.TokenType.CONTROL] * len(SPECIALS) + [gguf.TokenType.NORMAL] * (len(vocab) - len(SPECIALS)))
    w.add_token_merges(MERGES)
    w.add_bos_token_id(0)
    w.add_eos_token_id(2)
    w.add_add_bos_token(False)
    w.add_chat_template("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")

    for key, value in (metadata or {}).items():
        if value is None:
            w.kv_data[0].pop(key, None)
            continue
        value, vtype = value if isinstance(value, tuple) else (value, w.kv_data[0][key].type)
        w.kv_data[0][key] = gguf.GGUFValue(value=value, type=vtype)

    # -- tensors ---------------------------------------------------------------------------------------------------
    def name(kind: T, suffix: str = "weight", bid: int | None = None) -> str:
        if kind not in known:
            raise ValueError(f"{arch} files have no {kind.name} tensor")
        return gguf.TENSOR_NAMES[kind].format(bid=bid) + "." + suffix

    def matrix(kind: T, rows: int, cols: int, bid: int | None = None, scale: float | None = None):
        n = name(kind, bid=bid)
        spread = cols ** -0.5 if scale is None else scale
        x = (rng.standard_normal((rows, cols)) * spread).astype(np.float32)
        t = qtype
        for key, override in types.items():
            if key in n:
                t = override
        if t == Q.F32:
            w.add_tensor(n, x)
        else:
            q = quant.quantize(x, t) if quant.get(t).can_quantize() else quant.random_weights(rng, t, x.shape, spread)
            w.add_tensor(n, q, raw_shape=q.shape, raw_dtype=t)

    def vector(kind: T, size: int, bid: int | None = None, *, mean: float = 1.0, std: float = 0.1,
               suffix: str = "weight"):
        w.add_tensor(name(kind, suffix, bid), (mean + std * rng.standard_normal(size)).astype(np.float32))

    q_dim, kv_dim = n_head * hd, n_kv_head * hd
    matrix(T.TOKEN_EMBD, len(vocab), n_embd, scale=1.0)
    if arch == "gemma4":
        # Proportional RoPE: the pairs past partial_rotary of the head are held still by a divisor of 1e30. Only the
        # global layers read it (llama.cpp loads no file with a tensor nothing reads).
        rotated = int(hd * partial_rotary / 2)
        if not all(local_layers):
            w.add_tensor(name(T.ROPE_FREQS), np.array([1.0] * rotated + [1e30] * (hd // 2 - rotated), np.float32))
        if n_embd_per_layer:
            matrix(T.PER_LAYER_TOKEN_EMBD, len(vocab), n_layer * n_embd_per_layer, scale=1.0)
            matrix(T.PER_LAYER_MODEL_PROJ, n_layer * n_embd_per_layer, n_embd)
            vector(T.PER_LAYER_PROJ_NORM, n_embd_per_layer)
    if llama3_rope is not None:
        w.add_tensor(name(T.ROPE_FREQS), llama3_rope_factors(hd, rope_base, **llama3_rope))
    if arch == "phi3" and original_context is not None:
        # LongRoPE: short factors near 1, long ones growing towards the low frequencies (as in Phi-3's configs).
        half = rope_dim // 2
        long = np.geomspace(1.0, 16.0, half) * (1 + 0.05 * rng.standard_normal(half))
        short = 1 + 0.1 * np.abs(rng.standard_normal(half))
        w.add_tensor(name(T.ROPE_FACTORS_LONG), long.astype(np.float32))
        w.add_tensor(name(T.ROPE_FACTORS_SHORT), short.astype(np.float32))
    for i in range(n_layer):
        if arch == "gemma4":  # per-layer head size and K/V head count
            hd = (head_dim_swa or head_dim or n_embd // n_head) if local_layers[i] else head_dim or n_embd // n_head
            kv_dim = (n_kv_head if local_layers[i] or n_kv_head_global is None else n_kv_head_global) * hd
            q_dim = n_head * hd
        vector(T.ATTN_NORM, n_embd, i)
        if arch == "qwen35":
            _qwen35_mixer(w, name, matrix, vector, rng, i, recurrent_layers[i], n_embd=n_embd, q_dim=q_dim,
                          kv_dim=kv_dim, hd=hd, ssm_heads=ssm_heads, ssm_head_dim=ssm_head_dim,
                          conv_kernel=conv_kernel)
            vector(T.ATTN_POST_NORM, n_embd, i)
            matrix(T.FFN_GATE, n_ff, n_embd, i)
            matrix(T.FFN_UP, n_ff, n_embd, i)
            matrix(T.FFN_DOWN, n_embd, n_ff, i)
            continue
        if arch == "lfm2" and conv_layers[i]:
            # The converter squeezes the (n_embd, 1, l_cache) depthwise kernel to (n_embd, l_cache); it stays F32.
            w.add_tensor(name(T.SHORTCONV_CONV, bid=i), (rng.standard_normal((n_embd, l_cache)) * 0.5).astype(np.float32))
            matrix(T.SHORTCONV_INPROJ, 3 * n_embd, n_embd, i)
            matrix(T.SHORTCONV_OUTPROJ, n_embd, n_embd, i)
        elif arch == "phi3":
            matrix(T.ATTN_QKV, q_dim + 2 * kv_dim, n_embd, i)
        else:
            matrix(T.ATTN_Q, q_dim, n_embd, i)
            matrix(T.ATTN_K, kv_dim, n_embd, i)
            matrix(T.ATTN_V, kv_dim, n_embd, i)
        if arch == "qwen2" or attention_bias:
            for kind, size in ((T.ATTN_Q, q_dim), (T.ATTN_K, kv_dim), (T.ATTN_V, kv_dim)):
                vector(kind, size, i, mean=0.0, suffix="bias")
        if arch in ("qwen3", "gemma3", "gemma4") or arch == "lfm2" and not conv_layers[i]:
            vector(T.ATTN_Q_NORM, hd, i)
            vector(T.ATTN_K_NORM, hd, i)
        if not (arch == "lfm2" and conv_layers[i]):
            matrix(T.ATTN_OUT, n_embd, q_dim, i)
        if attention_bias:
            vector(T.ATTN_OUT, n_embd, i, mean=0.0, suffix="bias")
        if arch in ("gemma3", "gemma4"):
            vector(T.ATTN_POST_NORM, n_embd, i)
        gemma = arch in ("gemma3", "gemma4")
        vector(T.FFN_PRE_NORM if gemma else T.FFN_NORM, n_embd, i)  # both named blk.N.ffn_norm
        ff = 2 * n_ff if arch == "gemma4" and double_wide_mlp and i >= n_layer - shared_kv_layers else n_ff
        if arch == "phi3":
            matrix(T.FFN_UP, 2 * ff, n_embd, i)  # [gate; up]
        else:
            matrix(T.FFN_GATE, ff, n_embd, i)
            matrix(T.FFN_UP, ff, n_embd, i)
        matrix(T.FFN_DOWN, n_embd, ff, i)
        if gemma:
            vector(T.FFN_POST_NORM, n_embd, i)
        if arch == "gemma4":
            if n_embd_per_layer:
                matrix(T.PER_LAYER_INP_GATE, n_embd_per_layer, n_embd, i)
                matrix(T.PER_LAYER_PROJ, n_embd, n_embd_per_layer, i)
                vector(T.PER_LAYER_POST_NORM, n_embd, i)
            vector(T.LAYER_OUT_SCALE, 1, i, mean=0.75, std=0.2)
    for i in range(n_layer, n_layer + mtp_layers):  # a full-attention block with the prediction head's tensors
        vector(T.ATTN_NORM, n_embd, i)
        _qwen35_mixer(w, name, matrix, vector, rng, i, False, n_embd=n_embd, q_dim=q_dim, kv_dim=kv_dim, hd=hd,
                      ssm_heads=ssm_heads, ssm_head_dim=ssm_head_dim, conv_kernel=conv_kernel)
        vector(T.ATTN_POST_NORM, n_embd, i)
        for kind, rows, cols in ((T.FFN_GATE, n_ff, n_embd), (T.FFN_UP, n_ff, n_embd), (T.FFN_DOWN, n_embd, n_ff),
                                 (T.NEXTN_EH_PROJ, n_embd, 2 * n_embd)):
            matrix(kind, rows, cols, i)
        for kind in (T.NEXTN_ENORM, T.NEXTN_HNORM, T.NEXTN_SHARED_HEAD_NORM):
            vector(kind, n_embd, i)
    vector(T.TOKEN_EMBD_NORM if arch == "lfm2" else T.OUTPUT_NORM, n_embd)  # LFM2's final norm
    if not tied:
        matrix(T.OUTPUT, len(vocab), n_embd, scale=n_embd ** -0.5)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _qwen35_mixer(w, name, matrix, vector, rng, i: int, recurrent: bool, *, n_embd: int, q_dim: int, kv_dim: int,
                  hd: int, ssm_heads: tuple[int, int], ssm_head_dim: int, conv_kernel: int) -> None:
    """One Qwen3.5 layer's mixer, as the converter writes it: a gated DeltaNet (decays drawn close enough to 1
    that the state carries over many steps) or full attention whose query projection holds each head's gate."""
    if not recurrent:
        matrix(T.ATTN_Q, 2 * q_dim, n_embd, i)  # per head: query rows, then gate rows
        vector(T.ATTN_Q_NORM, hd, i)
        matrix(T.ATTN_K, kv_dim, n_embd, i)
        vector(T.ATTN_K_NORM, hd, i)
        matrix(T.ATTN_V, kv_dim, n_embd, i)
        matrix(T.ATTN_OUT, n_embd, q_dim, i)
        return
    n_k, n_v = ssm_heads
    conv_dim = (2 * n_k + n_v) * ssm_head_dim
    matrix(T.ATTN_QKV, conv_dim, n_embd, i)
    matrix(T.ATTN_GATE, n_v * ssm_head_dim, n_embd, i)
    # The converter squeezes the (conv_dim, 1, kernel) depthwise kernel; it stays F32.
    w.add_tensor(name(T.SSM_CONV1D, bid=i), (rng.standard_normal((conv_dim, conv_kernel)) * 0.5).astype(np.float32))
    vector(T.SSM_DT, n_v, i, mean=-1.0, std=0.5, suffix="bias")
    w.add_tensor(gguf.TENSOR_NAMES[T.SSM_A].format(bid=i), -rng.uniform(0.02, 0.5, n_v).astype(np.float32))  # -exp(A_log)
    matrix(T.SSM_BETA, n_v, n_embd, i)
    matrix(T.SSM_ALPHA, n_v, n_embd, i)
    vector(T.SSM_NORM, ssm_head_dim, i)
    matrix(T.SSM_OUT, n_embd, n_v * ssm_head_dim, i)
