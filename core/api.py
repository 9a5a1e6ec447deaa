"""The Python API: `llmchat.load(MODEL)` gives an `LLM` that generates, chats, scores and reports its speed.

    from llmchat import load
    llm = load("smollm2")
    for event in llm.generate("The capital of France is", max_tokens=16):
        print(event.text, end="", flush=True)
"""
from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from .runtime import chat_cache, generation
from .hub.catalogue import resolve
from .chat.template import ChatTemplate
from .runtime.constraint import Constraint
from .runtime.engine import Engine, Feed
from .errors import ContextOverflowError, InvalidRequestError, LLMChatError
from .runtime.generation import FinishEvent, GenerationRequest
from .gguf.file import GGUFFile, open_gguf
from .gpu import open_device
from .gpu.kernels import Kernels
from .gpu.profiles import NO_PROFILE, Profile, get_profile
from .gpu.variants import variants
from .gpu.tune import ROUNDS, TuneContext, sweep, tune_model
from .runtime.kv_cache import common_prefix
from .runtime.memory import MemoryPlan, check_context, default_plan, plan_memory, step_bucket
from .models import model_class, model_config
from .models.weights import WeightLoader
from .chat.reply import Reply
from .runtime.sampler import SamplingParams
from .chat.structured import ChatSetup, prepare_chat, structured_constraint
from .tokenizer.tokenizer import Tokenizer


@dataclass
class Event:
    """One piece of a streamed generation: a token and the text it completes (possibly empty: held back for a
    stop string or an unfinished character). The last event has `finish_reason` set ("stop", "length", or
    "tool_calls" when a chat reply called tools).

    In `chat`, `text` is the reply's content only: a reasoning model's thinking comes as `reasoning`, tool calls
    as `tool_calls` deltas in OpenAI's streaming shape, and the last event carries the whole `message`
    (`content`, `reasoning_content`, `tool_calls`) as OpenAI's non-streaming answer has it."""

    text: str
    token: int | None = None
    logprob: float | None = None
    finish_reason: str | None = None
    usage: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    reasoning: str = ""
    tool_calls: list = field(default_factory=list)
    message: dict | None = None


