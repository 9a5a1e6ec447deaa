"""Continuous batching: one thread runs the engine step after step over every live sequence.

Each step carries the next token of every decoding sequence plus at most one chunk of one newcomer's prompt, so
a request joins at the next step, one that finishes leaves at once, and a long prompt is fed a chunk at a time
between decode steps instead of stalling the running streams for its whole prefill. While nothing is decoding,
the chunk is as large as a step allows. A newcomer gets its KV slot only when its prefill starts, from the prefix
cache: it shares the longest prefix computed so far, by a finished sequence or by one still running.

The GPU work is synchronous, so it runs here, in one thread that owns the engine. Requests arrive through a
thread-safe inbox; results leave through each request's `sink` callback (the server turns that into an asyncio
queue with `call_soon_threadsafe`). Cancelling sets a flag the loop reads before every step; the sequence's slot
and blocks are freed there.
"""
from __future__ import annotations

import logging
import math
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..runtime import generation
from ..runtime.engine import Engine
from ..errors import GrammarError, InvalidRequestError, LLMChatError
from ..runtime.generation import FinishEvent, GenerationRequest, TokenEvent
from ..gpu.kvlayout import BLOCK_TOKENS
from ..tokenizer.tokenizer import Tokenizer
from .metrics import Metrics
from .prefix_cache import PrefixCache

log = logging.getLogger("llmchat.serving")
RATE_WINDOW_S = 10.0  # the decode rate behind Retry-After is measured over this many seconds of steps


class QueueFullError(LLMChatError):
    """The waiting queue is full; the client should retry later (in `retry_after` seconds)."""

    status, code, api_code = 429, "busy", "rate_limit_exceeded"

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    def http_headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)}


class TooManySequencesError(InvalidRequestError):
    """One request asks for more sequences than the queue can ever hold."""

    param = "n"


class SchedulerStoppedError(LLMChatError):
    """The scheduler is not running (shut down, or its thread failed)."""

    status, code = 503, "stopped"


@dataclass(frozen=True)
class ErrorEvent:
    error: BaseException


SchedulerEvent = TokenEvent | FinishEvent | ErrorEvent
Sink = Callable[[SchedulerEvent], None]


class _Scheduled:
    """A sequence as the scheduler tracks it: its place in the generation loop (`gen`), where its events go, and
    when it was submitted and last sampled."""

    def __init__(self, gen: generation.Generation, sink: Sink, submitted: float):
        self.gen = gen
        self.sink = sink
        self.submitted = submitted
        self.last_token_at = 0.0
        self.cancelled = False


class Ticket:
    """The caller's handle on a submitted sequence."""

    def __init__(self, scheduler: Scheduler, seq: _Scheduled) -> None:
        self._scheduler, self._seq = scheduler, seq

    def cancel(self) -> None:
        """Stop generating and free the sequence's KV blocks (at the latest before the next step)."""
        self._scheduler.cancel(self._seq)


_WAKE = object()
_STOP = object()


