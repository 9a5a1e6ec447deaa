"""Hugging Face model references: how they are written, which file(s) of a repository they mean, and the URL of one.

    hf://ORG/REPO/FILE.gguf             one file, also in sub/dirs; a revision as hf://ORG/REPO@REV/FILE.gguf or
                                        hf://ORG/REPO/FILE.gguf@REV (default: main)
    ORG/REPO:QUANT                      the repository's GGUF whose name carries QUANT (case-insensitive), the
    hf.co/ORG/REPO[:QUANT]              short form of llama.cpp's `-hf` and of Ollama's `hf.co/` names; without
    huggingface.co/ORG/REPO[:QUANT]     QUANT, Q4_K_M
    hf://ORG/REPO[@REV][:QUANT]

A split model (`NAME-00001-of-00003.gguf` ...) is one model: the short form picks all its shards, and naming any
shard with hf:// means the whole set.

Everything here is pure (standard library, no network), because it runs in three places: natively before
huggingface_hub downloads, inside Pyodide, and — written again in web/hub.js, held to the same cases in
tests/data/hub_references.json — in the browser before Python has started.
"""
from __future__ import annotations

import os
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..errors import ModelNotFoundError
from ..gguf.file import shard_name, shard_number

DEFAULT_ENDPOINT = "https://huggingface.co"
DEFAULT_REVISION = "main"
DEFAULT_QUANT = "Q4_K_M"  # what llama.cpp's -hf and Ollama pick when the reference names none

_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"
_QUANT = r"[A-Za-z0-9][A-Za-z0-9._-]*"
_SHORT = re.compile(rf"(?P<repo>{_NAME}/{_NAME})(?::(?P<quant>{_QUANT}))?")
_HF_URI = re.compile(rf"(?P<repo>{_NAME}/{_NAME})(?:@(?P<rev>[^/:@]+))?(?:/(?P<path>.+)|:(?P<quant>{_QUANT}))?")
_SHORT_PREFIXES = ("hf.co/", "huggingface.co/")
_HF_URI_USAGE = "write hf://ORG/REPO/FILE.gguf (optionally @REVISION) or hf://ORG/REPO:QUANT"


@dataclass(frozen=True)
class HubRef:
    """A model in a Hugging Face repository: an exact file, or a quantization to look for among its files."""

    repo: str
    revision: str = DEFAULT_REVISION
    file: str | None = None  # path inside the repository
    quant: str | None = None  # only without `file`; None means DEFAULT_QUANT

    def __str__(self) -> str:
        at = "" if self.revision == DEFAULT_REVISION else f"@{self.revision}"
        if self.file is not None:
            return f"hf://{self.repo}/{self.file}{at}"
        return f"hf://{self.repo}{at}:{self.quant or DEFAULT_QUANT}"


def parse_reference(text: str) -> HubRef | None:
    """The HubRef that `text` spells, or None when it is not a hub reference at all.

    A text that starts like one (hf://, hf.co/, huggingface.co/) but does not follow the grammar is an error, so a
    typo gets a message rather than "no such file".
    """
    lowered = text.lower()
    if lowered.startswith("hf://"):
        return _parse_hf_uri(text, text[len("hf://"):])
    for prefix in _SHORT_PREFIXES:
        if lowered.startswith(prefix):
            match = _SHORT.fullmatch(text[len(prefix):])
            if match is None:
                raise ModelNotFoundError(f"{text!r} is not a Hugging Face reference: write {prefix}ORG/REPO or "
                                         f"{prefix}ORG/REPO:QUANT (or hf://ORG/REPO/FILE.gguf for one file)")
            return HubRef(match["repo"], quant=match["quant"])
    match = _SHORT.fullmatch(text)
    if match is not None and match["quant"] is not None:
        return HubRef(match["repo"], quant=match["quant"])
    return None


def _parse_hf_uri(text: str, body: str) -> HubRef:
    match = _HF_URI.fullmatch(body)
    if match is None:
        raise ModelNotFoundError(f"{text!r} is not a Hugging Face reference: {_HF_URI_USAGE}")
    revision, path = match["rev"], match["path"]
    if path is not None:
        head, at, tail = path.rpartition("@")
        if at and head.lower().endswith(".gguf"):
            if revision is not None:
                raise ModelNotFoundError(f"{text!r} gives the revision twice: {_HF_URI_USAGE}")
            path, revision = head, tail
        if not path.lower().endswith(".gguf"):
            raise ModelNotFoundError(f"{text!r} does not name a .gguf file: {_HF_URI_USAGE}")
        if any(part in ("", ".", "..") for part in path.split("/")):
            raise ModelNotFoundError(f"{text!r}: {path!r} is not a file path inside the repository")
    revision = urllib.parse.unquote(revision) if revision else DEFAULT_REVISION
    if not revision:
        raise ModelNotFoundError(f"{text!r} has an empty revision: {_HF_URI_USAGE}")
    return HubRef(match["repo"], revision, path, match["quant"])


