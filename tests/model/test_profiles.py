"""Device profiles (llmchat.gpu.profiles): what they cap, that both devices and every kernel-variant choice follow
them, and that the memory plan refuses a model over a profile's budget with the numbers, before anything is
allocated or read from the weights."""
from __future__ import annotations

import dataclasses
import warnings

import pytest

from llmchat.errors import InvalidRequestError, ModelTooLargeError, ShaderError
from llmchat.gguf.file import open_gguf
from llmchat.gpu.device import AdapterInfo
from llmchat.gpu.profiles import ENV, LIMITS, PROFILES, Profile, get_profile, parse_size
from llmchat.runtime.memory import DEFAULT_ADAPTER, plan_memory

MiB, GiB = 1 << 20, 1 << 30

# An adapter beyond every profile in every limit, with every feature (lavapipe's limits are of this kind).
BIG = AdapterInfo(name="big", backend="test", software=True, f16=True, subgroups=True, subgroup_min_size=8,
                  subgroup_max_size=8, max_binding_size=2 * GiB, max_buffer_size=4 * GiB, max_workgroup_size=1024,
                  max_workgroup_storage=65536, max_storage_buffers=32, max_workgroups_per_dim=1 << 20)
SMALL = AdapterInfo(name="small", backend="test", max_binding_size=64 * MiB, max_buffer_size=64 * MiB,
                    max_workgroup_size=64, max_workgroup_storage=4096, max_storage_buffers=4, max_workgroups_per_dim=1000)


@pytest.mark.parametrize("name", list(PROFILES))
def test_apply_takes_the_smaller_of_each_limit_and_never_adds(name):
    profile = PROFILES[name]
    capped = profile.apply(BIG)
    for limit in LIMITS:
        assert getattr(capped, limit) == getattr(profile, limit) < getattr(BIG, limit)
    assert capped.profile == name and capped.gpu_budget == profile.gpu_budget
    assert not capped.subgroups and capped.subgroup_min_size == capped.subgroup_max_size == 0
    assert capped.f16 == profile.f16
    assert (capped.name, capped.backend, capped.software) == ("big", "test", True)  # what the adapter is stays
    small = profile.apply(SMALL)
    assert all(getattr(small, limit) == getattr(SMALL, limit) for limit in LIMITS)  # never raised
    assert not small.f16 and not small.subgroups  # never added


def test_phone_is_the_intersection_of_the_device_classes():
    phone, classes = PROFILES["phone"], [p for n, p in PROFILES.items() if n != "phone"]
    assert {"iphone", "iphone-safari", "adreno", "mali"} <= set(PROFILES)
    for f in dataclasses.fields(Profile):
        if f.name in ("name", "description"):
            continue
        values = [getattr(p, f.name) for p in classes]
        assert getattr(phone, f.name) == (all(values) if isinstance(values[0], bool) else min(values)), f.name
    assert (phone.max_binding_size, phone.f16, phone.subgroups) == (128 * MiB, False, False)
    assert phone.gpu_budget == GiB  # the Safari tab's: iOS ends a tab near 1.5 GB
    assert PROFILES["iphone"].gpu_budget == 3 * GiB and PROFILES["adreno"].max_binding_size == 128 * MiB


def test_a_budget_already_on_the_adapter_is_not_raised_either():
    tight = dataclasses.replace(BIG, gpu_budget=256 * MiB)
    assert PROFILES["iphone"].apply(tight).gpu_budget == 256 * MiB


