"""Running GPU kernels against numpy references: session devices, random GGUF weights, activations in and out.

Test modules import the fixtures by name (`from gpu_util import gpu, split_gpu  # noqa: F401`).

References come from the `gguf` package (`gguf.quants.dequantize`), the library the whole project is measured
against. Weights are random *blocks*, not quantized random floats (`llmchat.quant.random_blocks`): random bytes
reach every nibble, high bit and scale pattern a decoder must handle, while the f16 scale fields get sane values so
no block decodes to inf or NaN.
"""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

import gguf
import numpy as np
import pytest

from llmchat.errors import NoAdapterError
from llmchat.gguf.types import BLOCK_LAYOUT, GGMLType
from llmchat.gpu.kernels import Kernels
from llmchat.gpu.native import NativeDevice
from llmchat.gpu.recorder import Act, Recorder
from llmchat.gpu.tensors import Piece, Weight, upload_weight
from llmchat.quant import random_blocks

from adapter_marks import GPU_PROFILES, adapter_only, needs  # noqa: F401 (test modules import them from here)

# Every type with a WGSL decoder, in the order GGUF numbers them.
ALL_TYPES = [GGMLType.F32, GGMLType.F16, GGMLType.BF16, GGMLType.Q4_0, GGMLType.Q4_1, GGMLType.Q5_0, GGMLType.Q5_1,
             GGMLType.Q8_0, GGMLType.Q2_K, GGMLType.Q3_K, GGMLType.Q4_K, GGMLType.Q5_K, GGMLType.Q6_K,
             GGMLType.IQ4_NL, GGMLType.IQ4_XS]

# Binding limit of the `split_gpu` device: small enough that test weights of a few dozen rows span several parts.
SPLIT_BINDING = 1024  # in bytes
TILES_BINDING = 4096  # in bytes: a few 8-row tiles of the split layout at short row lengths

# Tolerance of f32 results against float64 references: |got - ref| <= REL * max|ref| + ABS, elementwise.
# Sums of a few hundred f32 products drift by a few ulps of the largest partial sum; 1e-5 leaves two orders of
# magnitude of headroom while any decoding mistake (a wrong nibble, scale or sign) is far larger.
REL = 1e-5
ABS = 1e-6


def block_elems(qtype: GGMLType) -> int:
    """Elements one decoder call covers along a row: the block, or 32 for the plain float types."""
    return max(32, BLOCK_LAYOUT[qtype][0])


