"""Chooses kernel variants by measuring them on this adapter, at a model's own shapes, and remembers the choice.

On a model's first load on an adapter (tuning on, see `enabled`), every TuneCase of every registered family
(variants.TUNABLE: matvec and prefill tiles per weight type in use, and whatever other families register) is
timed: each candidate runs its recorded dispatches once (compiling it), its output is checked against the fixed
table's candidate, and then it is timed; the fastest correct one wins. Attention registers its kernels (the
invocation kernel and flash attention, each with its own range-splitting rule) for decode and prefill steps at the
model's head shape over ATTENTION_POSITIONS cached positions. Timed runs keep within BUDGET_S (under
2 s) and first runs, which compile, within COMPILE_BUDGET_S: candidates are tried in the order the family lists
them (the fixed table's first, always), and those a budget leaves untried are reported as such. Compilation is
budgeted apart because it is what varies most: tens of milliseconds per pipeline on GPU drivers (which cache
them), 0.3-5 s on lavapipe. Large matmuls are measured on their first rows (MAX_MACS), and the output head
(which prefill runs for the logits rows only) only in decode. Choices are cached per adapter, driver, llmchat
version and model shape (a JSON file natively under <llmchat home>/tune/, see `FileStore`; the browser passes a
`MemoryStore` over a JSON file the worker keeps in OPFS, to `tune_model`), so later loads time nothing.
`llmchat bench --retune` measures again. Where the model rounds activations to 8 bits (q8_activations) the matmul
cases round them too and, on adapters with dot4I8Packed, also time each tile with int8 dot products (same numbers
up to float summation order, so the output check holds); with f32 activations those differ by the rounding and
are not candidates.

Tuning is on by default on hardware adapters, off on CPU emulations (see `enabled`);
LLMCHAT_TUNE=1/0 or `load(..., tune=True/False)` decide otherwise. With it off the fixed per-adapter table of
variants.py decides. The test suite runs with it off except where tuning is what it tests.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..paths import llmchat_home
from ..version import __version__
from ..errors import ShaderError
from ..gguf.config import AttentionShape
from ..gguf.types import GGMLType
from . import ops
from .device import Buffer, Device, Program
from .kernels import Kernels
from .kvlayout import BLOCK_TOKENS, KVLayer, blocks_for, cache_type, layer_bytes
from .recorder import Recorder
from .tensors import Weight, WeightPart
from ..errors import GPUError
from .variants import INT8_TYPES, WORKGROUP_BYTES, MatmulTile, TuneCase, Variants, register_tunable

BUDGET_S = 1.8  # seconds of timed runs the tuner may spend (see `tune`)
COMPILE_BUDGET_S = 60.0  # seconds of first runs (compilation) after which no further candidate is tried
TARGET_RUN_S = 0.004  # each timed run lasts about this long (more dispatches for small kernels)
MAX_MACS = 8 << 20  # multiply-adds a measured matmul is cut down to (by rows, at least MIN_ROWS of them)
MIN_ROWS = 1024
MAX_DISPATCHES = 32
PROBE_DISPATCHES = 8  # the run that tells what one dispatch adds to a run's fixed cost
ATTENTION_POSITIONS = 512  # cached positions the attention cases attend over: a conversation a few turns long
RTOL, ATOL = 1e-4, 1e-5  # a candidate is correct when |out - reference| <= RTOL * max|reference| + ATOL
ENV = "LLMCHAT_TUNE"


def enabled(option: bool | None = None, software: bool = False) -> bool:
    """Whether to tune: the load option where given, else LLMCHAT_TUNE ("1" on, "0" off), else on for
    hardware adapters only, natively and in the browser (which keeps the results in OPFS, so only a first visit
    tunes). Off on CPU emulations: there compiling one candidate takes 0.3-5 s (lavapipe, 2 cores), so a sweep
    would add a minute to a first load, and the fixed table was measured on them; in Chromium on SwiftShader tuning
    took SmolLM2-135M's first load from 16 s to 29 s (13 s of tuning) and kept the fixed table's variants."""
    if option is not None:
        return option
    value = os.environ.get(ENV, "").strip().lower()
    if value in ("0", "false", "off", "no"):
        return False
    return bool(value) or not software


@dataclass
class TuneContext:
    """What a family needs to state its cases (variants.TUNABLE)."""

    device: Device
    kernels: Kernels
    variants: Variants
    weights: dict[str, Weight]  # the model's uploaded matmul weights by name
    config: object = None  # the model's config
    prefill_tokens: int = 64  # tokens of the model's prefill step
    q8_activations: bool = False  # the model's matmuls round x to 8 bits (and so may use int8 dot products)


class MemoryStore:
    """Tuning results held in a dict: for this process only, or (the browser) read from and written back to a
    file by the caller, which passes the file's `entries` in, names it `place`, and writes `entries` back when
    `changed` (the worker keeps them in OPFS, web/worker.js)."""

    def __init__(self, entries: dict[str, dict] | None = None, place: str = "memory"):
        self.entries: dict[str, dict] = dict(entries or {})
        self.place = place
        self.changed = False

    def load(self, key: str) -> dict | None:
        return self.entries.get(key)

    def save(self, key: str, entry: dict) -> None:
        self.entries[key] = entry
        self.changed = True

    def where(self, key: str) -> str:
        return self.place if self.place == "memory" else f"{self.place}#{key}"


class FileStore:
    """Tuning results as one JSON file per key under `root` (default: <llmchat home>/tune)."""

    def __init__(self, root: Path | None = None):
        if root is None:
            root = llmchat_home() / "tune"
        self.root = Path(root)

    def path(self, key: str) -> Path:
        return self.root / f"{key}.json"

    def load(self, key: str) -> dict | None:
        try:
            return json.loads(self.path(key).read_text())
        except (OSError, ValueError):
            return None  # absent or unreadable: measure again (and rewrite it)

    def save(self, key: str, entry: dict) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.path(key).with_suffix(".tmp")
        tmp.write_text(json.dumps(entry, indent=1))
        tmp.replace(self.path(key))

    def where(self, key: str) -> str:
        return str(self.path(key))


@dataclass
class TuneReport:
    """What tuning decided: per "family/key" the variant and whether it was "tuned" (measured now or before)
    or the fixed table's "default"; `timed` lists every measurement of this run (none when the cache answered)."""

    enabled: bool
    source: str = "off"  # "off", "measured" or "cached"
    cache: str = ""
    seconds: float = 0.0
    choices: dict[str, dict] = field(default_factory=dict)
    timed: list[dict] = field(default_factory=list)

    def summary(self) -> dict:
        """What `llmchat bench` reports: the choices and how they were made, without the measurements."""
        return {k: v for k, v in self.as_dict().items() if k != "timed"}

    def as_dict(self) -> dict:
        return {"enabled": self.enabled, "source": self.source, "cache": self.cache,
                "seconds": round(self.seconds, 3), "choices": self.choices, "timed": self.timed}


