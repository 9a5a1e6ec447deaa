"""The device on wgpu-py (wgpu-native: Vulkan, Metal, D3D12; lavapipe on machines without a GPU)."""
from __future__ import annotations

import os
from dataclasses import replace

from ..errors import DeviceLostError, GPUError, NoAdapterError, ShaderError
from .device import (TEXEL_ROW, TEXTURE_ROW_BYTES, AdapterInfo, Buffer, Device, Dispatch, Kernel, Program, Texture,
                     View, is_software_adapter, texture_bytes)
from .kernels import binding_kinds
from .profiles import Profile, get_profile

# AdapterInfo's limits and the WebGPU limits they are read from (and requested as).
_LIMITS = {"max_binding_size": "max-storage-buffer-binding-size", "max_buffer_size": "max-buffer-size",
           "max_storage_buffers": "max-storage-buffers-per-shader-stage",
           "max_workgroup_storage": "max-compute-workgroup-storage-size",
           "max_workgroup_size": "max-compute-invocations-per-workgroup",
           "max_workgroups_per_dim": "max-compute-workgroups-per-dimension"}


# A shader using WGSL's packed_4x8_integer_dot_product (see AdapterInfo.dot4i8): wgpu-py's
# `wgsl_language_features` comes back empty from wgpu-native, so whether the compiler takes it is tried instead.
_DOT4_PROBE = """requires packed_4x8_integer_dot_product;
@group(0) @binding(0) var<storage, read_write> o: array<i32>;
@compute @workgroup_size(1)
fn main() {
    o[0] = dot4I8Packed(pack4xI8(vec4<i32>(o[1], -o[2], 3, 4)), u32(o[3]));
}
"""


def _round4(n: int) -> int:
    return (n + 3) & ~3


class NativeProgram(Program):
    def __init__(self, dispatches: list[Dispatch], steps: list[tuple], raw_steps: list[tuple]):
        super().__init__(dispatches)
        self.steps = steps  # (pipeline, bind_group, grid): keeps the wgpu-py objects (and so their handles) alive
        self.raw_steps = raw_steps  # (pipeline handle or None when unchanged, bind group handle, x, y, z)


