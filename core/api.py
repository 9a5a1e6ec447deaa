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
from dataclasses import dataclass, field, replace

from .chat.reply import Reply
from .chat.structured import structured_constraint
from .errors import ContextOverflowError, FieldError, InvalidRequestError, LLMChatError
from .gguf.file import GGUFFile, open_gguf
from .gpu.device import Device
from .gpu.profiles import Profile, get_profile
from .grammar import Constraint
from .hub.catalogue import resolve
from .protocol import Piece, Request, read_event
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
    def answer(self, request: Request, *, messages: Sequence[dict] | None = None,
               prompt: str | list[int] | None = None, on_prefill: Callable[[int, int], bool | None] | None = None,
               should_stop: Callable[[], bool] | None = None) -> Iterator[Piece]:
        """Answer a checked request (llmchat.protocol.read_request, as the server reads one) with the protocol's
        pieces, for llmchat.protocol.Completion to shape as OpenAI's answer: a chat request continues the `chat`
        conversation with `messages`, a text completion completes `prompt` (text or token ids) in a slot of its
        own. One choice (`n` 1); the scheduler runs many.

        `on_prefill` hears the prompt's progress as in `chat`. `should_stop()` is asked before each prompt step
        and before each token is given out: once it says true the reply ends with finish_reason "abort", no token
        after it, its counts those of the prompt and of the tokens given out. The last piece carries the finish,
        the counts, a chat reply's whole message and llmchat's timings (`extension["timings"]`)."""
        if request.n != 1:
            raise FieldError("this engine makes one choice per request; leave `n` out", "n")

        def make(ids: list[int], constraint: Constraint | None) -> GenerationRequest:
            budget = request.max_tokens if request.max_tokens is not None else max(1, self.context - len(ids))
            return request.generation(ids, budget, constraint)
        if request.chat:
            if messages is None:
                raise FieldError("a chat request needs `messages`", "messages")
            return self._chat(messages, request.chat_fields(), make, on_prefill, should_stop)
        if isinstance(prompt, str):
            ids = self.runtime.encode_prompt(prompt)
        elif isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool)
                                                         for t in prompt):
            ids = list(prompt)
        else:
            raise FieldError("`prompt` must be a string or a non-empty list of token ids", "prompt")
        constraint = structured_constraint(self.tokenizer, **request.structure)
        return self._complete(make(ids, constraint), on_prefill, should_stop)

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
        request = GenerationRequest(ids, SamplingParams(**sampling), max_tokens, tuple(stop), ignore_eos=ignore_eos,
                                    constraint=constraint)
        return _stream_events(self._complete(request, on_prefill))

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
        fields = dict(response_format=response_format, grammar=grammar, json_schema=json_schema, tools=tools,
                      tool_choice=tool_choice, parallel_tool_calls=parallel_tool_calls,
                      template_kwargs=chat_template_kwargs)
        params = SamplingParams(**sampling)

        def make(ids: list[int], constraint: Constraint | None) -> GenerationRequest:
            return GenerationRequest(ids, params, max_tokens, tuple(stop), constraint=constraint)
        return _stream_events(self._chat(messages, fields, make, on_prefill))

    def reset_chat(self) -> None:
        """Forget the `chat` conversation (and free its KV cache blocks)."""
        self.conversation.reset()

    def save_chat(self, file: str | os.PathLike | chat_cache.ChatFile, identity: str = "") -> chat_cache.Saved:
        """Keep the `chat` conversation's KV cache in `file` (a path, or a `chat_cache.ChatFile`), so that
        `restore_chat` continues it later, in another process, without computing it again. Saving again to the
        same file writes only the positions added since (or changed by an edit). `identity` names the model
        file's bytes (a checksum, an ETag) when the file could change under the same tensor layout."""
        self._saved_chats_here()
        return self.conversation.save(file, identity)

    def restore_chat(self, file: str | os.PathLike | chat_cache.ChatFile, identity: str = "") -> int:
        """Make the conversation saved by `save_chat` the one `chat` continues: its next call computes only what
        follows the saved tokens. Returns the positions restored. `chat_cache.ChatCacheError` when the file was
        saved for another model or is damaged; the current conversation is then kept."""
        self._saved_chats_here()
        return self.conversation.restore(file, identity)

    def _saved_chats_here(self) -> None:
        if self.runtime.engine_choice.engine != "webgpu":
            raise InvalidRequestError("saved conversations hold the webgpu engine's KV cache; this model runs on the "
                                      f"{self.runtime.engine_choice.engine} engine, which does not save them yet: "
                                      "load it with engine='webgpu' to save or restore one")

    def _chat(self, messages: Sequence[dict], fields: dict, make: Callable[..., GenerationRequest],
              on_prefill=None, should_stop=None) -> Iterator[Piece]:
        """The conversation's next reply to `messages` (`fields`: the chat layer's keywords), generated as
        `make(prompt ids, constraint)` asks, its KV cache continued from the last turn and kept for the next."""
        setup = self.runtime.prepare_chat(messages, **fields)
        ids = self.runtime.encode_chat(setup.prompt)
        seq = self.runtime.generation(make(ids, setup.constraint))
        seq.start(*self.conversation.resume(ids))
        for piece in self._pieces(seq, Reply(setup.parser()), on_prefill, should_stop):
            if piece.finish_reason is not None:  # the conversation's cache first: a caller may stop reading here
                self.conversation.keep(seq.tokens[:seq.pos])
            yield piece

    def _complete(self, request: GenerationRequest, on_prefill=None, should_stop=None) -> Iterator[Piece]:
        seq = self.runtime.generation(request)
        with self.runtime.slot() as slot:
            seq.start(slot)
            yield from self._pieces(seq, None, on_prefill, should_stop)

    def _pieces(self, seq: Generation, reply: Reply | None, on_prefill=None, should_stop=None) -> Iterator[Piece]:
        """Drive `seq` through the shared generation loop, each event read as the protocol's piece (a chat reply's
        by `reply`), the finish with its timings. Recording a step's program (where its kernels compile, the first
        time a shape of step comes) is counted apart, as `compile_s`: the prefill and decode rates are those of
        the steps themselves."""
        def prefill(done: int, total: int) -> bool | None:
            if should_stop is not None and should_stop():
                return False
            return None if on_prefill is None else on_prefill(done, total)
        stats = self.runtime.engine.stats
        t0, t1, record0 = time.perf_counter(), None, stats["record_s"]
        for event in generation.generate(self.runtime.engine, seq, prefill):
            if t1 is None:  # the first token is sampled: the prompt is in (host time counts decode steps only)
                t1, host0, steps0, record1 = time.perf_counter(), stats["host_s"], stats["steps"], stats["record_s"]
            if isinstance(event, FinishEvent):
                break
            if should_stop is not None and should_stop():
                # Neither this token nor the text held back before it is given out, nor counted.
                event = replace(seq.abort(), text="", completion_tokens=seq.generated - 1)
                break
            yield read_event(event, reply)
        t2, record2 = time.perf_counter(), stats["record_s"]
        decode_tokens = max(0, event.completion_tokens - 1)
        host_s, steps = stats["host_s"] - host0, stats["steps"] - steps0
        prefill_s, decode_s = t1 - t0 - (record1 - record0), t2 - t1 - (record2 - record1)
        piece = read_event(event, reply, seq.request.constraint)
        piece.extension = {"timings": {
            "load_s": self.runtime.load_s, "compile_s": record2 - record0,
            "prefill_tok_s": (event.prompt_tokens - event.cached_tokens) / max(prefill_s, 1e-9),
            "decode_tok_s": decode_tokens / max(decode_s, 1e-9) if decode_tokens else 0.0,
            "host_ms_per_token": 1e3 * host_s / max(1, steps),
            **({"grammar": dict(seq.constraint.stats)} if seq.constraint else {})}}
        yield piece


def _stream_events(pieces: Iterator[Piece]) -> Iterator[StreamEvent]:
    """The Python API's events for the protocol's pieces: the text held back to the end (for a stop string that
    never came, or an unfinished character, as U+FFFD) comes as an event of its own before the last."""
    for piece in pieces:
        parts = {"reasoning": piece.parts.get("reasoning_content", ""), "tool_calls": piece.parts.get("tool_calls", [])}
        if piece.finish_reason is None:
            yield StreamEvent(piece.text, piece.token, piece.logprob, **parts)
            continue
        if piece.text or piece.parts:
            yield StreamEvent(piece.text, **parts)
        counts = piece.counts
        yield StreamEvent("", finish_reason=piece.finish_reason, message=piece.message, unenforced=piece.unenforced,
                          usage={"prompt_tokens": counts.prompt_tokens, "completion_tokens": counts.completion_tokens,
                                 "cached_tokens": counts.cached_tokens}, timings=piece.extension["timings"])


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
