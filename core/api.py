"""The Python API: `llmchat.load(MODEL)` gives an `LLM` that generates, chats, scores and reports its speed.

    from llmchat import load
    llm = load("smollm2")
    for event in llm.generate("The capital of France is", max_tokens=16):
        print(event.text, end="", flush=True)

An `LLM` holds the loaded model (`llm.runtime`, llmchat.runtime.runtime.Runtime: its file, tokenizer, device,
engine and reports) and runs its sessions over it: completions, each in a slot of its own, and the chat
conversation, whose KV cache is kept from one turn to the next.
"""
from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from .chat.reply import Reply
from .chat.structured import structured_constraint
from .errors import ContextOverflowError, LLMChatError
from .gguf.file import GGUFFile, open_gguf
from .gpu.device import Device
from .gpu.profiles import Profile, get_profile
from .grammar import Constraint
from .hub.catalogue import resolve
from .runtime import chat_cache, generation
from .runtime.generation import FinishEvent, Generation, GenerationRequest
from .runtime.memory import MemoryPlan, default_plan
from .runtime.runtime import LoadOptions, Runtime
from .runtime.sampler import SamplingParams
from .serving.scheduler import Scheduler
from .tokenizer.tokenizer import Tokenizer


@dataclass
class StreamEvent:
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
    unenforced: tuple = ()  # on the last event: a best-effort JSON schema's keywords that were not enforced

    @property
    def parts(self) -> dict:
        """The delta's parts beside its content, as an OpenAI chunk's delta has them (only those present)."""
        return {k: v for k, v in (("reasoning_content", self.reasoning), ("tool_calls", self.tool_calls)) if v}