def hub_endpoint(environ: Mapping[str, str] = os.environ) -> str:
    """The hub to talk to: $HF_ENDPOINT (a mirror, or a test server), as huggingface_hub reads it, else the hub."""
    return (environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def file_url(ref: HubRef, path: str, endpoint: str = DEFAULT_ENDPOINT) -> str:
    """Where one file of the repository is served: `{endpoint}/{repo}/resolve/{revision}/{path}` (it redirects
    to a CDN for large files). The same rule as huggingface_hub's `hf_hub_url`."""
    return (f"{endpoint.rstrip('/')}/{ref.repo}/resolve/{urllib.parse.quote(ref.revision, safe='')}/"
            f"{urllib.parse.quote(path)}")


def listing_url(ref: HubRef, endpoint: str = DEFAULT_ENDPOINT) -> str:
    """The hub API answer that lists the repository's files at the revision (`siblings[].rfilename`)."""
    return f"{endpoint.rstrip('/')}/api/models/{ref.repo}/revision/{urllib.parse.quote(ref.revision, safe='')}"


def named_files(ref: HubRef) -> list[str]:
    """The files an exact reference (`ref.file`) stands for: that file, or every shard of its split set."""
    if ref.file is None:
        raise ModelNotFoundError(f"{ref} names a repository, not a file")
    position = shard_number(ref.file)
    if position is None:
        return [ref.file]
    count = position[1]
    return [name for index in range(count) if (name := shard_name(ref.file, index, count)) is not None]


@dataclass(frozen=True)
class _Model:
    """One model among a repository's files: a single GGUF, or the shards of one split set (in order)."""

    files: tuple[str, ...]
    count: int  # shards the names announce; 1 for a single file

    @property
    def complete(self) -> bool:
        return len(self.files) == self.count

    def describe(self) -> str:
        if self.count == 1:
            return self.files[0]
        return f"{self.files[0]} (+{self.count - 1} more shard{'s' if self.count > 2 else ''})"


def _models(paths: Iterable[str]) -> list[_Model]:
    """The GGUF models among a repository's files; vision projectors (mmproj) are not models of their own."""
    singles: list[_Model] = []
    sets: dict[tuple[str, int], dict[int, str]] = {}
    for path in paths:
        base = path.rsplit("/", 1)[-1]
        if not base.lower().endswith(".gguf") or "mmproj" in base.lower():
            continue
        position = shard_number(path)
        if position is None:
            singles.append(_Model((path,), 1))
        else:
            first = shard_name(path, 0, position[1])
            if first is None:  # shard_number matched, so shard_name does too
                continue
            sets.setdefault((first, position[1]), {})[position[0]] = path
    shards = [_Model(tuple(v[k] for k in sorted(v)), count) for (_, count), v in sets.items()]
    return sorted(singles + shards, key=lambda m: m.files[0].lower())


def _carries(path: str, quant: str) -> bool:
    """Whether `path` names the quantization `quant` as a whole token: Q4_K does not match Q4_K_M, nor Q4_0 IQ4_0."""
    pattern = rf"(?<![A-Za-z0-9]){re.escape(quant)}(?![A-Za-z0-9]|_[A-Za-z0-9])"
    return re.search(pattern, path, flags=re.IGNORECASE) is not None


def choose_files(ref: HubRef, paths: Iterable[str], where: str = "") -> list[str]:
    """The repository file(s) `ref` means, given the repository's file list: one file, or all shards of one split
    model in order. ModelNotFoundError listing the repository's models when it names none, or several.

    `where` says whose list this is in messages (default: the repository on the hub).
    """
    paths = list(paths)
    where = where or f"{ref.repo}" + ("" if ref.revision == DEFAULT_REVISION else f"@{ref.revision}")
    if ref.file is not None:
        wanted = named_files(ref)
        missing = [f for f in wanted if f not in paths]
        if missing:
            raise ModelNotFoundError(f"{where} has no file {missing[0]}{_offer(_models(paths))}")
        return wanted
    models = _models(paths)
    if not models:
        raise ModelNotFoundError(f"{where} has no GGUF files" + (f" (it has {_few(paths)})" if paths else ""))
    quant = ref.quant or DEFAULT_QUANT
    matches = [m for m in models if _carries(m.files[0], quant)]
    if not matches and ref.quant is None and len(models) == 1:
        matches = models  # nothing asked for, and there is only one model to give
    if not matches:
        raise ModelNotFoundError(f"{where} has no GGUF file for quantization {quant}{_offer(models)}")
    if len(matches) > 1:
        raise ModelNotFoundError(
            f"{where}:{quant} matches {len(matches)} models: {'; '.join(m.describe() for m in matches)}; "
            f"name one as hf://{ref.repo}/FILE.gguf")
    model = matches[0]
    if not model.complete:
        raise ModelNotFoundError(f"{where} lists only {len(model.files)} of the {model.count} shards of "
                                 f"{model.files[0]}")
    return list(model.files)


def _offer(models: list[_Model]) -> str:
    if not models:
        return "; it has no GGUF files"
    return (f"; it has: {'; '.join(m.describe() for m in models)}. "
            "Name one as ORG/REPO:QUANT or hf://ORG/REPO/FILE.gguf")


def _few(paths: list[str], limit: int = 5) -> str:
    shown = ", ".join(sorted(paths)[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")
