"""The scheduler in-process over a tiny random model: batching against one-at-a-time generation, prefix sharing,
eviction when cache blocks run out, cancellation at every stage, refusals at the door, shutdown."""
from __future__ import annotations

import math
import threading

import pytest

from llmchat.api import LLM
from llmchat.errors import InvalidRequestError
from llmchat.runtime.sampler import SamplingParams
from llmchat.runtime.generation import FinishEvent, GenerationRequest, TokenEvent
from llmchat.serving.scheduler import ErrorEvent, QueueFullError, Scheduler, SchedulerStoppedError
from model_factory import write_model
from gpu_util import adapter_gpu  # noqa: F401 (a fixture)

pytestmark = pytest.mark.gpu

CONTEXT = 64


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return write_model(tmp_path_factory.mktemp("tiny") / "tiny.gguf", seed=3)


@pytest.fixture(scope="module")
def llm(model_path, adapter_gpu):  # noqa: F811
    # Two sequences' worth of cache (8 blocks of 16) shared by three slots: running two long sequences after
    # two others finished forces evictions.
    return LLM(str(model_path), context=CONTEXT, n_slots=2, max_tokens_per_step=16, device=adapter_gpu.device)


class Collector:
    """Gathers each sequence's events; `wait()` returns once every sequence finished or failed."""

    def __init__(self, n: int, hold: bool = False) -> None:
        self.hold = threading.Event()  # with `hold`, the first token blocks the scheduler until release()
        if not hold:
            self.hold.set()
        self.tokens: list[list[int]] = [[] for _ in range(n)]
        self.ends: list[FinishEvent | ErrorEvent | None] = [None] * n
        self._left = n
        self._done = threading.Event()
        self.first_token = threading.Event()

    def __call__(self, index: int, event) -> None:
        if isinstance(event, TokenEvent):
            self.tokens[index].append(event.token)
            self.first_token.set()
            self.hold.wait(10)
            return
        self.ends[index] = event
        self._left -= 1
        if self._left == 0:
            self._done.set()

    def release(self) -> None:
        self.hold.set()

    def wait(self, timeout: float = 60) -> None:
        assert self._done.wait(timeout), "sequences did not finish"


def _scheduler(llm: LLM, **options) -> Scheduler:
    s = llm.scheduler(**{"max_batch": 2, "max_queue": 8, "prefill_chunk": 4, **options})
    s.start()
    return s


def _greedy(prompt: list[int], max_tokens: int) -> GenerationRequest:
    return GenerationRequest(prompt, SamplingParams(), max_tokens, ignore_eos=True)


def _alone(llm: LLM, prompt: list[int], max_tokens: int) -> list[int]:
    return [e.token for e in llm.generate(list(prompt), max_tokens=max_tokens, ignore_eos=True) if e.token is not None]


PROMPTS = [[5 + i, 40, 41, 42 + i, 7, 9, 100 + 3 * i] * (1 + i % 3) for i in range(5)]


def test_batched_greedy_equals_one_at_a_time(llm):
    expected = [_alone(llm, p, 10) for p in PROMPTS]
    scheduler = _scheduler(llm)
    try:
        got = Collector(len(PROMPTS))
        scheduler.submit([_greedy(p, 10) for p in PROMPTS], got)
        got.wait()
        assert got.tokens == expected
        assert all(e.reason == "length" and e.completion_tokens == 10 for e in got.ends)
        assert scheduler.metrics.batch_size.count < sum(len(p) + 10 for p in PROMPTS)  # steps were shared
    finally:
        scheduler.stop()


def test_choices_share_the_prompt_and_evictions_make_room(llm):
    prompt = list(range(30, 70))  # 40 tokens: two whole blocks to share
    scheduler = _scheduler(llm)
    try:
        got = Collector(2)
        scheduler.submit([_greedy(prompt, 8), _greedy(prompt, 8)], got)
        got.wait()
        assert got.tokens[0] == got.tokens[1] == _alone(llm, prompt, 8)
        assert got.ends[1].cached_tokens == 32  # the second choice forked the first one's whole blocks
        assert scheduler.cache.match(prompt)[1] == 32
        # Two more long, unrelated sequences need all 8 blocks: the cached prompt must be evicted.
        kv = llm.runtime.engine.kv
        assert kv.n_blocks == 8
        others = [[200 + i] * 40 for i in range(2)]
        got = Collector(2)
        scheduler.submit([_greedy(p, 20) for p in others], got)
        got.wait()
        assert got.tokens == [_alone(llm, p, 20) for p in others]
        assert scheduler.cache.match(prompt)[1] == 0
    finally:
        scheduler.stop()
    assert kv.free_blocks == kv.n_blocks and kv.free_slots == kv.n_slots  # nothing leaked


