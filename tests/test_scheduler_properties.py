"""Property-based tests of the Scheduler: random workloads, random failures, random stops.

Durations are counted in event-loop turns, not seconds, so every run is deterministic for the
example hypothesis draws and nothing depends on the machine's speed.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolnexus import Tool, ToolHints
from toolnexus.scheduling import Outcome, Scheduler


@dataclass
class _Spec:
    safe: bool
    turns: int
    fails: bool
    submit_after: int  # loop turns to wait before submitting this call


@dataclass
class _World:
    """What actually happened while the lane ran."""

    running: set[int] = field(default_factory=set)
    peak: int = 0
    violations: list[str] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    exclusive: int | None = None
    answered: dict[int, int] = field(default_factory=dict)
    commit_order: list[int] = field(default_factory=list)


def _tools(world: _World) -> tuple[Tool, Tool]:
    async def run(args: dict[str, Any]) -> int:
        i = args["i"]
        if world.exclusive is not None:
            world.violations.append(f"{i} started while exclusive {world.exclusive} ran")
        if not args["safe"]:
            if world.running:
                world.violations.append(f"exclusive {i} started with {sorted(world.running)}")
            world.exclusive = i
        world.running.add(i)
        world.starts.append(i)
        world.peak = max(world.peak, len(world.running))
        try:
            for _ in range(args["turns"]):
                await asyncio.sleep(0)
        finally:
            world.running.discard(i)
            if not args["safe"]:
                world.exclusive = None
        if args["fails"]:
            raise RuntimeError(f"call {i} failed")
        return i

    safe = Tool("safe", execute=run, hints=ToolHints(read_only=True))
    unsafe = Tool("unsafe", execute=run)
    return safe, unsafe


specs = st.lists(
    st.builds(
        _Spec,
        safe=st.booleans(),
        turns=st.integers(0, 6),
        fails=st.booleans(),
        submit_after=st.integers(0, 2),
    ),
    min_size=1,
    max_size=25,
)


async def _scenario(
    calls: list[_Spec], cap: int, stop_after: int | None
) -> tuple[_World, list[Outcome], bool]:
    world = _World()
    safe, unsafe = _tools(world)
    lane = Scheduler(max_parallel=cap)
    tickets = []

    async def submit_all() -> None:
        for i, spec in enumerate(calls):
            for _ in range(spec.submit_after):
                await asyncio.sleep(0)
            args = {"i": i, "safe": spec.safe, "turns": spec.turns, "fails": spec.fails}
            ticket = lane.submit(safe if spec.safe else unsafe, args)
            assert ticket._future is not None or lane.stopped
            if ticket._future is not None:
                ticket._future.add_done_callback(
                    lambda f, i=i: world.answered.__setitem__(i, world.answered.get(i, 0) + 1)
                )
                ticket._future.add_done_callback(lambda f, i=i: world.commit_order.append(i))
            tickets.append(ticket)

    submitter = asyncio.create_task(submit_all())
    stopped = False
    if stop_after is not None:
        for _ in range(stop_after):
            await asyncio.sleep(0)
        await lane.stop()
        stopped = True
    await submitter
    outcomes = await asyncio.wait_for(asyncio.gather(*(lane.wait(t) for t in tickets)), 10)
    await lane.stop()
    await asyncio.sleep(0)
    return world, list(outcomes), stopped


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=specs, cap=st.integers(1, 5))
def test_random_workloads_keep_every_guarantee(calls: list[_Spec], cap: int) -> None:
    world, outcomes, _ = asyncio.run(_scenario(calls, cap, stop_after=None))
    assert world.violations == []  # an exclusive call never overlaps anything
    assert world.peak <= cap  # in flight never exceeds the cap
    assert world.starts == list(range(len(calls)))  # starts are FIFO
    assert world.commit_order == list(range(len(calls)))  # commit order = submission order
    assert world.answered == dict.fromkeys(range(len(calls)), 1)  # every ticket answered once
    for i, (spec, outcome) in enumerate(zip(calls, outcomes, strict=True)):
        if spec.fails:  # a failure is this call's own outcome and nobody else's
            assert outcome.error == {"tool": "safe" if spec.safe else "unsafe",
                                     "message": f"call {i} failed"}  # fmt: skip
        else:
            assert outcome == Outcome(value=i)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=specs, cap=st.integers(1, 5), stop_after=st.integers(0, 40))
def test_stop_at_a_random_moment_still_answers_everyone(
    calls: list[_Spec], cap: int, stop_after: int
) -> None:
    world, outcomes, _ = asyncio.run(_scenario(calls, cap, stop_after=stop_after))
    assert world.violations == []
    assert world.peak <= cap
    assert len(outcomes) == len(calls)
    in_lane = sorted(world.answered)
    assert world.commit_order == in_lane  # answers still come in submission order
    assert all(count == 1 for count in world.answered.values())
    gone = "code run is over; scheduler is gone"
    abandoned = "code run is over; tool call abandoned"
    for i, (spec, outcome) in enumerate(zip(calls, outcomes, strict=True)):
        if outcome.error is None:
            assert outcome.value == i and not spec.fails
        elif outcome.error["message"] in (gone, abandoned):
            assert i not in world.starts or outcome.error["message"] == abandoned
        else:
            assert spec.fails and outcome.error["message"] == f"call {i} failed"