def test_names_overrides_none_and_the_environment(monkeypatch):
    assert get_profile("phone") is PROFILES["phone"] and get_profile("PHONE") is PROFILES["phone"]
    custom = get_profile("phone,gpu_budget=96MiB, max_binding_size=1GiB")
    assert (custom.name, custom.gpu_budget, custom.max_binding_size) == ("phone", 96 * MiB, GiB)
    assert get_profile(custom) is custom
    monkeypatch.delenv(ENV, raising=False)
    assert get_profile(None) is None and get_profile("none") is None
    monkeypatch.setenv(ENV, "mali")
    assert get_profile(None) is PROFILES["mali"] and get_profile("none") is None
    assert parse_size("1.5GiB", "x") == 3 * GiB // 2 and parse_size("4096", "x") == 4096
    assert parse_size("2GB", "x") == 2 * 10 ** 9


def test_unknown_names_and_fields_are_refused_listing_the_known_ones():
    with pytest.raises(InvalidRequestError, match="unknown device profile 'pc'; known profiles: phone, iphone"):
        get_profile("pc")
    with pytest.raises(InvalidRequestError, match="'f16' cannot be set; settable: .*gpu_budget"):
        get_profile("phone,f16=1")
    with pytest.raises(InvalidRequestError, match="is not a size"):
        get_profile("phone,gpu_budget=lots")


# -- the memory plan under a profile --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def smollm2(smollm2_path):
    with open_gguf(smollm2_path) as gguf:
        yield gguf


def test_a_model_over_the_budget_is_refused_with_the_numbers_and_the_largest_context(smollm2):
    info = get_profile("phone,gpu_budget=110MiB").apply(DEFAULT_ADAPTER)
    with pytest.raises(ModelTooLargeError) as caught:
        plan_memory(smollm2, info, context=2048)
    e = caught.value
    message = str(e)
    assert "the 'phone' device profile" in message and "110.0 MiB GPU memory budget" in message
    need = e.needs
    for part in ("weights", "kv_cache", "activations", "total"):
        assert f"{need[part] / MiB:.1f} MiB" in message, part
    assert (e.profile, e.budget) == ("phone", 110 * MiB)
    fits = e.largest_context
    assert f"the largest context that fits is {fits} tokens" in message
    # The answer is the plan's own: that context fits, one more token does not.
    assert plan_memory(smollm2, info, context=fits).total <= 110 * MiB
    with pytest.raises(ModelTooLargeError):
        plan_memory(smollm2, info, context=fits + 1)
    assert 16 <= fits < 2048


def test_when_no_context_fits_the_refusal_says_so(smollm2):
    info = get_profile("phone,gpu_budget=64MiB").apply(DEFAULT_ADAPTER)
    with pytest.raises(ModelTooLargeError, match="no context fits, however small") as caught:
        plan_memory(smollm2, info, context=512)
    assert caught.value.largest_context == 0


def test_the_phone_budget_holds_smollm2_and_the_plan_uses_the_tighter_budget(smollm2):
    info = PROFILES["phone"].apply(DEFAULT_ADAPTER)
    assert plan_memory(smollm2, info, context=2048).total < GiB
    with pytest.raises(ModelTooLargeError, match="100.0 MiB GPU memory budget"):
        plan_memory(smollm2, info, context=2048, gpu_budget=100 * MiB)  # e.g. the browser's deviceMemory estimate


def test_api_plan_needs_no_gpu(smollm2_path):
    import llmchat
    assert llmchat.plan(str(smollm2_path), profile="phone").context == 2048
    with pytest.raises(ModelTooLargeError, match="largest context that fits"):
        llmchat.plan(str(smollm2_path), profile="phone,gpu_budget=110MiB")


# -- the native device under a profile (lavapipe) ------------------------------------------------------------------

@pytest.fixture(scope="module")
def phone_device():
    from llmchat.errors import NoAdapterError
    from llmchat.gpu.native import NativeDevice
    try:
        device = NativeDevice(profile="phone")
    except NoAdapterError as e:
        pytest.skip(f"no WebGPU adapter: {e}")
    yield device
    device.close()


