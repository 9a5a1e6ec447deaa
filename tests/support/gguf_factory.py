"""Small GGUF files for tests: valid ones through the `gguf` package's writer (an independent implementation of
the format), broken ones assembled byte by byte so that each defect is exactly the one a test names."""
from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np
from gguf import GGUFValueType as VT

from llmchat.gguf.types import BLOCK_LAYOUT, GGMLType

# key -> (value, value type, array item type). Values are exactly representable in their type, so what the
# parser returns must equal them. Integers sit at the edges of their ranges to catch signedness mistakes.
EVERY_TYPE_METADATA: dict[str, tuple[object, VT, VT | None]] = {
    "test.uint8": (255, VT.UINT8, None),
    "test.int8": (-128, VT.INT8, None),
    "test.uint16": (65535, VT.UINT16, None),
    "test.int16": (-32768, VT.INT16, None),
    "test.uint32": (4_294_967_295, VT.UINT32, None),
    "test.int32": (-2_147_483_648, VT.INT32, None),
    "test.uint64": (2**64 - 1, VT.UINT64, None),
    "test.int64": (-(2**63), VT.INT64, None),
    "test.float32": (-1.5, VT.FLOAT32, None),
    "test.float64": (math.pi, VT.FLOAT64, None),
    "test.bool_true": (True, VT.BOOL, None),
    "test.bool_false": (False, VT.BOOL, None),
    "test.string": ("héllo, wörld ✓ 🦙", VT.STRING, None),
    "test.empty_string": ("", VT.STRING, None),
    "test.array.uint8": ([0, 1, 255], VT.ARRAY, VT.UINT8),
    "test.array.int8": ([-128, 0, 127], VT.ARRAY, VT.INT8),
    "test.array.uint16": ([0, 65535], VT.ARRAY, VT.UINT16),
    "test.array.int16": ([-32768, 32767], VT.ARRAY, VT.INT16),
    "test.array.uint32": ([0, 4_294_967_295], VT.ARRAY, VT.UINT32),
    "test.array.int32": ([-2_147_483_648, 2_147_483_647], VT.ARRAY, VT.INT32),
    "test.array.uint64": ([0, 2**64 - 1], VT.ARRAY, VT.UINT64),
    "test.array.int64": ([-(2**63), 2**63 - 1], VT.ARRAY, VT.INT64),
    "test.array.float32": ([0.5, -2.25, 1e-3], VT.ARRAY, VT.FLOAT32),
    "test.array.float64": ([1e300, -1e-300, 0.1], VT.ARRAY, VT.FLOAT64),
    "test.array.bool": ([True, False, True], VT.ARRAY, VT.BOOL),
    "test.array.string": (["a", "", "Ġthe", "日本"], VT.ARRAY, VT.STRING),
    "test.array.nested": ([[1, 2, 3], [4]], VT.ARRAY, VT.ARRAY),
    "test.array.nested_strings": ([["x", "y"], ["z"]], VT.ARRAY, VT.ARRAY),
}


def expected_value(value: object, vtype: VT, item_type: VT | None) -> object:
    """What a reader must return for a value written with this type (float32 rounds)."""
    if vtype == VT.FLOAT32:
        return struct.unpack("<f", struct.pack("<f", value))[0]
    if vtype == VT.ARRAY and item_type == VT.FLOAT32:
        return [struct.unpack("<f", struct.pack("<f", v))[0] for v in value]  # type: ignore[union-attr]
    return value


@dataclass(frozen=True)
class TensorSpec:
    name: str
    type: GGMLType
    shape: tuple[int, ...]  # GGUF order: shape[0] is the row length
    data: bytes

    @staticmethod
    def random(name: str, ggml_type: GGMLType, shape: Sequence[int], seed: int = 0) -> TensorSpec:
        block_elems, block_bytes = BLOCK_LAYOUT[ggml_type]
        nbytes = math.prod(shape) // block_elems * block_bytes
        data = np.random.default_rng(seed).integers(0, 256, nbytes, dtype=np.uint8).tobytes()
        return TensorSpec(name, ggml_type, tuple(shape), data)


def default_tensors() -> list[TensorSpec]:
    """A few tensors of plain and block-quantized types, 1-D to 4-D."""
    return [
        TensorSpec.random("token_embd.weight", GGMLType.Q8_0, (64, 3), seed=1),
        TensorSpec.random("blk.0.attn_norm.weight", GGMLType.F32, (7,), seed=2),
        TensorSpec.random("blk.0.ffn_up.weight", GGMLType.Q4_1, (32, 2), seed=3),
        TensorSpec.random("blk.0.attn_k.weight", GGMLType.F16, (3, 2, 2), seed=4),
        TensorSpec.random("blk.0.q6k", GGMLType.Q6_K, (256, 1), seed=5),
        TensorSpec.random("misc.i32", GGMLType.I32, (2, 1, 1, 2), seed=6),
    ]


def _add_tensor(writer: gguf.GGUFWriter, spec: TensorSpec) -> None:
    # Handing the writer raw bytes with the GGML type lets one code path cover every type, quantized or not.
    block_elems, block_bytes = BLOCK_LAYOUT[spec.type]
    row_bytes = spec.shape[0] // block_elems * block_bytes
    rows = np.frombuffer(spec.data, dtype=np.uint8).reshape(*reversed(spec.shape[1:]), row_bytes)
    writer.add_tensor(spec.name, rows, raw_dtype=gguf.GGMLQuantizationType(int(spec.type)))


