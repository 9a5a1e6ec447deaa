"""The memory plan: what a model needs on an adapter — weights, KV cache, activations — computed in one place from
the GGUF header, before any allocation or download.

The model's own constructor runs against a planning `WeightLoader`, so the plan stacks, splits and lays out
weights exactly as the load will; the engine allocates activations from the same `ActivationSpec`s and the KV cache
from the same widths. The native loader, `llmchat inspect`, `llmchat serve` and the browser's fit check all call
`plan_memory`.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

from ..errors import ContextLengthWarning, InvalidRequestError, ModelTooLargeError
from ..gguf.file import GGUFFile
from ..gpu.device import BINDING_ALIGN, AdapterInfo
from ..gpu.kvlayout import blocks_for, cache_type, layer_bytes
from ..gpu.profiles import Profile
from ..gpu.ops import TOPK_MAX, topk_words
from ..models import model_class, model_config
from .kv_cache import state_bytes
from ..models.base import ActivationSpec, state_widths
from ..models.weights import WeightLoader

# What "can this version run it" is judged against when no adapter is at hand: a GPU with WebGPU's default limits
# (128 MiB bindings) and a 2048-token context (or the trained length, when shorter).
DEFAULT_ADAPTER = AdapterInfo(name="a GPU with WebGPU's default limits", backend="webgpu")
DEFAULT_CONTEXT = 2048
# The cpu engine's plan (cpu_engine.py): llama.cpp keeps weights and cache in host memory, which has no binding
# limits; its cache is f16 unless asked otherwise.
CPU = AdapterInfo(name="llama.cpp on the CPU", backend="cpu", f16=True, max_binding_size=1 << 62,
                  max_buffer_size=1 << 62)


def check_context(requested: int | None) -> None:
    """Refuse a context that is not a positive number of tokens (None: the default)."""
    if requested is not None and (isinstance(requested, bool) or not isinstance(requested, int) or requested < 1):
        raise InvalidRequestError(f"the context must be a positive number of tokens, not {requested!r}")


def context_size(requested: int | None, trained: int, where: str = "model") -> int:
    """The context a load runs with, by one rule for the CLI (--ctx), the server and the API (context=): by default
    DEFAULT_CONTEXT, or the trained length when that is shorter; a context asked for is used as asked, and when
    it exceeds the trained length a ContextLengthWarning says so (what llama.cpp does), never a silent change."""
    check_context(requested)
    if requested is None:
        return min(DEFAULT_CONTEXT, trained)
    if requested > trained:
        warnings.warn(f"{where}: running with a context of {requested} tokens as asked, longer than the {trained} "
                      f"the model was trained for (its context_length); text beyond {trained} tokens may degrade",
                      ContextLengthWarning, stacklevel=3)
    return requested


def step_bucket(n: int) -> int:
    """The smallest power of two ≥ n: programs are recorded per bucket of step sizes."""
    return 1 << max(0, n - 1).bit_length()


@dataclass(frozen=True)
class MemoryPlan:
    arch: str
    context: int  # positions one sequence may reach
    kv_positions: int  # positions the KV cache holds, all sequences together
    step_tokens: int  # tokens one forward step takes
    weights: int  # bytes on the GPU, in the layout this adapter gets
    upload: int  # bytes of the file that go to the GPU (weights are read as stored, then maybe repacked there)
    kv_cache: int
    kv_type: str  # the cache's element type, f16 or f32 (kvlayout.cache_type)
    activations: int  # one step's activations, logits rows and top-k candidates
    largest_binding: int  # the largest single buffer binding
    kernels: tuple[str, ...] = field(default=())  # weight types and layouts the matmuls run
    state: int = 0  # per-sequence state of recurrent/convolution layers, every slot (see Model.state_widths)
    slots: int = 1  # sequences open at once, sharing the cache's kv_positions (by default a full context each)

    @property
    def total(self) -> int:
        return self.weights + self.kv_cache + self.activations + self.state

    def parts(self) -> str:
        """What the total is made of, for people: "weights 92.1 MiB, KV cache 720.0 MiB (f16, 16 sequences of
        2048 positions), activations 9.9 MiB" (`inspect`, `serve` and the too-large error all print this)."""
        if self.kv_positions != self.context * self.slots:  # a cache smaller than a full context each
            held = f"{self.kv_positions} positions shared by {self.slots} sequences of up to {self.context}"
        elif self.slots > 1:
            held = f"{self.slots} sequences of {self.context} positions"
        else:
            held = f"{self.context} positions"
        parts = [f"weights {_mib(self.weights)}", f"KV cache {_mib(self.kv_cache)} ({self.kv_type}, {held})",
                 f"activations {_mib(self.activations)} ({self.step_tokens} tokens a step)"]
        if self.state:
            parts.append(f"recurrent state {_mib(self.state)}")
        return ", ".join(parts)

    def as_dict(self) -> dict:
        return {"arch": self.arch, "context": self.context, "kv_positions": self.kv_positions,
                "step_tokens": self.step_tokens, "weights": self.weights, "upload": self.upload,
                "kv_cache": self.kv_cache, "kv_type": self.kv_type, "activations": self.activations,
                "total": self.total, "largest_binding": self.largest_binding, "kernels": list(self.kernels),
                "state": self.state, "slots": self.slots}