def cases_for(ctx: TuneContext) -> list[TuneCase]:
    from .variants import TUNABLE  # noqa: PLC0415 (read at call time: families register on import)
    return [case for family in sorted(TUNABLE) for case in TUNABLE[family](ctx)]


def cache_key(device: Device, cases: list[TuneCase]) -> str:
    info = device.info
    text = json.dumps([info.name, info.backend, info.driver, __version__,
                       [(c.family, c.key, c.shape, [repr(x) for x in c.candidates]) for c in cases]])
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def tune(ctx: TuneContext, *, store=None, retune: bool = False, budget_s: float = BUDGET_S,
         compile_budget_s: float = COMPILE_BUDGET_S) -> TuneReport:
    """Choose a variant for every case of the model in `ctx` (cached or measured), apply the choices to the
    device's Variants, and say what was chosen."""
    t0 = time.perf_counter()
    store = store if store is not None else FileStore()
    cases = cases_for(ctx)
    key = cache_key(ctx.device, cases)
    report = TuneReport(enabled=True, cache=store.where(key))
    entry = None if retune else store.load(key)
    if entry is not None and _apply_cached(ctx.variants, cases, entry, report):
        report.source = "cached"
    else:
        report.choices.clear()
        report.source = "measured"
        budget = {"timed": budget_s, "compile": compile_budget_s}
        saved = {}
        for case in cases:
            best = _measure(ctx, case, budget, report)
            _choose(ctx.variants, case, best, report)
            saved[f"{case.family}/{case.key}"] = repr(best)
        store.save(key, {"adapter": ctx.device.info.name, "driver": ctx.device.info.driver, "version": __version__,
                         "choices": saved, "timed": report.timed})
    report.seconds = time.perf_counter() - t0
    return report


