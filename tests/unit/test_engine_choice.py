"""Which engine a load runs, and the sentence saying why (llmchat.runtime.engine_choice), over stand-in adapters;
and the CMake arguments llama-cpp-python is built with (llmchat.runtime.cpu_build)."""
from __future__ import annotations

import pytest

from llmchat.errors import InvalidRequestError, MissingDependencyError, NoAdapterError
from llmchat.gpu.device import AdapterInfo
from llmchat.runtime.cpu_build import cmake_args
from llmchat.runtime import engine_choice
from llmchat.runtime.engine_choice import choose_engine, requested_engine


class FakeDevice:
    def __init__(self, name: str, software: bool) -> None:
        self.info = AdapterInfo(name=name, backend="vulkan", software=software)
        self.closed = False

    def close(self) -> None:
        self.closed = True


def _opener(device=None):
    def open_device():
        if device is None:
            raise NoAdapterError("no WebGPU adapter was found")
        return device
    return open_device


@pytest.fixture(autouse=True)
def no_engine_asked_for(monkeypatch):
    monkeypatch.delenv("LLMCHAT_ENGINE", raising=False)  # the suite's conftest asks for webgpu


@pytest.fixture
def installed(monkeypatch):
    def set_installed(yes: bool) -> None:
        monkeypatch.setattr(engine_choice, "cpu_engine_installed", lambda: yes)
    return set_installed


def test_the_request_comes_from_the_argument_then_the_environment(monkeypatch):
    assert requested_engine(None) == "auto"
    monkeypatch.setenv("LLMCHAT_ENGINE", "cpu")
    assert requested_engine(None) == "cpu" and requested_engine("webgpu") == "webgpu"
    with pytest.raises(InvalidRequestError, match=r"^engine must be one of auto, webgpu, cpu, not 'gpu'$"):
        requested_engine("gpu")
    monkeypatch.setenv("LLMCHAT_ENGINE", "CPU")
    with pytest.raises(InvalidRequestError, match=r"^\$LLMCHAT_ENGINE must be one of"):
        requested_engine(None)


def test_auto_keeps_a_hardware_adapter(installed):
    installed(True)
    gpu = FakeDevice("NVIDIA H100", software=False)
    choice, device = choose_engine("auto", [], None, _opener(gpu))
    assert (choice.engine, device) == ("webgpu", gpu) and choice.why == "a hardware adapter (NVIDIA H100)"


def test_auto_runs_the_cpu_engine_instead_of_an_emulation(installed):
    installed(True)
    lavapipe = FakeDevice("llvmpipe (LLVM 15.0.6, 256 bits)", software=True)
    choice, device = choose_engine("auto", [], None, _opener(lavapipe))
    assert choice.engine == "cpu" and device is None and lavapipe.closed
    assert choice.describe() == ("cpu engine: the only adapter, llvmpipe (LLVM 15.0.6, 256 bits; lavapipe, Mesa's "
                                 "Vulkan on the CPU), emulates a GPU on the CPU: llama.cpp's CPU kernels are faster "
                                 "there")
    choice, device = choose_engine(None, [], None, _opener(None))
    assert choice.engine == "cpu" and choice.why == "no WebGPU adapter (no WebGPU adapter was found)"


def test_without_the_cpu_engine_auto_says_how_to_install_it(installed):
    installed(False)
    lavapipe = FakeDevice("SwiftShader Device (Subzero)", software=True)
    choice, device = choose_engine("auto", [], None, _opener(lavapipe))
    assert choice.engine == "webgpu" and device is lavapipe and not lavapipe.closed
    assert "the cpu engine, several times faster there, is not installed: CMAKE_ARGS=" in choice.why
    assert "pip install 'llmchat[cpu]'" in choice.why
    with pytest.raises(NoAdapterError, match=r"without a GPU the cpu engine \(llama.cpp\) runs models: CMAKE_ARGS"):
        choose_engine("auto", [], None, _opener(None))
    with pytest.raises(MissingDependencyError, match="llama-cpp-python, which is not installed"):
        choose_engine("cpu", [], None, _opener(None))


def test_webgpu_options_and_devices_ask_for_webgpu(installed):
    installed(True)
    lavapipe = FakeDevice("llvmpipe", software=True)
    choice, device = choose_engine("auto", ["profile"], None, _opener(lavapipe))
    assert (choice.engine, choice.why, device) == ("webgpu", "profile asked for it", lavapipe)
    given = FakeDevice("llvmpipe", software=True)
    choice, device = choose_engine(None, [], given, _opener(lavapipe))
    assert (choice.engine, choice.why, device) == ("webgpu", "a device was given", given)
    assert choose_engine("webgpu", [], None, _opener(lavapipe))[0].why == "asked for"
    with pytest.raises(InvalidRequestError, match=r"^profile, q8_activations belong to the webgpu engine; the cpu "):
        choose_engine("cpu", ["profile", "q8_activations"], None, _opener(None))
    with pytest.raises(InvalidRequestError, match=r"^a device belongs to the webgpu engine"):
        choose_engine("cpu", [], given, _opener(None))


AMX_XEON = ("processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma f16c bmi2 avx512f avx512_vnni avx512_bf16 amx_tile "
            "amx_int8 amx_bf16 avx_vnni\n")


def test_llama_cpp_is_built_for_the_instruction_sets_the_cpu_reports_without_amx():
    args = cmake_args(AMX_XEON, "x86_64").split()
    assert args[0] == "-DGGML_NATIVE=OFF" and not any("AMX" in a for a in args)
    assert {"-DGGML_AVX512=ON", "-DGGML_AVX512_VNNI=ON", "-DGGML_AVX_VNNI=ON", "-DGGML_AVX512_VBMI=OFF"} <= set(args)
    assert "-DGGML_AVX512=OFF" in cmake_args("flags : sse2 avx avx2 fma\n", "x86_64").split()
    assert cmake_args(AMX_XEON, "aarch64") == "-DGGML_NATIVE=ON"
    assert cmake_args("no flags here", "x86_64") == "-DGGML_NATIVE=ON"