class NativeDevice(Device):
    """`max_binding_size` lowers the adapter's binding limit (tests use it to exercise split tensors); `profile`
    (a name from gpu/profiles.py, a Profile, or None for $LLMCHAT_PROFILE) caps the adapter to a class of
    devices."""

    def __init__(self, *, power_preference: str = "high-performance", max_binding_size: int | None = None,
                 f16: bool | None = None, profile: str | Profile | None = None):
        os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")  # wgpu-native's Vulkan loader complains without it
        try:
            import wgpu
        except ImportError as e:  # pragma: no cover - depends on the install
            raise NoAdapterError(f"wgpu-py is not installed ({e}); install llmchat with its native dependencies") from e
        self._wgpu = wgpu
        try:
            adapter = wgpu.gpu.request_adapter_sync(power_preference=power_preference)
        except Exception as e:
            raise NoAdapterError(f"no WebGPU adapter found: {e}. On Linux without a GPU, install Mesa's Vulkan "
                                 "drivers (Debian: mesa-vulkan-drivers) for the lavapipe CPU adapter") from e
        if adapter is None:
            raise NoAdapterError("no WebGPU adapter found; on Linux without a GPU install mesa-vulkan-drivers")
        info = adapter.info
        name = info.get("device", "") or info.get("description", "") or "unknown"
        lim, feats = adapter.limits, set(adapter.features)
        offered = AdapterInfo(
            name=name, backend=f"wgpu-native/{info.get('backend_type', '')}", vendor=info.get("vendor", ""),
            driver=info.get("description", "") or "",
            software=is_software_adapter(name, fallback=info.get("adapter_type", "").upper() == "CPU"),
            f16="shader-f16" in feats and f16 is not False, subgroups="subgroup" in feats,
            subgroup_min_size=int(info.get("subgroup_min_size", 0) or 0),
            subgroup_max_size=int(info.get("subgroup_max_size", 0) or 0),
            **{field: lim[key] for field, key in _LIMITS.items()})
        # The profile caps the adapter here, where it is read, so kernel variants, weight layouts and the memory
        # plan all see the profile's device; and the device is requested with exactly these limits and features,
        # so work that reached beyond them would fail WebGPU validation rather than quietly run.
        profile = get_profile(profile)
        self.info = profile.apply(offered) if profile else offered
        want = {key: getattr(self.info, field) for field, key in _LIMITS.items()}
        if max_binding_size is not None:  # a planning limit only (split tensors in tests): the device keeps its own
            self.info = replace(self.info, max_binding_size=min(self.info.max_binding_size, max_binding_size))
        want["max-compute-workgroup-size-x"] = min(lim["max-compute-workgroup-size-x"], self.info.max_workgroup_size)
        features = [f for f, on in (("shader-f16", self.info.f16), ("subgroup", self.info.subgroups)) if on]
        self._device = adapter.request_device_sync(required_features=features, required_limits=want)
        self._queue = self._device.queue
        self.info = replace(self.info, dot4i8=self._compiles(_DOT4_PROBE))
        from wgpu.backends.wgpu_native._api import ffi, lib  # the C functions behind wgpu-py, for `run`
        self._lib, self._ffi = lib, ffi

    def _compiles(self, source: str) -> bool:
        """Whether wgpu-native compiles `source` into a compute pipeline (errors are the answer, not raised)."""
        try:
            module = self._device.create_shader_module(code=source, label="probe")
            self._device.create_compute_pipeline(layout="auto", compute={"module": module, "entry_point": "main"})
        except self._wgpu.GPUError:
            return False
        return True

    # -- buffers ---------------------------------------------------------------------------------------------------
    def buffer(self, size: int, label: str, *, uniform: bool = False, readable: bool = False) -> Buffer:
        U = self._wgpu.BufferUsage
        size = max(4, _round4(size))
        if not uniform and size > self.info.max_buffer_size:
            raise GPUError(f"buffer '{label}' needs {size} bytes; the adapter allows {self.info.max_buffer_size}")
        usage = (U.UNIFORM | U.COPY_DST) if uniform else (U.STORAGE | U.COPY_DST | U.COPY_SRC)
        handle = self._guard(lambda: self._device.create_buffer(size=size, usage=usage, label=label))
        return Buffer(size=size, label=label, handle=handle, uniform=uniform)

    def write(self, buffer: Buffer, data, offset: int = 0) -> None:
        mv = memoryview(data).cast("B")
        if len(mv) % 4:  # WebGPU writes are in 4-byte units
            mv = memoryview(bytes(mv) + bytes(4 - len(mv) % 4))
        if offset + len(mv) > buffer.size:
            raise GPUError(f"write of {len(mv)} bytes at {offset} overruns buffer '{buffer.label}' ({buffer.size})")
        self._guard(lambda: self._queue.write_buffer(buffer.handle, offset, mv))

    def read(self, buffer: Buffer, offset: int = 0, size: int | None = None) -> bytes:
        size = buffer.size - offset if size is None else size
        return bytes(self._guard(lambda: self._queue.read_buffer(buffer.handle, offset, _round4(size))))[:size]

    textures = True

    def texture_from(self, buffer: Buffer) -> Texture:
        T = self._wgpu.TextureUsage
        row = TEXTURE_ROW_BYTES
        rows, rest = divmod(buffer.size, row)
        if buffer.size % 16:
            raise GPUError(f"buffer '{buffer.label}' ({buffer.size} bytes) does not fill whole texels")

        def make():
            texture = self._device.create_texture(size=(TEXEL_ROW, rows + (rest > 0), 1), format="rgba32uint",
                                                  usage=T.TEXTURE_BINDING | T.COPY_DST, label=buffer.label)
            encoder = self._device.create_command_encoder()
            # Whole rows in one copy, the last part-row in another (a copy's rows must all be full).
            for first, n, width in ((0, rows, TEXEL_ROW), (rows, 1 if rest else 0, rest // 16)):
                if n:
                    encoder.copy_buffer_to_texture(
                        {"buffer": buffer.handle, "offset": first * row, "bytes_per_row": row, "rows_per_image": n},
                        {"texture": texture, "origin": (0, first, 0)}, (width, n, 1))
            self._queue.submit([encoder.finish()])
            return texture, texture.create_view()

        return Texture(size=texture_bytes(buffer.size), label=buffer.label, handle=self._guard(make))

    # -- kernels and programs --------------------------------------------------------------------------------------
    def kernel(self, name: str, source: str, constants: dict | None = None) -> Kernel:
        wgpu = self._wgpu
        try:
            entries = [{"binding": i, "visibility": wgpu.ShaderStage.COMPUTE,
                        **({"texture": {"sample_type": "uint"}} if kind == "texture" else {"buffer": {"type": kind}})}
                       for i, kind in enumerate(binding_kinds(source))]
            group = self._device.create_bind_group_layout(entries=entries, label=name)
            layout = self._device.create_pipeline_layout(bind_group_layouts=[group], label=name)
            module = self._device.create_shader_module(code=source, label=name)
            compute = {"module": module, "entry_point": "main"}
            if constants:
                compute["constants"] = constants
            pipeline = self._device.create_compute_pipeline(layout=layout, compute=compute, label=name)
        except wgpu.GPUError as e:
            raise ShaderError(f"kernel '{name}' failed to compile:\n{e}") from None
        return Kernel(name=name, handle=(pipeline, group))

    def program(self, dispatches: list[Dispatch]) -> NativeProgram:
        steps = []
        for d in dispatches:
            pipeline, layout = d.kernel.handle
            entries = []
            for i, b in enumerate(d.bindings):
                if isinstance(b, Texture):
                    entries.append({"binding": i, "resource": b.handle[1]})
                    continue
                v = b if isinstance(b, View) else View(b)
                size = v.buffer.size - v.offset if v.size is None else v.size
                entries.append({"binding": i, "resource": {"buffer": v.buffer.handle, "offset": v.offset, "size": size}})
            try:
                group = self._device.create_bind_group(layout=layout, entries=entries)
            except self._wgpu.GPUError as e:
                raise GPUError(f"binding buffers to kernel '{d.kernel.name}' failed:\n{e}") from None
            steps.append((pipeline, group, d.grid))
        raw_steps, last = [], None
        for pipeline, group, grid in steps:
            raw_steps.append((pipeline._internal if pipeline is not last else None, group._internal, *grid))
            last = pipeline
        return NativeProgram(dispatches, steps, raw_steps)

    def run(self, program: Program) -> None:
        if not isinstance(program, NativeProgram):
            raise GPUError("a program recorded for another device cannot run on this one")
        # The dispatches go straight to wgpu-native's C functions with handles prepared by `program`: wgpu-py's
        # wrappers check arguments and allocate per call (about 17 us a dispatch), which on a GPU that finishes a
        # token in milliseconds would be most of the step. Validation errors surface at `submit`, which goes
        # through wgpu-py and raises them.
        lib, null = self._lib, self._ffi.NULL
        set_pipeline = lib.wgpuComputePassEncoderSetPipeline
        set_group = lib.wgpuComputePassEncoderSetBindGroup
        dispatch = lib.wgpuComputePassEncoderDispatchWorkgroups

        def submit():
            encoder = self._device.create_command_encoder()
            cpass = encoder.begin_compute_pass()
            handle = cpass._internal
            for pipeline, group, x, y, z in program.raw_steps:
                if pipeline is not None:
                    set_pipeline(handle, pipeline)
                set_group(handle, 0, group, 0, null)
                dispatch(handle, x, y, z)
            cpass.end()
            self._queue.submit([encoder.finish()])
        self._guard(submit)

    def _guard(self, fn):
        try:
            return fn()
        except self._wgpu.GPUError as e:
            text = str(e)
            if "lost" in text.lower():
                raise DeviceLostError(f"the GPU device was lost: {text}") from None
            raise GPUError(text) from None

    def close(self) -> None:
        self._device.destroy()
