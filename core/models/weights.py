"""Hands a model its tensors by GGUF name: uploaded to the device, or only planned (sizes, parts, layout).

Planning runs the model's own constructor without a device, so "how much memory, in which bindings, with which
kernels" is answered by the same code that later uploads — before a single weight byte is read (the browser's fit
check runs on the header alone).
"""
from __future__ import annotations

from ..errors import GGUFError, UnsupportedModelError
from ..gguf.file import GGUFFile
from ..gpu.device import AdapterInfo, Buffer, Device
from ..gpu.kernels import Kernels
from ..gpu.tensors import (Piece, Weight, WeightPart, check_type, plan_parts, split_bytes, split_parts, split_weight,
                           splits, texture_weight, upload_weight)
from ..gpu.variants import planned, variants


class WeightLoader:
    """Tensors of `gguf` for a model on `device`; with `device=None`, phantom buffers sized for an adapter `info`."""

    def __init__(self, gguf: GGUFFile, device: Device | None = None, *, info: AdapterInfo | None = None):
        if device is None and info is None:
            raise ValueError("a WeightLoader needs a device, or an adapter's info to plan for")
        self.gguf, self.device = gguf, device
        self.info = device.info if device is not None else info
        chosen = variants(device) if device is not None else planned(self.info)
        self.split = chosen.split_weights
        self.textures = chosen.weight_textures
        self.fold_norms = chosen.fold_norms
        self.fuse_gated = chosen.fuse_gated
        self.kernels = Kernels(device) if device is not None and self.split else None
        self.bytes = 0  # on the GPU, in the layout this adapter gets
        self.file_bytes = 0  # read from the file (what a load's progress counts)
        self.weights: dict[str, Weight] = {}  # what each matmul reads, by its tensor names
        self._read: set[str] = set()  # every tensor the model asked for

    @property
    def planning(self) -> bool:
        return self.device is None

    def has(self, name: str) -> bool:
        return name in self.gguf.tensors

    def _info(self, name: str):
        info = self.gguf.tensors.get(name)
        if info is None:
            raise GGUFError(f"{self.gguf.name}: tensor '{name}' is missing")
        self._read.add(name)
        return info

    def check_all_read(self) -> None:
        """Refuse a file holding tensors the model never asked for. llama.cpp loads no file with tensors its
        architecture does not know, so each of these is something llama.cpp computes with (an output bias,
        LongRoPE factors of a llama file, ...) and leaving it out would give other logits without a word."""
        unread = sorted(set(self.gguf.tensors) - self._read)
        if unread:
            shown = ", ".join(unread[:6]) + (f" and {len(unread) - 6} more" if len(unread) > 6 else "")
            raise UnsupportedModelError(f"{self.gguf.name}: this {self.gguf.metadata.get('general.architecture')} "
                                        f"file has tensors llmchat does not use yet: {shown}")

    def skip(self, names: list[str]) -> None:
        """Tensors of the file, where present, that llama.cpp loads but never computes with: nothing is uploaded,
        and `check_all_read` counts them as read."""
        self._read.update(n for n in names if self.has(n))

    def weight(self, names: list[str], rows: dict[str, list[tuple[int, int]]] | None = None) -> Weight:
        """One weight made of the tensors `names` stacked by rows (they must share row length and type).

        `rows` takes only some rows of a tensor, as (first row, count) ranges in the order given: the outputs of a
        fused projection regrouped (Qwen3.5's query heads apart from their interleaved gates)."""
        rows = rows or {}
        infos = [self._info(n) for n in names]
        k = infos[0].shape[0]
        if any(len(i.shape) != 2 or i.shape[0] != k or i.type != infos[0].type for i in infos):
            raise GGUFError(f"{self.gguf.name}: tensors {names} cannot be stacked (shapes or types differ)")
        ranges = [rows.get(n, [(0, i.shape[1])]) for n, i in zip(names, infos)]
        if any(a < 0 or n < 1 or a + n > i.shape[1] for r, i in zip(ranges, infos) for a, n in r):
            raise ValueError(f"row ranges {rows} fall outside the tensors {names}")
        name = "+".join(n + (f"[{len(rows[n])} row ranges from {rows[n][0][0]}]" if n in rows else "") for n in names)
        ggml_type = infos[0].type
        limit = self.info.max_binding_size
        split = self._splits(ggml_type, k)
        n_rows = sum(n for r in ranges for _, n in r)
        row_bytes = Weight(name, ggml_type, k, 0, []).row_bytes
        if self.planning:
            check_type(name, ggml_type, k)
            w = Weight(name, ggml_type, k, n_rows, [], layout="split" if split else "gguf")
            parts = plan_parts(name, n_rows, row_bytes, limit)  # as uploaded; then split as split_weight does
            if split:
                parts = [(start + a, m) for start, n in parts for a, m in split_parts(n, w.row_bytes, limit)]
            w.parts.extend(WeightPart(Buffer(split_bytes(n, w.row_bytes) if split else n * w.row_bytes,
                                             f"{name}[{start}:+{n}]", None), start, n) for start, n in parts)
        else:
            pieces = [Piece(n, self.gguf.sources[i.shard], i.offset + a * row_bytes)
                      for r, i in zip(ranges, infos) for a, n in r]
            w = upload_weight(self.device, name, ggml_type, k, pieces)
            if split:
                w = split_weight(self.device, self.kernels, w)
                if self.textures:
                    w = texture_weight(self.device, w)
        self.bytes += w.nbytes
        self.file_bytes += sum(i.nbytes * sum(n for _, n in r) // i.shape[1] for r, i in zip(ranges, infos))
        self.weights[name] = w
        return w

    def _splits(self, ggml_type, k: int) -> bool:
        """Whether a weight of this type and row length gets the split layout here (tensors.splits)."""
        return self.split and splits(ggml_type, k, self.info.max_binding_size)

    def stacked(self, names: list[str], rows: dict[str, list[tuple[int, int]]] | None = None, *,
                stack: bool = True) -> list[Weight]:
        """The tensors as one stacked weight (one dispatch computes them all) when `stack`, their types match and the
        stack fits one binding's worth of parts, else one weight each (`rows` as for `weight`)."""
        rows = rows or {}
        infos = [self._info(n) for n in names]
        if stack and len({i.type for i in infos}) == 1 and len({i.shape[0] for i in infos}) == 1:
            n_rows = sum(sum(n for _, n in rows[m]) if m in rows else i.shape[1] for m, i in zip(names, infos))
            probe = Weight("", infos[0].type, infos[0].shape[0], n_rows, [],
                           layout="split" if self._splits(infos[0].type, infos[0].shape[0]) else "gguf")
            if probe.nbytes <= self.info.max_binding_size:
                return [self.weight(names, rows)]
        return [self.weight([n], {n: rows[n]} if n in rows else None) for n in names]

    def gate_up(self, prefix: str) -> list[Weight]:
        """A gated unit's `prefix`ffn_gate and ffn_up weights: stacked, for the one-dispatch gated matmul, unless the
        adapter keeps them apart (Variants.fuse_gated) or `stacked` cannot stack them."""
        return self.stacked([prefix + "ffn_gate.weight", prefix + "ffn_up.weight"], stack=self.fuse_gated)

    def vector(self, name: str) -> Buffer:
        """An f32 vector (a norm's weights)."""
        info = self._info(name)
        if info.type.name != "F32":
            raise GGUFError(f"{self.gguf.name}: '{name}' is {info.type.name}; norm weights must be F32")
        return self.raw([name])

    def optional_vector(self, name: str) -> Buffer | None:
        return self.vector(name) if self.has(name) else None

    def bias(self, names: list[str]) -> Buffer | None:
        """The biases of `names` back to back (one per stacked weight), or None when the model has none."""
        present = [self.has(n) for n in names]
        if not any(present):
            return None
        if not all(present):
            raise GGUFError(f"{self.gguf.name}: some but not all of {names} are present")
        return self.raw(names)

    def raw(self, names: list[str]) -> Buffer:
        """The tensors' bytes back to back in one buffer (f32 vectors: norms, biases)."""
        infos = [self._info(n) for n in names]
        size = sum(i.nbytes for i in infos)
        self.bytes += size
        self.file_bytes += size
        if self.planning:
            return Buffer(size, names[0], None)
        buf = self.device.buffer(size, names[0])
        offset = 0
        for i in infos:
            self.device.write_from(buf, offset, self.gguf.sources[i.shard], i.offset, i.nbytes)
            offset += i.nbytes
        return buf
