"""The session log records when each call was admitted, started and finished (``call_timing``).

The viewer draws from these events; here they are checked against what the probe saw run.
"""

from __future__ import annotations

import asyncio

from helpers import Probe
from toolnexus import Session, Tool
from toolnexus.codemode._run_code import CODE_MODE_NAMING
from toolnexus.scheduling import Scheduler, ToolCall, run_batch


def _timings(session: Session) -> list[dict[str, object]]:
    return [e.data for e in session.events if e.type == "call_timing"]


async def test_native_batch_records_overlap_and_the_barrier(probe: Probe) -> None:
    read, write = probe.tool("read"), probe.tool("write", read_only=False)
    session = Session()
    calls = [
        ToolCall("c1", "read", {"id": "a", "steps": 3}),
        ToolCall("c2", "read", {"id": "b", "steps": 1}),
        ToolCall("c3", "write", {"id": "w"}),
        ToolCall("c4", "read", {"id": "d", "fail": "disk gone"}),
    ]
    await run_batch(calls, [read, write], session=session, max_parallel=4)
    timing = {t["id"]: t for t in _timings(session)}
    assert list(timing) == ["c1", "c2", "c3", "c4"]  # written as each commits, in order
    c1, c2, c3, c4 = (timing[c] for c in ("c1", "c2", "c3", "c4"))
    for t in timing.values():
        assert t["admitted"] <= t["started"] <= t["finished"]  # type: ignore[operator]
    # the two reads overlapped: each started before the other finished
    assert c2["started"] <= c1["finished"] and c1["started"] <= c2["finished"]  # type: ignore[operator]
    # the write waited for both, behind the barrier, and the read after it waited for the write
    assert c3["started"] >= max(c1["finished"], c2["finished"])  # type: ignore[type-var]
    assert c3["waited_for"] == {"seq": c1["seq"], "resource": "*"}
    assert c4["waited_for"] == {"seq": c3["seq"], "resource": "*"}
    assert c4["started"] >= c3["finished"]  # type: ignore[operator]
    assert [t["mode"] for t in (c1, c2, c3, c4)] == [
        "parallel",
        "parallel",
        "exclusive",
        "parallel",
    ]
    assert [t["ok"] for t in (c1, c2, c3, c4)] == [True, True, True, False]
    assert c4["error"] == "disk gone"
    assert len({t["lane"] for t in timing.values()}) == 1
    assert "program" not in c1  # a native call belongs to no program


async def test_code_mode_lane_records_each_sub_call_and_abandoned_calls(probe: Probe) -> None:
    read: Tool = probe.tool("read")
    session = Session()
    lane = Scheduler(session=session, max_parallel=1, call_id="toolu_7", naming=CODE_MODE_NAMING)
    async with lane:
        first = lane.submit(read, {"id": "a"})
        lane.submit(read, {"id": "b", "gate": "never"})
        await lane.wait(first)
        for _ in range(3):
            await asyncio.sleep(0)
    timings = _timings(session)
    assert [t["id"] for t in timings] == ["toolu_7:code:1", "toolu_7:code:2"]
    assert all(t["program"] == "toolu_7" for t in timings)
    assert timings[0]["ok"] is True
    assert timings[1]["ok"] is False and "abandoned" in str(timings[1]["error"])
    # the cap of one held the second call back until the first settled
    assert timings[1]["started"] >= timings[0]["finished"]  # type: ignore[operator]
