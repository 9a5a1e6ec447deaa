"""`llmchat inspect`: the JSON form carries everything in full; the text form is readable and abbreviated."""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pytest
from gguf import GGUFValueType as VT
from gguf_factory import EVERY_TYPE_METADATA, default_tensors, expected_value, write_gguf, write_split_gguf

from llmchat.cli.inspect import inspect_main


def _run(capsys: pytest.CaptureFixture[str], model: Path, as_json: bool, tensors: bool = False) -> str:
    assert inspect_main(argparse.Namespace(model=str(model), json=as_json, tensors=tensors)) == 0
    return capsys.readouterr().out


def _strict_json(text: str) -> dict:
    def refuse(constant: str) -> None:
        raise AssertionError(f"not strict JSON: {constant}")
    return json.loads(text, parse_constant=refuse)


def test_json_has_full_metadata_and_tensor_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    metadata = {**EVERY_TYPE_METADATA, "long": (list(range(1000)), VT.ARRAY, VT.INT32),
                "nan": (math.nan, VT.FLOAT32, None), "inf": (-math.inf, VT.FLOAT64, None)}
    path = write_gguf(tmp_path / "m.gguf", metadata=metadata)
    out = _run(capsys, path, as_json=True)
    assert out.count("\n") == 1
    summary = _strict_json(out)
    assert list(summary) == ["version", "alignment", "metadata", "tensors", "plan"]
    assert "metadata llama.block_count is missing" in summary["plan"]["error"]  # not a runnable model
    assert (summary["version"], summary["alignment"]) == (3, 32)
    for key, (value, vtype, item_type) in EVERY_TYPE_METADATA.items():
        assert summary["metadata"][key] == expected_value(value, vtype, item_type), key
    assert summary["metadata"]["long"] == list(range(1000))
    assert (summary["metadata"]["nan"], summary["metadata"]["inf"]) == ("nan", "-inf")
    assert summary["tensors"][0] == {"name": "token_embd.weight", "type": "Q8_0", "shape": [64, 3],
                                     "offset": summary["tensors"][0]["offset"], "nbytes": 204}
    assert [t["name"] for t in summary["tensors"]] == [s.name for s in default_tensors()]
    assert [t["nbytes"] for t in summary["tensors"]] == [len(s.data) for s in default_tensors()]


def test_text_abbreviates_and_escapes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    metadata = {"long": (list(range(1000)), VT.ARRAY, VT.INT32), "eps": (1e-5, VT.FLOAT32, None),
                "raw": (b"ab\xff", VT.STRING, None), "template": ("x" * 500, VT.STRING, None)}
    path = write_gguf(tmp_path / "m.gguf", metadata=metadata)
    lines = _run(capsys, path, as_json=False, tensors=True).splitlines()
    assert lines[0] == str(path)
    assert lines[1].startswith("GGUF v3, alignment 32, 5 metadata keys, 6 tensors, 535 parameters")
    # Not a runnable model: the summary says what it can, the plan why it cannot run.
    assert lines[3].split() == ["model", "m", "(llama)"]  # its file name, without .gguf (model_title)
    assert next(line for line in lines if line.startswith("  cannot: "))
    by_key = {line.split()[0]: line for line in lines if line.startswith("  ") and len(line.split()) > 2}
    assert by_key["long"].split(None, 2)[1:] == ["[int32]", "[0, 1, 2, 3, 4, ...] (1000 items)"]
    assert by_key["eps"].endswith("float32    1e-05")  # the float32 shown as written, not 9.99999974e-06
    assert by_key["raw"].endswith('"ab\\xff"')
    assert by_key["template"].endswith('"' + "x" * 60 + '"... (500 chars)')
    start = lines.index("tensors:") + 1
    table = lines[start:]  # the table comes last
    assert table[0].split() == ["#", "name", "type", "shape", "offset", "bytes"]
    assert table[1].split()[:4] == ["0", "token_embd.weight", "Q8_0", "[64,"]
    assert table[1].split()[-1] == "204"
    assert len(table) == 1 + len(default_tensors())


def test_split_model_lists_shards(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = write_split_gguf(tmp_path / "model.gguf", default_tensors(), tensors_per_shard=2)
    summary = _strict_json(_run(capsys, paths[1], as_json=True))
    assert [t["shard"] for t in summary["tensors"]] == [0, 0, 1, 1, 2, 2]
    text = _run(capsys, paths[0], as_json=False)
    assert text.startswith(f"shard 1: {paths[0]}\nshard 2: {paths[1]}\nshard 3: {paths[2]}\n")
    assert "in 3 shards" in text


def test_plan_names_the_kernels_and_memory_a_real_model_needs(smollm2_path, capsys) -> None:
    summary = _strict_json(_run(capsys, Path(smollm2_path), as_json=True))
    plan = summary["plan"]
    assert plan["kernels"] == ["q4_1/gguf", "q8_0/gguf"]
    assert plan["weights"] == sum(t["nbytes"] for t in summary["tensors"])
    assert plan["kv_cache"] == 30 * 2 * 2048 * 3 * 64 * 4
    assert plan["total"] == plan["weights"] + plan["kv_cache"] + plan["activations"]
    lines = _run(capsys, Path(smollm2_path), as_json=False).splitlines()
    # The summary and the plan come first; the metadata after them; the tensor table only with --tensors.
    summary = {line.split(None, 1)[0]: line.split(None, 1)[1] for line in lines[3:7]}
    assert summary["model"] == "SmolLM2 135M Instruct (llama, 135M)"  # the catalogue's title (model_title)
    assert summary["tensor"] == "types   Q4_1 ×210 (63.3 MiB), Q8_0 ×1 (28.7 MiB), F32 ×61 (0.1 MiB)"
    assert summary["context"] == "8192 tokens trained; runs with 2048 unless --ctx says otherwise"
    assert lines[7] == "  chat template  tokenizer.chat_template from the model file"
    run = lines.index("to run (a GPU with WebGPU's default limits, 2048-token context):")
    assert run < lines.index("metadata:")
    mib = {k: f"{plan[k] / 2**20:.1f} MiB" for k in ("total", "weights", "kv_cache", "activations")}
    assert lines[run + 1] == (f"  {mib['total']} of GPU memory: weights {mib['weights']}, KV cache {mib['kv_cache']} "
                              f"(f32, 2048 positions), activations {mib['activations']} (64 tokens a step)")
    assert lines[run + 2] == "  matmul kernels (type/layout): q4_1/gguf, q8_0/gguf"
    assert lines[-1] == "tensors: 272 (--tensors lists them)" and len(lines) < 60
    table = _run(capsys, Path(smollm2_path), as_json=False, tensors=True).splitlines()
    assert table[:len(lines) - 1] == lines[:-1] and len(table) == len(lines) + 1 + 272
