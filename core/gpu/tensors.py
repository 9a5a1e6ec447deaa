"""GPU-resident tensors: quantized weights (GGUF blocks as stored, split by rows when larger than one binding)."""
from __future__ import annotations

import struct
from dataclasses import dataclass

from ..errors import ModelTooLargeError, UnsupportedModelError
from ..gguf.types import BLOCK_LAYOUT, GGMLType
from .device import Buffer, Device, Dispatch, Texture
from .recorder import cdiv

# Types with a WGSL decoder in shaders/<name>.wgsl
GPU_TYPES = {
    GGMLType.F32: "f32", GGMLType.F16: "f16", GGMLType.BF16: "bf16",
    GGMLType.Q4_0: "q4_0", GGMLType.Q4_1: "q4_1", GGMLType.Q5_0: "q5_0", GGMLType.Q5_1: "q5_1",
    GGMLType.Q8_0: "q8_0", GGMLType.Q2_K: "q2_k", GGMLType.Q3_K: "q3_k", GGMLType.Q4_K: "q4_k",
    GGMLType.Q5_K: "q5_k", GGMLType.Q6_K: "q6_k", GGMLType.IQ4_NL: "iq4_nl", GGMLType.IQ4_XS: "iq4_xs",
}


@dataclass
class WeightPart:
    buffer: Buffer | Texture  # a texture only in the split layout (`texture_weight`)
    row_start: int  # first row of the weight held by this buffer
    rows: int


@dataclass(frozen=True)
class SplitLayout:
    """A type's split layout (shaders/rows_split.wgsl): per 32-element block, `quant_vec4s` vec4<u32> of quants and
    `side_words` u32 words (scales, offsets, high bits), in tiles of SPLIT_TILE rows. The type's shader file says what
    the words hold and how they are made from the GGUF block (`split_quant`, `split_side`)."""

    quant_vec4s: int
    side_words: int  # 1, 2 or 4, so a block's side words never straddle a vec4


SPLIT_TILE = 8  # rows per tile of the split layout (rows_split.wgsl): a CPU emulator's matmul tile

SPLIT_TYPES = {
    GGMLType.Q4_0: SplitLayout(1, 1), GGMLType.Q4_1: SplitLayout(1, 1), GGMLType.Q8_0: SplitLayout(2, 1),
    GGMLType.Q5_0: SplitLayout(1, 2), GGMLType.Q5_1: SplitLayout(1, 2), GGMLType.Q4_K: SplitLayout(1, 2),
    GGMLType.Q5_K: SplitLayout(1, 4), GGMLType.Q6_K: SplitLayout(1, 4), GGMLType.IQ4_NL: SplitLayout(2, 1),
    GGMLType.IQ4_XS: SplitLayout(2, 1),
}


@dataclass
class Weight:
    """A 2-D weight of `rows` x `k` elements in GGML type `type`; row r is `row_bytes` bytes.

    `layout` is "gguf" (rows exactly as in the file) or "split" (see `split_weight`)."""

    name: str
    type: GGMLType
    k: int  # elements per row (GGUF ne[0])
    rows: int
    parts: list[WeightPart]
    layout: str = "gguf"

    @property
    def row_bytes(self) -> int:
        if self.layout == "split":
            return split_row_bytes(self.type, self.k)
        elems, nbytes = BLOCK_LAYOUT[self.type]
        return self.k // elems * nbytes

    @property
    def shader(self) -> str:
        return GPU_TYPES[self.type]

    @property
    def store(self) -> str:
        """Where kernels read the split layout's words from: "texture" (`texture_weight`) or "buffer"; the
        template value WEIGHTS of the kernels that read weights."""
        return "texture" if self.parts and isinstance(self.parts[0].buffer, Texture) else "buffer"

    def words(self, part: WeightPart, empty: Buffer) -> Buffer:
        """What a kernel binds as `w`, the part's bytes as u32 words: its buffer, or `empty` when a texture holds
        them (only the split layout's accessors read it then, from the texture)."""
        return empty if isinstance(part.buffer, Texture) else part.buffer

    @property
    def nbytes(self) -> int:
        """Bytes on the device (in the split layout each binding holds whole tiles; without parts: in one)."""
        if self.layout == "split":
            return sum(split_bytes(p.rows, self.row_bytes) for p in self.parts or [WeightPart(None, 0, self.rows)])
        return self.rows * self.row_bytes


def check_type(name: str, ggml_type: GGMLType, k: int) -> None:
    if ggml_type not in GPU_TYPES:
        supported = ", ".join(t.name for t in GPU_TYPES)
        raise UnsupportedModelError(f"tensor '{name}' has type {ggml_type.name}, which has no GPU kernel yet "
                                    f"(supported: {supported})")
    if k % 32:
        raise UnsupportedModelError(f"tensor '{name}' has rows of {k} elements; kernels need a multiple of 32")


@dataclass(frozen=True)
class Piece:
    """`rows` rows of a weight stored at `offset` in a byte source (one tensor of a GGUF file)."""

    rows: int
    source: object  # llmchat.gguf.sources.Source
    offset: int = 0

    @classmethod
    def of(cls, rows: int, data: bytes) -> "Piece":
        """Rows held in memory (tests, tools)."""
        from ..gguf.sources import BytesSource
        return cls(rows, BytesSource(data))


