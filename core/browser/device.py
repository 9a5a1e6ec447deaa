"""The device inside Pyodide: the page's WebGPU (`navigator.gpu`), driven through a small JS bridge (web/gpu.js).

Crossing from Python into JS costs a few microseconds per call, so the split is: Python decides (sizes, kernels,
the recorded dispatch list), JS acts. Objects stay on the JS side in tables and Python holds small integer ids.

- `program` hands the whole dispatch list to JS once, as one flat list of integers; JS builds the bind groups.
- `write` and `run` only queue work in Python; the queue travels with the next call that has to reach JS (a
  `read`, usually), so a decode step crosses into JS once, whatever the model's depth.
- `write_from` with a browser source moves weights from the browser's model store straight into GPU buffers;
  the bytes never become Python objects. It returns at once: the copies stream in while the programs are
  recorded and their pipelines compile, and the next `read` waits for them.
- Pipelines compile in parallel: `kernel` returns at once and `program` waits for the kernels it uses;
  `run_once` (a load's repacks) does not wait at all: JS binds and submits it in order once its kernels are ready.
- Asynchronous WebGPU results (pipelines, bind-group validation, buffer mapping) are awaited with `run_sync`,
  which suspends the WebAssembly stack (JSPI) so the core keeps its synchronous shape. Callers must enter Python
  through a promising call (the worker does).

Every JS failure becomes a `GPUError` (WebGPU's asynchronous errors surface at the next `program` or `read`);
running out of GPU memory is `ModelTooLargeError`, a lost device `DeviceLostError` carrying the browser's reason.
"""
from __future__ import annotations

from array import array

from ..errors import DeviceLostError, GPUError, ModelTooLargeError, NoAdapterError, ShaderError
from ..gpu.device import AdapterInfo, Buffer, Device, Dispatch, Kernel, Program, View, is_software_adapter
from ..gpu.kernels import binding_kinds
from ..gpu.profiles import Profile, get_profile

# In the queue's meta, (0, RELEASE, buffer id, 0) frees a buffer (web/gpu.js apply); program ids never reach it.
RELEASE = 0xFFFFFFFF


def _round4(n: int) -> int:
    return (n + 3) & ~3


def adapter_info(raw: dict, max_binding_size: int | None = None, profile: str | Profile | None = None) -> AdapterInfo:
    """AdapterInfo from the bridge's description of the adapter (web/gpu.js `describe`), capped by `profile` (see
    gpu/profiles.py: the same numbers as natively; the page only passes the name)."""
    limits = raw["limits"]
    features = set(raw["features"])
    text = " ".join(str(raw.get(k, "")) for k in ("vendor", "architecture", "device", "description"))
    software = is_software_adapter(text, fallback=bool(raw.get("isFallbackAdapter")))
    binding = int(limits["maxStorageBufferBindingSize"])
    if max_binding_size is not None:
        binding = min(binding, max_binding_size)
    name = raw.get("description") or raw.get("device") or raw.get("architecture") or "WebGPU adapter"
    info = AdapterInfo(
        name=str(name), backend="browser/webgpu", vendor=str(raw.get("vendor", "")), software=software,
        f16="shader-f16" in features, subgroups="subgroups" in features, dot4i8=bool(raw.get("packed4x8")),
        subgroup_min_size=int(raw.get("subgroupMinSize", 0) or 0),
        subgroup_max_size=int(raw.get("subgroupMaxSize", 0) or 0),
        max_binding_size=binding, max_buffer_size=int(limits["maxBufferSize"]),
        max_workgroup_size=int(limits["maxComputeInvocationsPerWorkgroup"]),
        max_workgroup_storage=int(limits["maxComputeWorkgroupStorageSize"]),
        max_storage_buffers=int(limits["maxStorageBuffersPerShaderStage"]),
        max_workgroups_per_dim=int(limits["maxComputeWorkgroupsPerDimension"]))
    profile = get_profile(profile)
    return profile.apply(info) if profile else info


class BrowserProgram(Program):
    def __init__(self, dispatches: list[Dispatch], js_id: int):
        super().__init__(dispatches)
        self.js_id = js_id