def _apply_cached(v: Variants, cases: list[TuneCase], entry: dict, report: TuneReport) -> bool:
    saved = entry.get("choices", {})
    picks = []
    for case in cases:
        label = saved.get(f"{case.family}/{case.key}")
        match = [c for c in case.candidates if repr(c) == label]
        if not match:
            return False  # the cache does not cover this model's cases as they are now: measure again
        picks.append((case, match[0]))
    for case, choice in picks:
        _choose(v, case, choice, report)
    return True


def _choose(v: Variants, case: TuneCase, choice, report: TuneReport) -> None:
    v.tuned[(case.family, case.key)] = choice
    report.choices[f"{case.family}/{case.key}"] = {
        "variant": repr(choice), "by": "default" if choice == case.candidates[0] else "tuned", "shape": case.shape}


# Timed runs per candidate (while the budget lasts), interleaved: load from other programs falls on all alike.
ROUNDS = 8
SLOW = 2.0  # after the first round, candidates this many times slower than the best are not timed again


def _measure(ctx: TuneContext, case: TuneCase, budget: dict[str, float], report: TuneReport):
    """The fastest correct candidate of `case` that the budgets leave time for (the default at least)."""
    name = f"{case.family}/{case.key}"
    reference = None
    trials = []  # (choice, program, out, dispatches, best seconds per dispatch so far)
    n = 0
    for i, choice in enumerate(case.candidates):
        row = {"case": name, "variant": repr(choice)}
        if i and min(budget.values()) <= 0:
            report.timed.append({**row, "skipped": "budget"})
            continue
        start = time.perf_counter()
        try:
            program, out, nbytes, n = _trial(ctx, case, choice, n)
        except ShaderError as e:  # the fixed table's must compile; another that this driver refuses is left out
            if not i:
                raise
            budget["compile"] -= time.perf_counter() - start
            report.timed.append({**row, "rejected": f"does not compile here: {str(e)[:300]}"})
            continue
        got = _floats(ctx.device.read(out, 0, nbytes))
        budget["compile"] -= time.perf_counter() - start
        if reference is None:
            reference = got
        elif not _close(got, reference):
            report.timed.append({**row, "rejected": "output differs from the default's"})
            continue
        trials.append([choice, program, out, n, float("inf")])
    for r in range(ROUNDS):
        fastest = min(t[4] for t in trials)
        for t in trials:
            if r and (budget["timed"] <= 0 or (t[4] > SLOW * fastest and t is not trials[0])):
                continue
            wall, cost = time_run(ctx.device, t[1], t[2])
            budget["timed"] -= wall
            t[4] = min(t[4], cost / t[3])
    for choice, _, _, _, seconds in trials:
        report.timed.append({"case": name, "variant": repr(choice), "us_per_dispatch": round(seconds * 1e6, 1)})
    return min(trials, key=lambda t: t[4])[0]


def sweep(ctx: TuneContext, rounds: int = ROUNDS) -> dict[str, dict]:
    """Every candidate of every case timed `rounds` times, interleaved, with no budget and no pruning — the full
    forced sweep the tuner's picks are judged by. Per "family/key": the case's shape, each candidate's best
    microseconds per dispatch (those this driver does not compile left out), timed as the tuner times them, the
    `fastest`, and `ties`: the candidates the measurement cannot tell from the fastest, as their fastest round was no slower
    than the fastest candidate's slowest (on a noisy emulator, kernels of equal speed differ by 20-30% from run
    to run)."""
    result = {}
    for case in cases_for(ctx):
        trials, n = [], 0
        for choice in case.candidates:
            try:
                program, out, _, n = _trial(ctx, case, choice, n)
            except ShaderError:
                continue
            trials.append((repr(choice), program, out, n))
        runs = {name: [] for name, *_ in trials}
        for _ in range(rounds):
            for name, program, out, n in trials:
                runs[name].append(time_run(ctx.device, program, out)[1] / n)
        fastest = min(runs, key=lambda name: min(runs[name]))
        result[f"{case.family}/{case.key}"] = {
            "shape": case.shape, "us_per_dispatch": {k: round(min(v) * 1e6, 2) for k, v in runs.items()},
            "fastest": fastest, "ties": sorted(k for k, v in runs.items() if min(v) <= max(runs[fastest]))}
    return result


