"""GGUF parsing: round trips through the reference writer, the real model against gguf.GGUFReader, split models,
and a refusal with a clear message for every kind of broken file."""
from __future__ import annotations

import math
import struct
from collections.abc import Callable
from pathlib import Path

import gguf
import pytest
from gguf_factory import (
    EVERY_TYPE_METADATA,
    TensorSpec,
    array_payload,
    default_tensors,
    expected_value,
    f32_tensors,
    gguf_string,
    kv,
    kv_str,
    kv_u32,
    raw_gguf,
    raw_shard,
    tensor_info,
    write_gguf,
    write_split_gguf,
)

from llmchat.errors import GGUFError, SourceError
from llmchat.gguf.types import GGMLType
from llmchat.gguf.file import GGUFValueType as VT
from llmchat.gguf.file import open_gguf, shard_name
from llmchat.gguf.header import HEADER_CHUNK, MAX_COUNT, MAX_STRING_BYTES
from llmchat.gguf.sources import BytesSource, FileSource, Source

# ---- valid files round-trip ----


@pytest.mark.parametrize("version", [2, 3])
def test_every_metadata_type_round_trips(tmp_path: Path, version: int) -> None:
    path = write_gguf(tmp_path / "m.gguf", version=version)
    with open_gguf(path) as f:
        assert f.version == version
        assert f.alignment == 32
        assert f.architecture == "llama"
        assert list(f.metadata) == ["general.architecture", *EVERY_TYPE_METADATA]
        for key, (value, vtype, item_type) in EVERY_TYPE_METADATA.items():
            assert f.metadata[key] == expected_value(value, vtype, item_type), key
            assert type(f.metadata[key]) is type(value), key  # bool stays bool, int stays int
            assert f.metadata_types[key] == ((vtype,) if item_type is None else (vtype, item_type)), key


@pytest.mark.parametrize("version", [2, 3])
def test_tensor_index_and_bytes_round_trip(tmp_path: Path, version: int) -> None:
    specs = default_tensors()
    path = write_gguf(tmp_path / "m.gguf", version=version, tensors=specs)
    with open_gguf(path) as f:
        assert list(f.tensors) == [s.name for s in specs]
        for spec in specs:
            info = f.tensors[spec.name]
            assert (info.name, info.type, info.shape, info.shard) == (spec.name, spec.type, spec.shape, 0)
            assert info.nbytes == len(spec.data)
            assert info.n_elements == math.prod(spec.shape)
            assert info.offset % f.alignment == 0
            assert bytes(f.tensor_bytes(spec.name)) == spec.data


def test_custom_alignment_is_honoured(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "m.gguf", alignment=256, metadata={})
    with open_gguf(path) as f:
        assert f.alignment == 256
        assert all(t.offset % 256 == 0 for t in f.tensors.values())
        for spec in default_tensors():
            assert bytes(f.tensor_bytes(spec.name)) == spec.data


def test_open_accepts_str_path_and_source(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "m.gguf", metadata={})
    for target in (str(path), path, FileSource(path), BytesSource(path.read_bytes(), name="mem.gguf")):
        with open_gguf(target) as f:
            assert list(f.tensors) == [s.name for s in default_tensors()]


def test_empty_array_and_no_tensors() -> None:
    data = raw_gguf([kv("empty", VT.ARRAY, array_payload(VT.STRING, 0, b"")),
                     kv("empty.nested", VT.ARRAY, array_payload(VT.ARRAY, 1, array_payload(VT.UINT8, 0, b"")))])
    with open_gguf(BytesSource(data)) as f:
        assert f.metadata == {"empty": [], "empty.nested": [[]]}
        assert f.tensors == {}


def test_non_utf8_strings_are_kept_byte_exact(tmp_path: Path) -> None:
    # Vocabularies may hold raw byte pieces: they must survive and encode back to the file's bytes.
    raw_value, raw_items = b"ok \xff\xfe", [b"\x80", b"fine", b"\xe2\x82"]
    path = write_gguf(tmp_path / "m.gguf", metadata={"raw": (raw_value, VT.STRING, None),
                                                     "raw.items": (raw_items, VT.ARRAY, VT.STRING)})
    with open_gguf(path) as f:
        assert f.metadata["raw"].encode("utf-8", "surrogateescape") == raw_value
        assert [s.encode("utf-8", "surrogateescape") for s in f.metadata["raw.items"]] == raw_items
        assert f.metadata["raw.items"][1] == "fine"


