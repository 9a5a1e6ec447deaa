"""The cpu engine's parts that need no llama.cpp: the candidates it gives the sampler, against a full sort; and
`make demo`'s step that installs it where `auto` would run it (tools/build/cpu_engine.py), over stand-in adapters."""
from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import numpy as np
import pytest

from llmchat.errors import NoAdapterError
from llmchat.gpu.device import AdapterInfo
from llmchat.runtime.cpu_engine import top_candidates

TOOL = Path(__file__).resolve().parents[2] / "tools" / "build" / "cpu_engine.py"


@pytest.mark.parametrize("vocab", [1, 7, 1000, 262144])
def test_candidates_are_the_largest_logits_highest_first_ties_by_lower_id(vocab):
    rng = np.random.default_rng(vocab)
    row = rng.integers(-50, 50, vocab).astype(np.float32) / 8  # many ties
    order = sorted(range(vocab), key=lambda i: (-row[i], i))
    for k in (1, 2, 5, 40, vocab + 3):
        top = top_candidates(row, k)
        n = min(k, vocab)
        assert list(top.indices) == order[:n] and list(top.values) == [float(row[i]) for i in order[:n]]
        assert top.max == float(row.max())
        assert top.sum_exp == pytest.approx(float(np.exp(row.astype(np.float64) - row.max()).sum()), rel=1e-5)


@pytest.fixture
def tool(monkeypatch):
    spec = importlib.util.spec_from_file_location("cpu_engine_tool", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.delenv("LLMCHAT_ENGINE", raising=False)
    monkeypatch.setattr(module, "cpu_engine_installed", lambda: False)
    runs = []
    monkeypatch.setattr(module.subprocess, "run", lambda args, env: runs.append((args, env)) or
                        subprocess.CompletedProcess(args, 0))
    module.runs = runs
    return module


class Adapter:
    def __init__(self, software: bool) -> None:
        self.info = AdapterInfo(name="llvmpipe (LLVM 15.0.6, 256 bits)" if software else "NVIDIA H100",
                                backend="vulkan", software=software)

    def close(self) -> None:
        pass


def test_the_demo_installs_the_cpu_engine_where_the_only_adapter_emulates_a_gpu(tool, monkeypatch, capsys):
    monkeypatch.setattr(tool, "open_device", lambda: Adapter(software=True))
    assert tool.main() == 0
    (args, env), = tool.runs
    assert args[1:4] == ["-m", "pip", "install"] and args[-1].endswith("[cpu]")
    assert env["CMAKE_ARGS"] == tool.cmake_args()
    assert "emulates a GPU: installing the cpu engine" in capsys.readouterr().err


def test_the_demo_installs_nothing_on_a_hardware_gpu_or_when_webgpu_is_asked_for(tool, monkeypatch):
    monkeypatch.setattr(tool, "open_device", lambda: Adapter(software=False))
    assert tool.main() == 0 and tool.runs == []
    monkeypatch.setenv("LLMCHAT_ENGINE", "webgpu")
    monkeypatch.setattr(tool, "open_device", lambda: Adapter(software=True))
    assert tool.main() == 0 and tool.runs == []


def test_without_any_adapter_the_demo_installs_it_too(tool, monkeypatch, capsys):
    def none():
        raise NoAdapterError("no adapter")
    monkeypatch.setattr(tool, "open_device", none)
    assert tool.main() == 0 and len(tool.runs) == 1
    assert "there is no WebGPU adapter: installing the cpu engine" in capsys.readouterr().err
