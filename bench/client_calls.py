"""The client loop's own cost per tool call: no network, no model latency, no-op tools.

One in-process model turn asks for N no-op read-only calls (``toolnexus.testing``), the loop
runs them through the scheduler and hands the results back, and a second turn ends the run.
Printed side by side: the whole loop per call, and ``run_batch`` (the scheduler and argument
checks alone) per call on the same calls, with their ratio. Medians of interleaved runs.

Run: ``python bench/client_calls.py [--calls N] [--runs R]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from toolnexus import ToolCall, ToolHints, create_client, run_batch, tool
from toolnexus.testing import FunctionModel


@tool(hints=ToolHints(read_only=True))
def noop(n: int, label: str = "x") -> int:
    """Return n."""
    return n


def calls_for(count: int) -> list[ToolCall]:
    return [ToolCall(f"c{i}", "noop", f'{{"n": {i}, "label": "item {i}"}}') for i in range(count)]


async def through_the_loop(count: int) -> float:
    calls = calls_for(count)

    def model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        return calls if messages[-1]["role"] == "user" else "done"

    client = create_client(model=FunctionModel(model), code_mode="native")
    started = time.perf_counter()
    result = await client.run("go", tools=[noop])
    elapsed = time.perf_counter() - started
    assert len(result.tool_calls) == count
    assert result.text == "done"
    return elapsed


async def through_run_batch(count: int) -> float:
    calls = calls_for(count)
    started = time.perf_counter()
    outcomes = await run_batch(calls, [noop])
    elapsed = time.perf_counter() - started
    assert all(o.ok for o in outcomes)
    return elapsed


async def main(count: int, runs: int) -> None:
    loop_times, batch_times = [], []
    await through_the_loop(10)  # warm up imports and pools
    for _ in range(runs):
        loop_times.append(await through_the_loop(count))
        batch_times.append(await through_run_batch(count))
    loop_us = statistics.median(loop_times) / count * 1e6
    batch_us = statistics.median(batch_times) / count * 1e6
    print(f"{count} no-op calls in one model turn, {runs} interleaved runs, medians")
    print(f"    client loop (in-process model)  {loop_us:8.1f} us/call")
    print(f"    run_batch alone                  {batch_us:8.1f} us/call")
    print(f"    loop / run_batch                 {loop_us / batch_us:8.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=7)
    options = parser.parse_args()
    asyncio.run(main(options.calls, options.runs))
