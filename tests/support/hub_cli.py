"""A local Hugging Face hub with real GGUF files, a home of its own for each test, and the real `llmchat` CLI
pointed at both: the fixtures and helpers of the hub tests (tests/unit/test_hub.py) and of the hostile model
references (tests/hostile/test_hostile_references.py). Import the fixtures by name into a test module."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fake_hub import FakeHub
from gguf_factory import default_tensors, write_gguf, write_split_gguf
from model_factory import write_model

# A 24 MiB "model": huggingface_hub resumes from the last chunk it wrote (10 MiB chunks in 2.x), so the cut below
# comes after the first chunk.
BIG = np.random.default_rng(7).integers(0, 256, 24 << 20, dtype=np.uint8).tobytes()
CUT = 12 << 20


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """Real GGUF bytes: a tiny llama this version runs, one of an architecture it does not, a split model."""
    d = tmp_path_factory.mktemp("gguf")
    split = write_split_gguf(d / "split-Q4_K_M.gguf", default_tensors(), tensors_per_shard=2)
    return {
        "tiny-Q8_0.gguf": write_model(d / "q8.gguf").read_bytes(),
        "tiny-Q4_0.gguf": write_model(d / "q4.gguf", qtype=__import__("gguf").GGMLQuantizationType.Q4_0).read_bytes(),
        # an architecture this version does not run, so `list` has a reason to show
        "gemma-Q4_K_M.gguf": write_model(d / "gemma.gguf", arch="llama", label="olmo2").read_bytes(),
        "plain-Q4_K_M.gguf": write_gguf(d / "plain.gguf").read_bytes(),
        **{f"Q4_K_M/{p.name}": p.read_bytes() for p in split},
    }


@pytest.fixture
def hub(files: dict[str, bytes]):
    hub = FakeHub()
    hub.add_repo("org/tiny-GGUF", {"README.md": b"# tiny\n", "tiny-Q8_0.gguf": files["tiny-Q8_0.gguf"],
                                   "tiny-Q4_0.gguf": files["tiny-Q4_0.gguf"]})
    hub.add_repo("org/default-GGUF", {"plain-Q4_K_M.gguf": files["plain-Q4_K_M.gguf"],
                                      "gemma-Q8_0.gguf": files["gemma-Q4_K_M.gguf"]})
    hub.add_repo("org/split-GGUF", {k: v for k, v in files.items() if k.startswith("Q4_K_M/")}
                 | {"split-Q8_0.gguf": files["plain-Q4_K_M.gguf"]})
    hub.add_repo("org/big-GGUF", {"big-Q8_0.gguf": BIG})
    hub.add_repo("org/gated-GGUF", {"gated-Q4_0.gguf": files["tiny-Q4_0.gguf"]}, gated=True)
    yield hub
    hub.close()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path


def env_for(hub: FakeHub | None, home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_HOME=str(home / "hf"), LLMCHAT_HOME=str(home / "llmchat"), HF_HUB_DISABLE_TELEMETRY="1",
               HF_ENDPOINT=hub.url if hub else "http://127.0.0.1:9")
    env.update(extra)
    return env


def llmchat(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The CLI with exactly `env` (cli_util's adds the caller's environment, HF_* variables included)."""
    return subprocess.run([sys.executable, "-m", "llmchat", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def error_line(result: subprocess.CompletedProcess[str]) -> str:
    """The one `llmchat: error:` line of a failed command, among its progress lines (cli_util's allows none)."""
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.strip().splitlines() if line.startswith("llmchat: error: ")]
    assert len(lines) == 1, result.stderr
    return lines[0]