def _trial(ctx: TuneContext, case: TuneCase, choice, n: int = 0) -> tuple[Program, Buffer, int, int]:
    """Record one dispatch, run it (compiling it), then record `n` and run them once. Every candidate of a case
    is timed with the first one's `n`, so the fixed cost of a run (submission, readback) weighs on all alike.
    By default `n` is as many dispatches as TARGET_RUN_S takes, judged from what a dispatch adds to a run: where
    a round trip costs more than a small kernel (a browser's GPU process, about 2 ms on SwiftShader) one dispatch
    a run would time the round trip, and the candidates would differ only by noise."""
    program, out, nbytes = case.trial(choice, 1)
    ctx.device.run(program)
    ctx.device.read(out, 0, 4)
    if not n:
        once = _best_wall(ctx.device, program, out)
        several = _best_wall(ctx.device, *case.trial(choice, PROBE_DISPATCHES)[:2])
        # Noise can make the difference tiny or negative: a dispatch is taken to cost at least an eighth of its
        # share of the probe run.
        added = max((several - once) / (PROBE_DISPATCHES - 1), several / (8 * PROBE_DISPATCHES), 1e-7)
        n = max(1, min(MAX_DISPATCHES, int(TARGET_RUN_S / added)))
    if n > 1:
        program, out, nbytes = case.trial(choice, n)
        ctx.device.run(program)
        ctx.device.read(out, 0, 4)
    return program, out, nbytes, n


def _best_wall(device: Device, program: Program, out: Buffer) -> float:
    """The shorter wall time of two runs (the first run of a new recording may still pay for setting it up)."""
    return min(time_run(device, program, out)[0] for _ in range(2))


def time_run(device: Device, program: Program, out: Buffer) -> tuple[float, float]:
    """(wall seconds, cost) of one run: the cost is wall time on GPUs; on CPU emulators, which run kernels on
    this process's threads, it is this process's CPU seconds, which other programs competing for the cores
    barely move (tools/bench/kernel_speed.py reports both). In Pyodide process_time is the wall clock (emscripten's
    clock()), which is as well: SwiftShader runs in the browser's GPU process, outside any clock of the worker."""
    start, cpu = time.perf_counter(), time.process_time()
    device.run(program)
    device.read(out, 0, 4)
    wall = time.perf_counter() - start
    return wall, (time.process_time() - cpu if device.info.software else wall)


def _floats(data: bytes) -> list[float]:
    return list(struct.unpack(f"<{len(data) // 4}f", data))


def _close(got: list[float], ref: list[float]) -> bool:
    scale = max((abs(r) for r in ref), default=0.0)
    tol = RTOL * scale + ATOL
    return all(abs(g - r) <= tol for g, r in zip(got, ref, strict=True))  # NaN compares false: rejected


# -- the matmul family ------------------------------------------------------------------------------------------

def matvec_candidates(v: Variants) -> list[MatmulTile]:
    """Decode tiles worth timing on `v`'s adapter, the fixed table's first."""
    reduces = ["subgroup", "workgroup"] if v.subgroup_width >= 4 else ["workgroup"]
    if v.software:
        xl = "shared" if v.shared_loads else "plain"
        more = [MatmulTile(8, 1, 8, xl), MatmulTile(8, 1, 8, "plain"), MatmulTile(4, 1, 8, xl),
                MatmulTile(8, 1, 16, xl),
                MatmulTile(4, 1, 8, shape="rowgroup", reduce=reduces[0]),
                MatmulTile(8, 1, 8, shape="rowgroup", reduce=reduces[0])]
    else:
        more = [MatmulTile(r, 1, wg, shape="rowgroup", reduce=red)
                for red in reduces for r, wg in ((2, 32), (1, 32), (4, 32), (2, 64), (1, 64), (4, 64), (1, 128))]
        more.append(MatmulTile(1, 1, 64))  # one row per invocation, the GPU tile before the row-group matvec
    return _unique([v.default_matmul(1), *more])