def test_cancel_while_waiting_prefilling_and_decoding(llm):
    scheduler = _scheduler(llm, max_batch=1, prefill_chunk=2)
    kv = llm.runtime.engine.kv
    free = kv.free_slots
    try:
        got = Collector(3, hold=True)
        tickets = scheduler.submit([_greedy(list(range(10, 60)), 10), _greedy([1, 2, 3], 10),
                                    _greedy([4, 5, 6], 10)], got)
        tickets[2].cancel()  # waiting
        tickets[0].cancel()  # prefilling, or about to
        assert got.first_token.wait(10)  # the middle one decodes (and holds the scheduler at its first token)...
        tickets[1].cancel()  # ... until cancelled
        got.release()
        got2 = Collector(1)
        scheduler.submit([_greedy([7, 8, 9], 5)], got2)
        got2.wait()
        assert _until(lambda: scheduler.metrics.sequences.value("cancelled") == 3)
        assert _until(lambda: kv.free_slots == free - len(scheduler.cache))
        assert got.ends[0] is None and got.ends[2] is None and got2.ends[0].reason == "length"
    finally:
        scheduler.stop()


def _until(condition, timeout: float = 30) -> bool:
    done = threading.Event()
    for _ in range(int(timeout / 0.05)):
        if condition():
            return True
        done.wait(0.05)
    return condition()


def test_refusals_at_the_door(llm):
    scheduler = _scheduler(llm, max_batch=1, max_queue=2)
    try:
        sink = Collector(1)
        for bad in ([], [llm.runtime.config.vocab_size]):
            with pytest.raises(InvalidRequestError):
                scheduler.submit([_greedy(bad, 1)], sink)
        with pytest.raises(InvalidRequestError):
            scheduler.submit([_greedy([1] * 60, 5)], sink)  # 65 positions in a 64-token context
        with pytest.raises(InvalidRequestError):
            scheduler.submit([_greedy([1], 1)] * 3, sink)  # more than the queue ever holds
        running = Collector(1)
        scheduler.submit([_greedy([1, 2], 40)], running)
        assert running.first_token.wait(10)
        queued = scheduler.submit([_greedy([3], 2), _greedy([4], 2)], Collector(2))
        with pytest.raises(QueueFullError) as info:
            scheduler.submit([_greedy([5], 2)], Collector(1))
        assert info.value.retry_after >= 1
        for t in queued:
            t.cancel()
    finally:
        scheduler.stop()
    assert isinstance(running.ends[0], (FinishEvent, ErrorEvent))
    with pytest.raises(SchedulerStoppedError):
        scheduler.submit([_greedy([1], 1)], Collector(1))


def test_retry_after_is_the_running_sequence_at_the_decode_rate(llm):
    """A full queue's Retry-After is when the running sequence (the one batch place) ends, so that the waiting one
    starts and frees its place: its remaining tokens at the decode rate measured over the last steps. The sink holds
    the scheduler at the running sequence's sixth token, so neither moves while the test asks; until then it paces
    the tokens at 5 a second at most, so the estimate is seconds, not the 1 s floor."""
    scheduler = _scheduler(llm, max_batch=1, max_queue=1)
    seen, held, release = [], threading.Event(), threading.Event()

    def paced(index, event):
        if isinstance(event, TokenEvent):
            seen.append(event.token)
            if len(seen) == 6:
                held.set()
                release.wait(60)
            else:
                release.wait(0.2)

    try:
        scheduler.submit([_greedy([1, 2], 40)], paced)
        assert held.wait(60)
        scheduler.submit([_greedy([3], 2)], Collector(1))
        with pytest.raises(QueueFullError) as info:
            scheduler.submit([_greedy([4], 2)], Collector(1))
        rate = scheduler.tokens_per_second()
        assert rate is not None and info.value.retry_after == math.ceil((40 - 6) / rate) > 1
    finally:
        release.set()
        scheduler.stop()


def test_stop_fails_what_is_left(llm):
    scheduler = _scheduler(llm, max_batch=1)
    got = Collector(3)
    scheduler.submit([_greedy([1, 2, 3], 50)] * 3, got)
    assert got.first_token.wait(10)
    scheduler.stop()
    got.wait(5)
    assert sum(isinstance(e, ErrorEvent) and isinstance(e.error, SchedulerStoppedError) for e in got.ends) >= 2
    assert llm.runtime.engine.kv.free_slots == llm.runtime.engine.kv.n_slots  # every slot back, the cache emptied