class LLM:
    def __init__(self, path, *, context: int | None = None, n_slots: int = 1, max_tokens_per_step: int = 64,
                 device=None, fold_norms: bool | None = None, q8_activations: bool = False,
                 profile: str | Profile | None = None, kv_type: str | None = None, tune: bool | None = None,
                 retune: bool = False, int8_dot: bool = False, tune_store=None):
        """`fold_norms` forces RMSNorms into (or out of) the projections; by default it depends on the adapter.
        `q8_activations` rounds activations to 8 bits before matmuls over quantized weights, as llama.cpp does: its
        numbers rather than f32's (which are closer to the unquantized model); with it, the tuner also times int8 dot
        products (dot4I8Packed) where the adapter has them. `int8_dot` forces those for Q4_0, Q4_1 and Q8_0 weights
        (and implies q8_activations); an adapter without them refuses it with GPUError. `profile` caps the device to a class
        of devices ("phone", "iphone", ... see llmchat.gpu.profiles; default $LLMCHAT_PROFILE): its limits, its
        features and its GPU memory budget, which the memory plan checks before anything is allocated. `kv_type`
        ("f16" or "f32") forces the KV cache's element type; by default f16 where the adapter has shader-f16, f32
        elsewhere. `tune` measures kernel variants at this model's shapes on the first load on an adapter and keeps
        the fastest (gpu/tune.py; default: on for hardware adapters unless LLMCHAT_TUNE=0); `retune` measures again
        even if cached; `tune_store` keeps the choices (default: a file per adapter and model shape, see
        gpu/tune.py's FileStore)."""
        t0 = time.perf_counter()
        check_context(context)  # before anything is opened
        chosen = get_profile(profile)
        if device is not None and profile is not None and device.info.profile != (chosen.name if chosen else ""):
            raise InvalidRequestError(f"the device given was opened under the profile "
                                      f"'{device.info.profile or NO_PROFILE}', not '{profile}'; open it with "
                                      "profile= or leave profile out")
        self.path = path
        # An open GGUFFile is taken as it is: the browser opens a split model's shards through its own store.
        self.gguf = path if isinstance(path, GGUFFile) else open_gguf(path)
        md = self.gguf.metadata
        self.config = model_config(self.gguf)
        self.tokenizer = Tokenizer.from_metadata(md)
        self.template = ChatTemplate.from_metadata(md)
        self.device = device or open_device(profile=chosen or NO_PROFILE)
        # One slot more than asked for holds the `chat` conversation; all slots share the cache's memory, sized for
        # `n_slots` full contexts. The plan refuses what cannot fit before anything is allocated.
        self.plan = plan_memory(self.gguf, self.device.info, context=context, n_slots=n_slots,
                                step_tokens=max_tokens_per_step, fold_norms=fold_norms, kv_type=kv_type)
        self.context = self.plan.context
        loader = WeightLoader(self.gguf, self.device)
        self.model = model_class(self.config.arch)(self.config, loader, fold_norms=fold_norms)
        kernels = Kernels(self.device)
        # Before any program is recorded: recording picks the kernel variants.
        q8_activations = q8_activations or int8_dot
        self.tune_context = TuneContext(self.device, kernels, variants(self.device), dict(loader.weights),
                                        self.config, step_bucket(max_tokens_per_step), q8_activations)
        self.tuning = tune_model(self.tune_context, option=tune, retune=retune, int8_dot=int8_dot, store=tune_store)
        self.engine = Engine(self.model, self.device, kernels, context=self.context,
                             n_slots=n_slots + 1, max_tokens_per_step=max_tokens_per_step,
                             cache_positions=self.plan.kv_positions, q8_activations=q8_activations,
                             kv_type=self.plan.kv_type)
        self.engine.program(1, 1)  # compile the decode step now, not on the first token
        self.load_s = time.perf_counter() - t0
        self._chat_slot: int | None = None
        self._chat_tokens: list[int] = []

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
        """The prompt, reply constraint and reply parser for a chat request (see `chat` for the fields)."""
        return prepare_chat(self.template, self.tokenizer, messages, **fields)

    # -- scoring -------------------------------------------------------------------------------------------------
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

    def logits(self, prompt: str) -> tuple[list[int], list[float]]:
        """Prompt ids and the logits at the last prompt position."""
        ids = self.encode_prompt(prompt)
        if not ids:
            raise LLMChatError("the prompt is empty")
        if len(ids) > self.context:
            raise ContextOverflowError(f"the prompt has {len(ids)} tokens; the context holds {self.context} "
                                       "(nothing was truncated)")
        with self._slot() as slot:
            return ids, list(self.prefill(slot, ids)[-1])

    def perplexity(self, text: str, window: int = 256) -> dict:
        """Mean negative log-likelihood over consecutive windows, scoring every token after each window's first
        (BOS is put before each window when the model adds one, and then the window's first token is scored too)."""
        ids = self.tokenizer.encode(text, add_bos=False)
        bos = self.tokenizer.bos_id if self.tokenizer.add_bos else None
        if window < 2 or window + (bos is not None) > self.context:
            raise LLMChatError(f"window must be between 2 and the context size ({self.context})")
        nll, n = 0.0, 0
        for w in range(0, len(ids), window):
            chunk = ids[w:w + window]
            feed = ([bos] if bos is not None else []) + chunk
            if len(feed) < 2:
                continue
            with self._slot() as slot:
                rows = self.prefill(slot, feed, all_logits=True)
            for pos in range(len(feed) - 1):
                row = rows[pos]
                m = max(row)
                lse = m + math.log(sum(math.exp(v - m) for v in row))
                nll += lse - row[feed[pos + 1]]
                n += 1
        if n == 0:
            raise LLMChatError("the text is too short to score")
        return {"ppl": math.exp(nll / n), "mean_nll": nll / n, "tokens": n}

    # -- kernels -------------------------------------------------------------------------------------------------
    def sweep_kernels(self, rounds: int = ROUNDS) -> dict[str, dict]:
        """Every kernel variant the tuner chooses among, at this model's shapes, timed `rounds` times with no
        budget (gpu/tune.py's `sweep`): per case its shape, each candidate's microseconds per dispatch, the
        fastest, those the measurement cannot tell from it (`ties`), and the variant this load runs — how close
        the tuner's (or the fixed table's) picks are."""
        result = sweep(self.tune_context, rounds)
        for name, case in result.items():
            case["running"] = self.tuning.choices[name]["variant"]
        return result

    # -- generation ----------------------------------------------------------------------------------------------
    def generate(self, prompt: str | Sequence[dict] | list[int], *, max_tokens: int = 256,
                 stop: Sequence[str] = (), ignore_eos: bool = False, response_format=None, grammar=None,
                 json_schema=None, **sampling) -> Iterator[Event]:
        """Stream a completion of a raw prompt (str), of token ids, or of chat messages (a list of dicts).

        `ignore_eos` keeps generating past end-of-generation tokens (benchmarks). `response_format`, `grammar`
        and `json_schema` constrain the text as in `chat`."""
        if isinstance(prompt, str):
            ids = self.encode_prompt(prompt)
        elif prompt and isinstance(prompt[0], int):
            ids = list(prompt)
        else:
            ids = self.encode_messages(prompt)
        constraint = structured_constraint(self.tokenizer, response_format, grammar=grammar, json_schema=json_schema)
        seq = self._sequence(ids, max_tokens, stop, sampling, ignore_eos, constraint)
        with self._slot() as slot:
            seq.start(slot)
            yield from self._run(seq)

    def chat(self, messages: Sequence[dict], *, max_tokens: int = 256, stop: Sequence[str] = (),
             response_format=None, tools=None, tool_choice=None, parallel_tool_calls=None,
             chat_template_kwargs=None, grammar=None, json_schema=None, **sampling) -> Iterator[Event]:
        """Stream a chat reply, keeping the conversation's KV cache: the next call with the same history plus new
        messages only computes the new tokens.

        Structured output, in OpenAI's shapes: `response_format` ({"type": "json_object"}, {"type":
        "json_schema", "json_schema": {"name", "schema"}}, {"type": "grammar", "grammar": GBNF}, {"type":
        "regex", "regex": ...}) or llama.cpp's `grammar`/`json_schema`; `tools` (OpenAI function tools) with
        `tool_choice` ("auto", "none", "required" or {"type": "function", "function": {"name"}}) and
        `parallel_tool_calls`; `chat_template_kwargs` passes options such as {"enable_thinking": False} to the
        chat template. `logit_bias` ({token id: -100..100}) and the other sampling options go with them."""
        setup = self.prepare_chat(messages, response_format=response_format, grammar=grammar,
                                  json_schema=json_schema, tools=tools, tool_choice=tool_choice,
                                  parallel_tool_calls=parallel_tool_calls, template_kwargs=chat_template_kwargs)
        ids = self.encode_chat(setup.prompt)
        seq = self._sequence(ids, max_tokens, stop, sampling, constraint=setup.constraint)
        if self._chat_slot is None:
            self._chat_slot = self.engine.kv.new_slot()
            self._chat_tokens = []
        common = common_prefix(self._chat_tokens, ids[:-1])  # at least one token must be fed to get logits
        common = self.engine.kv.truncate(self._chat_slot, common)
        self._chat_tokens = ids[:common]
        seq.start(self._chat_slot, common)
        reply = Reply(setup.parser())
        for event in self._run(seq):
            if event.finish_reason is None:
                delta = reply.feed(event.text)
            else:  # the conversation's cache first: a caller may stop reading at the last event
                self._chat_tokens = seq.tokens[:seq.pos]
                delta = reply.close(event.text)
                event.finish_reason = reply.finish_reason(event.finish_reason)
                event.message = reply.message()
            event.text = delta.get("content", "")
            event.reasoning = delta.get("reasoning_content", "")
            event.tool_calls = delta.get("tool_calls", [])
            yield event

    def reset_chat(self) -> None:
        if self._chat_slot is not None:
            self.engine.kv.free_slot(self._chat_slot)
        self._chat_slot, self._chat_tokens = None, []

    def save_chat(self, file: str | os.PathLike | chat_cache.ChatFile, identity: str = "") -> chat_cache.Saved:
        """Keep the `chat` conversation's KV cache in `file` (a path, or a `chat_cache.ChatFile`), so that
        `restore_chat` continues it later, in another process, without computing it again. Saving again to the
        same file writes only the positions added since (or changed by an edit). `identity` names the model
        file's bytes (a checksum, an ETag) when the file could change under the same tensor layout."""
        with _opened(file, writable=True) as f:
            model = chat_cache.fingerprint(self.gguf, self.engine.kv, identity)
            return chat_cache.save(self.engine.kv, self._chat_slot, self._chat_tokens, f, model)

    def restore_chat(self, file: str | os.PathLike | chat_cache.ChatFile, identity: str = "") -> int:
        """Make the conversation saved by `save_chat` the one `chat` continues: its next call computes only what
        follows the saved tokens. Returns the positions restored. `chat_cache.ChatCacheError` when the file was
        saved for another model or is damaged; the current conversation is then kept."""
        with _opened(file, writable=False) as f:
            model = chat_cache.fingerprint(self.gguf, self.engine.kv, identity)
            conversation = chat_cache.read(self.engine.kv, f, model)
        self.reset_chat()
        self._chat_slot = chat_cache.place(self.engine.kv, conversation)
        self._chat_tokens = conversation.tokens if self._chat_slot is not None else []
        return len(self._chat_tokens)

    def _sequence(self, ids: list[int], max_tokens: int, stop: Sequence[str], sampling: dict,
                  ignore_eos: bool = False, constraint: Constraint | None = None) -> generation.Sequence:
        request = GenerationRequest(ids, SamplingParams(**sampling), max_tokens, tuple(stop), ignore_eos=ignore_eos,
                                    constraint=constraint)
        return generation.Sequence(request, self.tokenizer, self.config.vocab_size, self.context)

    def _run(self, seq: generation.Sequence) -> Iterator[Event]:
        """Drive `seq` through the shared generation loop, adding timings to its finish."""
        stats = self.engine.stats
        t0, t1 = time.perf_counter(), None
        for event in generation.generate(self.engine, seq):
            if t1 is None:  # the first token is sampled: the prompt is in (host time counts decode steps only)
                t1, host0, steps0 = time.perf_counter(), stats["host_s"], stats["steps"]
            if isinstance(event, FinishEvent):
                break
            yield Event(event.text, event.token, event.logprob)
        if event.text:  # held back for a stop string that never came, or an unfinished character (as U+FFFD)
            yield Event(event.text)
        t2 = time.perf_counter()
        decode_tokens = max(0, event.completion_tokens - 1)
        yield Event("", finish_reason=event.reason,
                    usage={"prompt_tokens": event.prompt_tokens, "completion_tokens": event.completion_tokens,
                           "cached_tokens": event.cached_tokens},
                    timings={"load_s": self.load_s,
                             "prefill_tok_s": (event.prompt_tokens - event.cached_tokens) / max(t1 - t0, 1e-9),
                             "decode_tok_s": decode_tokens / (t2 - t1) if decode_tokens else 0.0,
                             "host_ms_per_token": 1e3 * (stats["host_s"] - host0) / max(1, stats["steps"] - steps0),
                             **({"grammar": dict(seq.constraint.stats)} if seq.constraint else {})})

    def _slot(self):
        return _SlotLease(self.engine.kv)


