"""Device profiles: the limits of a class of devices (phones), applied on top of whatever adapter runs the engine.

A profile only ever lowers what the adapter offers: each limit becomes the smaller of the two, features it lacks are
turned off, and its GPU memory budget is what the memory plan checks before anything is allocated or downloaded.
Both devices apply it where they read the adapter (native.py, browser.py), so AdapterInfo — and with it every
kernel-variant choice, the weight layout and the memory plan — sees the profile's device, and the native device
is requested with the capped limits, so a kernel that reached past them fails validation instead of running.
A laptop can so rehearse a phone: `llmchat run MODEL --profile phone`.

Where the numbers come from:
- Limits: WebGPU's default limits (the spec's "default" column, which every implementation must offer and which
  a page on an unknown phone can count on): storage bindings 128 MiB, buffers 256 MiB, 256 invocations per
  workgroup, 16 KiB of workgroup storage, 8 storage buffers per stage, 65535 workgroups per dimension.
  Android WebGPU (Adreno, Mali) is reported to stop at the same 128 MiB for storage bindings.
- Features: shader-f16 and subgroups are missing on many phones (Android WebGPU ships shader-f16 only on some
  GPUs; subgroups are newer still), so the classes here turn subgroups off and the Android ones f16 as well.
  Apple GPUs compute in half precision natively and Safari exposes shader-f16 on them.
- Budgets: iOS kills a Safari tab near 1.5 GB; the tab also holds the Pyodide heap, the page and the chat, so
  1 GiB is left for GPU buffers (an estimate). MLC's iPhone apps budget about 3 GB per model natively (and cap
  the context at 2048, as llmchat's default context does). The Android budgets are assumptions, not
  measurements: Android's low-memory killer leaves a foreground app a few GB on a 6-8 GB phone (Adreno-class),
  less on the 4 GB phones many Mali GPUs ship in. `phone` is the intersection of all classes: the smallest of
  every limit and budget.

`LLMCHAT_PROFILE` names the profile used when none is given (the CLI, `llmchat.load`, the device constructors).
A profile name may carry overrides of its numbers, e.g. "phone,gpu_budget=512MiB" (sizes in bytes, KiB, MiB or
GiB): for a device whose budget is known better, and for tests.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, fields, replace

from ..errors import InvalidRequestError
from .device import AdapterInfo

MiB, GiB = 1 << 20, 1 << 30
ENV = "LLMCHAT_PROFILE"
NO_PROFILE = "none"  # the name that asks for the adapter as it is, whatever LLMCHAT_PROFILE says


@dataclass(frozen=True)
class Profile:
    """What a class of devices allows. Limits are in bytes or counts, as in AdapterInfo; gpu_budget is the GPU
    memory (bytes) a model's weights, KV cache and activations may take together."""

    name: str
    description: str
    gpu_budget: int
    max_binding_size: int = 128 * MiB
    max_buffer_size: int = 256 * MiB
    f16: bool = False  # whether shader-f16 may be used (if the adapter has it)
    subgroups: bool = False  # whether subgroup operations may be used (if the adapter has them)
    max_workgroup_size: int = 256
    max_workgroup_storage: int = 16384
    max_storage_buffers: int = 8
    max_workgroups_per_dim: int = 65535

    def apply(self, info: AdapterInfo) -> AdapterInfo:
        """`info` as seen through this profile: each limit the smaller of the two, features the profile lacks
        off (a profile never raises a limit nor adds a feature)."""
        subgroups = info.subgroups and self.subgroups
        budget = min((b for b in (info.gpu_budget, self.gpu_budget) if b), default=0)  # 0 means unknown
        return replace(
            info, profile=self.name, gpu_budget=budget, f16=info.f16 and self.f16, subgroups=subgroups,
            subgroup_min_size=info.subgroup_min_size if subgroups else 0,
            subgroup_max_size=info.subgroup_max_size if subgroups else 0,
            **{name: min(getattr(info, name), getattr(self, name)) for name in LIMITS})

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