class BrowserDevice(Device):
    """`bridge` is the worker's GPU bridge (web/gpu.js); by default the global `llmchatGPU` the worker sets."""

    def __init__(self, bridge=None, *, max_binding_size: int | None = None, profile: str | Profile | None = None,
                 **_ignored):
        try:
            import js
            from pyodide.ffi import JsException, run_sync, to_js
        except ImportError as e:  # pragma: no cover - only reachable outside Pyodide
            raise NoAdapterError(f"the browser device needs Pyodide ({e})") from None
        self._bridge = bridge if bridge is not None else getattr(js, "llmchatGPU", None)
        if self._bridge is None:
            raise NoAdapterError("no WebGPU device: the page's worker did not open one (navigator.gpu missing?)")
        self._run_sync, self._to_js, self._JsException = run_sync, to_js, JsException
        # The page opened the WebGPU device before Python started, with the adapter's own limits; the profile
        # caps what the engine sees and uses (kernel variants, layouts, the memory plan) from here on.
        self.info = adapter_info(self._bridge.describe().to_py(), max_binding_size, profile)
        # Queued work: write bytes back to back, and (buffer id, offset, start, length) per write,
        # (0, program id, 0, 0) per replay or (0, RELEASE, buffer id, 0) per released buffer.
        self._blob = bytearray()
        self._meta = array("I")

    # -- buffers ---------------------------------------------------------------------------------------------------
    def buffer(self, size: int, label: str, *, uniform: bool = False, readable: bool = False) -> Buffer:
        size = max(4, _round4(size))
        if not uniform and size > self.info.max_buffer_size:
            raise GPUError(f"buffer '{label}' needs {size} bytes; the adapter allows {self.info.max_buffer_size}")
        handle = self._call(lambda: self._bridge.createBuffer(size, label, uniform))
        return Buffer(size=size, label=label, handle=handle, uniform=uniform)

    def release(self, buffer: Buffer) -> None:
        self._meta.extend((0, RELEASE, buffer.handle, 0))  # after the writes and replays queued before it

    def write(self, buffer: Buffer, data, offset: int = 0) -> None:
        mv = memoryview(data).cast("B")
        n = _round4(len(mv))  # WebGPU writes are in 4-byte units
        if offset + n > buffer.size:
            raise GPUError(f"write of {len(mv)} bytes at {offset} overruns buffer '{buffer.label}' ({buffer.size})")
        self._meta.extend((buffer.handle, offset, len(self._blob), n))
        self._blob += mv
        self._blob += bytes(n - len(mv))

    def write_from(self, buffer: Buffer, offset: int, source, src_offset: int, length: int,
                   chunk: int = 16 << 20) -> None:
        store = getattr(source, "js_store", None)
        if store is None:  # bytes that are already in Python (tests, small sources)
            super().write_from(buffer, offset, source, src_offset, length, chunk)
            return
        if offset + length > buffer.size:
            raise GPUError(f"write of {length} bytes at {offset} overruns buffer '{buffer.label}' ({buffer.size})")
        self._flush()  # what Python queued before goes first
        self._call(lambda: self._bridge.writeFrom(buffer.handle, offset, store, src_offset, length))

    def read(self, buffer: Buffer, offset: int = 0, size: int | None = None) -> bytes:
        size = buffer.size - offset if size is None else size
        blob, meta = self._take_writes()
        data = self._await(lambda: self._bridge.read(buffer.handle, offset, _round4(size), blob, meta))
        return data.to_bytes()[:size]

    # -- kernels and programs --------------------------------------------------------------------------------------
    def kernel(self, name: str, source: str, constants: dict | None = None) -> Kernel:
        """Starts compiling and returns at once: pipelines compile in parallel, and `program` waits for them (a
        compile error surfaces there as ShaderError, naming the kernel)."""
        kinds = self._to_js(binding_kinds(source))
        consts = self._to_js(constants or {}, dict_converter=_js_object)
        handle = self._call(lambda: self._bridge.kernel(name, source, kinds, consts))
        return Kernel(name=name, handle=handle)

    def program(self, dispatches: list[Dispatch]) -> BrowserProgram:
        flat, names = self._dispatch_list(dispatches)
        js_id = self._await(lambda: self._bridge.program(flat, names))
        return BrowserProgram(dispatches, js_id)

    def run_once(self, dispatches: list[Dispatch]) -> None:
        """Queued in JS behind the work before it, and returns at once. A load repacks each weight this way, so
        Python records the whole model without waiting for the GPU process (on SwiftShader, busy executing and
        compiling, SmolLM2's 151 repacks waited 1 s in all) and asks for the decode step's kernels while the weights
        still upload; gpu.js allocates a buffer when the queued work first uses it, so the file-layout rows waiting
        for their repack take memory one weight at a time."""
        self._flush()  # what Python queued before goes first
        flat, names = self._dispatch_list(dispatches)
        self._call(lambda: self._bridge.runOnce(flat, names))

    def _dispatch_list(self, dispatches: list[Dispatch]):
        """One flat list: per dispatch kernel, grid x/y/z, binding count, then (buffer, offset, size) per binding;
        and the kernels' names (labels)."""
        flat = array("I", [len(dispatches)])
        for d in dispatches:
            flat.extend((d.kernel.handle, *d.grid, len(d.bindings)))
            for b in d.bindings:
                v = b if isinstance(b, View) else View(b)
                flat.extend((v.buffer.handle, v.offset, v.buffer.size - v.offset if v.size is None else v.size))
        return self._to_js(memoryview(flat)), self._to_js([d.kernel.name for d in dispatches])

    def run(self, program: Program) -> None:
        if not isinstance(program, BrowserProgram):
            raise GPUError("a program recorded for another device cannot run on this one")
        self._meta.extend((0, program.js_id, 0, 0))  # buffer id 0 marks a replay (web/gpu.js `apply`)

    def close(self) -> None:
        self._flush()
        self._call(lambda: self._bridge.destroy())

    # -- plumbing --------------------------------------------------------------------------------------------------
    def _take_writes(self):
        """The queued work as JS typed arrays (copies), leaving the queue empty."""
        if not self._meta:
            return None, None
        blob, meta = self._to_js(memoryview(self._blob)), self._to_js(memoryview(self._meta))
        self._blob, self._meta = bytearray(), array("I")
        return blob, meta

    def _flush(self) -> None:
        blob, meta = self._take_writes()
        if meta is not None:
            self._call(lambda: self._bridge.apply(blob, meta))

    def _call(self, fn):
        try:
            return fn()
        except self._JsException as e:
            raise self._error(e) from None

    def _await(self, fn):
        try:
            return self._run_sync(fn())
        except self._JsException as e:
            raise self._error(e) from None

    def _error(self, e: Exception) -> GPUError:
        reason = self._bridge.lostReason
        if isinstance(reason, str):  # JS null (alive) arrives as pyodide's jsnull, which is not None
            return DeviceLostError(f"the GPU device was lost: {reason}")
        kind = getattr(e, "name", "")
        if kind == "ShaderError":
            return ShaderError(str(e))
        if kind == "OutOfMemory":
            return ModelTooLargeError(str(e))
        return GPUError(str(e))


def _js_object(entries):
    import js
    return js.Object.fromEntries(entries)