class _SlotLease:
    def __init__(self, kv):
        self.kv = kv

    def __enter__(self) -> int:
        self.slot = self.kv.new_slot()
        return self.slot

    def __exit__(self, *exc) -> None:
        self.kv.free_slot(self.slot)


@contextmanager
def _opened(file, writable: bool):
    if isinstance(file, (str, os.PathLike)):
        with chat_cache.LocalFile(file, writable) as f:
            yield f
    else:
        yield file


def load(model: str, *, profile: str | Profile | None = None, **options) -> LLM:
    """Open MODEL (a path, an http(s) URL, or a catalogue name such as "smollm2") on the best GPU adapter;
    `profile="phone"` caps the device to a class of devices (see `LLM`)."""
    get_profile(profile)  # an unknown name fails before a catalogue model is pulled
    return LLM(resolve(model), profile=profile, **options)


def plan(model: str, *, profile: str | Profile | None = None, context: int | None = None,
         n_slots: int = 1) -> MemoryPlan:
    """What MODEL needs on a device of `profile` (default $LLMCHAT_PROFILE; none: a GPU with WebGPU's default
    limits), from its header alone: no GPU is opened, and an http(s) URL is read by Range, not downloaded
    (a catalogue name is pulled first). Raises ModelTooLargeError with the numbers and the largest context that
    would fit."""
    with open_gguf(resolve(model)) as gguf:
        return default_plan(gguf, get_profile(profile), context=context, n_slots=n_slots)
