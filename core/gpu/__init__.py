"""The GPU layer: a thin device interface (device.py), its wgpu-py implementation (native.py), kernel loading
(kernels.py), weights on the GPU (tensors.py), and the operations the models record (ops.py)."""
from __future__ import annotations

import sys

from ..errors import NoAdapterError
from .device import AdapterInfo, Device
from .profiles import PROFILES, Profile, get_profile


def open_device(**options) -> Device:
    """The native device (wgpu-py). `profile=` (a name from PROFILES or a Profile; default $LLMCHAT_PROFILE) caps
    it to a class of devices. In the browser the runtime opens the page's WebGPU (llmchat.browser.device) itself
    and passes that device to the model it loads."""
    if sys.platform == "emscripten":
        raise NoAdapterError("in the browser, open the page's WebGPU device with "
                             "llmchat.browser.device.BrowserDevice() and pass it as device=")
    from .native import NativeDevice  # imported here: the browser, which never opens it, does not load it
    return NativeDevice(**options)


__all__ = ["AdapterInfo", "Device", "PROFILES", "Profile", "get_profile", "open_device"]
