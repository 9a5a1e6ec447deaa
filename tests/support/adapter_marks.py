"""What the GPU suites need of the adapter, as marks and checks, without numpy: tests/conftest.py imports it in
every run, Pyodide's included (tests/model/test_pyodide.py runs the unit tests there)."""
from __future__ import annotations

import pytest

from llmchat.gpu.device import Device
from llmchat.gpu.profiles import get_profile
from llmchat.gpu.variants import subgroup_size


# The kernel suites run twice: on the adapter as it is (or as $LLMCHAT_PROFILE caps it), and under the phone
# profile, which turns subgroups and f16 off and lowers the limits to WebGPU's defaults, so the variants phones get
# (plain loads of x, no subgroup kernels) are checked against the same references.
GPU_PROFILES = [None, "phone"]

# The device features a test or a case may need, named as Profile's fields.
FEATURES = ("f16", "subgroups")


def needs(*features: str) -> pytest.MarkDecorator:
    """Marks a test, or one case of it (pytest.param(..., marks=needs(...))), as running only where the device
    has `features`. The `gpu` fixture's phone profile turns them off, so its cases are not collected at all
    (`profile_allows`); on the adapter the test checks the adapter itself and skips where it lacks one, which
    `make test` refuses (tests/conftest.py)."""
    unknown = set(features) - set(FEATURES)
    if unknown:
        raise ValueError(f"unknown device features {sorted(unknown)}; known: {', '.join(FEATURES)}")
    return pytest.mark.needs(*features)


# Marks a kernel test whose every case forces its variant (a tile, a kernel) to sweep shapes or types. A profile
# changes which variant a device chooses and the limits it is held to, never a forced variant's shader: under the
# phone profile such a test would run the adapter's shaders again at the same shapes. It runs on the adapter as it
# is only; the tests of each variant itself (its modes, edges and grid) still run under the phone profile too, so
# its limits meet every variant.
adapter_only = pytest.mark.adapter_only


def profile_allows(item: pytest.Item) -> bool:
    """False for a case of the `gpu` fixture under the phone profile that could only skip (it needs a feature the
    profile turns off, `needs`) or repeat the adapter's case (`adapter_only`)."""
    callspec = getattr(item, "callspec", None)
    if callspec is None or "gpu" not in callspec.params or callspec.params["gpu"] is None:
        return True
    profile = get_profile(callspec.params["gpu"])
    return item.get_closest_marker("adapter_only") is None and all(
        getattr(profile, f) for mark in item.iter_markers("needs") for f in mark.args)


def missing_features(device: Device) -> list[str]:
    """What the suite tests that `device` lacks: the f16 KV cache and kernels (shader-f16), shared loads of x
    (subgroups of at least 8 lanes) and 8-bit integer matmuls (dot4I8Packed). lavapipe, the CI adapter, has all
    three; a driver update that loses one would otherwise only turn its tests into skips."""
    checks = {"shader-f16": device.info.f16, "subgroups of at least 8 lanes": subgroup_size(device) >= 8,
              "dot4I8Packed (packed_4x8_integer_dot_product)": device.info.dot4i8}
    return [name for name, present in checks.items() if not present]
