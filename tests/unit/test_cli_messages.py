"""What the command line tells a user, checked without a GPU or a model: how adapters are named."""
from __future__ import annotations

from llmchat.gpu.device import AdapterInfo, adapter_notice, describe_adapter, is_software_adapter


def _adapter(name: str) -> AdapterInfo:
    return AdapterInfo(name=name, backend="wgpu-native/Vulkan", software=is_software_adapter(name))


def test_a_cpu_emulation_is_named_as_the_readme_and_its_package_name_it() -> None:
    lavapipe = _adapter("llvmpipe (LLVM 15.0.6, 256 bits)")
    assert describe_adapter(lavapipe) == "llvmpipe (LLVM 15.0.6, 256 bits; lavapipe, Mesa's Vulkan on the CPU)"
    assert adapter_notice(lavapipe) == ("llmchat: llvmpipe (LLVM 15.0.6, 256 bits; lavapipe, Mesa's Vulkan on the "
                                        "CPU) runs on the CPU: correct, and slow")
    assert describe_adapter(_adapter("llvmpipe")) == "llvmpipe (lavapipe, Mesa's Vulkan on the CPU)"
    # A name that already says what it is is left alone; one we do not know is still called an emulation.
    assert describe_adapter(_adapter("SwiftShader Device (Subzero)")) == "SwiftShader Device (Subzero)"
    unknown = AdapterInfo(name="Acme Soft GPU", backend="webgpu", software=True)
    assert describe_adapter(unknown) == "Acme Soft GPU (a CPU emulation of a GPU)"


def test_a_hardware_adapter_keeps_its_name_and_gets_no_notice() -> None:
    gpu = _adapter("NVIDIA H200")
    assert describe_adapter(gpu) == "NVIDIA H200" and adapter_notice(gpu) is None
