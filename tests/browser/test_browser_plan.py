"""The browser worker's judgement of a model before any weights are downloaded (llmchat.browser.runtime.plan)."""
from __future__ import annotations

import pytest

from llmchat.errors import ContextLengthWarning, InvalidRequestError, ModelTooLargeError
from llmchat.gguf.file import open_gguf
from llmchat.gpu.device import AdapterInfo
from llmchat.gpu.kvlayout import cache_type
from llmchat.browser.runtime import plan

PHONE = AdapterInfo(name="phone", backend="browser/webgpu", max_binding_size=128 << 20, max_buffer_size=256 << 20)


@pytest.fixture(scope="module")
def model(smollm2_path):
    with open_gguf(smollm2_path) as gguf:
        yield gguf


def test_smollm2_fits_a_phone_class_adapter(model):
    need = plan(model, PHONE, context=2048, gpu_budget=2 << 30)
    assert need["weights"] == need["upload"] == sum(t.nbytes for t in model.tensors.values())
    # 30 layers x (K + V) x 2048 positions x 3 KV heads x 64 dims x 4 bytes
    assert need["kv_cache"] == 30 * 2 * 2048 * 3 * 64 * 4
    assert need["total"] == need["weights"] + need["kv_cache"] + need["activations"]
    assert need["context"] == 2048 and need["layers"] == 30


def test_a_context_beyond_the_trained_length_runs_as_asked_with_a_warning(model):
    trained = model.metadata["llama.context_length"]
    with pytest.warns(ContextLengthWarning, match=f"context of {2 * trained} tokens as asked, longer than the {trained}"):
        assert plan(model, PHONE, context=2 * trained)["context"] == 2 * trained


def test_too_little_gpu_memory_is_refused_with_the_numbers(model):
    with pytest.raises(ModelTooLargeError, match=r"of GPU memory \(weights .*GPU memory budget"):
        plan(model, PHONE, context=2048, gpu_budget=64 << 20)


def test_a_kv_cache_layer_beyond_the_binding_limit_is_refused(model):
    tiny = AdapterInfo(name="tiny", backend="browser/webgpu", max_binding_size=1 << 20)
    with pytest.raises(ModelTooLargeError, match="context-size"):
        plan(model, tiny, context=2048)


def test_adapter_description_becomes_adapter_info():
    from llmchat.browser.device import adapter_info
    limits = {"maxStorageBufferBindingSize": 1 << 30, "maxBufferSize": 1 << 30,
              "maxComputeInvocationsPerWorkgroup": 256, "maxComputeWorkgroupStorageSize": 32768,
              "maxStorageBuffersPerShaderStage": 10, "maxComputeWorkgroupsPerDimension": 65535}
    swiftshader = {"vendor": "google", "architecture": "swiftshader", "isFallbackAdapter": False,
                   "subgroupMinSize": 4, "subgroupMaxSize": 4, "features": ["subgroups"], "limits": limits}
    info = adapter_info(swiftshader)
    assert info.software and info.subgroups and not info.f16
    assert (info.max_binding_size, info.max_storage_buffers, info.subgroup_min_size) == (1 << 30, 10, 4)
    assert adapter_info(swiftshader, max_binding_size=1024).max_binding_size == 1024
    gpu = {**swiftshader, "vendor": "apple", "architecture": "metal-3", "features": ["shader-f16"]}
    info = adapter_info(gpu)
    assert not info.software and info.f16 and not info.subgroups and not info.dot4i8
    assert adapter_info({**gpu, "isFallbackAdapter": True}).software
    assert adapter_info({**gpu, "packed4x8": True}).dot4i8  # wgslLanguageFeatures' packed_4x8_integer_dot_product


def test_the_page_and_python_know_the_same_software_adapters():
    """The page decides before Python starts (web/adapter.js); both lists must name the same emulators."""
    import re
    from pathlib import Path

    from llmchat.gpu.device import SOFTWARE_ADAPTERS, is_software_adapter
    source = (Path(__file__).resolve().parents[2] / "web" / "adapter.js").read_text()
    listed = re.search(r"SOFTWARE_ADAPTERS = \[([^\]]*)\]", source).group(1)
    assert tuple(re.findall(r'"([^"]+)"', listed)) == SOFTWARE_ADAPTERS
    assert is_software_adapter("llvmpipe (LLVM 15.0.6, 256 bits)") and is_software_adapter("x", fallback=True)
    assert not is_software_adapter("NVIDIA H200")


def test_a_cpu_emulator_holds_weights_repacked_but_reads_the_file_once(model):
    """On software adapters weights are repacked on the GPU (the split layout): more GPU bytes, same upload."""
    swiftshader = AdapterInfo(name="SwiftShader", backend="browser/webgpu", software=True, max_binding_size=1 << 30)
    need = plan(model, swiftshader, context=512)
    assert need["upload"] == sum(t.nbytes for t in model.tensors.values()) < need["weights"]
    assert "q4_1/split" in need["kernels"]


def test_an_adapter_with_shader_f16_plans_a_half_size_f16_cache(model):
    """Adapters with shader-f16 keep K/V in f16, others f32 (kvlayout.cache_type)."""
    gpu = AdapterInfo(name="gpu", backend="browser/webgpu", f16=True)
    need = plan(model, gpu, context=2048)
    assert need["kv_type"] == "f16" and need["kv_cache"] == 30 * 2 * 2048 * 3 * 64 * 2
    assert plan(model, PHONE, context=2048)["kv_type"] == "f32"


def test_a_kv_cache_type_is_forced_or_refused_by_name():
    gpu = AdapterInfo(name="gpu", backend="browser/webgpu", f16=True)
    assert cache_type(gpu, "f32") == "f32" and cache_type(gpu, "f16") == "f16"
    with pytest.raises(InvalidRequestError, match="shader-f16"):
        cache_type(PHONE, "f16")
    with pytest.raises(InvalidRequestError, match="f16, f32"):
        cache_type(gpu, "bf16")
