"""Parse and validate the header of one GGUF file: metadata, tensor index, data offset. Never tensor data.

Layout (little-endian): magic "GGUF", u32 version, u64 tensor count, u64 metadata count, the metadata entries
(string key, u32 value type, value), the tensor infos (string name, u32 n_dims, u64 dims[n_dims] with the
contiguous dimension first, u32 GGML type, u64 offset relative to the data section), padding up to the alignment,
then the data section. Strings are a u64 byte length followed by that many bytes.

Everything here treats the file as hostile: every count and length is checked against the bytes actually left in
the file before it drives a loop or an allocation, and every problem becomes a `GGUFError` naming the file.
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from enum import IntEnum
from itertools import pairwise
from typing import Any, NoReturn

from ..errors import GGUFError
from .types import BLOCK_LAYOUT, GGMLType
from .sources import Source

GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)  # v3 only added big-endian files; for little-endian files the layouts are identical
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_ARRAY_DEPTH = 8  # nested arrays deeper than this are corrupt in practice, and would exhaust the stack
HEADER_CHUNK = 1 << 20  # the header is read in windows of this size; tensor data is never requested
# Caps on counts and string lengths that are within the file but beyond any real model (the largest vocabularies
# hold ~260k tokens, the largest strings are tokenizer JSON of tens of MB). Checking against the bytes left is not
# enough on its own: in a 40 GB file a corrupt count could still make us read gigabytes into Python objects.
MAX_COUNT = 1 << 24
MAX_STRING_BYTES = 1 << 28
INT64_MAX = (1 << 63) - 1  # GGML stores dims and offsets as int64: larger u64 values are negative there


class GGUFValueType(IntEnum):
    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    UINT32 = 4
    INT32 = 5
    FLOAT32 = 6
    BOOL = 7
    STRING = 8
    ARRAY = 9
    UINT64 = 10
    INT64 = 11
    FLOAT64 = 12


# struct format characters of the fixed-size value types ('?' maps any non-zero byte to True)
_FORMAT = {
    GGUFValueType.UINT8: "B", GGUFValueType.INT8: "b", GGUFValueType.UINT16: "H", GGUFValueType.INT16: "h",
    GGUFValueType.UINT32: "I", GGUFValueType.INT32: "i", GGUFValueType.FLOAT32: "f", GGUFValueType.BOOL: "?",
    GGUFValueType.UINT64: "Q", GGUFValueType.INT64: "q", GGUFValueType.FLOAT64: "d",
}
_SCALAR = {t: struct.Struct("<" + c) for t, c in _FORMAT.items()}
_INTEGER_TYPES = frozenset(t for t, c in _FORMAT.items() if c in "BbHhIiQq")
_U32 = _SCALAR[GGUFValueType.UINT32]
_U64 = _SCALAR[GGUFValueType.UINT64]

# Smallest possible encodings, used to bound counts by the bytes left in the file.
_MIN_STRING = 8  # the length alone
_MIN_ARRAY = 4 + 8  # item type + count
_MIN_ITEM = {**{t: s.size for t, s in _SCALAR.items()},
             GGUFValueType.STRING: _MIN_STRING, GGUFValueType.ARRAY: _MIN_ARRAY}
_MIN_KV = _MIN_STRING + 4 + 1  # key, value type, one-byte value
_MIN_TENSOR_INFO = _MIN_STRING + 4 + 8 + 4 + 8  # name, n_dims, one dim, type, offset

# A tensor info as stored: (name, type, shape, offset relative to the data section, nbytes).
_RawTensor = tuple[str, GGMLType, tuple[int, ...], int, int]

# Type of a metadata value: (scalar type,) or (ARRAY, item type); nested arrays are (ARRAY, ARRAY).
MetadataType = tuple[GGUFValueType, ...]


@dataclass(frozen=True)
class TensorInfo:
    """Where one tensor lives and what it is; `shape` is in GGUF order (shape[0] is the contiguous row)."""

    name: str
    type: GGMLType
    shape: tuple[int, ...]
    offset: int  # absolute byte offset in its shard
    nbytes: int
    shard: int = 0  # index into GGUFFile.sources

    @property
    def n_elements(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class GGUFHeader:
    """Everything the header of one file says, validated against the file's size."""

    name: str
    version: int
    metadata: dict[str, object]
    metadata_types: dict[str, MetadataType]
    tensors: dict[str, TensorInfo]
    alignment: int
    data_offset: int


