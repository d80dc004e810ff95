"""Built-in tool benchmarks. Prints times and ratios measured side by side; asserts nothing.

(a) grep over a generated tree of 10,000 files (content mode, a pattern in 1 % of them).
(b) 50 reads of different files in one batch, through the scheduler at cap 10 and at cap 1.

Run: ``python bench/tools.py``
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from toolnexus.scheduling import ToolCall, run_batch
from toolnexus.tools.builtins import builtin_tools


def make_tree(root: Path, files: int = 10_000) -> None:
    for i in range(files):
        folder = root / f"pkg{i // 100:03d}"
        folder.mkdir(exist_ok=True)
        marker = "NEEDLE" if i % 100 == 7 else "hay"
        lines = [f"line {n} of file {i}: {marker if n == 20 else 'hay'}" for n in range(40)]
        (folder / f"mod{i:05d}.py").write_text("\n".join(lines) + "\n")


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        start = time.perf_counter()
        make_tree(root)
        print(f"generated 10,000 files in {time.perf_counter() - start:.2f} s")
        tools = {t.name: t for t in builtin_tools(root)}
        grep_times = []
        for _ in range(3):
            start = time.perf_counter()
            out = await tools["grep"].invoke(
                {"pattern": "NEEDLE", "output_mode": "content", "limit": 1000}
            )
            grep_times.append(time.perf_counter() - start)
        print(
            f"(a) grep over 10,000 files: median {statistics.median(grep_times) * 1000:.0f} ms "
            f"({len(out.splitlines())} matching lines)"
        )
        calls = [
            ToolCall(f"r{i}", "read", {"path": f"pkg{i:03d}/mod{i * 100:05d}.py"})
            for i in range(50)
        ]
        results = {}
        for cap in (10, 1, 10, 1):
            start = time.perf_counter()
            outcomes = await run_batch(calls, list(tools.values()), max_parallel=cap)
            elapsed = time.perf_counter() - start
            assert all(o.ok for o in outcomes)
            results.setdefault(cap, []).append(elapsed)
        ten, one = statistics.median(results[10]), statistics.median(results[1])
        print(
            f"(b) 50 reads in one batch: cap 10 {ten * 1000:.1f} ms, cap 1 {one * 1000:.1f} ms, "
            f"ratio cap 1 / cap 10 = {one / ten:.2f}"
        )


if __name__ == "__main__":
    asyncio.run(main())