def _add_metadata(writer: gguf.GGUFWriter, metadata: dict[str, tuple[object, VT, VT | None]]) -> None:
    for key, (value, vtype, item_type) in metadata.items():
        writer.add_key_value(key, value, vtype, sub_type=item_type)


def set_version(path: Path, version: int) -> None:
    """The writer always writes v3; for little-endian files v2 has the same layout, so only the field differs."""
    with open(path, "r+b") as f:
        f.seek(4)
        f.write(struct.pack("<I", version))


def write_gguf(path: Path, *, version: int = 3, arch: str = "llama",
               metadata: dict[str, tuple[object, VT, VT | None]] | None = None,
               tensors: Iterable[TensorSpec] | None = None, alignment: int | None = None) -> Path:
    """Write a valid GGUF file with the reference writer."""
    writer = gguf.GGUFWriter(path, arch)
    if alignment is not None:
        writer.add_custom_alignment(alignment)
    _add_metadata(writer, EVERY_TYPE_METADATA if metadata is None else metadata)
    for spec in default_tensors() if tensors is None else tensors:
        _add_tensor(writer, spec)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    if version != 3:
        set_version(path, version)
    return path


def write_split_gguf(path: Path, tensors: list[TensorSpec], tensors_per_shard: int,
                     metadata: dict[str, tuple[object, VT, VT | None]] | None = None) -> list[Path]:
    """Write a split model the way gguf-split does (the reference writer implements the same convention):
    `path` names the model; the shards are `<stem>-0000i-of-0000n.gguf` next to it. Returns the shard paths."""
    writer = gguf.GGUFWriter(path, "llama", split_max_tensors=tensors_per_shard)
    _add_metadata(writer, metadata or {"general.name": ("split test", VT.STRING, None)})
    for spec in tensors:
        _add_tensor(writer, spec)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return writer.format_shard_names(Path(path))


# ---- raw bytes, for files the writer would refuse to produce ----

def gguf_string(text: str | bytes) -> bytes:
    data = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(data)) + data


def kv(key: str | bytes, vtype: int, payload: bytes) -> bytes:
    """A metadata entry whose value bytes are given as they appear in the file."""
    return gguf_string(key) + struct.pack("<I", vtype) + payload


def kv_u32(key: str, value: int) -> bytes:
    return kv(key, VT.UINT32, struct.pack("<I", value))


def kv_str(key: str, value: str | bytes) -> bytes:
    return kv(key, VT.STRING, gguf_string(value))


def array_payload(item_type: int, count: int, items: bytes) -> bytes:
    return struct.pack("<IQ", item_type, count) + items


def tensor_info(name: str | bytes, shape: Sequence[int], ggml_type: int, offset: int) -> bytes:
    """A tensor info; dims are written as u64, so pass 2**64 - n for a dimension of -n."""
    return (gguf_string(name) + struct.pack("<I", len(shape)) + struct.pack(f"<{len(shape)}Q", *shape)
            + struct.pack("<IQ", ggml_type, offset))


def raw_gguf(kvs: Sequence[bytes] = (), infos: Sequence[bytes] = (), data: bytes = b"", *, version: int = 3,
             magic: bytes = b"GGUF", n_tensors: int | None = None, n_kv: int | None = None,
             alignment: int = 32) -> bytes:
    """Assemble a file from parts; counts default to the number of parts given, and the data section starts at
    the next multiple of `alignment` as a reader will expect."""
    head = (magic + struct.pack("<IQQ", version, len(infos) if n_tensors is None else n_tensors,
                                len(kvs) if n_kv is None else n_kv)
            + b"".join(kvs) + b"".join(infos))
    return head + bytes(-len(head) % alignment) + data


def kv_u16(key: str, value: int) -> bytes:
    return kv(key, VT.UINT16, struct.pack("<H", value))


def kv_i32(key: str, value: int) -> bytes:
    return kv(key, VT.INT32, struct.pack("<i", value))


def f32_tensors(named_sizes: Sequence[tuple[str, int]], alignment: int = 32) -> tuple[list[bytes], bytes]:
    """Tensor infos and a data section for 1-D F32 tensors laid out one after another, each aligned; element i
    of every tensor holds the value i so that reads can be checked."""
    infos, data = [], b""
    for name, n in named_sizes:
        data += bytes(-len(data) % alignment)
        infos.append(tensor_info(name, (n,), GGMLType.F32, len(data)))
        data += struct.pack(f"<{n}f", *range(n))
    return infos, data


def raw_shard(no: int, count: int, total: int, named_sizes: Sequence[tuple[str, int]]) -> bytes:
    """One shard of a split model with gguf-split's keys; only the first carries the model's own metadata."""
    kvs = [kv_str("general.architecture", "llama")] if no == 0 else []
    kvs += [kv_u16("split.no", no), kv_u16("split.count", count), kv_i32("split.tensors.count", total)]
    infos, data = f32_tensors(named_sizes)
    return raw_gguf(kvs, infos, data)