class Scheduler:
    """Runs `engine` over every submitted sequence, at most `max_batch` at once and `max_queue` waiting; up to
    `cache_entries` finished ones are kept for prefix sharing (None: as many as the KV cache's other slots hold)."""

    def __init__(self, engine: Engine, tokenizer: Tokenizer, *, max_batch: int = 8, max_queue: int = 64,
                 prefill_chunk: int = 16, cache_entries: int | None = None, metrics: Metrics | None = None) -> None:
        if not 1 <= max_batch < engine.max_step:
            raise ValueError(f"max_batch must be between 1 and {engine.max_step - 1} (the engine's step size "
                             f"less one token for prefill), got {max_batch}")
        if cache_entries is None:
            cache_entries = engine.kv.n_slots - max_batch
        if engine.kv.n_slots < max_batch + cache_entries or cache_entries < 0:
            raise ValueError(f"the KV cache has {engine.kv.n_slots} slots, fewer than max_batch={max_batch} "
                             f"and cache_entries={cache_entries} need")
        if prefill_chunk < 1 or max_queue < 0:
            raise ValueError("prefill_chunk must be >= 1 and max_queue >= 0")
        self.engine = engine
        self.tokenizer = tokenizer
        self.vocab_size = engine.config.vocab_size
        self.max_batch = max_batch
        self.max_queue = max_queue
        self.prefill_chunk = prefill_chunk
        self.metrics = metrics or Metrics()
        self.cache = PrefixCache(engine.kv, cache_entries)
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._waiting: deque[_Scheduled] = deque()  # scheduler thread only
        self._decoding: list[_Scheduled] = []  # scheduler thread only
        self._prefilling: _Scheduled | None = None  # scheduler thread only
        self._lock = threading.Lock()
        self._queued = 0  # submitted, not yet admitted: guarded by _lock, read by submit() on other threads
        self._thread: threading.Thread | None = None
        self._stopping = False
        self.failure: BaseException | None = None
        self._recent_steps: deque[tuple[float, int]] = deque()  # (time, tokens sampled): the decode rate
        m = self.metrics
        m.gauge("llmchat_queue_depth", "Sequences waiting to start.", lambda: self._queued)
        m.gauge("llmchat_running_sequences", "Sequences prefilling or decoding.",
                lambda: len(self._decoding) + (self._prefilling is not None))
        m.gauge("llmchat_prefix_cache_entries", "Finished sequences kept for prefix sharing.", lambda: len(self.cache))
        m.gauge("llmchat_kv_free_blocks", "KV cache blocks on the free list.", lambda: engine.kv.free_blocks)
        m.gauge("llmchat_kv_free_slots", "KV cache sequence slots unused.", lambda: engine.kv.free_slots)

    # -- the caller's side (any thread) --------------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and not self._stopping

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("the scheduler was already started")
        self._thread = threading.Thread(target=self._run, name="llmchat-scheduler", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Finish the step in flight, fail whatever is left, and end the thread."""
        if self._thread is None:
            return
        self._stopping = True
        self._inbox.put(_STOP)
        self._thread.join(timeout)

    def submit(self, requests: Sequence[GenerationRequest],
               sink: Callable[[int, SchedulerEvent], None]) -> list[Ticket]:
        """Queue sequences that belong together (one request's choices): all of them, or none when the queue is
        full (QueueFullError). `sink(index, event)` gets each sequence's events, on the scheduler thread."""
        if not self.alive:
            raise SchedulerStoppedError("the generation scheduler is not running")
        if len(requests) > self.max_queue:
            raise TooManySequencesError(f"{len(requests)} sequences in one request, but at most {self.max_queue} can "
                                      "wait at once on this server (--max-queue)")
        now = time.perf_counter()
        # Refused here (each checks itself), not inside a batched step where it would fail its batch-mates too.
        seqs = [_Scheduled(generation.Generation(r, self.tokenizer, self.vocab_size, self.engine.context),
                           _bind(sink, i), now) for i, r in enumerate(requests)]
        with self._lock:
            if self._queued + len(seqs) > self.max_queue:
                raise QueueFullError(f"the server is busy: {self._queued} sequences are waiting "
                                     f"(at most {self.max_queue})", self._retry_after(len(seqs)))
            self._queued += len(seqs)
        self._inbox.put(seqs)
        return [Ticket(self, s) for s in seqs]

    def cancel(self, seq: _Scheduled) -> None:
        seq.cancelled = True
        self._inbox.put(_WAKE)

    def tokens_per_second(self) -> float | None:
        """Tokens sampled per second over the last RATE_WINDOW_S seconds of steps; None before two steps."""
        recent = list(self._recent_steps)
        if len(recent) < 2 or recent[-1][0] <= recent[0][0]:
            return None
        return sum(n for _, n in recent[1:]) / (recent[-1][0] - recent[0][0])

    def _retry_after(self, wanted: int) -> int:
        """Seconds until `wanted` queue places are likely free. A place frees when a waiting sequence starts, which
        needs a running one to finish: the running sequences' remaining budgets, shortest first, at each one's
        share of the measured decode rate, give when the first ones finish (an upper bound where a sequence ends
        early at an end-of-text token)."""
        running = [s for s in [*self._decoding, self._prefilling] if s is not None]  # other threads' copies
        rate = self.tokens_per_second()
        if not running or not rate:
            return 1  # nothing measured yet, or nothing running: the queue moves at the next step
        remaining = sorted(max(0, s.gen.request.max_tokens - s.gen.generated) for s in running)
        needed = max(1, self._queued + wanted - self.max_queue)
        waves = math.ceil(needed / len(running))
        nth = remaining[min(needed, len(remaining)) - 1]
        seconds = nth * waves * len(running) / rate
        return max(1, min(600, math.ceil(seconds)))

    # -- the scheduler thread ------------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while True:
                idle = not (self._waiting or self._decoding or self._prefilling)
                if not self._drain(block=idle):
                    break
                self._reap_cancelled()
                if self._waiting or self._decoding or self._prefilling:
                    self._step()
        except BaseException as exc:  # a bug or a lost device: fail everyone instead of leaving them hanging
            log.exception("the scheduler stopped")
            self.failure = exc
        finally:
            self._stopping = True
            self._fail_all(self.failure or SchedulerStoppedError("the server is shutting down"))

    def _drain(self, block: bool) -> bool:
        """Take everything from the inbox (waiting for something when idle); False once told to stop."""
        try:
            item = self._inbox.get() if block else self._inbox.get_nowait()
            while True:
                if item is _STOP:
                    return False
                if item is not _WAKE:
                    self._waiting.extend(item)
                item = self._inbox.get_nowait()
        except queue.Empty:
            return True

    def _reap_cancelled(self) -> None:
        for seq in [s for s in self._waiting if s.cancelled]:
            self._waiting.remove(seq)
            self._dequeued()
            self.metrics.sequences.inc(1, "cancelled")
        if self._prefilling is not None and self._prefilling.cancelled:
            self._release(self._prefilling, keep=False)
            self._prefilling = None
            self.metrics.sequences.inc(1, "cancelled")
        for seq in [s for s in self._decoding if s.cancelled]:
            self._decoding.remove(seq)
            self._release(seq, keep=False)
            self.metrics.sequences.inc(1, "cancelled")

    def _dequeued(self) -> None:
        with self._lock:
            self._queued -= 1

    def _step(self) -> None:
        engine = self.engine
        decoding = list(self._decoding)
        need = sum(engine.kv.blocks_needed(s.gen.slot, s.gen.pos + 1) for s in decoding)
        if not self.cache.make_block_room(need):
            raise LLMChatError("the KV cache cannot hold the running sequences")  # sizing makes this unreachable
        feeds = [(s, s.gen.pending(1)) for s in decoding]
        pre, chunk = self._prefill_chunk(decoding)
        if pre is not None:
            feeds.append((pre, chunk))
        if not feeds:
            return
        held = {s.gen: s for s, _ in feeds}
        try:
            outputs = [(held[gen], out, read_row)
                       for gen, out, read_row in generation.step(engine, [(s.gen, chunk) for s, chunk in feeds])]
        except LLMChatError as exc:  # refused input (a bug here) or a device error: fail this step's sequences
            log.exception("engine step failed")
            for seq, _ in feeds:
                self._fail(seq, exc)
            return
        self.metrics.steps.inc()
        self.metrics.batch_size.observe(len(feeds))
        self._record_step(len(outputs))
        if pre is not None and pre.gen.pos == len(pre.gen.tokens):  # its prompt is in: from now on it decodes
            self._prefilling = None
            self._decoding.append(pre)
        for seq, out, read_row in outputs:
            try:
                events = seq.gen.sample(out, read_row)
            except GrammarError as exc:  # the request's grammar grew too ambiguous on this reply: its fault
                self._fail(seq, exc)
                continue
            except Exception as exc:  # one sequence's sampling bug must not take the others down
                log.exception("sampling failed")
                self._fail(seq, LLMChatError(f"sampling failed: {type(exc).__name__}: {exc}"))
                continue
            self._sampled(seq, events)

    def _record_step(self, sampled: int) -> None:
        now = time.perf_counter()
        self._recent_steps.append((now, sampled))
        while now - self._recent_steps[0][0] > RATE_WINDOW_S:
            self._recent_steps.popleft()

    def _prefill_chunk(self, decoding: list[_Scheduled]) -> tuple[_Scheduled | None, list[int]]:
        """The prompt tokens this step carries: admit a waiting sequence when none is prefilling and the batch has
        room, then take as much of its remaining prompt as the step and the free blocks allow."""
        seq = self._prefilling
        if seq is None:
            if not self._waiting or len(decoding) >= self.max_batch:
                return None, []
            seq = self._waiting.popleft()
            self._dequeued()
            try:
                self._admit(seq, decoding)
            except LLMChatError as exc:  # no slot could be had (the slot count makes this unreachable)
                self._emit(seq, ErrorEvent(exc))
                self.metrics.sequences.inc(1, "error")
                return None, []
            self._prefilling = seq
        gen = seq.gen
        budget = self.engine.max_step - len(decoding)
        if decoding:
            budget = min(budget, self.prefill_chunk)
        end = min(len(gen.tokens), gen.pos + budget)
        kv = self.engine.kv
        if not self.cache.make_block_room(kv.blocks_needed(gen.slot, end)):
            # Blocks are short even with the cache empty: take what fits now, the rest once others finish.
            room = kv.free_blocks * BLOCK_TOKENS + (-gen.pos) % BLOCK_TOKENS
            end = min(end, gen.pos + room)
            if end == gen.pos:
                if not decoding:  # nobody will ever free a block for it
                    self._fail(seq, LLMChatError("the KV cache is too small for this prompt"))
                return None, []
        return seq, gen.tokens[gen.pos:end]

    def _admit(self, seq: _Scheduled, decoding: list[_Scheduled]) -> None:
        gen = seq.gen
        lease = self.cache.lease(gen.tokens, [(s.gen.slot, s.gen.tokens[:s.gen.pos]) for s in decoding])
        gen.start(lease.slot, lease.cached)
        self.metrics.prompt_tokens.inc(len(gen.tokens))
        self.metrics.prefix_hit_tokens.inc(lease.cached)

    def _sampled(self, seq: _Scheduled, events: list[generation.GenerationEvent]) -> None:
        now = time.perf_counter()
        if seq.gen.generated == 1:
            self.metrics.ttft.observe(now - seq.submitted)
        else:
            self.metrics.itl.observe(now - seq.last_token_at)
        seq.last_token_at = now
        self.metrics.generated_tokens.inc()
        for event in events:
            if isinstance(event, FinishEvent):
                self._finish(seq, event)
            else:
                self._emit(seq, event)

    def _finish(self, seq: _Scheduled, event: FinishEvent) -> None:
        self._decoding.remove(seq)
        self._emit(seq, event)
        self._release(seq, keep=True)
        self.metrics.sequences.inc(1, event.reason)

    def _fail(self, seq: _Scheduled, error: BaseException) -> None:
        if seq in self._decoding:
            self._decoding.remove(seq)
        if seq is self._prefilling:
            self._prefilling = None
        self._emit(seq, ErrorEvent(error))
        self._release(seq, keep=False)
        self.metrics.sequences.inc(1, "error")

    def _fail_all(self, error: BaseException) -> None:
        for seq in [*self._decoding, *([self._prefilling] if self._prefilling else [])]:
            self._fail(seq, error)
        while self._waiting:
            seq = self._waiting.popleft()
            self._dequeued()
            self._emit(seq, ErrorEvent(error))
        self.cache.clear()

    def _release(self, seq: _Scheduled, keep: bool) -> None:
        """Give the sequence's slot to the prefix cache (its computed positions stay useful) or free it."""
        gen = seq.gen
        if gen.slot < 0:
            return
        if keep:
            self.cache.insert(gen.slot, gen.tokens[:gen.pos])
        else:
            self.engine.kv.free_slot(gen.slot)
        gen.slot = -1

    @staticmethod
    def _emit(seq: _Scheduled, event: SchedulerEvent) -> None:
        try:
            seq.sink(event)
        except Exception:  # a consumer's bug must not stop everyone else's generation
            log.exception("a sequence's event sink failed")


def _bind(sink: Callable[[int, SchedulerEvent], None], index: int) -> Sink:
    return lambda event: sink(index, event)