class RecordingSource(Source):
    """Wraps a source and records every read, to see what opening a file touches."""

    def __init__(self, inner: Source) -> None:
        self.inner, self.name, self.size = inner, inner.name, inner.size
        self.reads: list[tuple[int, int]] = []

    def read(self, offset: int, length: int) -> bytes | memoryview:
        self.reads.append((offset, length))
        return self.inner.read(offset, length)

    def close(self) -> None:
        self.inner.close()


def _data_offset(f) -> int:
    return min(t.offset for t in f.tensors.values())


def test_opening_reads_the_header_only(tmp_path: Path) -> None:
    big = TensorSpec.random("big", GGMLType.F32, (3 * HEADER_CHUNK // 4,))  # 3 header windows of data
    path = write_gguf(tmp_path / "m.gguf", tensors=[big])
    source = RecordingSource(FileSource(path))
    with open_gguf(source) as f:
        data_offset = f.tensors["big"].offset
        assert all(offset < data_offset for offset, _ in source.reads)  # no read starts in tensor data
        assert sum(length for _, length in source.reads) <= data_offset + HEADER_CHUNK
        source.reads.clear()
        assert bytes(f.tensor_bytes("big")) == big.data
        assert source.reads == [(data_offset, len(big.data))]


def test_missing_tensor_and_architecture_are_gguf_errors(tmp_path: Path) -> None:
    data = raw_gguf([kv_u32("x", 1)])
    with open_gguf(BytesSource(data, name="noarch.gguf")) as f:
        with pytest.raises(GGUFError, match="noarch.gguf.*no tensor named 'nope'"):
            f.tensor_bytes("nope")
        with pytest.raises(GGUFError, match="noarch.gguf.*general.architecture"):
            _ = f.architecture


# ---- the real model against the reference reader ----


@pytest.fixture(scope="module")
def reference(smollm2_path: Path) -> gguf.GGUFReader:
    return gguf.GGUFReader(smollm2_path)


@pytest.mark.model
def test_real_model_metadata_matches_reference(smollm2_path: Path, reference: gguf.GGUFReader) -> None:
    with open_gguf(smollm2_path) as f:
        expected = {k: v for k, v in reference.fields.items() if not k.startswith("GGUF.")}
        assert list(f.metadata) == list(expected)
        for key, field in expected.items():
            assert f.metadata[key] == field.contents(), key
            assert list(f.metadata_types[key]) == [VT(t) for t in field.types], key
        assert len(f.metadata["tokenizer.ggml.tokens"]) == 49152
        assert f.version == reference.fields["GGUF.version"].contents() == 3
        assert f.alignment == reference.alignment


@pytest.mark.model
def test_real_model_tensor_table_matches_reference(smollm2_path: Path, reference: gguf.GGUFReader) -> None:
    with open_gguf(smollm2_path) as f:
        assert list(f.tensors) == [t.name for t in reference.tensors]
        for ref in reference.tensors:
            info = f.tensors[ref.name]
            assert int(info.type) == int(ref.tensor_type), ref.name
            assert info.shape == tuple(int(d) for d in ref.shape), ref.name
            assert (info.offset, info.nbytes, info.n_elements) == (ref.data_offset, ref.n_bytes, ref.n_elements)
        for ref in reference.tensors[:3] + reference.tensors[-2:]:
            assert bytes(f.tensor_bytes(ref.name)) == ref.data.tobytes(), ref.name


@pytest.mark.model
def test_real_model_header_takes_few_reads(smollm2_path: Path) -> None:
    source = RecordingSource(FileSource(smollm2_path))
    with open_gguf(source) as f:
        assert len(f.tensors) == 272
        assert len(source.reads) <= 4  # ~1.8 MB of header in 1 MiB windows, not one read per field
        assert all(offset < _data_offset(f) for offset, _ in source.reads)


# ---- split models ----


@pytest.fixture
def split_model(tmp_path: Path) -> tuple[list[Path], list[TensorSpec]]:
    specs = default_tensors()
    paths = write_split_gguf(tmp_path / "model.gguf", specs, tensors_per_shard=2)
    assert [p.name for p in paths] == [f"model-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    return paths, specs


@pytest.mark.parametrize("opened", [0, 1, 2])
def test_split_model_opens_as_one_from_any_shard(split_model: tuple[list[Path], list[TensorSpec]],
                                                 opened: int) -> None:
    paths, specs = split_model
    with open_gguf(paths[opened]) as f:
        assert f.name == str(paths[0])
        assert [s.name for s in f.sources] == [str(p) for p in paths]
        assert f.metadata["general.name"] == "split test"
        assert list(f.tensors) == [s.name for s in specs]
        assert [t.shard for t in f.tensors.values()] == [0, 0, 1, 1, 2, 2]
        for spec in specs:
            assert bytes(f.tensor_bytes(spec.name)) == spec.data


def test_split_missing_shard(split_model: tuple[list[Path], list[TensorSpec]]) -> None:
    paths, _ = split_model
    paths[2].unlink()
    with pytest.raises(SourceError) as e:
        open_gguf(paths[0])
    assert str(paths[0]) in str(e.value) and str(paths[2]) in str(e.value) and "shard 3 of 3" in str(e.value)


def _write_shards(directory: Path, shards: list[bytes], stem: str = "m") -> list[Path]:
    paths = []
    for i, data in enumerate(shards):
        paths.append(directory / f"{stem}-{i + 1:05d}-of-{len(shards):05d}.gguf")
        paths[-1].write_bytes(data)
    return paths


def test_split_hand_written_shards_open(tmp_path: Path) -> None:
    paths = _write_shards(tmp_path, [raw_shard(0, 2, 3, [("a", 4), ("b", 8)]), raw_shard(1, 2, 3, [("c", 16)])])
    with open_gguf(paths[1]) as f:
        assert {n: t.shard for n, t in f.tensors.items()} == {"a": 0, "b": 0, "c": 1}
        assert struct.unpack("<16f", f.tensor_bytes("c")) == tuple(range(16))


@pytest.mark.parametrize("shards, problem", [
    ([raw_shard(0, 2, 2, [("a", 4)]), raw_shard(1, 3, 2, [("b", 4)])], "expected shard 2 of 2"),
    ([raw_shard(0, 2, 2, [("a", 4)]), raw_shard(0, 2, 2, [("b", 4)])], "expected shard 2 of 2"),
    ([raw_shard(0, 2, 3, [("a", 4)]), raw_shard(1, 2, 3, [("b", 4)])], "hold 2 tensors, but split.tensors.count"),
    ([raw_shard(0, 2, 2, [("a", 4)]), raw_shard(1, 2, 2, [("a", 4)])], "'a' appears in both"),
    ([raw_shard(0, 2, 2, [("a", 4)]), raw_gguf([kv_str("general.architecture", "llama")])], "no split metadata"),
], ids=["count", "number", "tensor-count", "duplicate-tensor", "not-a-shard"])
def test_split_inconsistent_shards(tmp_path: Path, shards: list[bytes], problem: str) -> None:
    paths = _write_shards(tmp_path, shards)
    with pytest.raises(GGUFError, match=problem) as e:
        open_gguf(paths[0])
    assert str(tmp_path) in str(e.value)


def test_split_shard_that_was_renamed(tmp_path: Path) -> None:
    path = tmp_path / "renamed.gguf"
    path.write_bytes(raw_shard(0, 2, 2, [("a", 4)]))
    with pytest.raises(GGUFError, match="renamed.gguf: is shard 1 of 2.*-00001-of-00002.gguf"):
        open_gguf(path)
    wrong_number = tmp_path / "m-00002-of-00002.gguf"
    wrong_number.write_bytes(raw_shard(0, 2, 2, [("a", 4)]))
    with pytest.raises(GGUFError, match="m-00002-of-00002.gguf: is shard 1 of 2"):
        open_gguf(wrong_number)


def test_shard_names() -> None:
    assert shard_name("/d/m-00002-of-00003.gguf", 0, 3) == "/d/m-00001-of-00003.gguf"
    assert shard_name("https://h/x/m-00001-of-00002.gguf?download=1", 1, 2) == \
        "https://h/x/m-00002-of-00002.gguf?download=1"
    assert shard_name("/d/model.gguf", 0, 3) is None


# ---- broken files: each refused with GGUFError naming the file and the defect ----

U64_MAX = 2**64 - 1
F32 = GGMLType.F32


def _one_tensor(info: bytes, nbytes: int = 64, **kw: object) -> bytes:
    return raw_gguf([kv_str("general.architecture", "llama")], [info], bytes(nbytes), **kw)  # type: ignore[arg-type]


def _nested(depth: int) -> bytes:
    payload = array_payload(VT.UINT8, 0, b"")
    for _ in range(depth - 1):
        payload = array_payload(VT.ARRAY, 1, payload)
    return kv("deep", VT.ARRAY, payload)


BROKEN: dict[str, tuple[Callable[[], bytes], str]] = {
    "empty file": (lambda: b"", "only 0 bytes"),
    "shorter than magic": (lambda: b"GG", "only 2 bytes"),
    "wrong magic": (lambda: raw_gguf(magic=b"GGML"), "not a GGUF file: it starts with b'GGML'"),
    "truncated header": (lambda: b"GGUF\x03\x00\x00\x00\x00", "truncated file"),
    "version 1": (lambda: raw_gguf(version=1), "version 1 is not supported"),
    "version 4": (lambda: raw_gguf(version=4), "unsupported GGUF version 4"),
    "big-endian": (lambda: raw_gguf(version=3 << 24), "big-endian"),
    "absurd tensor count": (lambda: raw_gguf(n_tensors=U64_MAX), f"tensor count {U64_MAX} cannot fit"),
    "absurd kv count": (lambda: raw_gguf(n_kv=2**40), f"metadata entry count {2**40} cannot fit"),
    "absurd array length": (lambda: raw_gguf([kv("a", VT.ARRAY, array_payload(VT.UINT32, 2**62, b""))]),
                            f"array count {2**62} cannot fit"),
    "absurd string array length": (
        lambda: raw_gguf([kv("a", VT.ARRAY, array_payload(VT.STRING, 2**61, b""))]), "array count"),
    "absurd string length": (lambda: raw_gguf([kv("s", VT.STRING, struct.pack("<Q", 2**63))]),
                             f"string claims {2**63} bytes"),
    "absurd key length": (lambda: raw_gguf([struct.pack("<Q", U64_MAX) + b"key"]), "string claims"),
    "absurd string in array": (
        lambda: raw_gguf([kv("a", VT.ARRAY, array_payload(VT.STRING, 2, gguf_string("ok") + struct.pack("<Q", 99)))]),
        "string claims 99 bytes"),
    "unknown value type": (lambda: raw_gguf([kv("x", 13, b"\0" * 8)]), "unknown metadata value type 13"),
    "unknown array item type": (lambda: raw_gguf([kv("x", VT.ARRAY, array_payload(99, 1, b"\0" * 8))]),
                                "unknown metadata value type 99"),
    "arrays nested too deep": (lambda: raw_gguf([_nested(9)]), "nested more than 8 deep"),
    "duplicate key": (lambda: raw_gguf([kv_u32("k", 1), kv_u32("k", 2)]), "duplicate metadata key 'k'"),
    "key not utf-8": (lambda: raw_gguf([kv(b"k\xff", VT.UINT32, b"\0" * 4)]), "is not valid UTF-8"),
    "alignment zero": (lambda: raw_gguf([kv_u32("general.alignment", 0)]), "power of two, not 0"),
    "alignment not power of two": (lambda: raw_gguf([kv_u32("general.alignment", 48)]), "power of two, not 48"),
    "alignment not an integer": (lambda: raw_gguf([kv_str("general.alignment", "32")]),
                                 "general.alignment must be an integer"),
    "unknown tensor type": (lambda: _one_tensor(tensor_info("t", (32,), 4, 0)), "unknown tensor type 4"),
    "huge tensor type": (lambda: _one_tensor(tensor_info("t", (32,), 2**31, 0)), "unknown tensor type"),
    "five dimensions": (lambda: _one_tensor(tensor_info("t", (1, 1, 1, 1, 1), F32, 0)), "5 dimensions"),
    "no dimensions": (lambda: _one_tensor(tensor_info("t", (), F32, 0)), "0 dimensions"),
    "zero dimension": (lambda: _one_tensor(tensor_info("t", (4, 0), F32, 0)), "zero dimension"),
    "negative dimension": (lambda: _one_tensor(tensor_info("t", (4, U64_MAX), F32, 0)),
                           r"negative dimension: shape \[4, -1\]"),
    "element count overflow": (lambda: _one_tensor(tensor_info("t", (2**40, 2**40), F32, 0)), "elements"),
    "row not a multiple of the block": (lambda: _one_tensor(tensor_info("t", (33, 2), GGMLType.Q4_0, 0)),
                                        "rows of 33 elements, not a multiple of its block size 32"),
    "data beyond end of file": (lambda: _one_tensor(tensor_info("t", (32,), F32, 0), nbytes=100),
                                "needs bytes .* but the file has only"),
    "offset beyond end of file": (lambda: _one_tensor(tensor_info("t", (4,), F32, 2**63)), "needs bytes"),
    "unaligned offset": (lambda: _one_tensor(tensor_info("t", (4,), F32, 4)),
                         "data offset 4, which is not a multiple of the alignment 32"),
    "overlapping tensors": (lambda: raw_gguf([], [tensor_info("a", (16,), F32, 0), tensor_info("b", (8,), F32, 32)],
                                             bytes(128)), "tensors 'a' .* and 'b' .* overlap"),
    "duplicate tensor": (lambda: raw_gguf([], [tensor_info("a", (4,), F32, 0), tensor_info("a", (4,), F32, 32)],
                                          bytes(64)), "duplicate tensor name 'a'"),
    "tensor name not utf-8": (lambda: _one_tensor(tensor_info(b"\xc3(", (4,), F32, 0)), "not valid UTF-8"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_broken_file_is_refused(tmp_path: Path, case: str) -> None:
    build, problem = BROKEN[case]
    path = tmp_path / "broken.gguf"
    path.write_bytes(build())
    with pytest.raises(GGUFError, match=problem) as e:
        open_gguf(path)
    assert str(e.value).startswith(f"{path}: ")


class HugeSource(Source):
    """`head` followed by zeros up to `size` bytes that are never stored: a very large file in little memory."""

    def __init__(self, head: bytes, size: int, name: str) -> None:
        self.head, self.size, self.name = head, size, name

    def read(self, offset: int, length: int) -> bytes:
        self._check_range(offset, length)
        assert length <= 1 << 24, "the parser asked for a huge window"
        part = self.head[offset:offset + length]
        return part + bytes(length - len(part))


@pytest.mark.parametrize("head, problem", [
    (raw_gguf([kv("a", VT.ARRAY, array_payload(VT.UINT8, MAX_COUNT + 1, b""))]), "array count .* exceeds the limit"),
    (raw_gguf([kv("a", VT.ARRAY, array_payload(VT.STRING, MAX_COUNT + 1, b""))]), "array count .* exceeds the limit"),
    (raw_gguf([kv("s", VT.STRING, struct.pack("<Q", MAX_STRING_BYTES + 1))]), "string of .* exceeds the limit"),
    (raw_gguf([kv("a", VT.ARRAY, array_payload(VT.STRING, 1, struct.pack("<Q", MAX_STRING_BYTES + 1)))]),
     "string of .* exceeds the limit"),
    (raw_gguf(n_tensors=MAX_COUNT + 1), "tensor count .* exceeds the limit"),
    (raw_gguf(n_kv=MAX_COUNT + 1), "metadata entry count .* exceeds the limit"),
], ids=["uint8-array", "string-array", "string", "string-in-array", "tensors", "metadata"])
def test_counts_that_fit_a_huge_file_are_still_capped(head: bytes, problem: str) -> None:
    # In a 1 TB file (over HTTP, say) the bytes-left check alone would let a corrupt count pull gigabytes in.
    with pytest.raises(GGUFError, match=problem) as e:
        open_gguf(HugeSource(head, 1 << 40, name="huge.gguf"))
    assert str(e.value).startswith("huge.gguf: ")


def test_every_truncation_of_a_valid_file_is_refused(tmp_path: Path) -> None:
    data = write_gguf(tmp_path / "m.gguf").read_bytes()
    with open_gguf(BytesSource(data)) as f:
        end = max(t.offset + t.nbytes for t in f.tensors.values())
    for cut in range(end):
        with pytest.raises(GGUFError) as e:
            open_gguf(BytesSource(data[:cut], name=f"cut-{cut}.gguf"))
        assert str(e.value).startswith(f"cut-{cut}.gguf: ")
    for cut in range(end, len(data)):  # only trailing padding lost: every tensor is still whole
        open_gguf(BytesSource(data[:cut])).close()


def test_missing_file_and_directory_are_source_errors(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=f"{tmp_path / 'nope.gguf'}: no such file"):
        open_gguf(tmp_path / "nope.gguf")
    with pytest.raises(SourceError, match=f"{tmp_path}: is a directory"):
        open_gguf(tmp_path)


def test_tensor_layout_fixture_is_valid() -> None:
    # The broken cases above change one thing each in files shaped like this one; it must itself be fine.
    infos, data = f32_tensors([("a", 16), ("b", 8)])
    with open_gguf(BytesSource(raw_gguf([kv_str("general.architecture", "llama")], infos, data))) as f:
        assert struct.unpack("<8f", f.tensor_bytes("b")) == tuple(range(8))