class _Reader:
    """Sequential reader over a Source that fetches the file in windows, so that parsing a header of many small
    fields costs a few reads (and, over HTTP, a few requests) rather than one per field."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.size = source.size
        self.pos = 0
        self.context = "the file header"  # what is being parsed, for error messages
        self._buf: bytes | memoryview = b""
        self._buf_start = 0

    def fail(self, problem: str) -> NoReturn:
        raise GGUFError(f"{self.source.name}: {problem}")

    def remaining(self) -> int:
        return self.size - self.pos

    def window(self, n: int) -> tuple[bytes | memoryview, int]:
        """Make the next n bytes addressable without consuming them: returns (buffer, index of pos in it)."""
        local = self.pos - self._buf_start
        if local + n <= len(self._buf):
            return self._buf, local
        if n > self.size - self.pos:
            self.fail(f"truncated file: {self.context} needs {n} bytes at offset {self.pos}, "
                      f"but the file ends at {self.size}")
        self._buf = b""  # drop the old window before mapping the next one
        self._buf = self.source.read(self.pos, min(max(n, HEADER_CHUNK), self.size - self.pos))
        self._buf_start = self.pos
        return self._buf, 0

    def scalar(self, fmt: struct.Struct) -> object:
        buf, local = self.window(fmt.size)
        self.pos += fmt.size
        return fmt.unpack_from(buf, local)[0]

    def u32(self) -> int:
        buf, local = self.window(4)
        self.pos += 4
        value: int = _U32.unpack_from(buf, local)[0]
        return value

    def u64(self) -> int:
        buf, local = self.window(8)
        self.pos += 8
        value: int = _U64.unpack_from(buf, local)[0]
        return value

    def raw(self, n: int) -> bytes | memoryview:
        buf, local = self.window(n)
        self.pos += n
        return buf[local:local + n]

    def string_length(self) -> int:
        n = self.u64()
        if n > self.remaining():
            self.fail(f"{self.context}: a string claims {n} bytes at offset {self.pos - 8}, "
                      f"but only {self.remaining()} bytes remain in the file")
        if n > MAX_STRING_BYTES:
            self.fail(f"{self.context}: a string of {n} bytes at offset {self.pos - 8} exceeds the limit of "
                      f"{MAX_STRING_BYTES} (no real model comes close)")
        return n

    def string_bytes(self) -> bytes | memoryview:
        return self.raw(self.string_length())

    def identifier(self, what: str) -> str:
        """Keys and tensor names are looked up by code, so bytes that are not UTF-8 mean a corrupt file."""
        raw = self.string_bytes()
        try:
            return str(raw, "utf-8")
        except UnicodeDecodeError:
            self.fail(f"{what} is not valid UTF-8: {bytes(raw[:60])!r}")

    def count(self, what: str, min_item_size: int) -> int:
        """A u64 count of items that each take at least `min_item_size` bytes, checked against the file."""
        n = self.u64()
        if n * min_item_size > self.remaining():
            self.fail(f"{self.context}: {what} count {n} cannot fit in the {self.remaining()} bytes "
                      f"left in the file after offset {self.pos}")
        if n > MAX_COUNT:
            self.fail(f"{self.context}: {what} count {n} exceeds the limit of {MAX_COUNT} (no real model "
                      f"comes close)")
        return n

    def value_type(self) -> GGUFValueType:
        code = self.u32()
        try:
            return GGUFValueType(code)
        except ValueError:
            self.fail(f"{self.context}: unknown metadata value type {code} at offset {self.pos - 4}")


# Metadata strings are kept even when they are not UTF-8: token pieces of some vocabularies are raw bytes.
# 'surrogateescape' maps each invalid byte to a lone surrogate, so s.encode("utf-8", "surrogateescape") gives
# back exactly the bytes in the file, and valid text is unaffected. (Keys and tensor names are strict instead.)
def _decode_text(raw: bytes | memoryview) -> str:
    return str(raw, "utf-8", "surrogateescape")


def _read_strings(r: _Reader, count: int) -> list[str]:
    # The hot loop for vocabularies (tens of thousands of tokens and merges). It walks a bytes copy of the
    # current window without helper calls (bytes slicing and decoding beat memoryview ones by about 2x) and
    # only goes back to the reader when a string crosses the end of the window.
    out: list[str] = []
    append = out.append
    unpack_length = _U64.unpack_from
    data = b""  # bytes of the file from offset `base` on
    base = r.pos
    local = 0
    for _ in range(count):
        if local + _MIN_STRING <= len(data):
            n = unpack_length(data, local)[0]
            end = local + _MIN_STRING + n
            if end <= len(data):
                append(data[local + _MIN_STRING:end].decode("utf-8", "surrogateescape"))
                local = end
                continue
        r.pos = base + local
        n = r.string_length()
        buf, start = r.window(n)
        data = bytes(buf[start:])
        base = r.pos
        local = n
        append(data[:n].decode("utf-8", "surrogateescape"))
    r.pos = base + local
    return out


def _read_array(r: _Reader, depth: int) -> tuple[list[Any], GGUFValueType]:
    item_type = r.value_type()
    count = r.count("array", _MIN_ITEM[item_type])
    fmt = _FORMAT.get(item_type)
    if fmt is not None:  # fixed-size numbers: one struct call for the whole array
        nbytes = count * _SCALAR[item_type].size
        buf, local = r.window(nbytes)
        r.pos += nbytes
        return list(struct.unpack_from(f"<{count}{fmt}", buf, local)), item_type
    if item_type == GGUFValueType.STRING:
        return _read_strings(r, count), item_type
    if depth >= MAX_ARRAY_DEPTH:
        r.fail(f"{r.context}: arrays nested more than {MAX_ARRAY_DEPTH} deep")
    return [_read_array(r, depth + 1)[0] for _ in range(count)], item_type


def _read_value(r: _Reader, value_type: GGUFValueType) -> tuple[object, MetadataType]:
    if value_type == GGUFValueType.STRING:
        return _decode_text(r.string_bytes()), (value_type,)
    if value_type == GGUFValueType.ARRAY:
        values, item_type = _read_array(r, 1)
        return values, (value_type, item_type)
    return r.scalar(_SCALAR[value_type]), (value_type,)


def _read_metadata(r: _Reader, count: int) -> tuple[dict[str, object], dict[str, MetadataType]]:
    metadata: dict[str, object] = {}
    types: dict[str, MetadataType] = {}
    for i in range(count):
        r.context = f"metadata entry #{i}"
        key = r.identifier(f"the key of metadata entry #{i}")
        if key in metadata:
            r.fail(f"duplicate metadata key {key!r}")
        r.context = f"metadata {key!r}"
        metadata[key], types[key] = _read_value(r, r.value_type())
    return metadata, types


def _check_version(r: _Reader, version: int) -> None:
    if version in SUPPORTED_VERSIONS:
        return
    if version == 1:
        r.fail("GGUF version 1 is not supported (a 2023 format that stored counts as 32-bit); "
               "convert the model again with a current llama.cpp")
    if int.from_bytes(version.to_bytes(4, "little"), "big") in (1, 2, 3):
        r.fail("this is a big-endian GGUF file; only little-endian files are supported")
    r.fail(f"unsupported GGUF version {version} (supported: 2 and 3)")


def _alignment(r: _Reader, metadata: dict[str, object], types: dict[str, MetadataType]) -> int:
    if "general.alignment" not in metadata:
        return DEFAULT_ALIGNMENT
    value = metadata["general.alignment"]
    if types["general.alignment"][0] not in _INTEGER_TYPES:
        r.fail(f"general.alignment must be an integer, not {types['general.alignment'][0].name}")
    if not isinstance(value, int):
        r.fail(f"general.alignment must be an integer, not {value!r}")
    if value <= 0 or value & (value - 1):
        r.fail(f"general.alignment must be a non-zero power of two, not {value}")
    return value


def _read_tensor_info(r: _Reader, index: int, alignment: int) -> _RawTensor:
    r.context = f"tensor info #{index}"
    name = r.identifier(f"the name of tensor #{index}")
    r.context = f"tensor {name!r}"
    n_dims = r.u32()
    if not 1 <= n_dims <= MAX_DIMS:
        r.fail(f"tensor {name!r} has {n_dims} dimensions (must be 1 to {MAX_DIMS})")
    buf, local = r.window(8 * n_dims)
    shape = struct.unpack_from(f"<{n_dims}Q", buf, local)
    r.pos += 8 * n_dims
    if 0 in shape:
        r.fail(f"tensor {name!r} has a zero dimension: shape {list(shape)}")
    if max(shape) > INT64_MAX:
        signed = [d - (1 << 64) if d > INT64_MAX else d for d in shape]
        r.fail(f"tensor {name!r} has a negative dimension: shape {signed}")
    type_id = r.u32()
    try:
        ggml_type = GGMLType(type_id)
        block_elems, block_bytes = BLOCK_LAYOUT[ggml_type]
    except (ValueError, KeyError):
        r.fail(f"tensor {name!r} has unknown tensor type {type_id}")
    if shape[0] % block_elems:
        r.fail(f"tensor {name!r} of type {ggml_type.name} has rows of {shape[0]} elements, "
               f"not a multiple of its block size {block_elems}")
    n_elements = math.prod(shape)
    if n_elements > INT64_MAX:
        r.fail(f"tensor {name!r} has {n_elements} elements, more than a 64-bit count allows")
    offset = r.u64()
    if offset % alignment:
        r.fail(f"tensor {name!r} starts at data offset {offset}, which is not a multiple of the "
               f"alignment {alignment}")
    return name, ggml_type, shape, offset, n_elements // block_elems * block_bytes


def _read_tensor_infos(r: _Reader, count: int, alignment: int) -> list[_RawTensor]:
    infos: list[_RawTensor] = []
    names: set[str] = set()
    for i in range(count):
        info = _read_tensor_info(r, i, alignment)
        if info[0] in names:
            r.fail(f"duplicate tensor name {info[0]!r}")
        names.add(info[0])
        infos.append(info)
    return infos


def _place_tensors(r: _Reader, infos: list[_RawTensor], data_offset: int) -> dict[str, TensorInfo]:
    """Turn data-section offsets into file offsets, checking that each tensor is inside the file and alone."""
    tensors = {}
    for name, ggml_type, shape, offset, nbytes in infos:
        start = data_offset + offset
        if start + nbytes > r.size:
            r.fail(f"tensor {name!r} needs bytes {start} to {start + nbytes} but the file has only {r.size} "
                   f"bytes (truncated download?)")
        tensors[name] = TensorInfo(name, ggml_type, shape, start, nbytes)
    by_offset = sorted(tensors.values(), key=lambda t: t.offset)
    for before, after in pairwise(by_offset):
        if before.offset + before.nbytes > after.offset:
            r.fail(f"tensors {before.name!r} (bytes {before.offset} to {before.offset + before.nbytes}) and "
                   f"{after.name!r} (from byte {after.offset}) overlap")
    return tensors


def read_header(source: Source) -> GGUFHeader:
    """Parse and validate the header of one GGUF file; reads nothing past the tensor infos but a read window."""
    r = _Reader(source)
    if source.size < len(GGUF_MAGIC):
        r.fail(f"not a GGUF file: it is only {source.size} bytes long")
    magic = bytes(r.raw(len(GGUF_MAGIC)))
    if magic != GGUF_MAGIC:
        r.fail(f"not a GGUF file: it starts with {magic!r}, not {GGUF_MAGIC!r}")
    version = r.u32()
    _check_version(r, version)
    n_tensors = r.count("tensor", _MIN_TENSOR_INFO)
    n_kv = r.count("metadata entry", _MIN_KV)
    metadata, types = _read_metadata(r, n_kv)
    alignment = _alignment(r, metadata, types)
    infos = _read_tensor_infos(r, n_tensors, alignment)
    data_offset = -(-r.pos // alignment) * alignment  # the data section starts at the next aligned byte
    tensors = _place_tensors(r, infos, data_offset)
    return GGUFHeader(source.name, version, metadata, types, tensors, alignment, data_offset)
