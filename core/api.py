"""The Python API: `llmchat.load(MODEL)` gives an `LLM` that generates, chats, scores and reports its speed.

    from llmchat import load
    llm = load("smollm2")
    for event in llm.generate("The capital of France is", max_tokens=16):
        print(event.text, end="", flush=True)
"""
from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from .catalogue import resolve
from .chat import ChatTemplate
from .config import ModelConfig
from .engine import Engine, Feed
from .errors import ContextOverflowError, LLMChatError
from .gguf import open_gguf
from .gpu import open_device
from .gpu.kernels import Kernels
from .models import model_class
from .sampler import Sampler, SamplingParams
from .tokenizer import Tokenizer


@dataclass
class Event:
    """One piece of a streamed generation. The last event has `finish_reason` set ("stop" or "length")."""

    text: str
    token: int | None = None
    logprob: float | None = None
    finish_reason: str | None = None
    usage: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)


class LLM:
    def __init__(self, path: str, *, context: int | None = None, n_slots: int = 1, max_tokens_per_step: int = 64,
                 device=None, fold_norms: bool | None = None):
        """`fold_norms` forces RMSNorms into (or out of) the projections; by default it depends on the adapter."""
        t0 = time.perf_counter()
        self.path = path
        self.gguf = open_gguf(path)
        md = self.gguf.metadata
        self.config = ModelConfig.from_metadata(md, self.gguf.name)
        self.tokenizer = Tokenizer.from_metadata(md)
        self.template = ChatTemplate.from_metadata(md)
        self.device = device or open_device()
        self.model = model_class(self.config)(self.config, self.gguf, self.device, fold_norms=fold_norms)
        self.context = min(context or 2048, self.config.context_length)
        # One slot more than asked for holds the `chat` conversation; all slots share the cache's memory, sized for
        # `n_slots` full contexts.
        self.engine = Engine(self.model, self.device, Kernels(self.device), context=self.context,
                             n_slots=n_slots + 1, max_tokens_per_step=max_tokens_per_step,
                             cache_positions=self.context * n_slots)
        self.engine.program(1, 1)  # compile the decode step now, not on the first token
        self.load_s = time.perf_counter() - t0
        self._chat_slot: int | None = None
        self._chat_tokens: list[int] = []

    # -- prompts -------------------------------------------------------------------------------------------------
    def encode_prompt(self, prompt: str) -> list[int]:
        """Raw completion prompt: special-token text parsed, BOS as the model's metadata says."""
        return self.tokenizer.encode(prompt, add_bos=self.tokenizer.add_bos, parse_special=True)

    def encode_messages(self, messages: Sequence[dict], tools=None) -> list[int]:
        text = self.template.render(messages, add_generation_prompt=True, tools=tools)
        # The template writes BOS itself when the model wants one.
        return self.tokenizer.encode(text, add_bos=False, parse_special=True)

    # -- scoring -------------------------------------------------------------------------------------------------
    def prefill(self, slot: int, ids: list[int], start: int = 0, all_logits: bool = False, top_k: int = 0) -> list:
        """Feed `ids` at positions start.. in chunks; returns the last logits row (or every row, or the last row's
        top-k candidates)."""
        rows, step = [], self.engine.max_step
        for i in range(0, len(ids), step):
            chunk = ids[i:i + step]
            last = i + step >= len(ids)
            out = self.engine.step([Feed(slot, chunk, start + i, all_logits)], top_k=top_k if last else 0)[0]
            if all_logits:
                v = self.config.vocab_size
                rows.extend(out[j * v:(j + 1) * v] for j in range(len(chunk)))
            else:
                rows = [out]
        return rows

    def logits(self, prompt: str) -> tuple[list[int], list[float]]:
        """Prompt ids and the logits at the last prompt position."""
        ids = self.encode_prompt(prompt)
        if not ids:
            raise LLMChatError("the prompt is empty")
        self._check_fits(len(ids), 0)
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

    # -- generation ----------------------------------------------------------------------------------------------
    def generate(self, prompt: str | Sequence[dict] | list[int], *, max_tokens: int = 256,
                 stop: Sequence[str] = (), ignore_eos: bool = False, **sampling) -> Iterator[Event]:
        """Stream a completion of a raw prompt (str), of token ids, or of chat messages (a list of dicts).

        `ignore_eos` keeps generating past end-of-generation tokens (benchmarks)."""
        if isinstance(prompt, str):
            ids = self.encode_prompt(prompt)
        elif prompt and isinstance(prompt[0], int):
            ids = list(prompt)
        else:
            ids = self.encode_messages(prompt)
        with self._slot() as slot:
            yield from self._generate(slot, ids, 0, max_tokens, stop, SamplingParams(**sampling),
                                      ignore_eos=ignore_eos)

    def chat(self, messages: Sequence[dict], *, max_tokens: int = 256, stop: Sequence[str] = (),
             **sampling) -> Iterator[Event]:
        """Like generate(messages), keeping the conversation's KV cache: the next call with the same history plus
        new messages only computes the new tokens."""
        ids = self.encode_messages(messages)
        if self._chat_slot is None:
            self._chat_slot = self.engine.kv.new_slot()
            self._chat_tokens = []
        common = 0
        for a, b in zip(self._chat_tokens, ids[:-1]):  # at least one token must be fed to get logits
            if a != b:
                break
            common += 1
        common = self.engine.kv.truncate(self._chat_slot, common)
        self._chat_tokens = ids[:common]
        yield from self._generate(self._chat_slot, ids, common, max_tokens, stop, SamplingParams(**sampling),
                                  history=self._chat_tokens)

    def reset_chat(self) -> None:
        if self._chat_slot is not None:
            self.engine.kv.free_slot(self._chat_slot)
        self._chat_slot, self._chat_tokens = None, []

    def _generate(self, slot: int, ids: list[int], cached: int, max_tokens: int, stop: Sequence[str],
                  params: SamplingParams, history: list[int] | None = None, ignore_eos: bool = False,
                  ) -> Iterator[Event]:
        if not ids:
            raise LLMChatError("the prompt is empty")
        if max_tokens < 1:
            raise LLMChatError("max_tokens must be at least 1")
        params.validate()
        self._check_fits(len(ids), max_tokens)
        sampler = Sampler(params, self.config.vocab_size)
        seen = list(ids)
        stops = [s for s in stop if s]
        tok = self.tokenizer
        decoder = tok.stream_decoder()
        eog = frozenset() if ignore_eos else tok.eog_ids
        t0 = time.perf_counter()
        k = params.candidates_k  # 0 when sampling needs the whole row (penalties, or no top-k with temperature)
        logits = self.prefill(slot, ids[cached:], start=cached, top_k=k)[-1]
        t1 = time.perf_counter()
        stats = self.engine.stats
        host0, steps0 = stats["host_s"], stats["steps"]  # host time is reported for decode steps
        text, pending, n_out, finish, stopped_by_string = "", "", 0, "length", False
        pos = len(ids)
        while True:
            if k:
                token, logprob = sampler.sample_candidates(list(logits.indices), list(logits.values), logits.max,
                                                           logits.sum_exp, seen)
            else:
                token, logprob = sampler.sample_full(logits, seen)
            n_out += 1
            if token in eog:
                finish = "stop"
                break
            seen.append(token)
            piece = decoder.feed(token)
            pending += piece
            hit = _find_stop(pending, stops)
            if hit is not None:
                text += pending[:hit]
                if pending[:hit]:
                    yield Event(pending[:hit], token, logprob)
                finish, stopped_by_string = "stop", True
                break
            safe = len(pending) - _held_back(pending, stops)
            if safe > 0 or not stops:
                out, pending = pending[:safe], pending[safe:]
                text += out
                yield Event(out, token, logprob)
            if n_out >= max_tokens:
                break
            logits = self.engine.step([Feed(slot, [token], pos)], top_k=k)[0]
            pos += 1
        if pending and not stopped_by_string:  # text held back for a stop string that never came
            text += pending
            yield Event(pending)
        if history is not None:
            history[:] = seen[:pos]
        t2 = time.perf_counter()
        decode_tokens = max(0, n_out - 1)
        yield Event("", finish_reason=finish,
                    usage={"prompt_tokens": len(ids), "completion_tokens": n_out, "cached_tokens": cached},
                    timings={"load_s": self.load_s,
                             "prefill_tok_s": (len(ids) - cached) / max(t1 - t0, 1e-9),
                             "decode_tok_s": decode_tokens / (t2 - t1) if decode_tokens else 0.0,
                             "host_ms_per_token": 1e3 * (stats["host_s"] - host0) / max(1, stats["steps"] - steps0)})

    def _check_fits(self, n_prompt: int, max_tokens: int) -> None:
        if n_prompt + max_tokens > self.context:
            raise ContextOverflowError(f"the prompt has {n_prompt} tokens and {max_tokens} more were asked for; "
                                       f"the context holds {self.context} (nothing was truncated)")

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


def _find_stop(text: str, stops: list[str]) -> int | None:
    hits = [i for i in (text.find(s) for s in stops) if i >= 0]
    return min(hits) if hits else None


def _held_back(text: str, stops: list[str]) -> int:
    """How many trailing characters could still begin a stop string, so must not be streamed yet."""
    held = 0
    for s in stops:
        for k in range(min(len(s) - 1, len(text)), 0, -1):
            if text.endswith(s[:k]):
                held = max(held, k)
                break
    return held


def load(model: str, **options) -> LLM:
    """Open MODEL (a path, an http(s) URL, or a catalogue name such as "smollm2") on the best GPU adapter."""
    return LLM(resolve(model), **options)
