"""The roofline report of `llmchat bench --roofline`: how close the decode step comes to the adapter's own memory
bandwidth, measured on the spot on any adapter, emulated or real.

Three measurements, each a recorded program replayed with one word read back at the end:
- the adapter's streaming bandwidth: shaders/stream.wgsl reading (and copying) a buffer as large as one binding
  allows (at most STREAM_BYTES), far beyond any cache;
- per kernel family of the decode step, its time: the family's dispatches of the step replayed on their own;
- the whole step's time.
Timing replays a program of n copies of the dispatches in one submission (n chosen so it lasts about `target_s`)
and subtracts the same for an empty program, so submission and readback costs fall out; each figure is the best
of `rounds` rounds, the measurements interleaved, so load from other programs falls on all of them alike.
Bytes come from the dispatches themselves: every operation says what it moves when it records (device.Traffic).
The bandwidth is what a shader can stream, which on CPU emulators is far below the machine's memcpy: measured on
lavapipe (2 cores), the stream kernels read 2-3 GB/s where the driver's own buffer copy moves about 13 GB/s. A
kernel whose bytes sit in a cache (one small layer's weights on a CPU) can pass 100%; the whole step cannot by much.

The report (a dict, printed as JSON by `llmchat bench --roofline --json`):
    adapter               the adapter's name
    bandwidth             {buffer_bytes, read_gb_s, copy_gb_s, orders}: copy counts the bytes read and the bytes
                           written; each is the faster of two reading orders, `orders` gives all four figures
    step                  {context, dispatches, ms, families_ms, weight_bytes, bytes, weight_gb_s, weight_fraction,
                           gb_s, fraction}: one decode token at the end of a context of `context` positions;
                           fractions are of bandwidth.read_gb_s; families_ms sums the families timed alone
    kernels               per family, slowest first: {family, dispatches, ms, share, weight_bytes, bytes, gb_s,
                           fraction}; share is the family's time over the whole step's
    decode                with a measured decode rate only: {tok_s, weight_gb_s, weight_fraction}, the weight
                           stream at the rate tokens actually came (host time and waits included)
"""
from __future__ import annotations

import math
import re
import struct
import time
from collections import defaultdict

from ..errors import InvalidRequestError
from ..gpu.device import Device, Dispatch, Program
from ..gpu.kernels import Kernels, wgsl_bool
from ..gpu.recorder import cdiv

STREAM_BYTES = 256 << 20  # the largest buffer the bandwidth probe streams (GPU caches reach ~100 MiB)
STREAM_WG = 64
STRIDED_INVOCATIONS = 1 << 20  # enough to keep a large GPU's memory system busy; the grid-stride loop does the rest
CHUNKED_INVOCATIONS = 4096  # contiguous runs of 32 KiB and more: a few workgroups per core of a CPU emulator
GB = 1e9

REPORT_FIELDS = ("adapter", "bandwidth", "step", "kernels")
BANDWIDTH_FIELDS = ("buffer_bytes", "read_gb_s", "copy_gb_s", "orders")
STEP_FIELDS = ("context", "dispatches", "ms", "families_ms", "weight_bytes", "bytes", "weight_gb_s", "weight_fraction",
               "gb_s", "fraction")
KERNEL_FIELDS = ("family", "dispatches", "ms", "share", "weight_bytes", "bytes", "gb_s", "fraction")
DECODE_FIELDS = ("tok_s", "weight_gb_s", "weight_fraction")


def family(name: str) -> str:
    """A kernel's family: its file name plus the template values that change its cost (weight type, mode, tile)."""
    base = name.split("[", 1)[0]
    keys = dict(re.findall(r"\[(\w+)=([^\]]*)\]", name))
    if base == "matmul":
        return f"matmul {keys.get('QUANT')} mode={keys.get('MODE')} R={keys.get('R')} TT={keys.get('TT')}"
    return base