def upload_weight(device: Device, name: str, ggml_type: GGMLType, k: int, pieces: list[Piece]) -> Weight:
    """Create the buffers for a weight made of `pieces` stacked by rows, and fill them from their sources.

    Stacking lets Q, K and V (or gate and up) share one weight so one dispatch computes all of them. A weight larger
    than the adapter's binding limit is split into parts of whole rows.
    """
    check_type(name, ggml_type, k)
    rows = sum(p.rows for p in pieces)
    w = Weight(name, ggml_type, k, rows, [])
    row_bytes = w.row_bytes
    for start, n in plan_parts(name, rows, row_bytes, device.info.max_binding_size):
        buf = device.buffer(n * row_bytes, f"{name}[{start}:{start + n}]")
        w.parts.append(WeightPart(buf, start, n))
        # Copy the rows [start, start + n) of the stack: the overlapping slice of each piece.
        first = 0
        for p in pieces:
            lo, hi = max(start, first), min(start + n, first + p.rows)
            if lo < hi:
                device.write_from(buf, (lo - start) * row_bytes, p.source, p.offset + (lo - first) * row_bytes,
                                  (hi - lo) * row_bytes)
            first += p.rows
    return w


def plan_parts(name: str, rows: int, row_bytes: int, max_binding_size: int) -> list[tuple[int, int]]:
    """(first row, row count) of each part when `rows` rows of `row_bytes` are cut to fit one binding each."""
    if row_bytes > max_binding_size:
        raise ModelTooLargeError(f"one row of '{name}' ({row_bytes} bytes) exceeds the adapter's binding limit "
                                 f"({max_binding_size} bytes)")
    per_part = max_binding_size // row_bytes
    return [(start, min(per_part, rows - start)) for start in range(0, rows, per_part)]


def split_row_bytes(ggml_type: GGMLType, k: int) -> int:
    """Bytes per row in the split layout: the quants of every block, then the side words of every block, padded
    to 16."""
    blocks, layout = k // 32, SPLIT_TYPES[ggml_type]
    return blocks * layout.quant_vec4s * 16 + -(-blocks * layout.side_words * 4 // 16) * 16


def splits(ggml_type: GGMLType, k: int, max_binding_size: int) -> bool:
    """Whether weights of this type and row length take the split layout on bindings of `max_binding_size` bytes:
    the type has one, and a whole tile of its rows fits in one binding."""
    return ggml_type in SPLIT_TYPES and SPLIT_TILE * split_row_bytes(ggml_type, k) <= max_binding_size


def split_parts(rows: int, row_bytes: int, max_binding_size: int) -> list[tuple[int, int]]:
    """(first row, row count) of each binding of `rows` split-layout rows: whole tiles, as many as fit, so every
    binding starts a tile; the last binding's last tile is padded (`split_bytes`)."""
    fit = max_binding_size // row_bytes
    per_part = fit - fit % SPLIT_TILE
    if per_part == 0:
        raise ValueError(f"a tile of {SPLIT_TILE} split rows of {row_bytes} bytes exceeds the binding limit "
                         f"({max_binding_size} bytes); such weights keep the GGUF layout (see `splits`)")
    return [(start, min(per_part, rows - start)) for start in range(0, rows, per_part)]


def split_bytes(rows: int, row_bytes: int) -> int:
    """Bytes of a binding holding `rows` split-layout rows: whole tiles."""
    return cdiv(rows, SPLIT_TILE) * SPLIT_TILE * row_bytes


def split_weight(device: Device, kernels, w: Weight) -> Weight:
    """`w` rewritten on the GPU into the split layout (shaders/rows_split.wgsl), which CPU emulators read with aligned
    vector loads, in new buffers; `w`'s are released (device.release) and must not be used after. `kernels` is the
    device's kernel cache (gpu.kernels). Its type and row length must allow it (`splits`)."""
    src_row_bytes, dst_row_bytes = w.row_bytes, split_row_bytes(w.type, w.k)
    kernel = kernels.get("repack_split.wgsl", QUANT=w.shader, QUADS=3)
    out = Weight(w.name, w.type, w.k, w.rows, [], layout="split")
    dispatches = []
    for src in w.parts:
        for first, n in split_parts(src.rows, dst_row_bytes, device.info.max_binding_size):
            # Padding rows stay zero (new buffers are zeroed) and are never read for outputs.
            buf = device.buffer(split_bytes(n, dst_row_bytes), f"{w.name}[{src.row_start + first}:+{n}] split")
            out.parts.append(WeightPart(buf, src.row_start + first, n))
            params = device.buffer(32, f"{w.name}.repack", uniform=True)
            device.write(params, struct.pack("<8I", w.k, n, src_row_bytes, dst_row_bytes, first, 0, 0, 0))
            groups = cdiv(n * (w.k // 32), 64)
            grid = (groups, 1, 1) if groups <= 65535 else (65535, cdiv(groups, 65535), 1)
            dispatches.append(Dispatch(kernel, (params, src.buffer, buf, src.buffer), grid))
    device.run_once(dispatches)
    for buffer in [src.buffer for src in w.parts] + [d.bindings[0] for d in dispatches]:  # the GGUF rows, params
        device.release(buffer)
    return out


def texture_weight(device: Device, w: Weight) -> Weight:
    """`w` (split layout) with each part's bytes copied into a texture (shaders/weights_texture.wgsl), which CPU
    emulators read several times faster than a storage buffer (variants.py `weight_textures`); `w`'s buffers can be
    dropped."""
    if w.layout != "split":
        raise ValueError(f"'{w.name}': only the split layout is read from textures")
    return Weight(w.name, w.type, w.k, w.rows, [WeightPart(device.texture_from(p.buffer), p.row_start, p.rows)
                                                for p in w.parts], w.layout)
