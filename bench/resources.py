"""Resource keys on a coding-agent trace. Prints makespans and ratios side by side; asserts
only that every run leaves the same files.

The trace: 12 edits spread over 6 files, interleaved with 12 reads of those files, as one batch
of native tool calls through the built-in ``edit`` and ``read`` tools on real files. Each call
is held for 50-150 ms first (a slow disk, a formatter, a remote file system). Printed:

* the makespan with declarations (``builtin_tools(root, resource_keys=True)``) and without
  (reads overlap, every edit runs alone), and their ratio;
* the optimum the generalised rule allows: the same calls replayed through the pure
  ``SchedulingRule`` with their measured durations and no overhead, and the ratio to it;
* the one-by-one time (the sum of the durations), for scale.

Each edit appends its own line to its file, so the final contents depend on the order of the
edits of each file: every run must leave exactly what running the calls one by one leaves.

Run: ``python bench/resources.py [--seed 3] [--runs 3]``
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import json
import random
import statistics
import tempfile
import time
from collections import defaultdict, deque
from pathlib import Path
from typing import Any

from toolnexus import Resources, Tool, ToolCall, run_batch
from toolnexus.scheduling import Mode, SchedulingRule
from toolnexus.tools import classify
from toolnexus.tools.builtins import builtin_tools

FILES = [f"src/module_{i}.py" for i in range(6)]
END = "# end\n"


def trace(seed: int) -> list[tuple[ToolCall, float]]:
    """24 calls (12 edits, 12 reads) with how long each is held, in seconds."""
    rng = random.Random(seed)
    calls: list[tuple[ToolCall, float]] = []
    edits = [FILES[i % 6] for i in range(12)]
    rng.shuffle(edits)
    for n, path in enumerate(edits):
        edit = {"path": path, "old_string": END, "new_string": f"# edit {n}\n{END}"}
        calls.append((ToolCall(f"e{n}", "edit", json.dumps(edit)), rng.uniform(0.05, 0.15)))
        read = {"path": rng.choice(FILES)}
        calls.append((ToolCall(f"r{n}", "read", json.dumps(read)), rng.uniform(0.05, 0.15)))
    return calls


def key(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, sort_keys=True)


def held(tool: Tool, hold: dict[str, deque[tuple[int, float]]], ran: dict[int, float]) -> Tool:
    """``tool``, held for its call's time first; records how long each call really took.

    A call is found by its arguments; calls with the same arguments begin in the order they
    were made (the rule starts conflicting calls in order, and others in one decision, in
    order), so each takes the next of their times.
    """

    async def execute(args: dict[str, Any], ctx: Any) -> Any:
        index, seconds = hold[key(args)].popleft()
        began = time.perf_counter()
        await asyncio.sleep(seconds)
        try:
            return await tool.invoke(args, ctx)
        finally:
            ran[index] = time.perf_counter() - began

    return Tool(
        tool.name,
        tool.description,
        tool.input_schema,
        execute=execute,
        hints=tool.hints,
        resources=tool.resources,
    )


def fresh_root() -> Path:
    root = Path(tempfile.mkdtemp(prefix="toolnexus-bench-"))
    (root / "src").mkdir()
    for path in FILES:
        (root / path).write_text(f"# {path}\n{END}")
    return root


def contents(root: Path) -> dict[str, str]:
    return {path: (root / path).read_text() for path in FILES}


async def one_run(
    calls: list[tuple[ToolCall, float]], *, keys: bool, one_by_one: bool = False
) -> tuple[float, dict[str, str], list[tuple[Mode, Resources | None]], list[float]]:
    """Makespan, final contents, each call's classification and measured duration."""
    root = fresh_root()
    hold: dict[str, deque[tuple[int, float]]] = defaultdict(deque)
    for index, (call, seconds) in enumerate(calls):
        hold[key(json.loads(call.arguments))].append((index, seconds))
    ran: dict[int, float] = {}
    tools = [held(t, hold, ran) for t in builtin_tools(root, resource_keys=keys)]
    by_name = {t.name: t for t in tools}
    classes = [classify(by_name[c.name], json.loads(c.arguments)) for c, _ in calls]
    started = time.perf_counter()
    if one_by_one:
        for call, _ in calls:
            await run_batch([call], tools)
    else:
        outcomes = await run_batch([c for c, _ in calls], tools, max_parallel=10)
        assert all(o.ok for o in outcomes), [o.error for o in outcomes if not o.ok]
    makespan = time.perf_counter() - started
    durations = [ran[index] for index in range(len(calls))]
    return makespan, contents(root), classes, durations


def optimum(classes: list[tuple[Mode, Resources | None]], durations: list[float]) -> float:
    """The makespan the rule allows: the pure rule replayed with exact durations, no overhead."""
    rule = SchedulingRule(10)
    clock = 0.0
    finishing: list[tuple[float, int]] = []

    def start(started: list[int]) -> None:
        for seq in started:
            heapq.heappush(finishing, (clock + durations[seq - 1], seq))

    for mode, resources in classes:
        start(rule.submit(mode, resources)[1])
    while finishing:
        clock, seq = heapq.heappop(finishing)
        start(rule.settle(seq)[1])
    return clock


async def main(seed: int, runs: int) -> None:
    calls = trace(seed)
    serial_time, expected, _, _ = await one_run(calls, keys=False, one_by_one=True)
    keyed: list[float] = []
    plain: list[float] = []
    best: list[float] = []
    for _ in range(runs):  # interleaved, so both see the same machine
        with_keys, files_keyed, classes, durations = await one_run(calls, keys=True)
        without, files_plain, _, _ = await one_run(calls, keys=False)
        assert files_keyed == expected, "declarations changed what the edits left"
        assert files_plain == expected
        keyed.append(with_keys)
        plain.append(without)
        best.append(optimum(classes, durations))
    k, p, o = statistics.median(keyed), statistics.median(plain), statistics.median(best)
    print(f"coding-agent trace: 12 edits over 6 files, 12 reads, 50-150 ms each; {runs} runs")
    print(f"    one by one                          {serial_time * 1e3:7.0f} ms")
    print(f"    without declarations (safe/unsafe)  {p * 1e3:7.0f} ms")
    print(f"    with declarations (resource keys)   {k * 1e3:7.0f} ms")
    print(f"    optimum the rule allows             {o * 1e3:7.0f} ms")
    print(f"    without / with                      {p / k:7.2f}")
    print(f"    with / optimum                      {k / o:7.2f}")
    print("    final file contents equal the one-by-one run's: yes")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args()
    asyncio.run(main(options.seed, options.runs))
