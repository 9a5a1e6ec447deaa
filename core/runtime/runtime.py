"""A model loaded once onto a device: its file, tokenizer, chat template, memory plan, weights, tuned kernels and
engine, with the methods its users need (prompts to ids, prefill, reports, a conversation's cache). Completions and
chats are sessions over it (llmchat.api's LLM holds one); the server batches over its engine with llmchat.serving's
scheduler.

Loading is a few steps, in the order each needs the last: the file (and what its header names), the device, the
memory plan (which refuses what cannot fit before anything is allocated), the weights, the kernel tuning (before any
program is recorded: recording picks the kernel variants), the engine.
"""
from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..chat.structured import ChatSetup, prepare_chat
from ..chat.template import ChatTemplate
from ..errors import InvalidRequestError
from ..gguf.file import GGUFFile, open_gguf
from ..gpu import open_device
from ..gpu.device import Device
from ..gpu.kernels import Kernels
from ..gpu.profiles import NO_PROFILE, Profile, get_profile
from ..gpu.tune import ROUNDS, TuneContext, sweep, tune_model
from ..gpu.variants import variants
from ..models import model_class, model_config
from ..models.base import state_widths
from ..models.weights import WeightLoader
from ..tokenizer.tokenizer import Tokenizer
from .conversation import ChatSession
from .engine import Engine, Feed
from .generation import Generation, GenerationRequest
from .engine_choice import EngineChoice, choose_engine
from .memory import CPU, check_context, plan_memory, planned_model, step_bucket


@dataclass(frozen=True)
class LoadOptions:
    """How a model is loaded.

    `context`: tokens per sequence (default: llmchat.runtime.memory's). `n_slots` sequences can be open at once
    (one more holds the chat conversation); all share the cache's memory, sized for `n_slots` full contexts.
    `max_tokens_per_step`: the largest step (prefill chunks, batches). `fold_norms` forces RMSNorms into (or out of)
    the projections; by default it depends on the adapter. `q8_activations` rounds activations to 8 bits before
    matmuls over quantized weights, as llama.cpp does: its numbers rather than f32's (which are closer to the
    unquantized model); with it, the tuner also times int8 dot products (dot4I8Packed) where the adapter has them.
    `int8_dot` forces those for Q4_0, Q4_1 and Q8_0 weights (and implies q8_activations); an adapter without them
    refuses it with GPUError. `profile` caps the device to a class of devices ("phone", "iphone", ... see
    llmchat.gpu.profiles; default $LLMCHAT_PROFILE): its limits, its features and its GPU memory budget, which the
    memory plan checks before anything is allocated. `kv_type` ("f16" or "f32") forces the KV cache's element type;
    by default f16 where the adapter has shader-f16, f32 elsewhere. `tune` measures kernel variants at this model's
    shapes on the first load on an adapter and keeps the fastest (gpu/tune.py; default: on for hardware adapters
    unless LLMCHAT_TUNE=0); `retune` measures again even if cached; `tune_store` keeps the choices (default: a file
    per adapter and model shape, see gpu/tune.py's FileStore).

    `engine`: "webgpu" (our kernels), "cpu" (llama.cpp's CPU kernels, cpu_engine.py) or "auto" (default
    $LLMCHAT_ENGINE, else auto: see engine_choice.py). `threads`: the CPU engine's threads (default:
    every core). The options from `fold_norms` on belong to the WebGPU engine alone."""

    context: int | None = None
    n_slots: int = 1
    max_tokens_per_step: int = 64
    fold_norms: bool | None = None
    q8_activations: bool = False
    profile: str | Profile | None = None
    kv_type: str | None = None
    tune: bool | None = None
    retune: bool = False
    int8_dot: bool = False
    tune_store: Any = None
    engine: str | None = None
    threads: int | None = None

    def gpu_options(self) -> list[str]:
        """The WebGPU-only options this load sets, by name."""
        given = [(self.fold_norms is not None, "fold_norms"), (self.q8_activations, "q8_activations"),
                 (self.profile is not None, "profile"), (self.tune is not None, "tune"), (self.retune, "retune"),
                 (self.int8_dot, "int8_dot"), (self.tune_store is not None, "tune_store")]
        return [name for set_, name in given if set_]


