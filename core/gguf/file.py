"""A GGUF model as one object: metadata, tensor index and lazy access to tensor bytes, over one file or a set of
shards written by llama.cpp's gguf-split (`name-00001-of-00003.gguf` ...).

Opening reads headers only; `tensor_bytes` reads a tensor when asked. Header parsing and validation of a single
file live in `gguf_header`; this module adds shard discovery and the public object.
"""
from __future__ import annotations

import dataclasses
import os
import re
import urllib.parse
from collections.abc import Callable
from types import TracebackType

from ..errors import GGUFError, SourceError
from .header import GGUFHeader, GGUFValueType, MetadataType, TensorInfo, read_header
from .sources import Source, is_url, open_source

__all__ = ["GGUFFile", "GGUFValueType", "TensorInfo", "open_gguf", "shard_name", "shard_number"]

# Keys gguf-split writes into every shard. split.no counts from 0; the file names count from 1.
SPLIT_NO = "split.no"
SPLIT_COUNT = "split.count"
SPLIT_TENSORS_COUNT = "split.tensors.count"

_SHARD_NAME = re.compile(r"^(?P<prefix>.*)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")


class GGUFFile:
    """A parsed model. It owns its sources: `close()` closes them all."""

    def __init__(self, *, name: str, version: int, metadata: dict[str, object],
                 metadata_types: dict[str, MetadataType], tensors: dict[str, TensorInfo], alignment: int,
                 sources: list[Source]) -> None:
        self.name = name
        self.version = version
        self.metadata = metadata
        self.metadata_types = metadata_types  # (type,) or (ARRAY, item type) per key, as stored in the file
        self.tensors = tensors  # in file order, shard after shard
        self.alignment = alignment
        self.sources = sources

    @property
    def architecture(self) -> str:
        arch = self.metadata.get("general.architecture")
        if not isinstance(arch, str):
            raise GGUFError(f"{self.name}: general.architecture is missing or not a string")
        return arch

    def tensor_bytes(self, name: str) -> bytes | memoryview:
        """The raw bytes of one tensor, exactly as stored (quantized blocks included)."""
        info = self.tensors.get(name)
        if info is None:
            raise GGUFError(f"{self.name}: no tensor named {name!r}")
        return self.sources[info.shard].read(info.offset, info.nbytes)

    def close(self) -> None:
        for source in self.sources:
            source.close()

    def __enter__(self) -> GGUFFile:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"GGUFFile({self.name!r}, version={self.version}, {len(self.metadata)} keys, "
                f"{len(self.tensors)} tensors, {len(self.sources)} file(s))")


def shard_name(name: str, index: int, count: int) -> str | None:
    """The name of shard `index` (0-based) of a set that `name` belongs to, or None if `name` is not a shard
    name. Works on paths and on URLs (the query string, if any, is kept)."""
    url = urllib.parse.urlsplit(name) if is_url(name) else None
    path = url.path if url else name
    match = _SHARD_NAME.match(path)
    if match is None:
        return None
    path = f"{match['prefix']}-{index + 1:05d}-of-{count:05d}.gguf"
    return urllib.parse.urlunsplit(url._replace(path=path)) if url else path


def shard_number(name: str) -> tuple[int, int] | None:
    """(1-based shard number, shard count) as written in a shard's name (a path or URL); None for other names."""
    path = urllib.parse.urlsplit(name).path if is_url(name) else name
    match = _SHARD_NAME.match(path)
    return (int(match["no"]), int(match["count"])) if match else None


def _split_key(header: GGUFHeader, key: str) -> int | None:
    value = header.metadata.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise GGUFError(f"{header.name}: {key} must be a non-negative integer, not {value!r}")
    return value


def _split_position(header: GGUFHeader) -> tuple[int, int, int | None] | None:
    """(split.no, split.count, split.tensors.count) for a shard of a multi-file model, None for a lone file."""
    count = _split_key(header, SPLIT_COUNT)
    if count is None or count == 1:
        return None
    no = _split_key(header, SPLIT_NO)
    if count == 0 or no is None or no >= count:
        raise GGUFError(f"{header.name}: inconsistent split metadata: {SPLIT_NO}={no}, {SPLIT_COUNT}={count}")
    return no, count, _split_key(header, SPLIT_TENSORS_COUNT)


def _check_shard(header: GGUFHeader, index: int, count: int, total: int | None) -> None:
    position = _split_position(header)
    if position != (index, count, total):
        found = "no split metadata" if position is None else (
            f"{SPLIT_NO}={position[0]}, {SPLIT_COUNT}={position[1]}, {SPLIT_TENSORS_COUNT}={position[2]}")
        raise GGUFError(f"{header.name}: expected shard {index + 1} of {count} ({SPLIT_NO}={index}, "
                        f"{SPLIT_COUNT}={count}, {SPLIT_TENSORS_COUNT}={total}), found {found}")


def _merge_shards(headers: list[GGUFHeader], sources: list[Source], total: int | None) -> GGUFFile:
    """One model from its shards: the metadata of the first, the tensors of all, each pointing at its shard."""
    tensors: dict[str, TensorInfo] = {}
    home: dict[str, str] = {}
    for index, header in enumerate(headers):
        for name, info in header.tensors.items():
            if name in tensors:
                raise GGUFError(f"{headers[0].name}: tensor {name!r} appears in both {home[name]} "
                                f"and {header.name}")
            tensors[name] = dataclasses.replace(info, shard=index)
            home[name] = header.name
    if total is not None and len(tensors) != total:
        raise GGUFError(f"{headers[0].name}: the shards hold {len(tensors)} tensors, "
                        f"but {SPLIT_TENSORS_COUNT} says {total}")
    first = headers[0]
    return GGUFFile(name=first.name, version=first.version, metadata=first.metadata,
                    metadata_types=first.metadata_types, tensors=tensors, alignment=first.alignment,
                    sources=sources)


def open_gguf(target: str | os.PathLike[str] | Source, *,
              opener: Callable[[str], Source] = open_source) -> GGUFFile:
    """Open a GGUF model from a path, a URL or a Source, reading headers only.

    If the file is one shard of a split model, the other shards are opened next to it (same directory or same
    URL prefix) with `opener`, and the result presents the whole model. The returned file owns every source,
    including one passed in; on failure all of them are closed.
    """
    first = target if isinstance(target, Source) else opener(os.fspath(target))
    opened = [first]
    try:
        header = read_header(first)
        position = _split_position(header)
        if position is None:
            return _merge_shards([header], [first], None)
        no, count, total = position
        in_name = shard_number(first.name)
        if in_name != (no + 1, count):
            raise GGUFError(
                f"{first.name}: is shard {no + 1} of {count} of a split model, but its name does not end in "
                f"-{no + 1:05d}-of-{count:05d}.gguf, so the other shards cannot be found")
        headers: list[GGUFHeader] = []
        sources: list[Source] = []
        for index in range(count):
            if index == no:
                headers.append(header)
                sources.append(first)
                continue
            path = shard_name(first.name, index, count)
            if path is None:  # the name matched the shard pattern above, so this cannot happen
                raise GGUFError(f"{first.name}: cannot name shard {index + 1} of {count}")
            try:
                source = opener(path)
            except SourceError as e:
                raise SourceError(f"{first.name}: shard {index + 1} of {count} is missing or unreadable: "
                                  f"{e}") from None
            opened.append(source)
            shard_header = read_header(source)
            _check_shard(shard_header, index, count, total)
            headers.append(shard_header)
            sources.append(source)
        return _merge_shards(headers, sources, total)
    except BaseException:
        for source in opened:
            source.close()
        raise