def prefill_candidates(v: Variants, tokens: int) -> list[MatmulTile]:
    """Prefill tiles worth timing for steps of `tokens` tokens, the fixed table's first; only tiles whose
    workgroup memory fits the gated mode too (the choice serves every matmul of the weight type)."""
    if v.software:
        xl = "shared" if v.shared_loads else "plain"
        more = [MatmulTile(8, 8, 8, xl), MatmulTile(8, 4, 8, xl), MatmulTile(8, 8, 8, "plain"),
                MatmulTile(4, 8, 16, xl), MatmulTile(2, 8, 64, shape="tiled", wg_rows=16),
                MatmulTile(4, 8, 32, shape="tiled", wg_rows=8)]
    else:
        more = [MatmulTile(2, 8, 64, shape="tiled", wg_rows=16), MatmulTile(2, 4, 64, shape="tiled", wg_rows=16),
                MatmulTile(4, 4, 64, shape="tiled", wg_rows=8), MatmulTile(4, 8, 64, shape="tiled", wg_rows=8),
                MatmulTile(1, 8, 64, shape="tiled", wg_rows=32), MatmulTile(2, 4, 32, shape="rowgroup",
                                                                           reduce=v.default_matmul(1).reduce),
                MatmulTile(1, 8, 64)]  # one row x 8 tokens per invocation, the GPU tile before the tiled one
    fits = [t for t in [v.default_matmul(tokens), *more] if t.workgroup_bytes(2) <= WORKGROUP_BYTES]
    return _unique(fits)


def _unique(tiles: list[MatmulTile]) -> list[MatmulTile]:
    return list(dict.fromkeys(tiles))


def representative(weights: list[Weight]) -> Weight:
    """The weight of a type whose shape occurs most often in the model (ties: the largest), so the time measured
    is the time most of that type's matmuls take."""
    counts: dict[tuple[int, int], int] = {}
    for w in weights:
        counts[(w.rows, w.k)] = counts.get((w.rows, w.k), 0) + 1
    shape = max(counts, key=lambda s: (counts[s], s[0] * s[1]))
    return next(w for w in weights if (w.rows, w.k) == shape)


HEADS = ("output.", "token_embd.")  # weights that multiply only the rows that produce logits


def matmul_cases(ctx: TuneContext) -> list[TuneCase]:
    cases = []
    for family, tokens in (("matvec", 1), ("prefill", ctx.prefill_tokens)):
        if tokens < 2 and family == "prefill":
            continue
        by_type: dict[GGMLType, list[Weight]] = {}
        for name, w in ctx.weights.items():
            if family == "matvec" or not name.startswith(HEADS):
                by_type.setdefault(w.type, []).append(w)
        for qtype in sorted(by_type, key=int):
            w = cut(representative(by_type[qtype]), tokens)
            candidates = (matvec_candidates(ctx.variants) if tokens == 1
                          else prefill_candidates(ctx.variants, tokens))
            if ctx.q8_activations and ctx.variants.int8_dot and qtype in INT8_TYPES:
                # The same numbers as the f32 candidates' rounded x, so the output check holds them to RTOL too;
                # with f32 activations they differ by the rounding (~1e-2 of max|y|) and are not candidates.
                candidates = _unique(candidates + [t.int8() for t in candidates])
            cases.append(TuneCase(family, qtype.name, f"{w.rows}x{w.k} T={tokens}", candidates,
                                  _matmul_trial(ctx, w, tokens)))
    return cases


