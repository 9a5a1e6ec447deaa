"""The thin device interface the model talks to: buffers, kernels, recorded programs, readback.

Two implementations share it: `native.py` (wgpu-py: Vulkan, Metal, D3D12) and the browser device (Pyodide over
`navigator.gpu`). Model code only ever sees these verbs, so the same model runs in both places.

Record once, replay: a `Program` is a list of dispatches whose bind groups are built once; a decode step only writes
a few small parameter buffers and replays the program.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from ..errors import GPUError


# Names by which CPU emulations of WebGPU describe themselves (web/gpu.js `isSoftwareAdapter` holds the same list
# for the page, which must decide before Python starts; a test keeps the two equal).
SOFTWARE_ADAPTERS = ("swiftshader", "llvmpipe", "lavapipe", "warp", "softpipe", "basic render")


def is_software_adapter(description: str, fallback: bool = False) -> bool:
    """Whether an adapter is a CPU emulation (correct but slow): the API says so, or its description names one."""
    text = description.lower()
    return fallback or any(name in text for name in SOFTWARE_ADAPTERS)


# What the emulations are, in the words their projects and packages use: Mesa's Vulkan driver on the CPU is called
# lavapipe (the README, Debian's mesa-vulkan-drivers) but its device names itself after its compiler, llvmpipe.
SOFTWARE_GLOSSES = {
    "llvmpipe": "lavapipe, Mesa's Vulkan on the CPU",
    "swiftshader": "SwiftShader, Google's Vulkan on the CPU",
    "warp": "WARP, Direct3D on the CPU",
    "basic render": "WARP, Direct3D on the CPU",
    "softpipe": "softpipe, Mesa's reference driver on the CPU",
}


def describe_adapter(info: AdapterInfo) -> str:
    """The adapter's name as messages show it: a CPU emulation's own name with what it is, so that
    "llvmpipe (LLVM 15.0.6, 256 bits)" reads "llvmpipe (LLVM 15.0.6, 256 bits; lavapipe, Mesa's Vulkan on the CPU)"."""
    text = info.name.lower()
    gloss = next((g for key, g in SOFTWARE_GLOSSES.items() if key in text), None)
    if gloss is None and info.software:
        gloss = "a CPU emulation of a GPU"
    if gloss is None or gloss.split(",")[0].lower() in text:
        return info.name
    return f"{info.name[:-1]}; {gloss})" if info.name.endswith(")") else f"{info.name} ({gloss})"


def adapter_notice(info: AdapterInfo) -> str | None:
    """The line a command prints about an adapter that is a CPU emulation (None for a hardware adapter)."""
    if not info.software:
        return None
    return f"llmchat: {describe_adapter(info)} runs on the CPU: correct, and slow"


# Offsets of bindings within one buffer are multiples of this (WebGPU's largest minimum offset alignment, bytes).
BINDING_ALIGN = 256


@dataclass(frozen=True)
class AdapterInfo:
    """What the adapter is and what it can do; reported by `llmchat bench` and used to pick kernel variants."""

    name: str
    backend: str
    vendor: str = ""
    driver: str = ""  # driver name and version where the adapter reports them (kernel choices are cached per driver)
    software: bool = False  # a CPU emulation (lavapipe, SwiftShader, WARP): correct but slow
    f16: bool = False  # `shader-f16`
    subgroups: bool = False
    # WGSL's packed_4x8_integer_dot_product language feature (dot4I8Packed, pack4xI8): the browser lists it in
    # navigator.gpu.wgslLanguageFeatures; wgpu-native does not report language features, so a shader using it is
    # compiled once to find out. Whether the hardware has the instruction or the compiler emulates it is not visible
    # through WebGPU: only measuring tells (variants.py keeps int8 dot products off unless chosen or measured).
    dot4i8: bool = False
    subgroup_min_size: int = 0
    subgroup_max_size: int = 0
    max_binding_size: int = 128 << 20  # maxStorageBufferBindingSize, in bytes
    max_buffer_size: int = 256 << 20  # in bytes
    max_workgroup_size: int = 256  # maxComputeInvocationsPerWorkgroup
    max_workgroup_storage: int = 16384  # in bytes
    max_storage_buffers: int = 8  # per shader stage
    max_workgroups_per_dim: int = 65535
    profile: str = ""  # the device profile these limits were capped by (gpu/profiles.py); "" for none
    gpu_budget: int = 0  # GPU memory a model may take, in bytes (0: unknown, nothing is refused for memory)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(eq=False)
class Buffer:
    """A GPU buffer; `handle` belongs to the device implementation."""

    size: int  # in bytes
    label: str
    handle: object = field(repr=False)
    uniform: bool = False


@dataclass(frozen=True)
class View:
    """A byte range of a buffer bound to one binding (offsets must respect the adapter's alignment, 256 bytes)."""

    buffer: Buffer
    offset: int = 0  # in bytes
    size: int | None = None  # in bytes; None = to the end


@dataclass(eq=False)
class Texture:
    """A weight's bytes in a 2-D rgba32uint texture of TEXEL_ROW texels a row (shaders/weights_texture.wgsl), made by
    `Device.texture_from`; `size` is the bytes it holds (whole rows)."""

    size: int
    label: str
    handle: object = field(repr=False)


TEXEL_ROW = 4096  # texels (16 bytes each) per row of a weight texture
TEXTURE_ROW_BYTES = TEXEL_ROW * 16  # 64 KiB


def texture_bytes(n: int) -> int:
    """Bytes of the texture that holds `n` bytes: whole rows."""
    return -(-n // TEXTURE_ROW_BYTES) * TEXTURE_ROW_BYTES


Binding = Buffer | View | Texture


@dataclass(eq=False)
class Kernel:
    """A compiled compute pipeline."""

    name: str
    handle: object = field(repr=False)


@dataclass(frozen=True)
class Traffic:
    """The bytes one dispatch moves, each distinct byte counted once however often the kernel touches it: the
    least memory traffic the dispatch can cost, which the roofline report (llmchat.runtime.roofline) divides by its time."""

    weights: int = 0  # model weights read
    reads: int = 0  # everything else read: activations, the KV cache, norm and bias vectors
    writes: int = 0

    @property
    def total(self) -> int:
        return self.weights + self.reads + self.writes


@dataclass(frozen=True)
class Dispatch:
    """One kernel launch: bindings in @binding order of @group(0), and a workgroup grid; `traffic` is what the
    operation that recorded it says it moves (None where nobody counted)."""

    kernel: Kernel
    bindings: tuple[Binding, ...]
    grid: tuple[int, int, int]
    traffic: Traffic | None = None


class Program:
    """A recorded list of dispatches, prepared once by the device (bind groups made) and replayed by `Device.run`."""

    def __init__(self, dispatches: list[Dispatch]):
        self.dispatches = dispatches

    def __len__(self) -> int:
        return len(self.dispatches)


class Device(ABC):
    """A WebGPU device. Errors surface as the `GPUError` family from `llmchat.errors`."""

    info: AdapterInfo
    textures = False  # whether `texture_from` is implemented

    @abstractmethod
    def buffer(self, size: int, label: str, *, uniform: bool = False, readable: bool = False) -> Buffer:
        """A zero-filled buffer of at least `size` bytes (rounded up to 4)."""

    @abstractmethod
    def write(self, buffer: Buffer, data: bytes | bytearray | memoryview, offset: int = 0) -> None:
        """Queue a write of `data` into `buffer` at `offset`; ordered before the next `run`."""

    def write_from(self, buffer: Buffer, offset: int, source, src_offset: int, length: int,
                   chunk: int = 16 << 20) -> None:
        """Copy `length` bytes of a byte `Source` (llmchat.gguf.sources) into `buffer` at `offset`, in chunks.

        Weights are loaded through this verb so a device can move bytes its own way: natively they pass through a
        memory map; the browser device streams them from the network into the GPU without Python seeing them.
        """
        for done in range(0, length, chunk):
            n = min(chunk, length - done)
            self.write(buffer, source.read(src_offset + done, n), offset + done)

    def release(self, buffer: Buffer) -> None:
        """Free `buffer` once the work queued before this call is done; it must not be used again. Devices whose
        buffers are freed with their last reference (wgpu-py's) need do nothing; the browser's are ids into a
        table that would otherwise hold them, and their memory, for the engine's life."""

    def texture_from(self, buffer: Buffer) -> Texture:
        """A texture holding `buffer`'s bytes (a multiple of 16), copied on the GPU; the buffer can be dropped after.
        Only devices whose `textures` is true offer it (variants.py reads weights from textures where they pay)."""
        raise GPUError(f"{self.info.name}: this device does not hold weights in textures")

    @abstractmethod
    def kernel(self, name: str, source: str, constants: dict[str, float | int] | None = None) -> Kernel:
        """Compile WGSL `source` (entry point `main`) into a pipeline; raises ShaderError with the compiler's text."""

    @abstractmethod
    def program(self, dispatches: list[Dispatch]) -> Program:
        """Prepare dispatches for replay (bind groups built here, once)."""

    @abstractmethod
    def run(self, program: Program) -> None:
        """Submit one replay of `program`."""

    def run_once(self, dispatches: list[Dispatch]) -> None:
        """Submit `dispatches` once, keeping nothing for a replay (a load's one-off work: repacking weights). A
        device may return before their kernels are ready, in order with the work queued before and after; their
        errors then surface at the next `program` or `read`."""
        self.run(self.program(dispatches))

    @abstractmethod
    def read(self, buffer: Buffer, offset: int = 0, size: int | None = None) -> bytes:
        """Wait for submitted work and read bytes back."""

    def close(self) -> None:
        """Release the device."""
