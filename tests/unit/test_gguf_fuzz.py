"""Property-based fuzzing of the GGUF parser: whatever the bytes, opening a file and reading its tensors either
works or raises GGUFError / SourceError naming the file. Any other exception, a hang or a huge allocation is a bug.

Two generators: mutations of a small valid file (byte flips, truncations, insertions, deletions, and overwrites
of 4- or 8-byte fields with boundary values, which is where counts and lengths live), and headers assembled from
random parts with random counts, lengths, types and shapes.
"""
from __future__ import annotations

import struct
import tempfile
from pathlib import Path

from gguf_factory import (
    TensorSpec,
    array_payload,
    gguf_string,
    kv,
    raw_gguf,
    tensor_info,
    write_gguf,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmchat.errors import GGUFError, SourceError
from llmchat.gguf.types import GGMLType
from llmchat.gguf.file import GGUFValueType as VT
from llmchat.gguf.file import open_gguf
from llmchat.gguf.sources import BytesSource

NAME = "fuzz.gguf"
FUZZ = settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


def _base_file() -> bytes:
    """A small valid file with every kind of metadata value and a few tensors, about 1.5 KB."""
    metadata = {
        "general.alignment": (32, VT.UINT32, None),
        "a.u8": (7, VT.UINT8, None), "a.i64": (-5, VT.INT64, None), "a.f32": (0.5, VT.FLOAT32, None),
        "a.f64": (2.5, VT.FLOAT64, None), "a.bool": (True, VT.BOOL, None), "a.str": ("héllo", VT.STRING, None),
        "a.ints": ([1, 2, 3], VT.ARRAY, VT.INT32), "a.strs": (["x", "yz", ""], VT.ARRAY, VT.STRING),
        "a.nested": ([[1, 2], [3]], VT.ARRAY, VT.ARRAY),
    }
    tensors = [TensorSpec.random("t.q8", GGMLType.Q8_0, (32, 2), seed=1),
               TensorSpec.random("t.f32", GGMLType.F32, (3, 2), seed=2),
               TensorSpec.random("t.f16", GGMLType.F16, (4,), seed=3)]
    with tempfile.TemporaryDirectory() as d:
        return write_gguf(Path(d) / "base.gguf", metadata=metadata, tensors=tensors).read_bytes()


BASE = _base_file()


def _open_and_read_everything(data: bytes) -> None:
    try:
        with open_gguf(BytesSource(data, name=NAME)) as f:
            for name in f.tensors:
                assert len(f.tensor_bytes(name)) == f.tensors[name].nbytes
    except (GGUFError, SourceError) as e:
        assert str(e).startswith(f"{NAME}: "), str(e)


def test_base_file_is_valid() -> None:
    with open_gguf(BytesSource(BASE)) as f:
        assert len(f.tensors) == 3 and f.metadata["a.nested"] == [[1, 2], [3]]


# ---- mutations of a valid file ----

BOUNDARY = st.sampled_from([0, 1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 31, 32, 33, 255, 256, 2**16 - 1, 2**31 - 1, 2**31,
                            2**32 - 1, 2**32, 2**62, 2**63 - 1, 2**63, 2**64 - 1])
POSITION = st.integers(min_value=0, max_value=len(BASE))

MUTATION = st.one_of(
    st.tuples(st.just("byte"), POSITION, st.integers(0, 255)),
    st.tuples(st.just("u32"), POSITION, BOUNDARY.map(lambda v: v & 0xFFFFFFFF)),
    st.tuples(st.just("u64"), POSITION, BOUNDARY),
    st.tuples(st.just("truncate"), POSITION),
    st.tuples(st.just("insert"), POSITION, st.binary(min_size=1, max_size=16)),
    st.tuples(st.just("delete"), POSITION, st.integers(1, 16)),
)


def _mutate(data: bytes, mutations: list[tuple]) -> bytes:
    buf = bytearray(data)
    for op, pos, *arg in mutations:
        pos = min(pos, len(buf))
        if op == "byte" and pos < len(buf):
            buf[pos] = arg[0]
        elif op in ("u32", "u64"):
            packed = struct.pack("<I" if op == "u32" else "<Q", arg[0])
            buf[pos:pos + len(packed)] = packed[:max(0, len(buf) - pos)]
        elif op == "truncate":
            del buf[pos:]
        elif op == "insert":
            buf[pos:pos] = arg[0]
        elif op == "delete":
            del buf[pos:pos + arg[0]]
    return bytes(buf)


@FUZZ
@given(st.lists(MUTATION, min_size=1, max_size=4))
def test_mutated_files_open_or_raise_gguf_errors(mutations: list[tuple]) -> None:
    _open_and_read_everything(_mutate(BASE, mutations))


# ---- headers assembled from random parts ----

COUNT = st.one_of(st.integers(0, 4), BOUNDARY)
VALID_TYPE = st.integers(0, 12)
TYPE_CODE = st.one_of(VALID_TYPE, VALID_TYPE, VALID_TYPE, VALID_TYPE, st.integers(13, 2**32 - 1))  # mostly valid
SCALAR_SIZE = {VT.UINT8: 1, VT.INT8: 1, VT.BOOL: 1, VT.UINT16: 2, VT.INT16: 2, VT.UINT32: 4, VT.INT32: 4,
               VT.FLOAT32: 4, VT.UINT64: 8, VT.INT64: 8, VT.FLOAT64: 8}
TEXT = st.text(max_size=6).map(str.encode)
KEY = st.one_of(st.sampled_from(["general.alignment", "split.count", "split.no", "split.tensors.count", "k"]),
                TEXT, TEXT, st.binary(max_size=6))


@st.composite
def _value(draw: st.DrawFn, depth: int = 0) -> tuple[int, bytes]:
    """(value type code, encoded value), sometimes inconsistent with each other on purpose."""
    vtype = draw(TYPE_CODE)
    if vtype == VT.STRING:
        return vtype, draw(st.one_of(st.binary(max_size=12).map(gguf_string),
                                     st.tuples(COUNT, st.binary(max_size=8)).map(
                                         lambda t: struct.pack("<Q", t[0]) + t[1])))
    if vtype == VT.ARRAY and depth < 3:
        item_type, item = draw(_value(depth + 1))
        items = item * draw(st.integers(0, 3))
        return vtype, array_payload(item_type, draw(COUNT), items)
    size = SCALAR_SIZE.get(vtype)
    if size is not None and draw(st.booleans()):
        return vtype, draw(st.binary(min_size=size, max_size=size))
    return vtype, draw(st.binary(max_size=9))


@st.composite
def _kv(draw: st.DrawFn) -> bytes:
    vtype, payload = draw(_value())
    return kv(draw(KEY), vtype, payload)


@st.composite
def _tensor_info(draw: st.DrawFn) -> bytes:
    # Mostly plausible (row lengths that are multiples of 32, aligned offsets) so that the later checks and the
    # tensor reads get exercised, not only the first check that a random value fails.
    dim = st.one_of(st.integers(1, 4).map(lambda i: 32 * i), st.integers(1, 64), BOUNDARY)
    shape = draw(st.lists(dim, min_size=0, max_size=5))
    ggml_type = draw(st.one_of(st.sampled_from([int(t) for t in GGMLType]), st.integers(0, 2**32 - 1)))
    offset = draw(st.one_of(st.integers(0, 8).map(lambda i: 32 * i), BOUNDARY))
    return tensor_info(draw(st.one_of(TEXT, TEXT, st.binary(max_size=6))), shape, ggml_type, offset)


@st.composite
def _assembled_file(draw: st.DrawFn) -> bytes:
    kvs = draw(st.lists(_kv(), max_size=4))
    infos = draw(st.lists(_tensor_info(), max_size=4))
    # Counts usually match the parts (None); sometimes they lie.
    n_tensors = draw(st.one_of(st.none(), st.none(), st.none(), COUNT))
    n_kv = draw(st.one_of(st.none(), st.none(), st.none(), COUNT))
    version = draw(st.sampled_from([3] * 6 + [2, 2, 1, 4]))
    return raw_gguf(kvs, infos, draw(st.binary(max_size=600)), version=version, n_tensors=n_tensors, n_kv=n_kv)


@FUZZ
@given(_assembled_file())
def test_assembled_headers_open_or_raise_gguf_errors(data: bytes) -> None:
    _open_and_read_everything(data)
