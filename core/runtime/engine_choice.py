"""Which engine runs a model, and why: the WebGPU engine (our kernels, runtime/engine.py) or the CPU engine
(llama.cpp's kernels through llama-cpp-python, cpu_engine.py). One rule for the CLI (--engine), the Python API
(engine=) and $LLMCHAT_ENGINE, and one sentence saying what ran and why, which every report repeats.

`auto` (the default) runs WebGPU on a hardware adapter. A CPU emulation of a GPU (lavapipe, SwiftShader, WARP)
is correct but several times slower than llama.cpp's CPU kernels on the same cores, so where the only adapter is
one, or there is none, `auto` runs the CPU engine; where that is not installed it runs WebGPU on the emulator as
before and says how to install it. Options that only the WebGPU engine has (a device profile, int8 dot products,
8-bit activations, kernel tuning) ask for WebGPU: `auto` keeps it, `cpu` refuses them by name.
"""
from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import InvalidRequestError, MissingDependencyError, NoAdapterError
from ..gpu.device import Device, describe_adapter

ENGINES = ("auto", "webgpu", "cpu")
ENV = "LLMCHAT_ENGINE"
# How the cpu engine is installed, llama.cpp compiled for this CPU (cpu_build.py says why the arguments).
CPU_INSTALL = ("CMAKE_ARGS=\"$(python -m llmchat.runtime.cpu_build)\" pip install 'llmchat[cpu]' "
               "(docs/cli.md, Engines)")


@dataclass(frozen=True)
class EngineChoice:
    """The engine a load runs ("webgpu" or "cpu") and why, in words a person reads."""

    engine: str
    why: str

    def describe(self) -> str:
        return f"{self.engine} engine: {self.why}"

    def as_dict(self) -> dict:
        return {"engine": self.engine, "why": self.why}


def cpu_engine_installed() -> bool:
    """Whether llama-cpp-python can be imported (found without loading its library)."""
    return importlib.util.find_spec("llama_cpp") is not None


def requested_engine(engine: str | None) -> str:
    """The engine asked for: `engine`, else $LLMCHAT_ENGINE, else "auto"; refused when it names none."""
    name = engine if engine is not None else os.environ.get(ENV) or "auto"
    if name not in ENGINES:
        where = "engine" if engine is not None else f"${ENV}"
        raise InvalidRequestError(f"{where} must be one of {', '.join(ENGINES)}, not {name!r}")
    return name


def choose_engine(engine: str | None, gpu_options: list[str], device: Device | None,
                  open_device: Callable[[], Device]) -> tuple[EngineChoice, Device | None]:
    """The engine to run and, for WebGPU, the device it runs on (`device` when one was given, else
    `open_device()`). `gpu_options` names the WebGPU-only options the caller set."""
    name = requested_engine(engine)
    if name == "cpu":
        if device is not None or gpu_options:
            given = ", ".join(gpu_options) if gpu_options else "a device"
            raise InvalidRequestError(f"{given} belong{'s' if len(gpu_options) < 2 else ''} to the webgpu engine; "
                                      "the cpu engine (llama.cpp) takes none: leave them out, or ask for "
                                      "engine webgpu")
        _require_cpu_engine()
        return EngineChoice("cpu", "asked for"), None
    if name == "webgpu" or device is not None or gpu_options:
        why = ("asked for" if name == "webgpu" else
               "a device was given" if device is not None else f"{', '.join(gpu_options)} asked for it")
        return EngineChoice("webgpu", why), device or open_device()
    try:
        device = open_device()
    except NoAdapterError as exc:
        if not cpu_engine_installed():
            raise NoAdapterError(f"{exc}; without a GPU the cpu engine (llama.cpp) runs models: {CPU_INSTALL}") \
                from None
        return EngineChoice("cpu", f"no WebGPU adapter ({exc})"), None
    info = device.info
    if not info.software:
        return EngineChoice("webgpu", f"a hardware adapter ({info.name})"), device
    emulated = f"the only adapter, {describe_adapter(info)}, emulates a GPU on the CPU"
    if cpu_engine_installed():
        device.close()
        return EngineChoice("cpu", f"{emulated}: llama.cpp's CPU kernels are faster there"), None
    return EngineChoice("webgpu", f"{emulated}, and the cpu engine, several times faster there, is not "
                                  f"installed: {CPU_INSTALL}"), device


def _require_cpu_engine() -> None:
    if not cpu_engine_installed():
        raise MissingDependencyError(f"the cpu engine runs llama.cpp through llama-cpp-python, which is not "
                                     f"installed: {CPU_INSTALL}")
