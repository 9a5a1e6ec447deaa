"""Where the time of one forward step goes, per kernel family, on this machine's adapter.

Records the engine's program for a step of T tokens (1 = decode), then replays the dispatches of each kernel family
on their own, N times in one submission, and reports milliseconds per step for each family next to the whole
program's time. Families are timed interleaved and the best of several rounds is kept, so other programs
competing for the cores disturb the ratios less than the absolute figures. Also reports the host time of one
`Device.run` of the step, without waiting for the GPU (the Python cost of a step, which decides speed on real GPUs).

    .venv/bin/python tools/bench/forward_profile.py smollm2 --tokens 1
    .venv/bin/python tools/bench/forward_profile.py smollm2 --tokens 33
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict

from llmchat.api import LLM
from llmchat.hub.catalogue import resolve
from llmchat.runtime.engine import Feed
from llmchat.runtime.memory import step_bucket as bucket
from llmchat.runtime.roofline import family


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", default="smollm2")
    parser.add_argument("--tokens", type=int, default=1, help="tokens in the step (1 = decode)")
    parser.add_argument("--context", type=int, default=64, help="positions already in the cache")
    parser.add_argument("--top-k", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)

    llm = LLM(resolve(args.model), context=2048)
    eng, dev = llm.runtime.engine, llm.runtime.device
    slot = eng.kv.new_slot()
    start = args.context
    eng.kv.reserve(slot, start + args.tokens)
    if eng.kv.stateful:  # a model with per-sequence state continues only where its state stands: compute up to there
        llm.runtime.prefill(slot, [1] * start)
    feed = Feed(slot, [1] * args.tokens, start)
    eng.step([feed], top_k=args.top_k)  # compiles, fills the token buffers
    program = eng.program(bucket(args.tokens), 1, args.top_k, eng.context_bucket(start + args.tokens))
    groups: dict[str, list] = defaultdict(list)
    for d in program.dispatches:
        groups[family(d.kernel.name)].append(d)
    subprograms = {name: dev.program(ds) for name, ds in groups.items()}
    subprograms["(whole step)"] = program
    sync = eng.logits.buffer

    def timed(prog, n: int) -> float:
        dev.run(prog)
        dev.read(sync, 0, 4)
        t = time.perf_counter()
        for _ in range(n):
            dev.run(prog)
        dev.read(sync, 0, 4)
        return (time.perf_counter() - t) / n

    best: dict[str, float] = {}
    for _ in range(args.rounds):
        for name, prog in subprograms.items():
            best[name] = min(best.get(name, float("inf")), timed(prog, 3))
    # Host time of submitting the step (this thread's CPU time: the adapter's own threads are not counted).
    run_only = float("inf")
    for _ in range(10):
        t = time.thread_time()
        dev.run(program)
        run_only = min(run_only, time.thread_time() - t)
        dev.read(sync, 0, 4)

    total = best.pop("(whole step)")
    print(f"adapter: {dev.info.name}; step of {args.tokens} tokens at position {start}: {len(program)} dispatches")
    print(f"{'family':42} {'dispatches':>10} {'ms/step':>9} {'share':>6}")
    for name, t in sorted(best.items(), key=lambda kv: -kv[1]):
        print(f"{name:42} {len(groups[name]):>10} {t * 1e3:>9.2f} {t / total:>6.1%}")
    print(f"{'sum of families':42} {len(program):>10} {sum(best.values()) * 1e3:>9.2f}")
    print(f"{'whole step':42} {len(program):>10} {total * 1e3:>9.2f}")
    print(f"host: Device.run of the step {run_only * 1e3:.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