class Timer:
    """Seconds one replay of a list of dispatches takes on `device` (see the module's note on timing)."""

    def __init__(self, device: Device, *, target_s: float = 0.2, max_dispatches: int = 8192):
        self.device = device
        self.target_s = target_s
        self.max_dispatches = max_dispatches
        self.sync = device.buffer(16, "roofline.sync")
        self._empty = device.program([])
        self._baseline = math.inf

    def _once(self, program: Program) -> float:
        start = time.perf_counter()
        self.device.run(program)
        self.device.read(self.sync, 0, 4)
        return time.perf_counter() - start

    def baseline(self) -> float:
        """Submitting an empty program and reading one word back: the cost every measurement carries."""
        for _ in range(3):
            self._baseline = min(self._baseline, self._once(self._empty))
        return self._baseline

    def prepare(self, dispatches: list[Dispatch]) -> tuple[Program, int]:
        """A program of n copies of `dispatches`, n chosen so one run lasts about `target_s`."""
        probe = self.device.program(dispatches)
        self._once(probe)  # first use of the pipelines
        one = max(self._once(probe) - self.baseline(), 1e-6)
        n = max(1, min(math.ceil(self.target_s / one), self.max_dispatches // max(1, len(dispatches))))
        return (probe if n == 1 else self.device.program(dispatches * n)), n

    def best(self, programs: dict[str, tuple[Program, int]], rounds: int) -> dict[str, float]:
        """Seconds per copy of each prepared program, the best of `rounds` interleaved rounds (every other round in
        reverse order, so none always runs first)."""
        best = {name: math.inf for name in programs}
        names = list(programs)
        for r in range(rounds):
            for name in names[::-1] if r % 2 else names:
                program, n = programs[name]
                elapsed = self._once(program) - self.baseline()
                best[name] = min(best[name], max(elapsed, 1e-9) / n)
        return best


def stream_probes(device: Device, kernels, timer: Timer, max_bytes: int = STREAM_BYTES) -> tuple[int, dict]:
    """The bandwidth probes, prepared for `Timer.best`: (bytes each streams, {(kind, order): prepared program}) for
    kinds read and copy, over a buffer as large as one binding allows (<= max_bytes)."""
    info = device.info
    size = min(info.max_binding_size, info.max_buffer_size, max_bytes) // 256 * 256
    words = size // 16
    src = device.buffer(size, "stream.src")
    pattern = bytes(range(256)) * (1 << 12)  # 1 MiB of non-zero words
    for offset in range(0, size, len(pattern)):
        device.write(src, pattern[:size - offset], offset)
    copy = device.buffer(size, "stream.copy")
    probes = {}
    for order, invocations in (("strided", min(words, STRIDED_INVOCATIONS)), ("chunked", CHUNKED_INVOCATIONS)):
        params = device.buffer(16, f"stream.{order}", uniform=True)
        device.write(params, struct.pack("<4I", words, invocations, cdiv(words, invocations), 0))
        folded = device.buffer(invocations * 16, f"stream.{order}.folded")
        groups = cdiv(invocations, STREAM_WG)
        limit = info.max_workgroups_per_dim
        grid = (groups, 1, 1) if groups <= limit else (limit, cdiv(groups, limit), 1)
        for kind, dst in (("read", folded), ("copy", copy)):
            kernel = kernels.get("stream.wgsl", WG=STREAM_WG, COPY=wgsl_bool(kind == "copy"),
                                 CHUNKED=wgsl_bool(order == "chunked"))
            probes[kind, order] = timer.prepare([Dispatch(kernel, (params, src, dst), grid)])
    return size, probes


def bandwidth(size: int, seconds: dict) -> dict:
    """The `bandwidth` part of the report from the probes' times: each kind's faster order."""
    rates = {f"{kind}_{order}_gb_s": round((2 if kind == "copy" else 1) * size / s / GB, 3)
             for (kind, order), s in seconds.items() if kind in ("read", "copy")}
    return {"buffer_bytes": size, "read_gb_s": max(v for k, v in rates.items() if k.startswith("read")),
            "copy_gb_s": max(v for k, v in rates.items() if k.startswith("copy")), "orders": rates}


def report(runtime, *, context: int | None = None, decode_tok_s: float | None = None, target_s: float = 0.1,
           rounds: int = 5) -> dict:
    """The roofline report (fields in the module's note) for a loaded model (llmchat.runtime.runtime.Runtime), its
    decode step taken at the end of `context` positions (default: 256, or the model's context if shorter) and
    rounded up to a whole program bucket so attention reads every position its program covers."""
    device, engine = runtime.device, runtime.engine
    if device is None:
        raise InvalidRequestError("the roofline measures llmchat's WGSL kernels; this model runs on the cpu engine "
                                  "(llama.cpp's kernels): load it with engine webgpu")
    context = engine.context_bucket(context or 256)
    timer = Timer(device, target_s=target_s)
    size, prepared = stream_probes(device, Kernels(device), timer)
    program = engine.decode_program(context)
    groups: dict[str, list[Dispatch]] = defaultdict(list)
    for d in program.dispatches:
        groups[family(d.kernel.name)].append(d)
    prepared |= {("family", name): timer.prepare(ds) for name, ds in groups.items()}
    prepared["step"] = timer.prepare(program.dispatches)
    # One set of interleaved rounds for the probes and the kernels: load from other programs falls on both alike.
    measured = timer.best(prepared, rounds)
    step_s = measured.pop("step")
    seconds = {key[1]: s for key, s in measured.items() if key[0] == "family"}
    bw = bandwidth(size, measured)
    read = bw["read_gb_s"] * GB

    def figures(dispatches: list[Dispatch], s: float) -> dict:
        weights = sum(d.traffic.weights for d in dispatches if d.traffic)
        total = sum(d.traffic.total for d in dispatches if d.traffic)
        return {"dispatches": len(dispatches), "ms": round(s * 1e3, 4), "weight_bytes": weights, "bytes": total,
                "gb_s": round(total / s / GB, 3), "fraction": round(total / s / read, 4)}

    kernels = [{"family": name, **figures(groups[name], s), "share": round(s / step_s, 4)}
               for name, s in sorted(seconds.items(), key=lambda kv: -kv[1])]
    step = figures(program.dispatches, step_s)
    step |= {"context": context, "families_ms": round(sum(seconds.values()) * 1e3, 4),
             "weight_gb_s": round(step["weight_bytes"] / step_s / GB, 3),
             "weight_fraction": round(step["weight_bytes"] / step_s / read, 4)}
    result = {"adapter": device.info.name, "bandwidth": bw, "step": {k: step[k] for k in STEP_FIELDS},
              "kernels": [{k: row[k] for k in KERNEL_FIELDS} for row in kernels]}
    if decode_tok_s:
        weight_rate = step["weight_bytes"] * decode_tok_s
        result["decode"] = {"tok_s": round(decode_tok_s, 3), "weight_gb_s": round(weight_rate / GB, 3),
                            "weight_fraction": round(weight_rate / read, 4)}
    return result


def format_report(r: dict) -> str:
    """The report as a table for people."""
    bw, step = r["bandwidth"], r["step"]
    lines = [f"roofline on {r['adapter']}: read {bw['read_gb_s']:.2f} GB/s, copy {bw['copy_gb_s']:.2f} GB/s "
             f"(buffer of {bw['buffer_bytes'] >> 20} MiB); fractions are of the read bandwidth",
             f"decode step at {step['context']} positions: {step['dispatches']} dispatches",
             f"{'kernel family':44} {'disp':>5} {'ms/step':>8} {'share':>6} {'MB/step':>8} {'GB/s':>7} {'of read':>7}"]
    for k in r["kernels"]:
        lines.append(f"{k['family']:44} {k['dispatches']:>5} {k['ms']:>8.3f} {k['share']:>6.1%} "
                     f"{k['bytes'] / 1e6:>8.2f} {k['gb_s']:>7.2f} {k['fraction']:>7.1%}")
    lines.append(f"{'whole step':44} {step['dispatches']:>5} {step['ms']:>8.3f} {'':>6} {step['bytes'] / 1e6:>8.2f} "
                 f"{step['gb_s']:>7.2f} {step['fraction']:>7.1%}")
    lines.append(f"{'(families timed alone, summed)':44} {'':>5} {step['families_ms']:>8.3f}")
    lines.append(f"weight stream: {step['weight_bytes'] / 1e6:.1f} MB per token, {step['weight_gb_s']:.2f} GB/s in the "
                 f"replayed step = {step['weight_fraction']:.1%} of read bandwidth")
    if "decode" in r:
        d = r["decode"]
        lines.append(f"at the measured decode rate ({d['tok_s']:.2f} tok/s): {d['weight_gb_s']:.2f} GB/s of weights "
                     f"= {d['weight_fraction']:.1%} of read bandwidth")
    return "\n".join(lines)
