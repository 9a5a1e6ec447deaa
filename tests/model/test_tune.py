"""The kernel tuner (llmchat.gpu.tune) on this adapter: every candidate compiled, checked and timed, its pick the
fastest of the timings it recorded, the fixed table's tiles among its candidates, the cache written and reused (a
second tune times nothing), a retune measuring again, and `llmchat bench --retune --sweep` reporting what it chose
and every candidate's time. Which kernel is faster is the measurement's business, not the test's: the tests hold
the tuner to what it measured. The rest of the suite runs with tuning off (conftest.py sets LLMCHAT_TUNE=0).
"""
from __future__ import annotations

import dataclasses
import json
import os
from types import SimpleNamespace

import numpy as np
import pytest
from gpu_util import Gpu, gpu, random_weight  # noqa: F401 (gpu is a fixture)
from model_factory import write_model
from cli_util import llmchat, ok

from llmchat.gguf.types import GGMLType
from llmchat.gpu import tune
from llmchat.gpu.tensors import SPLIT_TYPES, split_weight
from llmchat.gpu.variants import ATTENTION_KERNELS, MatmulTile, variants

pytestmark = pytest.mark.gpu

def assert_picks_the_fastest(report: tune.TuneReport, cases: list) -> None:
    """Each case's choice is the candidate with the least time among those the tuner recorded, and every candidate
    was timed (none rejected or left out for the budget)."""
    assert not [t for t in report.timed if "skipped" in t or "rejected" in t], report.timed
    for case in cases:
        name = f"{case.family}/{case.key}"
        times = {t["variant"]: t["us_per_dispatch"] for t in report.timed if t["case"] == name}
        assert set(times) == {repr(c) for c in case.candidates}, (name, times)
        assert times[report.choices[name]["variant"]] == min(times.values()), (name, report.choices[name], times)


@pytest.fixture(scope="module")
def ctx(gpu: Gpu) -> tune.TuneContext:
    """SmolLM2's ffn_down shape (576 x 1536) in Q4_1, in the layout this adapter's loader gives it, and a prefill
    step of 64 tokens. Its own Variants, so tuned choices stay out of the session device's."""
    rng = np.random.default_rng(12)
    raw, _ = random_weight(rng, GGMLType.Q4_1, 576, 1536)
    w = gpu.weight("blk.0.ffn_down.weight", GGMLType.Q4_1, raw)
    v = dataclasses.replace(variants(gpu.device), tuned={})
    if v.split_weights and w.type in SPLIT_TYPES:
        w = split_weight(gpu.device, gpu.kernels, w)
    return tune.TuneContext(gpu.device, gpu.kernels, v, {w.name: w}, prefill_tokens=64)


@pytest.fixture(scope="module")
def first(ctx, tmp_path_factory):
    store = tune.FileStore(tmp_path_factory.mktemp("tune"))
    return store, tune.tune(ctx, store=store, compile_budget_s=600)


def test_fixed_table_is_among_the_candidates(ctx):
    v = ctx.variants
    assert tune.matvec_candidates(v)[0] == v.default_matmul(1)
    assert tune.prefill_candidates(v, 64)[0] == v.default_matmul(64)
    # Today's hand-picked tiles, for CPU emulators (shared x loads where subgroups allow: not under the phone
    # profile) and GPUs alike.
    xl = "shared" if v.shared_loads else "plain"
    hand = [MatmulTile(8, 1, 8, xl), MatmulTile(8, 1, 8, "plain")] if v.software else [MatmulTile(1, 1, 64)]
    assert set(hand) <= set(tune.matvec_candidates(v))
    hand = [MatmulTile(8, 8, 8, xl), MatmulTile(8, 4, 8, xl)] if v.software else [MatmulTile(1, 8, 64)]
    assert set(hand) <= set(tune.prefill_candidates(v, 64))


def test_pick_is_the_fastest_it_timed(ctx, first):
    _, report = first
    assert report.source == "measured" and report.seconds > 0
    cases = tune.matmul_cases(ctx)
    assert {f"{c.family}/{c.key}" for c in cases} == set(report.choices)
    assert_picks_the_fastest(report, cases)