@pytest.mark.gpu
def test_the_native_device_is_requested_with_the_capped_limits(phone_device):
    info = phone_device.info
    assert info.profile == "phone" and not info.f16 and not info.subgroups
    limits, features = phone_device._device.limits, set(phone_device._device.features)
    assert limits["max-storage-buffer-binding-size"] == info.max_binding_size == 128 * MiB
    assert limits["max-buffer-size"] == info.max_buffer_size == 256 * MiB
    assert limits["max-storage-buffers-per-shader-stage"] == 8
    assert limits["max-compute-invocations-per-workgroup"] == 256
    assert limits["max-compute-workgroup-storage-size"] == 16384
    assert "subgroup" not in features and "shader-f16" not in features


@pytest.mark.gpu
def test_every_variant_choice_follows_the_profile(phone_device):
    from llmchat.gpu.kernels import Kernels
    from llmchat.gpu.variants import subgroup_size, variants
    chosen = variants(phone_device)
    assert not chosen.shared_loads and chosen.matmul(1).xload == chosen.matmul(64).xload == "plain"
    assert subgroup_size(phone_device) == 0
    # A kernel that enables subgroups is refused by the loader, naming the profile...
    with pytest.raises(ShaderError, match="needs subgroups, which .* under the 'phone' device profile"):
        Kernels(phone_device).get("subgroup_size.wgsl")
    # ...and one that uses them without the directive (naga accepts that when the feature is on) fails WebGPU
    # validation on the device, which was requested without the feature: it does not run.
    source = ("@group(0) @binding(0) var<storage, read_write> out: array<u32>;\n"
              "@compute @workgroup_size(1) fn main(@builtin(subgroup_size) n: u32) { out[0] = n; }\n")
    with pytest.raises(ShaderError):
        phone_device.kernel("uses_subgroups", source)
    # A workgroup over the profile's 256 invocations fails validation too (lavapipe offers 1024).
    wide = ("@group(0) @binding(0) var<storage, read_write> out: array<u32>;\n"
            "@compute @workgroup_size(512) fn main(@builtin(local_invocation_index) i: u32) { out[i] = i; }\n")
    with pytest.raises(ShaderError):
        phone_device.kernel("too_wide", wide)


@pytest.mark.gpu
@pytest.mark.model
def test_a_model_over_budget_is_refused_before_a_byte_is_uploaded(smollm2_path, phone_device, monkeypatch):
    """Nothing is allocated on the GPU and no weight is read: only the header."""
    from llmchat.api import LLM
    from llmchat.gpu.native import NativeDevice
    from llmchat.gguf.sources import FileSource
    allocated, reads = [], []
    monkeypatch.setattr(NativeDevice, "buffer", lambda self, size, label, **kw: allocated.append(label))
    monkeypatch.setattr(NativeDevice, "write", lambda self, *a, **kw: allocated.append("write"))
    real_read = FileSource.read
    monkeypatch.setattr(FileSource, "read", lambda self, offset, n: reads.append((offset, n)) or
                        real_read(self, offset, n))
    with pytest.raises(ModelTooLargeError, match="'phone' device profile.*largest context that fits") as caught:
        LLM(str(smollm2_path), context=2048, profile="phone,gpu_budget=110MiB")
    assert caught.value.largest_context > 0
    assert allocated == []
    with warnings.catch_warnings(), open_gguf(smollm2_path) as gguf:
        first_weight = min(t.offset for t in gguf.tensors.values())
    # The header parser reads in windows of 1 MiB, so its last window may reach past the header; every read began
    # in the header, and all of them together are a few MiB of the 92 MiB of weights.
    assert reads and all(offset < first_weight for offset, _ in reads)
    assert sum(n for _, n in reads) <= 8 * MiB


@pytest.mark.gpu
def test_a_device_opened_under_another_profile_is_refused(phone_device, smollm2_path):
    from llmchat.api import LLM
    with pytest.raises(InvalidRequestError, match="opened under the profile 'phone', not 'mali'"):
        LLM(str(smollm2_path), device=phone_device, profile="mali")
