"""Scheduler benchmarks. Prints ratios measured side by side in one run; asserts nothing.

(a) overhead: N no-op parallel calls through ``Scheduler`` vs a bare ``asyncio.gather`` of the
    same coroutines. Prints the per-call overhead and the ratio (target <= 2.0).
(b) makespan: a mixed workload of sleeping tools (70 % safe, 5-50 ms, cap 10) through
    ``Scheduler``, against the optimum the rule allows: the same calls replayed through the pure
    ``SchedulingRule`` with zero overhead (target <= 1.05). The replay uses how long each tool
    actually ran, since ``asyncio.sleep`` itself overshoots by about a millisecond, which is not
    the scheduler's doing; the ratio to the nominal sleeps is printed beside it.

Run: ``python bench/scheduler.py [--calls 10000] [--mixed 200] [--seed 7]``
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import heapq
import random
import statistics
import time
from typing import Any

from toolnexus import Tool, ToolHints
from toolnexus.scheduling import Mode, Scheduler, SchedulingRule


async def _noop(args: dict[str, Any]) -> int:
    return 0


def _noop_dispatch(tool: Tool, args: dict[str, Any], run_ctx: Any) -> Any:
    return _noop(args)


READ = Tool("noop", execute=_noop, hints=ToolHints(read_only=True))


async def _bare(n: int) -> float:
    start = time.perf_counter()
    await asyncio.gather(*(_noop({"i": i}) for i in range(n)))
    return time.perf_counter() - start


async def _scheduled(n: int, max_parallel: int, dispatch: Any) -> float:
    start = time.perf_counter()
    async with Scheduler(dispatch, max_parallel=max_parallel) as lane:
        tickets = [lane.submit(READ, {"i": i}) for i in range(n)]
        for ticket in tickets:
            await lane.wait(ticket)
    return time.perf_counter() - start


def overhead(n: int, repeats: int = 11) -> None:
    """Part (a): median of ``repeats`` interleaved runs of each variant."""
    variants: dict[str, Any] = {
        "bare asyncio.gather": lambda: _bare(n),
        "Scheduler, cap 10 (dispatch seam)": lambda: _scheduled(n, 10, _noop_dispatch),
        f"Scheduler, cap {n} (dispatch seam)": lambda: _scheduled(n, n, _noop_dispatch),
        "Scheduler, cap 10 (default dispatch: validate + execute)": lambda: _scheduled(n, 10, None),
    }
    times: dict[str, list[float]] = {name: [] for name in variants}
    for run in variants.values():  # warm-up: imports, allocator, first-call costs
        asyncio.run(run())
    for _ in range(repeats):
        for name, run in variants.items():
            gc.collect()
            times[name].append(asyncio.run(run()))
    bare = times["bare asyncio.gather"]
    print(f"(a) {n:,} no-op parallel calls, {repeats} interleaved runs; medians, and the median")
    print("    of the per-run ratios (each run against the bare gather measured beside it)")
    for name, samples in times.items():
        t = statistics.median(samples)
        ratio = statistics.median(s / b for s, b in zip(samples, bare, strict=True))
        print(f"    {name:<58} {t * 1e3:8.1f} ms  {t / n * 1e6:6.2f} us/call  ratio {ratio:4.2f}")


def optimum(modes: list[Mode], durations: list[float], cap: int) -> float:
    """The makespan the rule allows: replay through the pure rule with exact durations."""
    rule = SchedulingRule(cap)
    clock = 0.0
    finishing: list[tuple[float, int]] = []

    def start(started: list[int]) -> None:
        for seq in started:
            heapq.heappush(finishing, (clock + durations[seq - 1], seq))

    for mode in modes:
        start(rule.submit(mode)[1])
    while finishing:
        clock, seq = heapq.heappop(finishing)
        start(rule.settle(seq)[1])
    return clock


async def _mixed_run(
    modes: list[Mode], durations: list[float], cap: int
) -> tuple[float, list[float]]:
    """The measured makespan, and how long each tool actually ran (timer overshoot included)."""
    ran = [0.0] * len(modes)

    async def sleep(args: dict[str, Any]) -> None:
        began = time.perf_counter()
        await asyncio.sleep(args["s"])
        ran[args["i"]] = time.perf_counter() - began

    safe = Tool("read", execute=sleep, hints=ToolHints(read_only=True))
    unsafe = Tool("write", execute=sleep)
    start = time.perf_counter()
    async with Scheduler(max_parallel=cap) as lane:
        tickets = [
            lane.submit(safe if mode == "parallel" else unsafe, {"s": d, "i": i})
            for i, (mode, d) in enumerate(zip(modes, durations, strict=True))
        ]
        for ticket in tickets:
            await lane.wait(ticket)
    return time.perf_counter() - start, ran


def makespan(calls: int, seed: int, cap: int = 10) -> None:
    """Part (b)."""
    rng = random.Random(seed)
    modes: list[Mode] = ["parallel" if rng.random() < 0.7 else "exclusive" for _ in range(calls)]
    durations = [rng.uniform(0.005, 0.050) for _ in range(calls)]
    measured, ran = asyncio.run(_mixed_run(modes, durations, cap))
    nominal_best = optimum(modes, durations, cap)
    actual_best = optimum(modes, ran, cap)
    overshoot = statistics.fmean([r - d for r, d in zip(ran, durations, strict=True)] or [0.0])
    print(
        f"(b) {calls} calls, {modes.count('parallel')} safe / {modes.count('exclusive')} unsafe, "
        f"5-50 ms sleeps, cap {cap}, seed {seed}"
    )
    print(f"    measured makespan                             {measured * 1e3:8.1f} ms")
    print(
        f"    optimum the rule allows, tools' actual times  {actual_best * 1e3:8.1f} ms  "
        f"ratio {measured / actual_best:5.3f}   <- scheduler efficiency (target <= 1.05)"
    )
    print(
        f"    optimum the rule allows, nominal sleeps       {nominal_best * 1e3:8.1f} ms  "
        f"ratio {measured / nominal_best:5.3f}   "
        f"(asyncio.sleep overshoots {overshoot * 1e3:.2f} ms per call on average)"
    )
    print(
        f"    all calls one by one, nominal                 {sum(durations) * 1e3:8.1f} ms  "
        f"ratio {sum(durations) / nominal_best:5.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10_000, help="calls for part (a)")
    parser.add_argument("--mixed", type=int, default=200, help="calls for part (b)")
    parser.add_argument("--seed", type=int, default=7)
    options = parser.parse_args()
    overhead(options.calls)
    makespan(options.mixed, options.seed)


if __name__ == "__main__":
    main()