def test_attention_kernels_are_chosen_by_output_and_speed(gpu: Gpu):
    """Attention's cases, decode and prefill at a SmolLM2-like head shape: every kernel is a candidate (the fixed
    table's first), the others' outputs match the first's (or the tuner would reject them), the pick is the fastest
    the tuner timed, and it is the one the model's steps then run."""
    v = dataclasses.replace(variants(gpu.device), tuned={})
    ctx = tune.TuneContext(gpu.device, gpu.kernels, v, {}, SimpleNamespace(n_head=9, n_kv_head=3, head_dim=64),
                           prefill_tokens=16)
    cases = tune.attention_cases(ctx)
    assert [c.key for c in cases] == ["decode", "prefill"]
    assert all(c.candidates[0] == v.attention_kernel(c.key) and set(c.candidates) == set(ATTENTION_KERNELS)
               for c in cases)
    report = tune.tune(ctx, store=tune.MemoryStore(), compile_budget_s=600)
    assert report.source == "measured"
    assert_picks_the_fastest(report, cases)
    for key in ("decode", "prefill"):
        assert repr(v.choice("attention", key, None)) == report.choices[f"attention/{key}"]["variant"]


def test_cache_is_written_and_reused(ctx, first, monkeypatch):
    store, report = first
    path = tune.Path(report.cache)
    assert path.is_file() and path.parent == store.root
    saved = json.loads(path.read_text())
    assert saved["choices"] == {k: c["variant"] for k, c in report.choices.items()}

    def no_timing(*args):
        raise AssertionError("a cached tune must not time anything")

    monkeypatch.setattr(tune, "_trial", no_timing)
    monkeypatch.setattr(tune, "time_run", no_timing)
    ctx.variants.tuned.clear()
    again = tune.tune(ctx, store=store)
    assert again.source == "cached" and again.timed == []
    assert again.choices == report.choices
    assert ctx.variants.matmul(1, "Q4_1") == next(c for c in tune.matvec_candidates(ctx.variants)
                                                  if repr(c) == report.choices["matvec/Q4_1"]["variant"])


def test_retune_measures_again(ctx, first):
    store, report = first
    before = tune.Path(report.cache).stat().st_mtime_ns
    again = tune.tune(ctx, store=store, retune=True, compile_budget_s=600)
    assert again.source == "measured" and again.timed
    assert tune.Path(again.cache).stat().st_mtime_ns > before


def test_tuning_switch(monkeypatch):
    monkeypatch.delenv(tune.ENV, raising=False)
    assert tune.enabled(None, software=False) and not tune.enabled(None, software=True)
    monkeypatch.setenv(tune.ENV, "1")
    assert tune.enabled(None, software=True)
    monkeypatch.setenv(tune.ENV, "0")
    assert not tune.enabled(None, software=False) and tune.enabled(True, software=False)


@pytest.mark.model
def test_bench_retune_reports_the_choices(tmp_path):
    """`llmchat bench --retune --sweep` on a small Q4_1 model: measured, cached under LLMCHAT_HOME, reported in the
    JSON with each choice "tuned" or "default", and every candidate timed beside the one running; without --retune
    (and tuning off) the fixed table's choices."""
    path = write_model(tmp_path / "tiny.gguf", qtype=GGMLType.Q4_1, types={"token_embd": GGMLType.Q4_1},
                       n_embd=256, n_ff=512)
    env = {**os.environ, "LLMCHAT_HOME": str(tmp_path / "home")}
    out = json.loads(ok(llmchat("bench", str(path), "-n", "2", "--repeat", "1", "--json", "--retune", "--sweep",
                                env=env)))
    kernels = out["kernels"]
    assert kernels["enabled"] and kernels["source"] == "measured"
    assert kernels["cache"].startswith(str(tmp_path / "home" / "tune"))
    assert {"matvec/Q4_1", "prefill/Q4_1"} <= set(kernels["choices"])
    assert all(c["by"] in ("tuned", "default") for c in kernels["choices"].values())
    # --sweep: every tuned case timed again with all its candidates, beside the one running
    assert set(out["sweep"]) == set(kernels["choices"])  # matvec, prefill and attention
    for name, case in out["sweep"].items():
        assert case["running"] == kernels["choices"][name]["variant"] in case["us_per_dispatch"]
        times = case["us_per_dispatch"]
        assert len(times) > 1 and times[case["fastest"]] == min(times.values())
        assert set(case["ties"]) <= set(case["us_per_dispatch"])
    plain = json.loads(ok(llmchat("bench", str(path), "-n", "2", "--repeat", "1", "--json", env=env)))
    assert not plain["kernels"]["enabled"]
    assert all(c["by"] == "default" for c in plain["kernels"]["choices"].values())