def activation_bytes(spec: ActivationSpec, step_tokens: int) -> int:
    return step_tokens * spec.cols * 4


def inputs_bytes(step_tokens: int) -> int:
    """The step's token records (16 bytes each) then its logits-row list, in one buffer."""
    return -(-step_tokens * 16 // BINDING_ALIGN) * BINDING_ALIGN + step_tokens * 4


def candidates_bytes(step_tokens: int) -> int:
    return step_tokens * topk_words(TOPK_MAX) * 4


def plan_memory(gguf: GGUFFile, info: AdapterInfo, *, context: int | None, n_slots: int = 1,
                kv_positions: int | None = None, step_tokens: int = 64, fold_norms: bool | None = None,
                gpu_budget: int = 0, kv_type: str | None = None) -> MemoryPlan:
    """The plan for `n_slots` sequences of up to `context` positions (see `context_size`; None: the default)
    sharing a cache of `kv_positions` (default: a full context each). Raises ModelTooLargeError, naming every
    problem and the largest context that would fit, when a binding or the GPU memory budget would be exceeded: the
    smaller of `gpu_budget` and the adapter's own `info.gpu_budget` (a device profile's; 0 = unknown). Raises
    UnsupportedModelError for an architecture or tensor type this version cannot run. `kv_type` forces the KV
    cache's element type (default: the adapter's, kvlayout.cache_type)."""
    budget = min((b for b in (gpu_budget, info.gpu_budget) if b), default=0)
    kv_type = cache_type(info, kv_type)
    config = model_config(gguf)
    context = context_size(context, config.context_length, gguf.name)
    plan, problems = _plan(gguf, info, config, context, n_slots, kv_positions, step_tokens, fold_norms, budget,
                           kv_type)
    if problems:
        fits = largest_context(gguf, info, context - 1, n_slots=n_slots, kv_positions=kv_positions,
                               step_tokens=step_tokens, fold_norms=fold_norms, gpu_budget=budget, kv_type=kv_type)
        where = f"the '{info.profile}' device profile" if info.profile else "this device"
        slots = f" for {n_slots} sequences (fewer fit more: --max-batch, --cache-entries)" if n_slots > 1 else ""
        advice = (f"the largest context that fits is {fits} tokens{slots} (--ctx, context=, the context-size "
                  "attribute)" if fits else "no context fits, however small: the weights and one step's activations alone are "
                  "over the limits")
        raise ModelTooLargeError(f"{gguf.name}: this model cannot run on {where} with a context of {context} "
                                 f"tokens: " + "; ".join(problems) + f"; {advice}",
                                 profile=info.profile, budget=budget, needs=plan.as_dict(), largest_context=fits)
    return plan


def largest_context(gguf: GGUFFile, info: AdapterInfo, below: int, *, n_slots: int = 1,
                    kv_positions: int | None = None, step_tokens: int = 64, fold_norms: bool | None = None,
                    gpu_budget: int = 0, kv_type: str | None = None) -> int:
    """The largest context of at most `below` tokens whose plan fits (0: none does), found by bisection over the
    same plan a load makes (only the KV cache grows with the context, so fitting is monotonic)."""
    config = model_config(gguf)

    def fits(context: int) -> bool:
        return not _plan(gguf, info, config, context, n_slots, kv_positions, step_tokens, fold_norms, gpu_budget,
                         cache_type(info, kv_type))[1]

    if below < 1 or not fits(1):
        return 0
    lo, hi = 1, below  # fits(lo); the answer is in [lo, hi]
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo


def _plan(gguf: GGUFFile, info: AdapterInfo, config, context: int, n_slots: int, kv_positions: int | None,
          step_tokens: int, fold_norms: bool | None, gpu_budget: int, kv_type: str) -> tuple[MemoryPlan, list[str]]:
    """The plan for a resolved `context` and cache type, and what of it does not fit (empty when it all does)."""
    kv_positions = kv_positions or context * n_slots
    step = step_bucket(step_tokens)
    model, loader = planned_model(gguf, info, fold_norms)
    n_blocks = blocks_for(kv_positions)
    kv_layers = [layer_bytes(w, n_blocks, kv_type) for w in model.kv_widths()]
    state_layers = [state_bytes(w, n_slots) for w in state_widths(model)]
    acts = [activation_bytes(s, step) for s in model.activations()]
    logits = step * config.vocab_size * 4
    activations = sum(acts) + logits + inputs_bytes(step) + candidates_bytes(step)
    weight_parts = [p.buffer.size for w in loader.weights.values() for p in w.parts]
    largest = max([*kv_layers, *state_layers, *acts, logits, *weight_parts])
    plan = MemoryPlan(arch=config.arch, context=context, kv_positions=kv_positions, step_tokens=step,
                      weights=loader.bytes, upload=loader.file_bytes, kv_cache=2 * sum(kv_layers), kv_type=kv_type,
                      activations=activations,
                      largest_binding=largest,
                      kernels=tuple(sorted({f"{w.shader}/{w.layout}" for w in loader.weights.values()})),
                      state=sum(state_layers), slots=n_slots)
    problems = []
    if max(kv_layers, default=0) > info.max_binding_size:
        problems.append(f"its KV cache for {kv_positions} positions needs {max(kv_layers) >> 20} MiB per layer, over "
                        f"this adapter's {info.max_binding_size >> 20} MiB binding limit (ask for a smaller context: --ctx, "
                        "context=, the context-size attribute; or fewer parallel sequences)")
    if max([*acts, logits]) > info.max_binding_size:
        problems.append(f"one step's activations of {step} tokens exceed the {info.max_binding_size >> 20} MiB binding "
                        "limit (use fewer tokens per step)")
    if gpu_budget and plan.total > gpu_budget:
        problems.append(f"it needs {_mib(plan.total)} of GPU memory ({plan.parts()}), more than the "
                        f"{_mib(gpu_budget)} GPU memory budget")
    return plan, problems


def _mib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 1 << 30 else f"{n / 2**20:.1f} MiB"


def default_plan(gguf: GGUFFile, profile: Profile | None = None, *, context: int | None = None,
                 n_slots: int = 1) -> MemoryPlan:
    """The plan on DEFAULT_ADAPTER (capped by `profile`, when given): what `llmchat inspect`, `llmchat list` and
    `llmchat.plan` report without opening a GPU."""
    info = profile.apply(DEFAULT_ADAPTER) if profile else DEFAULT_ADAPTER
    return plan_memory(gguf, info, context=context, n_slots=n_slots)


def planned_model(gguf: GGUFFile, info: AdapterInfo, fold_norms: bool | None = None):
    """The model's constructor run against a planning loader on `info` (nothing is read or allocated): the model,
    with its cache and state widths, and the loader, with the weights it laid out."""
    loader = WeightLoader(gguf, info=info)
    config = model_config(gguf)
    return model_class(config.arch)(config, loader, fold_norms=fold_norms), loader
