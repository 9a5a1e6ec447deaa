"""The GPU layer: a thin device interface (device.py), its wgpu-py implementation (native.py), kernel loading
(kernels.py), weights on the GPU (tensors.py), and the operations the models record (ops.py)."""
from __future__ import annotations

import sys

from .device import AdapterInfo, Device
from .profiles import PROFILES, Profile, get_profile


def open_device(**options) -> Device:
    """The device for this platform: wgpu-py natively; in the browser the page's WebGPU. `profile=` (a name from
    PROFILES or a Profile; default $LLMCHAT_PROFILE) caps it to a class of devices."""
    if sys.platform == "emscripten":
        from ..browser.device import BrowserDevice
        return BrowserDevice(**options)
    from .native import NativeDevice
    return NativeDevice(**options)


__all__ = ["AdapterInfo", "Device", "PROFILES", "Profile", "get_profile", "open_device"]