class Runtime:
    """MODEL (a path, or an open GGUFFile) loaded on the engine `options.engine` asks for (engine_choice.py) and,
    for WebGPU, on `device` (default: the best adapter, under the profile). `choice`: the engine already chosen
    by `choose_engine` (a server sizes its batch by it before the load)."""

    def __init__(self, path: str | GGUFFile, options: LoadOptions = LoadOptions(), device: Device | None = None,
                 choice: EngineChoice | None = None):
        t0 = time.perf_counter()
        check_context(options.context)  # before anything is opened
        if options.threads is not None and (not isinstance(options.threads, int) or options.threads < 1):
            raise InvalidRequestError(f"threads must be a positive number, not {options.threads!r}")
        self.options = options
        self.path = path
        self._open_file(path)
        if choice is None:
            choice, device = choose_engine(options.engine, options.gpu_options(), device, self._open_device)
        elif choice.engine == "webgpu" and device is None:
            device = self._open_device()
        self.engine_choice = choice
        if self.engine_choice.engine == "cpu":
            self._load_cpu()
        else:
            self._load_webgpu(device)
        self.load_s = time.perf_counter() - t0

    def _load_webgpu(self, device: Device) -> None:
        options = self.options
        self.device = device
        self._check_profile()
        self.plan = plan_memory(self.gguf, self.device.info, context=options.context, n_slots=options.n_slots,
                                step_tokens=options.max_tokens_per_step, fold_norms=options.fold_norms,
                                kv_type=options.kv_type)
        self.context = self.plan.context
        weights = self._load_weights()
        kernels = Kernels(self.device)
        self._tune_kernels(kernels, weights)
        self.engine = Engine(self.model, self.device, kernels, context=self.context,
                             n_slots=options.n_slots + 1, max_tokens_per_step=options.max_tokens_per_step,
                             cache_positions=self.plan.kv_positions, q8_activations=self._q8_activations,
                             kv_type=self.plan.kv_type)
        self.engine.program(1, 1)  # compile the decode step now, not on the first token

    def _load_cpu(self) -> None:
        """llama.cpp's CPU kernels run the file; llmchat's plan sizes the cache and its model the bookkeeping."""
        from .cpu_engine import CpuEngine

        options = self.options
        if not isinstance(self.path, str):
            raise InvalidRequestError("the cpu engine opens a model by its path; it was given an open file")
        self.device = None
        self.plan = plan_memory(self.gguf, CPU, context=options.context, n_slots=options.n_slots,
                                step_tokens=options.max_tokens_per_step, kv_type=options.kv_type)
        self.context = self.plan.context
        self.model = planned_model(self.gguf, CPU)[0]
        self.tuning = None
        self.engine = CpuEngine(self.path, self.config, context=self.context,
                                n_slots=options.n_slots + 1, max_tokens_per_step=options.max_tokens_per_step,
                                cache_positions=self.plan.kv_positions, kv_widths=self.model.kv_widths(),
                                state_widths=state_widths(self.model), kv_type=self.plan.kv_type,
                                threads=options.threads)

    def engine_report(self) -> dict:
        """Which engine runs the model and why, for JSON reports: {"engine", "why", "description"}."""
        return {**self.engine_choice.as_dict(), "description": self.describe_engine()}

    def describe_engine(self) -> str:
        """What runs the model and why, as every report says it: "cpu engine (llama.cpp, 2 CPU threads): the only
        adapter, ..., emulates a GPU on the CPU: ..." or "webgpu engine (ADAPTER): a hardware adapter (...)"."""
        return f"{self.engine_choice.engine} engine ({self.engine.describe()}): {self.engine_choice.why}"

    # -- loading, step by step -----------------------------------------------------------------------------------
    def _open_file(self, path: str | GGUFFile) -> None:
        # An open GGUFFile is taken as it is: the browser opens a split model's shards through its own store.
        self.gguf = path if isinstance(path, GGUFFile) else open_gguf(path)
        self.config = model_config(self.gguf)
        self.tokenizer = Tokenizer.from_metadata(self.gguf.metadata)
        self.template = ChatTemplate.from_metadata(self.gguf.metadata)

    def _open_device(self) -> Device:
        return open_device(profile=get_profile(self.options.profile) or NO_PROFILE)

    def _check_profile(self) -> None:
        profile = self.options.profile
        chosen = get_profile(profile)
        if profile is not None and self.device.info.profile != (chosen.name if chosen else ""):
            raise InvalidRequestError(f"the device given was opened under the profile "
                                      f"'{self.device.info.profile or NO_PROFILE}', not '{profile}'; open it with "
                                      "profile= or leave profile out")

    def _load_weights(self) -> dict:
        loader = WeightLoader(self.gguf, self.device)
        self.model = model_class(self.config.arch)(self.config, loader, fold_norms=self.options.fold_norms)
        return dict(loader.weights)

    def _tune_kernels(self, kernels: Kernels, weights: dict) -> None:
        options = self.options
        self._q8_activations = options.q8_activations or options.int8_dot
        self._tune_context = TuneContext(self.device, kernels, variants(self.device), weights, self.config,
                                         step_bucket(options.max_tokens_per_step), self._q8_activations)
        self.tuning = tune_model(self._tune_context, option=options.tune, retune=options.retune,
                                 int8_dot=options.int8_dot, store=options.tune_store)

    # -- prompts -------------------------------------------------------------------------------------------------
    def encode_prompt(self, prompt: str) -> list[int]:
        """Raw completion prompt: special-token text parsed, BOS as the model's metadata says."""
        return self.tokenizer.encode(prompt, add_bos=self.tokenizer.add_bos, parse_special=True)

    def encode_messages(self, messages: Sequence[dict], tools=None) -> list[int]:
        return self.encode_chat(self.template.render(messages, add_generation_prompt=True, tools=tools))

    def encode_chat(self, text: str) -> list[int]:
        # The template writes BOS itself when the model wants one.
        return self.tokenizer.encode(text, add_bos=False, parse_special=True)

    def prepare_chat(self, messages: Sequence[dict], **fields) -> ChatSetup:
        """The prompt, reply constraint and reply parser for a chat request (see `LLM.chat` for the fields)."""
        return prepare_chat(self.template, self.tokenizer, messages, **fields)

    # -- sequences -----------------------------------------------------------------------------------------------
    @contextmanager
    def slot(self):
        """A KV cache slot for one sequence, freed on leaving."""
        slot = self.engine.kv.new_slot()
        try:
            yield slot
        finally:
            self.engine.kv.free_slot(slot)

    def generation(self, request: GenerationRequest) -> Generation:
        """`request` checked against this model, ready to `start` in a slot."""
        return Generation(request, self.tokenizer, self.config.vocab_size, self.context)

    def prefill(self, slot: int, ids: list[int], start: int = 0, all_logits: bool = False, top_k: int = 0) -> list:
        """Feed `ids` at positions start.. in chunks; returns the last logits row (or every row, or the last row's
        top-k candidates)."""
        rows, step = [], self.engine.max_step
        for i in range(0, len(ids), step):
            chunk = ids[i:i + step]
            last = i + step >= len(ids)
            out = self.engine.step([Feed(slot, chunk, start + i, all_logits, logits=all_logits or last)],
                                   top_k=top_k if last else 0)[0]
            if all_logits:
                v = self.config.vocab_size
                rows.extend(out[j * v:(j + 1) * v] for j in range(len(chunk)))
            elif last:
                rows = [out]
        return rows

    def chat_session(self) -> ChatSession:
        """A conversation's KV cache, continued turn after turn (see ChatSession)."""
        return ChatSession(self.engine.kv, self.gguf)

    # -- reports -------------------------------------------------------------------------------------------------
    def report(self, context: int | None = None) -> dict:
        """What one decode token costs at `context` positions (default: the full context): its dispatches, the
        weight bytes it reads, where kernels read weights from (buffers or textures, variants.weight_textures),
        the adapter, and the kernel variants chosen and why; on the CPU engine, its threads. Both say which engine
        ran and why (`engine`)."""
        engine = {"engine": self.engine_report()}
        if self.device is None:
            return {**engine, "threads": self.engine.threads}
        return {**engine, "dispatches_per_token": self.engine.dispatches_per_step(context=context),
                "weight_bytes_per_token": self.model.weight_bytes,
                "weights_read_from": dict(Counter(w.store for w in self._tune_context.weights.values())),
                "adapter": self.device.info.as_dict(),
                "kernels": self.tuning.summary()}

    def sweep_kernels(self, rounds: int = ROUNDS) -> dict[str, dict]:
        """Every kernel variant the tuner chooses among, at this model's shapes, timed `rounds` times with no
        budget (gpu/tune.py's `sweep`): per case its shape, each candidate's microseconds per dispatch, the
        fastest, those the measurement cannot tell from it (`ties`), and the variant this load runs — how close
        the tuner's (or the fixed table's) picks are."""
        if self.device is None:
            raise InvalidRequestError("the kernel sweep times llmchat's WGSL kernels; this model runs on the cpu "
                                      "engine (llama.cpp's kernels): load it with engine webgpu")
        result = sweep(self._tune_context, rounds)
        for name, case in result.items():
            case["running"] = self.tuning.choices[name]["variant"]
        return result