def random_weight(rng: np.random.Generator, qtype: GGMLType, rows: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """A random `rows` x `k` weight of type `qtype`: (raw GGUF bytes, uint8 rows x row_bytes; float64 values)."""
    gtype = gguf.GGMLQuantizationType(int(qtype))
    if BLOCK_LAYOUT[qtype][0] == 1:
        # gguf returns F32 and F16 as float arrays; every caller here wants the bytes.
        raw = gguf.quants.quantize(rng.standard_normal((rows, k)).astype(np.float32), gtype).view(np.uint8)
    else:
        raw = random_blocks(rng, qtype, (rows, k))
    values = gguf.quants.dequantize(raw, gtype).reshape(rows, k).astype(np.float64)
    assert np.isfinite(values).all()
    return raw, values


def round_blocks(x: np.ndarray) -> np.ndarray:
    """x with each 32-element block of each row rounded to 8 bits as llama.cpp's Q8_0 holds activations (and the
    matmul kernel's XQ8 and int8 dot products do): integers round(x / d), d = max|x| / 127 (in f32), times d as
    f16; an all-zero block stays zero."""
    blocks = x.reshape(x.shape[0], -1, 32)
    d = np.abs(blocks).max(-1, keepdims=True) / 127.0
    d32 = d.astype(np.float32).astype(np.float64)
    d16 = d.astype(np.float16).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        q = np.where(d32 > 0, np.round(blocks / np.where(d32 > 0, d32, 1)) * d16, blocks)
    return q.reshape(x.shape)


def case_id(value: object) -> str:
    """Readable pytest ids: type names rather than their numbers."""
    return value.name if isinstance(value, GGMLType) else str(value)


def seeded_rng(request: pytest.FixtureRequest) -> np.random.Generator:
    """A generator seeded from the test's id: new data for every test case, the same data on every run."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def assert_close(got: np.ndarray, ref: np.ndarray, rel: float = REL, abs_: float = ABS, what: str = "") -> None:
    """Elementwise |got - ref| <= rel * max|ref| + abs_, with NaN (an unwritten output) always a failure."""
    assert got.shape == ref.shape, (what, got.shape, ref.shape)
    bad = ~np.isfinite(got)
    assert not bad.any(), f"{what}: {bad.sum()} outputs not written or not finite, first at {np.argwhere(bad)[0]}"
    err = np.abs(got - ref)
    limit = rel * np.abs(ref).max() + abs_
    worst = np.unravel_index(err.argmax(), err.shape)
    assert err.max() <= limit, (f"{what}: max error {err.max():.3g} at {worst} (got {got[worst]!r}, "
                                f"want {ref[worst]!r}) exceeds {limit:.3g}")


@dataclass
class Gpu:
    """A device with its kernel cache, plus the few steps every kernel test repeats."""

    device: NativeDevice
    kernels: Kernels

    def recorder(self, n_tokens: int) -> Recorder:
        """A recorder whose programs run for `n_tokens` tokens (the step uniform)."""
        step = self.device.buffer(16, "step", uniform=True)
        self.device.write(step, struct.pack("<4I", n_tokens, 0, 0, 0))
        return Recorder(self.device, self.kernels, step)

    def act(self, rec: Recorder, label: str, values: np.ndarray) -> Act:
        """An activation holding `values` (rows x cols), as f32."""
        act = rec.act(label, *values.shape)
        self.device.write(act.buffer, np.ascontiguousarray(values, np.float32).tobytes())
        return act

    def poisoned(self, rec: Recorder, label: str, rows: int, cols: int) -> Act:
        """An activation full of NaN, so any output a kernel fails to write shows up."""
        return self.act(rec, label, np.full((rows, cols), np.nan, np.float32))

    def weight(self, name: str, qtype: GGMLType, raw: np.ndarray) -> Weight:
        k = raw.shape[1] // BLOCK_LAYOUT[qtype][1] * BLOCK_LAYOUT[qtype][0]
        return upload_weight(self.device, name, qtype, k, [Piece.of(raw.shape[0], raw.tobytes())])

    def tokens(self, ids: list[int]):
        """The token buffer kernels read: (id, position, sequence, 0) per token."""
        rows = [(i, p, 0, 0) for p, i in enumerate(ids)]
        buf = self.device.buffer(16 * len(rows), "tokens")
        self.device.write(buf, np.array(rows, np.uint32).tobytes())
        return buf

    def run(self, rec: Recorder) -> None:
        self.device.run(rec.finish())

    def read(self, act: Act) -> np.ndarray:
        data = self.device.read(act.buffer, 0, act.rows * act.cols * 4)
        return np.frombuffer(data, np.float32).reshape(act.rows, act.cols).astype(np.float64)


_OPENED: dict[tuple, Gpu] = {}


def _open(**options) -> Gpu:
    """One device per set of options for the whole session, whichever fixture asks: the kernel suites and the model
    suites on it share its compiled pipelines (on lavapipe a matmul pipeline takes 0.5-5 s to create, even with
    Mesa's shader cache warm). Left open until the process ends."""
    key = tuple(sorted((k, v) for k, v in options.items() if v is not None))
    if key not in _OPENED:
        try:
            device = NativeDevice(**options)
        except NoAdapterError as e:
            pytest.skip(f"no WebGPU adapter: {e}")
        _OPENED[key] = Gpu(device, Kernels(device))
    return _OPENED[key]


@pytest.fixture(scope="session", params=GPU_PROFILES, ids=lambda p: p or "default")
def gpu(request: pytest.FixtureRequest) -> Gpu:
    """The adapter, once as it is and once under the phone profile; kernels compiled once per device."""
    return _open(profile=request.param)


@pytest.fixture(scope="session")
def adapter_gpu() -> Gpu:
    """The adapter as it is only: for whole-model suites, where running every case twice would cost minutes (the
    phone profile's kernel variants are covered by the kernel suites and by test_golden.py)."""
    return _open()


@pytest.fixture(scope="session")
def phone_gpu() -> Gpu:
    """The adapter under the phone profile only (for tests about the profile itself)."""
    return _open(profile="phone")


@pytest.fixture(scope="session")
def split_gpu() -> Gpu:
    """The same adapter told its bindings hold only SPLIT_BINDING bytes, so weights are split into parts."""
    return _open(max_binding_size=SPLIT_BINDING)


@pytest.fixture(scope="session")
def tiles_gpu() -> Gpu:
    """The same adapter told its bindings hold only TILES_BINDING bytes: split-layout weights of short rows (whole
    tiles in every binding) come in several parts."""
    return _open(max_binding_size=TILES_BINDING)


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> np.random.Generator:
    return seeded_rng(request)
