"""Code Mode benchmarks, per runtime. Prints figures measured side by side; asserts nothing.

(a) start: cold (a new runtime: worker pool or Deno process started) and warm (a trivial
    program on a runtime that has run before) run_program latency.
(b) per sub-call overhead: a program awaiting a no-op tool N times in a row, minus the same
    program without calls, per call; against awaiting the same tool directly N times.
(c) fan-out: a program gathering 10 read-only tools that each sleep 200 ms; the ratio of its
    wall time to one sleep (target <= 1.3), against the same 10 calls awaited one by one.

Run: ``python bench/codemode.py [--calls 200] [--warm 15]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from toolnexus import Tool, ToolHints
from toolnexus.codemode import run_program
from toolnexus.codemode.runtimes import CodeRuntime, MontyRuntime, V8Runtime


async def _noop(args: dict[str, Any]) -> int:
    return 0


async def _nap(args: dict[str, Any]) -> int:
    await asyncio.sleep(0.2)
    return 1


NOOP = Tool(
    "noop", "Does nothing.", {"type": "object"}, execute=_noop, hints=ToolHints(read_only=True)
)
NAP = Tool(
    "nap", "Sleeps 200 ms.", {"type": "object"}, execute=_nap, hints=ToolHints(read_only=True)
)

PROGRAMS = {
    "python": {
        "trivial": "1",
        "calls": "for i in range({n}):\n    await tools.noop({{}})\n{n}",
        "empty": "for i in range({n}):\n    pass\n{n}",
        "fan_out": "import asyncio\nawait asyncio.gather(*[tools.nap({{}}) for i in range(10)])",
        "one_by_one": "for i in range(10):\n    await tools.nap({{}})",
    },
    "javascript": {
        "trivial": "return 1",
        "calls": "for (let i = 0; i < {n}; i++) await tools.noop({{}}); return {n}",
        "empty": "for (let i = 0; i < {n}; i++) {{}} return {n}",
        "fan_out": "return await Promise.all([...Array(10)].map(() => tools.nap({{}})))",
        "one_by_one": "for (let i = 0; i < 10; i++) await tools.nap({{}})",
    },
}


async def _timed(code: str, runtime: CodeRuntime, tools: list[Tool]) -> float:
    start = time.perf_counter()
    out = await run_program(code, tools, runtime=runtime)
    elapsed = time.perf_counter() - start
    if "error" in out:
        raise RuntimeError(f"benchmark program failed: {out['error']}")
    return elapsed


async def _direct(n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        await NOOP.invoke({})
    return time.perf_counter() - start


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:8.2f} ms"


async def bench_runtime(make: Any, calls: int, warm_runs: int) -> None:
    runtime: CodeRuntime = make()
    programs = PROGRAMS[runtime.language]
    name = type(runtime).__name__
    try:
        cold = await _timed(programs["trivial"], runtime, [])
        warm: list[float] = []
        for _ in range(warm_runs):
            await asyncio.sleep(0.15)  # let a V8 spare finish booting, as between model turns
            warm.append(await _timed(programs["trivial"], runtime, []))
        back_to_back = [await _timed(programs["trivial"], runtime, []) for _ in range(5)]
        print(
            f"{name} (a) start: cold {_ms(cold)}; warm median {_ms(statistics.median(warm))}"
            f" (min {_ms(min(warm))}); back-to-back median "
            f"{_ms(statistics.median(back_to_back))}"
        )

        with_calls: list[float] = []
        without: list[float] = []
        direct: list[float] = []
        for _ in range(9):  # interleaved, medians: the machine's noise hits all three alike
            with_calls.append(await _timed(programs["calls"].format(n=calls), runtime, [NOOP]))
            without.append(await _timed(programs["empty"].format(n=calls), runtime, [NOOP]))
            direct.append(await _direct(calls))
        per_call = (statistics.median(with_calls) - statistics.median(without)) / calls
        per_direct = statistics.median(direct) / calls
        print(
            f"{name} (b) per sub-call: {per_call * 1e6:7.1f} us through runtime + scheduler, "
            f"{per_direct * 1e6:6.1f} us calling the tool directly, "
            f"ratio {per_call / per_direct:6.1f}"
        )

        first = await _timed(programs["fan_out"].format(), runtime, [NAP])  # new SDK: cold checker
        fans: list[float] = []
        for _ in range(3):
            await asyncio.sleep(0.15)
            fans.append(await _timed(programs["fan_out"].format(), runtime, [NAP]))
        fan = statistics.median(fans)
        await asyncio.sleep(0.15)
        serial = await _timed(programs["one_by_one"].format(), runtime, [NAP])
        print(
            f"{name} (c) 10 x 200 ms reads: gathered {_ms(fan)} = {fan / 0.2:.2f} x one sleep "
            f"(target <= 1.3); one by one {_ms(serial)} = {serial / 0.2:.2f} x; "
            f"first run with a new tool set {first / 0.2:.2f} x"
        )
    finally:
        await runtime.aclose()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--warm", type=int, default=15)
    args = parser.parse_args()
    for make in (MontyRuntime, V8Runtime):
        await bench_runtime(make, args.calls, args.warm)


if __name__ == "__main__":
    asyncio.run(main())
