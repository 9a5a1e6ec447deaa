"""How llama-cpp-python is compiled for the CPU at hand: `python -m llmchat.runtime.cpu_build` prints the CMAKE_ARGS.

llama-cpp-python builds llama.cpp from source with `-DGGML_NATIVE=ON` by default, which compiles for every
extension the CPU reports. Some virtual machines report AMX on Xeons whose hypervisor does not run it, and there a
native build crashes (SIGSEGV) in its first decode. So on x86 the instruction sets are named one by one, each on
where /proc/cpuinfo lists it, and AMX is left out; elsewhere (ARM, macOS) the native build is right.

    CMAKE_ARGS="$(python -m llmchat.runtime.cpu_build)" pip install 'llmchat[cpu]'
"""
from __future__ import annotations

import platform
from pathlib import Path

# /proc/cpuinfo flag -> ggml's CMake option
X86_SETS = {"avx": "AVX", "avx2": "AVX2", "fma": "FMA", "f16c": "F16C", "bmi2": "BMI2", "avx512f": "AVX512",
            "avx512vbmi": "AVX512_VBMI", "avx512_vnni": "AVX512_VNNI", "avx512_bf16": "AVX512_BF16",
            "avx_vnni": "AVX_VNNI"}


def cpu_flags(cpuinfo: str) -> set[str]:
    """The flags of the first processor in /proc/cpuinfo's text."""
    line = next((line for line in cpuinfo.splitlines() if line.startswith("flags")), "")
    return set(line.partition(":")[2].split())


def cmake_args(cpuinfo: str | None = None, machine: str | None = None) -> str:
    """CMAKE_ARGS for llama-cpp-python on this machine (or on one with `cpuinfo` text and `machine` type)."""
    machine = (machine or platform.machine()).lower()
    if machine not in ("x86_64", "amd64", "i686", "i386"):
        return "-DGGML_NATIVE=ON"
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return "-DGGML_NATIVE=ON"
    flags = cpu_flags(cpuinfo)
    if not flags:
        return "-DGGML_NATIVE=ON"
    return " ".join(["-DGGML_NATIVE=OFF", *(f"-DGGML_{name}={'ON' if flag in flags else 'OFF'}"
                                            for flag, name in X86_SETS.items())])


if __name__ == "__main__":
    print(cmake_args())
