"""Time each kernel a browser load compiles, alone and one after another, on the adapter Chromium offers.

    python tools/bench/browser_compile_times.py [--model smollm2] [--rounds 2]

Loads the model once through web/bench.html (which keeps the kernels the load asked for in OPFS,
llmchat-kernels.json), then compiles each of those kernels again in a fresh device, waiting for each before the
next, and prints one JSON line: per kernel its name, WGSL length and milliseconds per round. On SwiftShader,
whose compiles run one at a time, the sum is what a load's compiling costs. Needs `make web` first.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "support"))

from browser_bench import bench_page  # noqa: E402 (tools/, this script's folder)
from browser_util import read_opfs  # noqa: E402

from llmchat.hub.catalogue import resolve  # noqa: E402

# Compiles `specs` ([name, WGSL, binding kinds, constants], as gpu.js keeps them) one after another on a new device
# with the adapter's limits; returns the milliseconds of each, or its error.
TIME_COMPILES = """async (specs) => {
  const adapter = await navigator.gpu.requestAdapter();
  const names = ["maxStorageBufferBindingSize", "maxBufferSize", "maxStorageBuffersPerShaderStage",
                 "maxComputeWorkgroupStorageSize", "maxComputeInvocationsPerWorkgroup"];
  const device = await adapter.requestDevice({
    requiredFeatures: [...adapter.features].filter((f) => ["shader-f16", "subgroups"].includes(f)),
    requiredLimits: Object.fromEntries(names.map((n) => [n, adapter.limits[n]])) });
  const times = [];
  for (const [name, code, kinds, constants] of specs) {
    const t0 = performance.now();
    const layout = device.createBindGroupLayout({ entries: kinds.map((type, binding) =>
      ({ binding, visibility: GPUShaderStage.COMPUTE, buffer: { type } })) });
    try {
      await device.createComputePipelineAsync({ layout: device.createPipelineLayout({ bindGroupLayouts: [layout] }),
        compute: { module: device.createShaderModule({ code }), entryPoint: "main", constants } });
      times.push(performance.now() - t0);
    } catch (error) {
      times.push(error.message);
    }
  }
  device.destroy();
  return times;
}"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2", help="catalogue name or path of a GGUF file")
    parser.add_argument("--rounds", type=int, default=2, help="times each kernel is compiled")
    parser.add_argument("--context", type=int, default=2048, help="KV cache size in tokens")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    model = Path(resolve(args.model))
    with bench_page(ROOT / "web", model, {"n": 2, "reps": 1, "context": args.context},
                    chromium=args.chromium) as (page, loaded):
        if "error" in loaded:
            sys.exit(f"browser_compile_times: the load failed: {loaded['error']}")
        specs = list(json.loads(read_opfs(page, "llmchat-kernels.json")).values())[-1]
        rounds = [page.evaluate(TIME_COMPILES, specs) for _ in range(args.rounds)]
    kernels = [{"name": spec[0], "wgsl_chars": len(spec[1]), "ms": [r[i] for r in rounds]}
               for i, spec in enumerate(specs)]
    totals = [round(sum(t for t in r if not isinstance(t, str))) for r in rounds]  # errors are strings
    print(json.dumps({"adapter": loaded["adapter"], "model": model.name, "kernels": kernels, "total_ms": totals}))


if __name__ == "__main__":
    main()