class LLM:
    """A model loaded once (`runtime`) and the sessions over it: `generate` and `chat` (which keeps its
    conversation's KV cache from turn to turn), scoring, saved conversations and a batching `scheduler`."""

    def __init__(self, path: str | GGUFFile, *, device: Device | None = None, **options):
        """Load `path` (see LoadOptions for the options) on `device` (default: the best adapter)."""
        self.runtime = Runtime(path, LoadOptions(**options), device)
        self.conversation = self.runtime.chat_session()

    @property
    def context(self) -> int:
        """Tokens a sequence holds, prompt and reply together."""
        return self.runtime.context

    @property
    def tokenizer(self) -> Tokenizer:
        return self.runtime.tokenizer

    def scheduler(self, **options) -> Scheduler:
        """Continuous batching over this model: many sequences at once, as the server runs them (llmchat.serving;
        `options` are Scheduler's)."""
        return Scheduler(self.runtime.engine, self.tokenizer, **options)

    # -- scoring -------------------------------------------------------------------------------------------------
    def logits(self, prompt: str) -> tuple[list[int], list[float]]:
        """Prompt ids and the logits at the last prompt position."""
        ids = self.runtime.encode_prompt(prompt)
        if not ids:
            raise LLMChatError("the prompt is empty")
        if len(ids) > self.context:
            raise ContextOverflowError(f"the prompt has {len(ids)} tokens; the context holds {self.context} "
                                       "(nothing was truncated)")
        with self.runtime.slot() as slot:
            return ids, list(self.runtime.prefill(slot, ids)[-1])

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
            with self.runtime.slot() as slot:
                rows = self.runtime.prefill(slot, feed, all_logits=True)
            for pos in range(len(feed) - 1):
                row = rows[pos]
                m = max(row)
                lse = m + math.log(sum(math.exp(v - m) for v in row))
                nll += lse - row[feed[pos + 1]]
                n += 1
        if n == 0:
            raise LLMChatError("the text is too short to score")
        return {"ppl": math.exp(nll / n), "mean_nll": nll / n, "tokens": n}

    # -- generation ----------------------------------------------------------------------------------------------
    def generate(self, prompt: str | Sequence[dict] | list[int], *, max_tokens: int = 256,
                 stop: Sequence[str] = (), ignore_eos: bool = False, response_format=None, grammar=None,
                 json_schema=None, on_prefill: Callable[[int, int], bool | None] | None = None,
                 **sampling) -> Iterator[StreamEvent]:
        """Stream a completion of a raw prompt (str), of token ids, or of chat messages (a list of dicts).

        `ignore_eos` keeps generating past end-of-generation tokens (benchmarks). `response_format`, `grammar`
        and `json_schema` constrain the text as in `chat`; `on_prefill` hears the prompt's progress as there."""
        if isinstance(prompt, str):
            ids = self.runtime.encode_prompt(prompt)
        elif prompt and isinstance(prompt[0], int):
            ids = list(prompt)
        else:
            ids = self.runtime.encode_messages(prompt)
        constraint = structured_constraint(self.tokenizer, response_format, grammar=grammar, json_schema=json_schema)
        seq = self._generation(ids, max_tokens, stop, sampling, ignore_eos, constraint)
        with self.runtime.slot() as slot:
            seq.start(slot)
            yield from self._run(seq, on_prefill)

    def chat(self, messages: Sequence[dict], *, max_tokens: int = 256, stop: Sequence[str] = (),
             response_format=None, tools=None, tool_choice=None, parallel_tool_calls=None,
             chat_template_kwargs=None, grammar=None, json_schema=None,
             on_prefill: Callable[[int, int], bool | None] | None = None, **sampling) -> Iterator[StreamEvent]:
        """Stream a chat reply, keeping the conversation's KV cache: the next call with the same history plus new
        messages only computes the new tokens.

        Structured output, in OpenAI's shapes: `response_format` ({"type": "json_object"}, {"type":
        "json_schema", "json_schema": {"name", "schema"}}, {"type": "grammar", "grammar": GBNF}, {"type":
        "regex", "regex": ...}) or llama.cpp's `grammar`/`json_schema`; `tools` (OpenAI function tools) with
        `tool_choice` ("auto", "none", "required" or {"type": "function", "function": {"name"}}) and
        `parallel_tool_calls`; `chat_template_kwargs` passes options such as {"enable_thinking": False} to the
        chat template. `logit_bias` ({token id: -100..100}) and the other sampling options go with them.
        `on_prefill(done, total)` is called before each step of the prompt with the prompt tokens computed so far
        and in all (those found in the cache left out), so a slow device can show progress before the first
        token; it returns False to stop there (the reply then ends at once with finish_reason "abort"). Between
        tokens, stop reading the events."""
        setup = self.runtime.prepare_chat(messages, response_format=response_format, grammar=grammar,
                                  json_schema=json_schema, tools=tools, tool_choice=tool_choice,
                                  parallel_tool_calls=parallel_tool_calls, template_kwargs=chat_template_kwargs)
        ids = self.runtime.encode_chat(setup.prompt)
        seq = self._generation(ids, max_tokens, stop, sampling, constraint=setup.constraint)
        seq.start(*self.conversation.resume(ids))
        reply = Reply(setup.parser())
        for event in self._run(seq, on_prefill):
            if event.finish_reason is None:
                delta = reply.feed(event.text)
            else:  # the conversation's cache first: a caller may stop reading at the last event
                self.conversation.keep(seq.tokens[:seq.pos])
                delta = reply.close(event.text)
                event.finish_reason = reply.finish_reason(event.finish_reason)
                event.message = reply.message()
            event.text = delta.get("content", "")
            event.reasoning = delta.get("reasoning_content", "")
            event.tool_calls = delta.get("tool_calls", [])
            yield event

    def reset_chat(self) -> None:
        """Forget the `chat` conversation (and free its KV cache blocks)."""
        self.conversation.reset()

    def save_chat(self, file: str | os.PathLike | chat_cache.ChatFile, identity: str = "") -> chat_cache.Saved:
        """Keep the `chat` conversation's KV cache in `file` (a path, or a `chat_cache.ChatFile`), so that
        `restore_chat` continues it later, in another process, without computing it again. Saving again to the
        same file writes only the positions added since (or changed by an edit). `identity` names the model
        file's bytes (a checksum, an ETag) when the file could change under the same tensor layout."""
        return self.conversation.save(file, identity)

    def restore_chat(self, file: str | os.PathLike | chat_cache.ChatFile, identity: str = "") -> int:
        """Make the conversation saved by `save_chat` the one `chat` continues: its next call computes only what
        follows the saved tokens. Returns the positions restored. `chat_cache.ChatCacheError` when the file was
        saved for another model or is damaged; the current conversation is then kept."""
        return self.conversation.restore(file, identity)

    def _generation(self, ids: list[int], max_tokens: int, stop: Sequence[str], sampling: dict,
                    ignore_eos: bool = False, constraint: Constraint | None = None) -> Generation:
        return self.runtime.generation(GenerationRequest(ids, SamplingParams(**sampling), max_tokens, tuple(stop),
                                                 ignore_eos=ignore_eos, constraint=constraint))

    def _run(self, seq: Generation,
             on_prefill: Callable[[int, int], bool | None] | None = None) -> Iterator[StreamEvent]:
        """Drive `seq` through the shared generation loop, adding timings to its finish. Recording a step's program
        (where its kernels compile, the first time a shape of step comes) is counted apart, as `compile_s`: the
        prefill and decode rates are those of the steps themselves."""
        stats = self.runtime.engine.stats
        t0, t1, record0 = time.perf_counter(), None, stats["record_s"]
        for event in generation.generate(self.runtime.engine, seq, on_prefill):
            if t1 is None:  # the first token is sampled: the prompt is in (host time counts decode steps only)
                t1, host0, steps0, record1 = time.perf_counter(), stats["host_s"], stats["steps"], stats["record_s"]
            if isinstance(event, FinishEvent):
                break
            yield StreamEvent(event.text, event.token, event.logprob)
        if event.text:  # held back for a stop string that never came, or an unfinished character (as U+FFFD)
            yield StreamEvent(event.text)
        t2, record2 = time.perf_counter(), stats["record_s"]
        decode_tokens = max(0, event.completion_tokens - 1)
        host_s, steps = stats["host_s"] - host0, stats["steps"] - steps0
        prefill_s, decode_s = t1 - t0 - (record1 - record0), t2 - t1 - (record2 - record1)
        constraint = seq.request.constraint
        yield StreamEvent("", finish_reason=event.reason, unenforced=constraint.unenforced if constraint else (),
                          usage={"prompt_tokens": event.prompt_tokens, "completion_tokens": event.completion_tokens,
                                 "cached_tokens": event.cached_tokens},
                          timings={"load_s": self.runtime.load_s, "compile_s": record2 - record0,
                                   "prefill_tok_s": (event.prompt_tokens - event.cached_tokens) / max(prefill_s, 1e-9),
                                   "decode_tok_s": decode_tokens / max(decode_s, 1e-9) if decode_tokens else 0.0,
                                   "host_ms_per_token": 1e3 * host_s / max(1, steps),
                                   **({"grammar": dict(seq.constraint.stats)} if seq.constraint else {})})


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
