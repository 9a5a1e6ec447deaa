"""The roofline report (llmchat.runtime.roofline, `llmchat bench --roofline`): the bandwidth probes on this machine's
adapter, the bytes each recorded dispatch says it moves, and the report's figures and fields from the real CLI."""
from __future__ import annotations

import json
import math

import pytest

from gpu_util import adapter_gpu, gpu  # noqa: F401 (fixtures)
from cli_util import llmchat, ok

from llmchat.runtime import roofline
from llmchat.runtime.runtime import LoadOptions, Runtime
from llmchat.gpu.kvlayout import CACHE_TYPES


def _finite_positive(x: float) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def test_stream_probes_measure_bandwidth_and_copy_for_real(gpu):  # noqa: F811
    dev = gpu.device
    timer = roofline.Timer(dev, target_s=0.02)
    size, probes = roofline.stream_probes(dev, gpu.kernels, timer, max_bytes=16 << 20)
    assert size == 16 << 20
    bw = roofline.bandwidth(size, timer.best(probes, rounds=1))
    assert all(_finite_positive(bw[k]) for k in ("read_gb_s", "copy_gb_s")), bw
    assert set(bw["orders"]) == {f"{kind}_{order}_gb_s" for kind in ("read", "copy") for order in ("strided", "chunked")}
    assert all(_finite_positive(v) for v in bw["orders"].values())
    assert bw["read_gb_s"] == max(bw["orders"]["read_strided_gb_s"], bw["orders"]["read_chunked_gb_s"])
    # The copy probes really stream the whole buffer: the destination ends up equal to the source.
    pattern = bytes(range(256)) * 64
    for order in ("strided", "chunked"):
        program, _ = probes["copy", order]
        params, src, dst = program.dispatches[0].bindings
        dev.write(dst, bytes(size))
        dev.run(program)
        for offset in (0, size // 2 + 4096, size - len(pattern)):
            assert dev.read(dst, offset, len(pattern)) == pattern, (order, offset)


@pytest.fixture(scope="module")
def smollm2(smollm2_path, adapter_gpu):  # noqa: F811
    return Runtime(str(smollm2_path), LoadOptions(context=512), adapter_gpu.device)


@pytest.mark.model
def test_decode_step_traffic_counts_every_weight_once(smollm2):
    """The step's weight bytes, summed from what each dispatch says it reads, are the model's weights: every matrix
    once, the tied embedding table once more as the output projection, and one embedding row; norms count as
    other reads."""
    program = smollm2.engine.decode_program(256)
    assert all(d.traffic is not None for d in program.dispatches)
    model = smollm2.model
    weights = sum(d.traffic.weights for d in program.dispatches)
    c = model.config
    norms = (2 * c.n_layer + 1) * c.n_embd * 4
    embed_row = model.token_embd.row_bytes
    assert weights == model.weight_bytes - norms + embed_row
    # The kernels that walk the cache (attention_combine merges their partial records) read 256 positions of K and
    # V per layer, in the cache's element type (f16 where the adapter has shader-f16).
    walks = [d for d in program.dispatches
             if d.kernel.name.startswith("attention") and not d.kernel.name.startswith("attention_combine")]
    value_bytes = CACHE_TYPES[smollm2.engine.kv.dtype]
    assert walks and sum(d.traffic.reads for d in walks) >= c.n_layer * 256 * 2 * c.kv_dim * value_bytes


@pytest.fixture(scope="module")
def bench_roofline(smollm2_path):
    return json.loads(ok(llmchat("bench", str(smollm2_path), "-n", "8", "--repeat", "1", "--roofline", "--json")))


@pytest.mark.model
def test_bench_roofline_json_has_the_documented_fields(bench_roofline):
    r = bench_roofline["roofline"]
    assert set(roofline.REPORT_FIELDS) | {"decode"} == set(r)
    assert set(r["bandwidth"]) == set(roofline.BANDWIDTH_FIELDS)
    assert set(r["step"]) == set(roofline.STEP_FIELDS)
    assert set(r["decode"]) == set(roofline.DECODE_FIELDS)
    assert r["kernels"] and all(set(k) == set(roofline.KERNEL_FIELDS) for k in r["kernels"])
    families = {k["family"] for k in r["kernels"]}
    assert {"rope_store", "embed", "topk"} <= families and any(f.startswith("attention") for f in families)
    assert any(f.startswith("matmul q4_1") for f in families)
    assert sum(k["dispatches"] for k in r["kernels"]) == r["step"]["dispatches"]
    assert r["step"]["context"] == 128  # 33 prompt tokens + 8 generated, rounded up to the smallest bucket
    table = roofline.format_report(r)  # what `llmchat bench --roofline` prints without --json
    assert all(k["family"] in table for k in r["kernels"]) and "whole step" in table and "decode rate" in table


@pytest.mark.model
def test_bench_roofline_fractions_and_shares(bench_roofline):
    r = bench_roofline["roofline"]
    step = r["step"]
    # The whole step streams from memory: it cannot beat the bandwidth by much where weights are read from storage
    # buffers, as the probe streams. Where they are read from textures (CPU emulators, variants.weight_textures),
    # which lavapipe streams about 7x faster than a buffer, only that factor bounds it.
    limit = 8.0 if "texture" in bench_roofline["weights_read_from"] else 1.5
    for value in (step["fraction"], step["weight_fraction"], r["decode"]["weight_fraction"]):
        assert 0 < value <= limit, r
    # One family's weights may sit in a CPU cache (a layer of SmolLM2 is 0.5 MB), so per kernel only sanity, with
    # the same allowance for texture reads as the step's.
    assert all(_finite_positive(k["fraction"]) and k["fraction"] <= 2 * limit + 1 for k in r["kernels"]), r["kernels"]
    # Families are timed apart from the step, on a machine shared with other work: their shares add up to about 1.
    assert 0.6 <= sum(k["share"] for k in r["kernels"]) <= 1.6, r
    assert step["weight_bytes"] == sum(k["weight_bytes"] for k in r["kernels"])
    assert abs(step["weight_gb_s"] - step["weight_bytes"] / step["ms"] / 1e6) <= 0.01 * step["weight_gb_s"] + 1e-3
