"""One model response, eight tool calls: watch the scheduler order them.

The calls read and write real files in a temporary folder; each tool also waits a little, the way
a network or disk call would, so the timeline shows what ran together:

* reads (``read_file``, ``list_dir``) are read-only, so a run of them overlaps (cap 3 here);
* ``write_file`` has no hints, so it is unsafe: it waits for everything before it, runs alone,
  and nothing after it starts until it has finished;
* ``delete_file`` is safe only for a dry run (a per-call predicate);
* a call to an unknown tool gets an error outcome without running anything.

Results come back in the order the model emitted the calls, whatever finished first.

Run: ``python examples/batch_timeline.py`` (no API key, no network).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from pathlib import Path

from toolnexus import ToolCall, ToolHints, Toolkit, run_batch, tool
from toolnexus.scheduling import concurrency_mode

WORKDIR = Path(tempfile.mkdtemp(prefix="toolnexus-example-"))
SPANS: list[list[float]] = []  # [start, end] of each call, in the order the calls started
T0 = time.perf_counter()


async def _timed(latency: float) -> None:
    span = [time.perf_counter() - T0, 0.0]
    SPANS.append(span)
    await asyncio.sleep(latency)
    span[1] = time.perf_counter() - T0


@tool(hints=ToolHints(read_only=True))
async def read_file(path: str) -> str:
    """Read a UTF-8 text file from the workspace.

    Args:
        path: File name, relative to the workspace.
    """
    await _timed(0.08)
    return (WORKDIR / path).read_text(encoding="utf-8")


@tool(hints=ToolHints(read_only=True))
async def list_dir() -> list[str]:
    """List the files of the workspace."""
    await _timed(0.02)
    return sorted(os.listdir(WORKDIR))


@tool
async def write_file(path: str, text: str) -> str:
    """Write a UTF-8 text file (no hints: unsafe, so it runs alone).

    Args:
        path: File name, relative to the workspace.
        text: The new content.
    """
    await _timed(0.05)
    (WORKDIR / path).write_text(text, encoding="utf-8")
    return f"wrote {len(text)} characters to {path}"


@tool(concurrency_safe=lambda args: args.get("dry_run") is True)
async def delete_file(path: str, dry_run: bool = False) -> str:
    """Delete a file; with dry_run it only says what it would do (and is then safe).

    Args:
        path: File name, relative to the workspace.
        dry_run: Only report.
    """
    await _timed(0.04)
    if dry_run:
        return f"would delete {path}"
    (WORKDIR / path).unlink()
    return f"deleted {path}"


def _groups(ids: list[str], timeline: dict[str, list[float]]) -> list[list[str]]:
    """Consecutive calls whose spans overlapped, from the measured timeline."""
    groups: list[list[str]] = []
    group_end = -1.0
    for call_id in ids:
        start, end = timeline[call_id]
        if groups and start < group_end:
            groups[-1].append(call_id)
            group_end = max(group_end, end)
        else:
            groups.append([call_id])
            group_end = end
    return groups


async def main() -> None:
    (WORKDIR / "a.txt").write_text("alpha", encoding="utf-8")
    (WORKDIR / "b.txt").write_text("bravo", encoding="utf-8")
    tools = Toolkit([read_file, list_dir, write_file, delete_file])
    calls = [
        ToolCall("1", "read_file", {"path": "a.txt"}),
        ToolCall("2", "read_file", {"path": "b.txt"}),
        ToolCall("3", "write_file", {"path": "c.txt", "text": "charlie"}),
        ToolCall("4", "read_file", {"path": "c.txt"}),
        ToolCall("5", "list_dir", {}),
        ToolCall("6", "delete_file", {"path": "a.txt", "dry_run": True}),
        ToolCall("7", "read_file", {"path": "b.txt"}),
        ToolCall("8", "delete_file", {"path": "b.txt"}),
        ToolCall("9", "summarise", {"text": "?"}),
    ]

    outcomes = await run_batch(calls, tools, max_parallel=3)

    # Calls start in the order the model emitted them (that is the rule), so the n-th span
    # recorded belongs to the n-th call that named a known tool.
    ran = [c.id for c in calls if tools.get(c.name) is not None]
    origin = min(start for start, _ in SPANS)
    timeline = {
        i: [start - origin, end - origin] for i, (start, end) in zip(ran, SPANS, strict=True)
    }
    span = max(end for _, end in timeline.values())
    width = 48
    print(f"toolnexus: one model response with {len(calls)} tool calls, max_tool_concurrency=3")
    print(f"{'#':>2}  {'call':<34} {'mode':<10} timeline (0 to {span * 1e3:.0f} ms)")
    for call in calls:
        t = tools.get(call.name)
        label = f"{call.name}({', '.join(f'{v}' for v in dict(call.arguments).values())})"
        mode = concurrency_mode(t, dict(call.arguments)) if t else "-"
        bar = ""
        if call.id in timeline:
            start, end = timeline[call.id]
            first = int(start / span * width)
            bar = " " * first + "█" * max(int(end / span * width) - first, 1)
        print(f"{call.id:>2}  {label[:34]:<34} {mode:<10} |{bar:<{width}}|")

    groups = _groups(ran, timeline)
    print(
        "\nwhat ran together (at most 3 at once):  ",
        "  ->  ".join(f"[{' '.join(g)}]" for g in groups),
    )
    print("\nresults, in the order the model emitted the calls:")
    for call, outcome in zip(calls, outcomes, strict=True):
        error = outcome.error or {}
        shown = repr(outcome.value) if outcome.ok else f"error: {error['message']}"
        print(f"{call.id:>2}  {call.name:<12} {shown}")


if __name__ == "__main__":
    try:
        asyncio.run(main())
    finally:
        shutil.rmtree(WORKDIR, ignore_errors=True)
