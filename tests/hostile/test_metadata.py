"""Model files whose metadata contradicts their tensors, or holds values that are not finite or out of range: every
load refuses them with a ModelMetadataError naming the key, the value and what the tensors say, from the Python API
and from the CLI (one line, no traceback), also under `python -O` — never an AssertionError, never garbage.

The files are the tiny random models of tests/support/model_factory.py, written with the `gguf` package, with one key
overwritten after the converter's keys are in. None of these checks needs a GPU: they run before a device opens.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import gguf
import pytest
from model_factory import ARCHES, write_model

from llmchat.api import LLM
from llmchat.cli import main
from llmchat.errors import GGUFError, ModelMetadataError, UnsupportedModelError
from llmchat.gguf.file import open_gguf
from llmchat.models import model_config

VT = gguf.GGUFValueType
NAN, INF = float("nan"), float("inf")

# (key without the architecture, patched value, what the message must contain besides the key). The tiny models
# have 2 blocks, n_embd 128, 2 query heads of 64, 1 key/value head, n_ff 192 and 263 tokens.
COMMON = [
    ("embedding_length", 96, "= 96"),
    ("embedding_length", (128.5, VT.FLOAT32), "128.5"),
    ("embedding_length", 0, "= 0"),
    ("feed_forward_length", 256, "= 256"),
    ("feed_forward_length", 0, "= 0"),
    ("attention.head_count", 4, "= 4"),
    ("attention.head_count", 0, "= 0"),
    ("attention.head_count_kv", 2, "= 2"),
    ("attention.head_count_kv", 3, "= 3"),
    ("attention.head_count_kv", 0, "= 0"),
    ("attention.key_length", (32, VT.UINT32), "= 32"),
    ("rope.freq_base", NAN, "nan"),
    ("rope.freq_base", INF, "inf"),
    ("rope.freq_base", 0.0, "= 0.0"),
    ("rope.freq_base", -10000.0, "-10000.0"),
    ("attention.layer_norm_rms_epsilon", NAN, "nan"),
    ("attention.layer_norm_rms_epsilon", 0.0, "= 0.0"),
    ("attention.layer_norm_rms_epsilon", -1e-5, "= -"),
    ("block_count", 3, "= 3"),
    ("block_count", 1, "= 1"),
    ("block_count", 0, "= 0"),
    ("block_count", (2**40, VT.UINT64), str(2**40)),
    ("context_length", 0, "= 0"),
    ("context_length", (-1, VT.INT32), "= -1"),
    ("vocab_size", (300, VT.UINT32), "= 300"),
    ("vocab_size", (100, VT.UINT32), "= 100"),
    ("rope.dimension_count", (65, VT.UINT32), "= 65"),
    ("rope.dimension_count", (128, VT.UINT32), "= 128"),
    ("rope.scaling.factor", (NAN, VT.FLOAT32), "nan"),
    ("rope.scaling.factor", (-2.0, VT.FLOAT32), "-2.0"),
]
SPECIFIC = [
    ("gemma3", {"sliding_window": 32}, "attention.sliding_window", (-1, VT.INT32), "= -1"),
    ("gemma3", {"sliding_window": 32}, "attention.sliding_window_pattern", (-2, VT.INT32), "= -2"),
    ("gemma3", {"sliding_window": 32}, "attention.sliding_window_pattern", ([True] * 3, VT.ARRAY), "3 flags"),
    ("gemma3", {}, "rope.freq_base_swa", (NAN, VT.FLOAT32), "nan"),
    ("gemma3", {}, "final_logit_softcapping", (-30.0, VT.FLOAT32), "-30.0"),
    ("phi3", {"rope_dim": 32, "original_context": 128}, "rope.scaling.original_context_length", 0, "= 0"),
    ("phi3", {"rope_dim": 32, "original_context": 128}, "rope.scaling.attn_factor", NAN, "nan"),
    ("phi3", {"rope_dim": 32, "original_context": 128}, "rope.dimension_count", 48, "= 48"),  # vs LongRoPE factors
    ("llama", {"llama3_rope": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                               "original_context": 64}}, "rope.dimension_count", 32, "= 32"),  # vs rope_freqs
]
# LFM2 keeps its key/value head counts per layer (0 for a convolution layer): an array, patched as one.
PER_LAYER_KV = {"lfm2"}
SPECIFIC += [
    ("lfm2", {}, "attention.head_count_kv", ([0, 1, 0], VT.ARRAY), "3 values"),
    ("lfm2", {}, "attention.head_count_kv", ([0, 0], VT.ARRAY), "no attention layer"),
    ("lfm2", {}, "attention.head_count_kv", ([0, 3], VT.ARRAY), "3"),
    ("qwen35", {}, "full_attention_interval", 3, "= 3"),  # 2 layers: none of them full attention
    ("qwen35", {"recurrent_layers": (True, False)}, "attention.recurrent_layers", ([True, True], VT.ARRAY), "full-attention"),
]
CASES = [(arch, {}, key, value, expect) for arch in ARCHES for key, value, expect in COMMON
         if not (arch in PER_LAYER_KV and key == "attention.head_count_kv")] + SPECIFIC


def _id(case) -> str:
    arch, options, key, value, _ = case
    shown = value[0] if isinstance(value, tuple) else value
    return f"{arch}{'+' if options else ''}-{key}={str(shown)[:12]}"


def _label(arch: str) -> str:
    """`general.architecture` of the tiny model: the converter writes Mistral as llama."""
    return "llama" if arch == "mistral" else arch


def _patched(tmp_path: Path, arch: str, options: dict, key: str, value) -> Path:
    return write_model(tmp_path / f"{arch}.gguf", arch=arch, **options, metadata={f"{_label(arch)}.{key}": value})


def _check_message(message: str, path: Path, arch: str, key: str, expect: str) -> None:
    assert message.startswith(f"{path}: "), message
    assert f"{_label(arch)}.{key}" in message, message
    assert expect in message, message


class _NoDevice:
    """Stands in for the GPU: a load that gets as far as using it has missed the check."""


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_contradicting_metadata_is_refused_by_the_api(tmp_path: Path, case) -> None:
    arch, options, key, value, expect = case
    path = _patched(tmp_path, arch, options, key, value)
    # value_length must follow a patched key_length, or the file is refused as unsupported before the shapes
    if key == "attention.key_length":
        path = write_model(tmp_path / f"{arch}.gguf", arch=arch, metadata={
            f"{_label(arch)}.attention.key_length": value, f"{_label(arch)}.attention.value_length": value})
    with pytest.raises(ModelMetadataError) as e:
        LLM(path, device=_NoDevice())
    _check_message(str(e.value), path, arch, key, expect)


CLI_CASES = [c for c in CASES[::7] + SPECIFIC if c[2] != "attention.key_length"]  # that one needs two keys patched


@pytest.mark.parametrize("case", CLI_CASES, ids=[_id(c) for c in CLI_CASES])
def test_contradicting_metadata_is_one_line_from_the_cli(tmp_path: Path, capsys, case) -> None:
    arch, options, key, value, expect = case
    path = _patched(tmp_path, arch, options, key, value)
    assert main(["run", str(path), "-p", "hi", "-n", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("llmchat: error: "), err
    _check_message(err[0].removeprefix("llmchat: error: "), path, arch, key, expect)


def test_value_length_unlike_key_length_names_the_key(tmp_path: Path) -> None:
    path = _patched(tmp_path, "llama", {}, "attention.value_length", (32, VT.UINT32))
    with pytest.raises(UnsupportedModelError, match=r"llama\.attention\.value_length = 32"):
        LLM(path, device=_NoDevice())


@pytest.mark.parametrize("optimize", [[], ["-O"]], ids=["plain", "python -O"])
def test_cli_subprocess_refuses_with_one_line(tmp_path: Path, optimize: list[str]) -> None:
    path = _patched(tmp_path, "llama", {}, "feed_forward_length", 256)
    result = subprocess.run([sys.executable, *optimize, "-m", "llmchat", "run", str(path), "-p", "hi"],
                            capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0] == (f"llmchat: error: {path}: metadata disagrees with the tensors: llama.feed_forward_length = 256 "
                        f"gives 256 rows for blk.0.ffn_gate.weight, but the tensor has 192 (shape [128, 192])")


@pytest.mark.parametrize("arch, options", [(a, {}) for a in ARCHES] + [(a, {"tied": False}) for a in ARCHES
                                                                         if a != "lfm2"] + [  # LFM2 is always tied
    ("phi3", {"rope_dim": 32, "original_context": 128}), ("qwen2", {}), ("gemma3", {"sliding_window": 32}),
    ("llama", {"attention_bias": False, "llama3_rope": {"factor": 8.0, "low_freq_factor": 1.0,
                                                        "high_freq_factor": 4.0, "original_context": 64}})])
def test_every_tensor_of_a_valid_file_has_a_declared_shape(tmp_path: Path, arch: str, options: dict) -> None:
    # The check covers what the forward pass reads only if every tensor the file holds is declared.
    path = write_model(tmp_path / "m.gguf", arch=arch, **options)
    with open_gguf(path) as f:
        config = model_config(f)
        assert set(f.tensors) <= set(config.tensor_shapes())


def test_the_real_models_pass(smollm2_path: Path, gemma3_path: Path) -> None:
    for path in (smollm2_path, gemma3_path):
        with open_gguf(path) as f:
            model_config(f)


def test_errors_are_gguf_errors() -> None:
    assert issubclass(ModelMetadataError, GGUFError)


def test_no_assert_guards_anything_in_the_core() -> None:
    # `python -O` strips asserts: none may stand between input and the code that relies on it.
    core = Path(__file__).parents[2] / "core"
    found = [f"{p.relative_to(core)}:{n}" for p in core.rglob("*.py")
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if line.strip().startswith("assert ")]
    assert not found, found
