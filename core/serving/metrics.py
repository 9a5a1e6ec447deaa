"""What the server's /metrics reports, in the Prometheus text format (version 0.0.4): mostly what the scheduler
counts as it batches, hence here below the server. Written by hand: three metric kinds are all we need, and the
client library would be one more dependency for a few dozen lines.

Counters and histograms are updated from the scheduler thread and the event loop at once, so each metric holds a
lock. Gauges are read at scrape time from a callback, so they can never go stale.
"""
from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Callable, Iterable, Sequence

# Latency buckets in seconds, from a fast GPU's milliseconds up to a CPU-emulated adapter's tens of seconds.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 60.0, 120.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64)


def _labels(names: Sequence[str], values: Sequence[str]) -> str:
    if not names:
        return ""
    escaped = (v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"') for v in values)
    return "{" + ",".join(f'{n}="{v}"' for n, v in zip(names, escaped)) + "}"


def _number(x: float) -> str:
    if x == math.inf:
        return "+Inf"
    return repr(float(x)) if isinstance(x, float) and not x.is_integer() else str(int(x))


class Counter:
    def __init__(self, name: str, help: str, labels: Sequence[str] = ()) -> None:
        self.name, self.help, self.label_names = name, help, tuple(labels)
        self._values: dict[tuple[str, ...], float] = {} if labels else {(): 0}
        self._lock = threading.Lock()

    def inc(self, amount: float = 1, *labels: str) -> None:
        key = tuple(labels)
        if len(key) != len(self.label_names):
            raise ValueError(f"{self.name} takes labels {self.label_names}, got {key}")
        with self._lock:
            self._values[key] = self._values.get(key, 0) + amount

    def value(self, *labels: str) -> float:
        with self._lock:
            return self._values.get(tuple(labels), 0)

    def render(self) -> Iterable[str]:
        yield f"# HELP {self.name} {self.help}"
        yield f"# TYPE {self.name} counter"
        with self._lock:
            items = sorted(self._values.items())
        for key, v in items:
            yield f"{self.name}{_labels(self.label_names, key)} {_number(v)}"


class Gauge:
    def __init__(self, name: str, help: str, read: Callable[[], float]) -> None:
        self.name, self.help, self.read = name, help, read

    def render(self) -> Iterable[str]:
        yield f"# HELP {self.name} {self.help}"
        yield f"# TYPE {self.name} gauge"
        yield f"{self.name} {_number(self.read())}"


class Histogram:
    def __init__(self, name: str, help: str, buckets: Sequence[float]) -> None:
        self.name, self.help = name, help
        self.bounds = tuple(sorted(buckets))
        self._counts = [0] * (len(self.bounds) + 1)  # the last one is +Inf
        self._sum = 0.0
        self._lock = threading.Lock()

    def observe(self, value: float) -> None:
        with self._lock:
            self._counts[bisect.bisect_left(self.bounds, value)] += 1
            self._sum += value

    @property
    def count(self) -> int:
        with self._lock:
            return sum(self._counts)

    def render(self) -> Iterable[str]:
        yield f"# HELP {self.name} {self.help}"
        yield f"# TYPE {self.name} histogram"
        with self._lock:
            counts, total = list(self._counts), self._sum
        running = 0
        for bound, c in zip((*self.bounds, math.inf), counts):
            running += c
            yield f'{self.name}_bucket{{le="{_number(bound)}"}} {running}'
        yield f"{self.name}_sum {_number(total)}"
        yield f"{self.name}_count {running}"


class Metrics:
    """Everything /metrics reports. The scheduler and the routes update it; gauges read the scheduler's state."""

    def __init__(self) -> None:
        self.requests = Counter("llmchat_requests_total", "HTTP requests by route and status code.",
                                ("route", "code"))
        self.prompt_tokens = Counter("llmchat_prompt_tokens_total",
                                     "Prompt tokens of admitted sequences (computed plus served from the cache).")
        self.generated_tokens = Counter("llmchat_generation_tokens_total", "Tokens generated.")
        self.prefix_hit_tokens = Counter("llmchat_prefix_cache_hit_tokens_total",
                                         "Prompt tokens whose KV came from the prefix cache instead of being computed.")
        self.sequences = Counter("llmchat_sequences_total", "Sequences that ended, by how they ended.", ("outcome",))
        self.steps = Counter("llmchat_engine_steps_total", "Engine steps run.")
        self.batch_size = Histogram("llmchat_batch_size", "Sequences fed per engine step.", BATCH_BUCKETS)
        self.ttft = Histogram("llmchat_time_to_first_token_seconds",
                              "From a request's arrival to its first generated token.", LATENCY_BUCKETS)
        self.itl = Histogram("llmchat_time_per_output_token_seconds",
                             "Time between consecutive tokens of one sequence.", LATENCY_BUCKETS)
        self._gauges: list[Gauge] = []

    def gauge(self, name: str, help: str, read: Callable[[], float]) -> None:
        self._gauges.append(Gauge(name, help, read))

    def render(self) -> str:
        parts: list[Counter | Gauge | Histogram] = [
            self.requests, self.prompt_tokens, self.generated_tokens, self.prefix_hit_tokens, self.sequences,
            self.steps, *self._gauges, self.batch_size, self.ttft, self.itl]
        return "\n".join(line for metric in parts for line in metric.render()) + "\n"
