"""The GPU layer: a thin device interface (device.py), its wgpu-py implementation (native.py), kernel loading
(kernels.py), weights on the GPU (tensors.py), and the operations the models record (ops.py)."""
from __future__ import annotations

import sys

from .device import AdapterInfo, Device


def open_device(**options) -> Device:
    """The device for this platform: wgpu-py natively; in the browser the page's WebGPU."""
    if sys.platform == "emscripten":
        from .browser import BrowserDevice
        return BrowserDevice(**options)
    from .native import NativeDevice
    return NativeDevice(**options)


__all__ = ["AdapterInfo", "Device", "open_device"]
