"""The device screen's content: the adapter as the engine sees it, and which catalogue models fit it.

A model that is on disk is planned exactly (`plan_memory` over its header, on this adapter); one that is not is
planned from its header read over HTTP Range (a few hundred kB), when the network is there, so the answer comes
before gigabytes are downloaded."""
from __future__ import annotations

from dataclasses import dataclass

from llmchat.hub.catalogue import CatalogueEntry
from llmchat.errors import LLMChatError, ModelTooLargeError
from llmchat.gguf.file import open_gguf
from llmchat.gpu.device import AdapterInfo
from llmchat.runtime.memory import plan_memory

from .store import ModelStore, human


@dataclass(frozen=True)
class Fit:
    entry: CatalogueEntry
    fits: bool | None  # None: not known (no header at hand)
    detail: str


def adapter_lines(info: AdapterInfo) -> list[str]:
    speed = "software (CPU emulation: correct, slow)" if info.software else "hardware"
    sizes = f" ({info.subgroup_min_size}-{info.subgroup_max_size})" if info.subgroup_max_size else ""
    subgroups = f"yes{sizes}" if info.subgroups else "no"
    return [f"Adapter: {info.name}", f"Backend: {info.backend}" + (f" ({info.vendor})" if info.vendor else ""),
            f"Kind: {speed}", f"shader-f16: {'yes' if info.f16 else 'no'}", f"Subgroups: {subgroups}",
            f"Max storage binding: {info.max_binding_size >> 20} MiB", f"Max buffer: {info.max_buffer_size >> 20} MiB",
            f"Workgroup: {info.max_workgroup_size} invocations, {human(info.max_workgroup_storage)} shared",
            f"Storage buffers per stage: {info.max_storage_buffers}"]


def plan_fit(gguf_target: str, entry: CatalogueEntry, info: AdapterInfo, *, gpu_budget: int = 0) -> Fit:
    try:
        gguf = open_gguf(gguf_target)
    except LLMChatError as e:
        return Fit(entry, None, f"header not readable: {e}")
    try:
        plan = plan_memory(gguf, info, context=None, gpu_budget=gpu_budget)
    except ModelTooLargeError as e:
        return Fit(entry, False, str(e))
    except LLMChatError as e:
        return Fit(entry, False, f"cannot run here: {e}")
    finally:
        gguf.close()
    return Fit(entry, True, f"needs {human(plan.total)} of GPU memory at a {plan.context}-token context "
                            f"(weights {human(plan.weights)}, KV cache {human(plan.kv_cache)})")


def fit(store: ModelStore, entry: CatalogueEntry, info: AdapterInfo, *, remote: bool = True) -> Fit:
    state = store.state(entry)
    if state.complete:
        return plan_fit(str(state.path), entry, info)
    if not remote:
        return Fit(entry, None, "not checked (not downloaded)")
    try:
        url = store.url(entry)
    except LLMChatError as e:
        return Fit(entry, None, str(e))
    return plan_fit(url, entry, info)


def storage_line(store: ModelStore) -> str:
    return f"Free storage: {human(store.free_bytes())} (models in {store.root})"