def cut(w: Weight, tokens: int) -> Weight:
    """`w`'s first rows, about MAX_MACS multiply-adds' worth (at least MIN_ROWS, a multiple of the split layout's
    8-row tiles, so the rows kept are laid out exactly as in the whole weight)."""
    rows = max(MIN_ROWS, MAX_MACS // (w.k * tokens)) // 8 * 8
    first = w.parts[0]
    if rows >= first.rows:
        return w
    return Weight(w.name, w.type, w.k, rows, [WeightPart(first.buffer, 0, rows)], w.layout)


def _matmul_trial(ctx: TuneContext, w: Weight, tokens: int):
    device = ctx.device
    step = device.buffer(16, "tune.step", uniform=True)
    device.write(step, struct.pack("<4I", tokens, 0, 0, 0))
    x_bytes = bytes(_pseudo_random_f32(tokens * w.k))
    acts = {}

    def trial(tile: MatmulTile, n: int):
        rec = Recorder(device, ctx.kernels, step, q8_activations=ctx.q8_activations)
        if "x" not in acts:  # one x and y for every candidate: the same inputs, outputs compared
            acts["x"], acts["y"] = rec.act("tune.x", tokens, w.k), rec.act("tune.y", tokens, w.rows)
            device.write(acts["x"].buffer, x_bytes)
        for _ in range(n):
            ops.matmul(rec, w, acts["x"], acts["y"], tile=tile)
        return rec.finish(), acts["y"].buffer, tokens * w.rows * 4

    return trial


def _pseudo_random_f32(n: int) -> bytearray:
    """n f32 values in [-1, 1) from a fixed linear congruential sequence (the core has no numpy)."""
    out = bytearray(4 * n)
    s = 12345
    for i in range(n):
        s = (s * 1103515245 + 12345) & 0x7FFFFFFF
        struct.pack_into("<f", out, 4 * i, s / 2 ** 30 - 1.0)
    return out


register_tunable("matmul", matmul_cases)


def attention_cases(ctx: TuneContext) -> list[TuneCase]:
    """The attention kernel for decode steps and for prefill steps, at the model's head shape."""
    c = ctx.config
    if c is None or not getattr(c, "n_head", 0):
        return []
    return [TuneCase("attention", key, f"{c.n_head}/{c.n_kv_head}x{c.head_dim} T={tokens} P={ATTENTION_POSITIONS}",
                     ctx.variants.attention_candidates(key),
                     _attention_trial(ctx, c.n_head, c.n_kv_head, c.head_dim, tokens))
            for key, tokens in (("decode", 1), ("prefill", min(ctx.prefill_tokens, ATTENTION_POSITIONS)))
            if key == "decode" or tokens > 1]


def _attention_trial(ctx: TuneContext, n_head: int, n_kv_head: int, head_dim: int, tokens: int):
    """One sequence whose cache holds ATTENTION_POSITIONS positions of pseudo-random K and V (in the adapter's
    cache type), and a step of `tokens` tokens at its last positions."""
    device = ctx.device
    kv_type = cache_type(device.info)
    n_blocks = blocks_for(ATTENTION_POSITIONS)
    width = n_kv_head * head_dim
    values = _pseudo_random_f32(n_blocks * BLOCK_TOKENS * width)
    if kv_type == "f16":
        floats = struct.unpack(f"<{len(values) // 4}f", values)
        values = struct.pack(f"<{len(floats)}e", *floats)
    cache = []
    for name in ("k", "v"):
        cache.append(device.buffer(layer_bytes(width, n_blocks, kv_type), f"tune.{name}"))
        device.write(cache[-1], values)
    table = device.buffer(n_blocks * 4, "tune.block_table")
    device.write(table, struct.pack(f"<{n_blocks}I", *range(n_blocks)))
    layer = KVLayer(cache[0], cache[1], table, n_blocks, ATTENTION_POSITIONS, kv_type)
    shape = AttentionShape(n_head, n_kv_head, head_dim, scale=head_dim ** -0.5)
    records = device.buffer(tokens * 16, "tune.tokens")
    first = ATTENTION_POSITIONS - tokens
    device.write(records, b"".join(struct.pack("<4I", 0, first + t, 0, 0) for t in range(tokens)))
    step = device.buffer(16, "tune.step", uniform=True)
    device.write(step, struct.pack("<4I", tokens, 0, 0, 0))
    qkv_cols = (n_head + 2 * n_kv_head) * head_dim
    qkv_bytes = bytes(_pseudo_random_f32(tokens * qkv_cols))
    acts = {}

    def trial(kernel: str, n: int):
        rec = Recorder(device, ctx.kernels, step)
        if "qkv" not in acts:  # one input and output for every candidate: the same inputs, outputs compared
            acts["qkv"], acts["out"] = rec.act("tune.qkv", tokens, qkv_cols), rec.act("tune.attn", tokens,
                                                                                        n_head * head_dim)
            device.write(acts["qkv"].buffer, qkv_bytes)
        for _ in range(n):
            ops.attention(rec, acts["qkv"], records, layer, acts["out"], shape, kernel=kernel)
        return rec.finish(), acts["out"].buffer, tokens * n_head * head_dim * 4

    return trial


register_tunable("attention", attention_cases)


def tune_model(ctx: TuneContext, *, option: bool | None = None, retune: bool = False, store=None,
               int8_dot: bool = False) -> TuneReport:
    """Tune for a loaded model (`ctx`: its weights, config, prefill step and activations) when `enabled(option)`
    or `retune`; otherwise the fixed table decides. Where the model rounds activations to 8 bits
    (`ctx.q8_activations`) the matmul cases round x as the model will, and take int8 dot products among their
    candidates where the adapter has them; `int8_dot` forces those afterwards (force_int8)."""
    device = ctx.device
    if int8_dot and not device.info.dot4i8:
        raise GPUError(f"int8 dot products need WGSL's packed_4x8_integer_dot_product, which {device.info.name} "
                       "does not offer; load without int8_dot")
    report = _tune_model(ctx, option, retune, store)
    if int8_dot:
        force_int8(ctx.variants, {w.type for w in ctx.weights.values()}, ctx.prefill_tokens, report)
    return report


def force_int8(v: Variants, qtypes, prefill_tokens: int, report: TuneReport) -> None:
    """Int8 dot products for every matmul over weights of INT8_TYPES among `qtypes`: each case's chosen tile (tuned
    or the table's) with dot "i8" (MatmulTile.int8), reported as "forced"."""
    for qtype in sorted(set(qtypes) & INT8_TYPES, key=int):
        for family, tokens in (("matvec", 1), ("prefill", prefill_tokens)):
            tile = v.matmul(tokens, qtype.name).int8()
            v.tuned[(family, qtype.name)] = tile
            report.choices[f"{family}/{qtype.name}"] = {"variant": repr(tile), "by": "forced"}


def _tune_model(ctx: TuneContext, option: bool | None, retune: bool, store) -> TuneReport:
    v, weights = ctx.variants, ctx.weights
    native = ctx.device.info.backend.startswith("wgpu-native")
    if not enabled(option, ctx.device.info.software) and not retune:
        v.tuned.clear()  # an earlier load's choices must not linger on this device
        report = TuneReport(enabled=False)
        for qtype in sorted({w.type for w in weights.values()}, key=int):
            for family, tokens in (("matvec", 1), ("prefill", ctx.prefill_tokens)):
                report.choices[f"{family}/{qtype.name}"] = {"variant": repr(v.matmul(tokens, qtype.name)),
                                                             "by": "default"}
        if ctx.config is not None and getattr(ctx.config, "n_head", 0):
            for key in ("decode", "prefill"):
                report.choices[f"attention/{key}"] = {"variant": repr(v.attention_kernel(key)),
                                                      "by": "default"}
        report.choices.update(gated_delta_choices(v, weights, ctx.prefill_tokens))
        return report
    report = tune(ctx, store=store if store is not None else FileStore() if native else MemoryStore(), retune=retune)
    report.choices.update(gated_delta_choices(v, weights, ctx.prefill_tokens))
    return report


def gated_delta_choices(v: Variants, weights: dict[str, Weight], prefill_tokens: int) -> dict[str, dict]:
    """The gated delta kernels a model with linear-attention layers (their `ssm_a` tensors) runs, decode and
    prefill (state_ops.gated_delta); none for other models."""
    if not any(".ssm_a" in name for name in weights):
        return {}
    choices = {}
    for key, tokens in (("decode", 1), ("prefill", prefill_tokens)):
        form = v.gated_delta_form(tokens)
        choices[f"gated_delta/{key}"] = {"variant": repr(form), "by": "tuned" if ("gated_delta", key) in v.tuned
                                         else "default"}
        if form == "chunk":
            choices[f"gated_delta/{key}"]["rows_per_lane"] = v.gated_delta_rows
    return choices
