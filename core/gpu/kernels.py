"""Loads WGSL kernels from `llmchat.shaders`, fills in a tiny template language, and caches pipelines.

The template language is deliberately small:
- `//!include name.wgsl` pastes another shader file (shared snippets such as quant block decoders);
- `{{KEY}}` is replaced by a value given at compile time (a quant type name, a flag, a workgroup size).
Per-device fixes are applied here, in one place: wgpu-native (naga) rejects `enable subgroups;`, which Chromium
requires (and wants before all declarations, so an included snippet's directives move to the top). (f16 weights are decoded with `unpack2x16float`, which needs no extension; only an f16 KV cache's kernels
enable f16, and kvlayout.cache_type gives one only where the adapter has shader-f16.)
A kernel that enables an extension the device's AdapterInfo lacks (the adapter's, or a profile turned it off) is
refused here, on every device: variants.py must not have chosen it.
"""
from __future__ import annotations

import re
import weakref
from importlib import resources

from ..errors import ShaderError
from .device import Device, Kernel

_INCLUDE = re.compile(r"^//!include\s+(\S+)\s*$", re.M)
_BINDING = re.compile(r"@group\(0\)\s*@binding\((\d+)\)\s*var"
                      r"(?:<\s*(uniform|storage\s*,\s*read_write|storage\s*,\s*read|storage)\s*>"
                      r"|\s+\w+\s*:\s*(texture_2d<u32>))")
_KEY = re.compile(r"\{\{(\w+)\}\}")
# WGSL extensions and language features a kernel may use, and the AdapterInfo flag that says the device has them.
_EXTENSIONS = {"enable subgroups;": "subgroups", "enable f16;": "f16",
               "requires packed_4x8_integer_dot_product;": "dot4i8"}


def shader_source(name: str, values: dict[str, object] | None = None) -> str:
    """The text of `shaders/<name>` with `{{KEY}}`s filled in and includes expanded (each file at most once)."""
    seen: set[str] = set()

    def expand(file: str) -> str:
        if file in seen:
            return ""
        seen.add(file)
        try:
            text = (resources.files("llmchat.shaders") / file).read_text()
        except FileNotFoundError:
            raise ShaderError(f"shader file '{file}' is not in llmchat/shaders") from None
        return _INCLUDE.sub(lambda m: expand(m.group(1)), render(text, values or {}))

    return expand(name)


def render(source: str, values: dict[str, object]) -> str:
    def sub(m: re.Match) -> str:
        if m.group(1) not in values:
            raise ShaderError(f"shader needs a value for {{{{{m.group(1)}}}}}")
        return str(values[m.group(1)])

    return _KEY.sub(sub, source)


def wgsl_bool(v: bool) -> str:
    """A flag's template value: WGSL spells its booleans in lower case."""
    return "true" if v else "false"


def binding_kinds(source: str) -> list[str]:
    """The kind of each @group(0) binding a shader declares, in binding order: "uniform", "read-only-storage",
    "storage" or "texture" (a texture_2d<u32>, shaders/weights_texture.wgsl). Pipelines get explicit layouts built
    from this, so a binding a variant happens not to use stays in the layout and every variant of a kernel is bound
    the same way."""
    kinds: dict[int, str] = {}
    for m in _BINDING.finditer(source):
        if m.group(3):
            kinds[int(m.group(1))] = "texture"
            continue
        access = m.group(2).replace(" ", "")
        kinds[int(m.group(1))] = ("uniform" if access == "uniform" else
                                  "storage" if access == "storage,read_write" else "read-only-storage")
    if sorted(kinds) != list(range(len(kinds))):
        raise ShaderError(f"bindings must be numbered 0..n-1 without gaps, found {sorted(kinds)}")
    return [kinds[i] for i in range(len(kinds))]


# The kernels compiled on each open device, by (file, values). Every Kernels over a device shares them: a load
# compiles its kernels, its weight repacks, the subgroup probe and the roofline probes through Kernels objects of
# their own, and a second model loaded on the same device needs most of the first one's pipelines again.
_COMPILED: weakref.WeakKeyDictionary[Device, dict[tuple, Kernel]] = weakref.WeakKeyDictionary()


class Kernels:
    """Compiles each (file, values) pair once per device."""

    def __init__(self, device: Device):
        self.device = device

    def get(self, file: str, **values) -> Kernel:
        key = (file, tuple(sorted(values.items())))
        compiled = _COMPILED.setdefault(self.device, {})
        kernel = compiled.get(key)
        if kernel is None:
            label = file.removesuffix(".wgsl") + "".join(f"[{k}={v}]" for k, v in sorted(values.items()))
            source = self._adapt(shader_source(file, values), label)
            kernel = compiled[key] = self.device.kernel(label, source)
        return kernel

    def _adapt(self, source: str, label: str = "") -> str:
        info = self.device.info
        lines, directives = [], []  # WGSL wants directives first: an included snippet's move to the top
        for line in source.splitlines():
            directive = line.strip()
            need = _EXTENSIONS.get(directive)
            if need and not getattr(info, need):
                where = f" under the '{info.profile}' device profile" if info.profile else ""
                feature = directive.split()[1].rstrip(";")
                raise ShaderError(f"kernel '{label}' needs {feature}, which {info.name}{where} does not offer")
            if directive == "enable subgroups;" and info.backend.startswith("wgpu-native"):
                continue
            if need:
                if directive not in directives:
                    directives.append(directive)
                continue
            lines.append(line)
        return "\n".join(directives + lines) + "\n"