# The AdapterInfo limits a profile caps (same names on both classes).
LIMITS = ("max_binding_size", "max_buffer_size", "max_workgroup_size", "max_workgroup_storage",
          "max_storage_buffers", "max_workgroups_per_dim")

_CLASSES = (
    Profile("iphone", "iPhone native app (Apple GPU over Metal): MLC's ~3 GB per-model budget, WebGPU's "
            "default binding and buffer limits, f16 yes, subgroups no", gpu_budget=3 * GiB, f16=True),
    Profile("iphone-safari", "iPhone Safari tab: iOS ends a tab near 1.5 GB, leaving about 1 GiB for GPU "
            "buffers; f16 yes, subgroups no", gpu_budget=1 * GiB, f16=True),
    Profile("adreno", "Android phone with a Qualcomm Adreno GPU: 128 MiB storage bindings, no f16, no "
            "subgroups, ~2 GiB for the model (assumed)", gpu_budget=2 * GiB),
    Profile("mali", "Android phone with an Arm Mali GPU: 128 MiB storage bindings, no f16, no subgroups, "
            "~1.5 GiB for the model (assumed: many ship with 4 GB of memory)", gpu_budget=3 * GiB // 2),
)


def _intersection(name: str, description: str, classes: tuple[Profile, ...]) -> Profile:
    numbers = {f.name: min(getattr(p, f.name) for p in classes) for f in fields(Profile)
               if f.type in ("int", int)}
    flags = {f.name: all(getattr(p, f.name) for p in classes) for f in fields(Profile) if f.type in ("bool", bool)}
    return Profile(name=name, description=description, **numbers, **flags)


PROFILES: dict[str, Profile] = {p.name: p for p in (
    _intersection("phone", "any phone: the smallest limits and budget of the classes below, no f16, no subgroups",
                  _CLASSES), *_CLASSES)}

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KiB|MiB|GiB|KB|MB|GB|K|M|G)?\s*$", re.I)
_UNITS = {"": 1, "b": 1, "kib": 1 << 10, "k": 1 << 10, "kb": 1000, "mib": MiB, "m": MiB, "mb": 10 ** 6,
          "gib": GiB, "g": GiB, "gb": 10 ** 9}


def get_profile(spec: str | Profile | None) -> Profile | None:
    """The profile `spec` names: a Profile, a name from PROFILES (with optional `,field=value` overrides),
    "none" for no profile, or None for $LLMCHAT_PROFILE (unset: no profile). Unknown names are an
    InvalidRequestError that lists the known ones."""
    if isinstance(spec, Profile):
        return spec
    if spec is None:
        spec = os.environ.get(ENV, "").strip()
        if not spec:
            return None
    name, *overrides = [part.strip() for part in str(spec).split(",")]
    if name.lower() == NO_PROFILE and not overrides:
        return None
    profile = PROFILES.get(name.lower())
    if profile is None:
        raise InvalidRequestError(f"unknown device profile {name!r}; known profiles: {', '.join(PROFILES)} "
                                  f"(or '{NO_PROFILE}')")
    changes = {}
    numeric = {f.name for f in fields(Profile) if f.type in ("int", int)}
    for item in overrides:
        key, _, value = item.partition("=")
        key = key.strip()
        if key not in numeric:
            raise InvalidRequestError(f"device profile {spec!r}: {key!r} cannot be set; settable: "
                                      f"{', '.join(sorted(numeric))}")
        changes[key] = parse_size(value, f"device profile {spec!r}: {key}")
    return replace(profile, **changes) if changes else profile


def parse_size(text: str, what: str) -> int:
    """Bytes from '512MiB', '1.5GiB', '4096' (KiB/MiB/GiB binary, KB/MB/GB decimal)."""
    m = _SIZE.match(text)
    if not m:
        raise InvalidRequestError(f"{what}: {text!r} is not a size (e.g. 512MiB, 2GiB, 1048576)")
    return int(float(m.group(1)) * _UNITS[(m.group(2) or "").lower()])
