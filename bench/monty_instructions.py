"""Host instructions per Monty sub-call and per warm start, counted by callgrind, per thread.

Why instructions: wall clocks on a shared two-CPU machine move by tens of percent between runs,
while callgrind's counts repeat to about one percent. Each figure is a difference of two runs
of this script under ``valgrind --tool=callgrind --separate-threads=yes``, so the interpreter's
start and the warm-up cancel out: per sub-call, a program of N sequential ``await
tools.noop({})`` calls against one of none (``--calls``); per warm start, ``--runs`` more
trivial runs (``"1"``, no tools) against five. ``loop`` is the event loop's thread,
``driver`` the driver threads (the worker processes are not counted).

Run: ``python bench/monty_instructions.py [--calls 200] [--runs 100]`` (needs valgrind; about
five minutes; a warm start's figure needs the many runs, it moves by tens of percent over 25).
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from toolnexus import Tool, ToolHints
from toolnexus.codemode import run_program
from toolnexus.codemode.runtimes import MontyRuntime

WARM_UP = 3
"""Runs before the counted ones in each child (the same in both of a pair)."""


async def _noop(args: dict[str, Any]) -> int:
    return 0


NOOP = Tool(
    "noop", "Does nothing.", {"type": "object"}, execute=_noop, hints=ToolHints(read_only=True)
)


async def _child(calls: int, runs: int, tools: list[Tool]) -> None:
    runtime = MontyRuntime(type_check=False)
    code = f"for i in range({calls}):\n    await tools.noop({{}})\n{calls}" if tools else "1"
    try:
        for _ in range(WARM_UP + runs):
            await asyncio.sleep(0.05)  # idle, as between model turns; the spare is ready
            out = await run_program(code, tools, runtime=runtime)
            if "result" not in out:
                raise RuntimeError(f"benchmark program failed: {out}")
    finally:
        await runtime.aclose()


def _counted(calls: int, runs: int, tools: str) -> dict[str, int]:
    """Instructions of one child run: the loop's thread, and the other threads together."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "cg.out"
        command = [
            "valgrind",
            "--tool=callgrind",
            "--separate-threads=yes",
            f"--callgrind-out-file={out}",
            sys.executable,
            __file__,
            "--child",
            str(calls),
            str(runs),
            tools,
        ]
        subprocess.run(command, check=True, capture_output=True)
        totals = {}
        for part in sorted(Path(folder).glob("cg.out-*")):
            for line in part.read_text().splitlines():
                if line.startswith("totals:"):
                    totals[part.name] = int(line.split()[1])
    # Thread 1 is the loop; the others are the driver threads and the runtime's helpers (whose
    # work, starting the pool, is the same in both runs of a pair and cancels out).
    loop = totals.pop("cg.out-01")
    return {"loop": loop, "driver": sum(totals.values())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        calls, runs, tools = options.child
        asyncio.run(_child(int(calls), int(runs), [NOOP] if tools == "noop" else []))
        return 0
    runs = 5
    none, many = _counted(0, runs, "noop"), _counted(options.calls, runs, "noop")
    per_call = (WARM_UP + runs) * options.calls
    few, more = _counted(0, runs, ""), _counted(0, runs + options.runs, "")
    for thread in ("loop", "driver"):
        sub_call = (many[thread] - none[thread]) / per_call
        warm = (more[thread] - few[thread]) / options.runs
        print(
            f"{thread:<7} {sub_call:10,.0f} instructions per sub-call   "
            f"{warm:12,.0f} per warm start"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
