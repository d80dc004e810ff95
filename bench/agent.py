"""Agent benchmark: one scripted task, three ways. Prints figures side by side; asserts nothing.

The task needs 20 independent reads (100 ms each) and then 3 writes that depend on each other
(50 ms each); the model (a scripted OpenAI-style endpoint on 127.0.0.1) takes 300 ms per turn.

* native: one turn asks for the 20 reads (they overlap, cap 10), then one turn per write;
* code mode: one turn sends a program that gathers the reads and chains the writes;
* cap 1: the native script with ``max_parallel=1`` (every call one by one).

Run: ``python bench/agent.py``
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))  # the scripted endpoint
from fake_provider import FakeProvider, Turn
from toolnexus import ToolHints, create_client, tool

LATENCY = 0.3
READS = 20


@tool(hints=ToolHints(read_only=True))
async def read_record(n: int) -> int:
    """Read one record."""
    await asyncio.sleep(0.1)
    return n


@tool
async def write_step(step: int, after: int) -> int:
    """Write one step; each depends on the previous one's result."""
    await asyncio.sleep(0.05)
    return after + step


PROGRAM = """
import asyncio
values = await asyncio.gather(*[tools.read_record({"n": i}) for i in range(20)])
total = sum(values)
for step in range(3):
    total = await tools.write_step({"step": step, "after": total})
total
"""


def native_script() -> list[Turn]:
    reads = [(f"r{i}", "read_record", {"n": i}) for i in range(READS)]
    turns = [Turn(calls=reads, delay=LATENCY)]
    total = sum(range(READS))
    for step in range(3):
        turns.append(
            Turn(calls=[(f"w{step}", "write_step", {"step": step, "after": total})], delay=LATENCY)
        )
        total += step
    turns.append(Turn(text=f"done: {total}", delay=LATENCY))
    return turns


def code_script() -> list[Turn]:
    run = ("c1", "run_code", {"code": PROGRAM, "description": "Read 20 records, write 3 steps."})
    return [Turn(calls=[run], delay=LATENCY), Turn(text="done", delay=LATENCY)]


async def measure(
    provider: FakeProvider, script: list[Turn], **options: Any
) -> tuple[float, int, int]:
    """Wall time, model round trips, and the bytes of every request body the model received
    (tool definitions, messages, results: what fills its context, turn after turn)."""
    provider.script(*script)
    first = len(provider.requests)
    client = create_client(base_url=provider.url + "/v1", model="bench", api_key="k", **options)
    start = time.perf_counter()
    result = await client.run("do the task", tools=[read_record, write_step])
    elapsed = time.perf_counter() - start
    if result.status != "done" or any(r.is_error for r in result.tool_calls):
        raise RuntimeError(f"the scripted task failed: {result.tool_calls}")
    sent = sum(len(json.dumps(body).encode()) for body in provider.requests[first:])
    return elapsed, result.turns, sent


async def main() -> None:
    provider = FakeProvider().start()
    try:
        await measure(provider, code_script(), code_mode="code")  # warm the sandbox once
        rows = [
            ("native, cap 10", await measure(provider, native_script(), code_mode="native")),
            ("code mode", await measure(provider, code_script(), code_mode="code")),
            (
                "native, cap 1 (sequential)",
                await measure(provider, native_script(), code_mode="native", max_parallel=1),
            ),
        ]
    finally:
        provider.stop()
    base, base_bytes = rows[0][1][0], rows[0][1][2]
    print(f"20 reads x 100 ms + 3 dependent writes x 50 ms, {LATENCY * 1000:.0f} ms per model turn")
    for name, (elapsed, turns, sent) in rows:
        print(
            f"  {name:28} {elapsed * 1000:8.0f} ms  {turns} model round trips"
            f"  ratio {elapsed / base:5.2f}  request bytes {sent:7,} ({sent / base_bytes - 1:+.0%})"
        )


if __name__ == "__main__":
    asyncio.run(main())
