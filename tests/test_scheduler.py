"""The asyncio Scheduler: ordering, the pool, the barrier, failures as data, stop, audit."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import socket
import threading
from typing import Any

import pytest

from helpers import Probe, settle_loop
from toolnexus import ConfigurationError, Tool, ToolHints, ToolResult
from toolnexus.scheduling import Outcome, Scheduler, Ticket
from toolnexus.session import Session


async def _wait_all(lane: Scheduler, tickets: list[Ticket]) -> list[Outcome]:
    return [await lane.wait(t) for t in tickets]


def _record_commits(tickets: list[Ticket], into: list[int]) -> None:
    for t in tickets:
        t._future.add_done_callback(lambda _f, seq=t.seq: into.append(seq))  # type: ignore[union-attr]


# -- ordering and the pool -------------------------------------------------------------------


async def test_parallel_calls_overlap_up_to_max_parallel(probe: Probe) -> None:
    read = probe.tool("read")
    async with Scheduler(max_parallel=3) as lane:
        tickets = [lane.submit(read, {"id": f"r{i}", "gate": "go"}) for i in range(7)]
        for _ in range(5):
            await asyncio.sleep(0)
        assert probe.peak == 3
        assert probe.starts() == ["r0", "r1", "r2"]
        probe.gate("go").set()
        outcomes = await _wait_all(lane, tickets)
    assert [o.value for o in outcomes] == [f"r{i}" for i in range(7)]
    assert probe.peak == 3
    assert probe.starts() == [f"r{i}" for i in range(7)]


async def test_outcomes_commit_in_submission_order_however_the_work_raced(probe: Probe) -> None:
    read = probe.tool("read")
    committed: list[int] = []
    async with Scheduler(max_parallel=4) as lane:
        tickets = [lane.submit(read, {"id": str(i), "gate": str(i)}) for i in range(1, 5)]
        _record_commits(tickets, committed)
        for key in ["4", "2", "3"]:  # finish in reverse-ish order
            probe.gate(key).set()
            for _ in range(5):
                await asyncio.sleep(0)
        assert committed == []  # call 1 still runs: nothing after it may commit
        assert [t.done for t in tickets] == [False] * 4
        probe.gate("1").set()
        await _wait_all(lane, tickets)
    assert committed == [1, 2, 3, 4]


async def test_exclusive_call_drains_the_pool_and_runs_alone(probe: Probe) -> None:
    read, write = probe.tool("read"), probe.tool("write", read_only=False)
    async with Scheduler(max_parallel=10) as lane:
        plan = [(read, "r1"), (read, "r2"), (write, "w"), (read, "r3"), (read, "r4")]
        tickets = [lane.submit(t, {"id": key, "steps": 3}) for t, key in plan]
        await _wait_all(lane, tickets)
    assert probe.overlaps == []
    # r1 and r2 together, then w alone, then r3 and r4 together
    assert probe.log == [
        ("start", "r1"),
        ("start", "r2"),
        ("end", "r1"),
        ("end", "r2"),
        ("start", "w"),
        ("end", "w"),
        ("start", "r3"),
        ("start", "r4"),
        ("end", "r3"),
        ("end", "r4"),
    ]


async def test_exclusive_call_holds_the_barrier_through_its_commit(probe: Probe) -> None:
    write = probe.tool("write", read_only=False)
    seen: list[bool] = []
    holder: dict[str, Ticket] = {}

    async def check(args: dict[str, Any]) -> str:
        seen.append(holder["write"].done)  # the exclusive call's outcome is already delivered
        return "checked"

    after = Tool("after", execute=check, hints=ToolHints(read_only=True))
    async with Scheduler() as lane:
        holder["write"] = lane.submit(write, {"id": "w"})
        t2 = lane.submit(after, {})
        assert (await lane.wait(t2)).value == "checked"
    assert seen == [True]


async def test_exclusive_call_waits_for_earlier_calls_to_commit(probe: Probe) -> None:
    read, write = probe.tool("read"), probe.tool("write", read_only=False)
    async with Scheduler() as lane:
        t1 = lane.submit(read, {"id": "slow", "gate": "slow"})
        t2 = lane.submit(read, {"id": "fast"})
        t3 = lane.submit(write, {"id": "w"})
        for _ in range(10):
            await asyncio.sleep(0)
        assert probe.starts() == ["slow", "fast"]  # fast finished, but w still waits for slow
        probe.gate("slow").set()
        await _wait_all(lane, [t1, t2, t3])
    assert probe.starts() == ["slow", "fast", "w"]
    assert probe.overlaps == []


async def test_max_parallel_one_runs_everything_serially(probe: Probe) -> None:
    read = probe.tool("read")
    async with Scheduler(max_parallel=1) as lane:
        await _wait_all(lane, [lane.submit(read, {"id": str(i), "steps": 2}) for i in range(5)])
    assert probe.peak == 1


async def test_calls_submitted_while_others_run_join_the_same_lane(probe: Probe) -> None:
    """Code Mode shape: sub-calls arrive one at a time while earlier ones are in flight."""
    read = probe.tool("read")
    async with Scheduler(max_parallel=2) as lane:
        first = lane.submit(read, {"id": "a", "gate": "a"})
        await asyncio.sleep(0)
        second = lane.submit(read, {"id": "b"})
        third = lane.submit(read, {"id": "c"})
        for _ in range(10):
            await asyncio.sleep(0)
        # b and c ran to completion while a was still in flight, but commit only after a
        assert probe.log[1:] == [("start", "b"), ("end", "b"), ("start", "c"), ("end", "c")]
        assert not (first.done or second.done or third.done)
        probe.gate("a").set()
        outcomes = await _wait_all(lane, [first, second, third])
        assert [o.value for o in outcomes] == ["a", "b", "c"]
    assert probe.peak == 2


async def test_many_calls_through_few_workers_keep_order_and_cap(probe: Probe) -> None:
    read = probe.tool("read")
    async with Scheduler(max_parallel=4) as lane:
        tickets = [lane.submit(read, {"id": str(i), "steps": i % 3}) for i in range(200)]
        outcomes = await _wait_all(lane, tickets)
    assert [o.value for o in outcomes] == [str(i) for i in range(200)]
    assert probe.peak == 4


async def test_calls_that_never_suspend_take_no_loop_turn_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A worker used to yield to the loop before each call it took over (so that calls began in
    # order): a loop turn per call. Started calls now wait in one queue and are taken in order,
    # so a worker runs them back to back, yielding only every YIELD_EVERY calls.
    began: list[int] = []

    async def instant(args: dict[str, Any]) -> int:
        began.append(args["i"])
        return int(args["i"])

    noop = Tool("noop", execute=instant, hints=ToolHints(read_only=True))
    yields = 0
    sleep = asyncio.sleep

    async def counting_sleep(delay: float, result: Any = None) -> Any:
        nonlocal yields
        yields += 1
        return await sleep(delay, result)

    monkeypatch.setattr(asyncio, "sleep", counting_sleep)
    async with Scheduler(max_parallel=10) as lane:
        tickets = [lane.submit(noop, {"i": i}) for i in range(200)]
        outcomes = await _wait_all(lane, tickets)
    assert [o.value for o in outcomes] == list(range(200))
    assert began == list(range(200))  # calls still begin in submission order
    assert yields <= 200 // 8, yields  # was about one per call


async def test_call_and_dispatch_fun_route_through_the_lane(probe: Probe) -> None:
    read = probe.tool("read")
    async with Scheduler(max_parallel=2) as lane:
        dispatch = lane.dispatch_fun()
        results = await asyncio.gather(*(dispatch(read, {"id": str(i)}, None) for i in range(5)))
        assert [r.value for r in results] == [str(i) for i in range(5)]
        assert (await lane.call(read, {"id": "x"})).value == "x"
    assert probe.peak == 2
    assert [data["seq"] for _, data in lane.logged_events()] == [1, 2, 3, 4, 5, 6]


async def test_a_call_that_may_start_at_once_runs_in_the_awaiting_task_without_a_loop_turn() -> (
    None
):
    """``call_in_task`` (what ``dispatch_fun`` is): a call that never suspends, on a lane with
    nothing waiting to begin, commits inside the caller's own step: no worker task, no
    hand-back through the loop. It is still audited and timed like any other call."""
    session = Session()
    ran_in: list[asyncio.Task[Any] | None] = []

    async def execute(args: dict[str, Any]) -> int:
        ran_in.append(asyncio.current_task())
        return int(args["n"]) * 2

    double = Tool("double", execute=execute)
    async with Scheduler(max_parallel=2, session=session, call_id="c") as lane:
        for n in range(3):
            step = lane.dispatch_fun()(double, {"n": n}, None)
            with pytest.raises(StopIteration) as done:
                step.send(None)  # it never yields: the call ran and committed right here
            assert done.value.value == Outcome(value=2 * n)
    assert ran_in == [asyncio.current_task()] * 3
    kinds = [kind for kind, _ in lane.logged_events()]
    assert kinds == ["tool_call", "call_timing"] * 3
    assert [data["seq"] for _, data in lane.logged_events()] == [1, 1, 2, 2, 3, 3]


async def test_a_call_run_in_its_task_looks_up_nothing_it_has_and_awaits_no_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A call that commits in the caller's step returns its outcome without a `wait`
    coroutine, and the caller's task is looked up on the lane's loop (``current_task()``
    without it looks the running loop up again: a ``getpid()`` system call per call)."""
    looked_up: list[object] = []
    current_task = asyncio.current_task

    def counted(loop: Any = None) -> Any:
        looked_up.append(loop)
        return current_task(loop)

    monkeypatch.setattr(asyncio, "current_task", counted)
    waits: list[int] = []
    wait = Scheduler.wait

    async def counted_wait(self: Scheduler, ticket: Any, *args: Any) -> Any:
        waits.append(1)
        return await wait(self, ticket, *args)

    monkeypatch.setattr(Scheduler, "wait", counted_wait)

    async def execute(args: dict[str, Any]) -> int:
        return 1

    one = Tool("one", execute=execute)
    async with Scheduler() as lane:
        for _ in range(3):
            assert await lane.call_in_task(one, {}) == Outcome(value=1)
        assert looked_up == [asyncio.get_running_loop()] * 3
        assert waits == []


async def test_calls_run_in_their_tasks_keep_the_cap_the_start_order_and_the_commit_order(
    probe: Probe,
) -> None:
    """Each caller runs its own call while the rule lets it start: at most ``max_parallel``
    at once, the rest begin (in a worker) in submission order as places free up, and every
    outcome is delivered in submission order however the work raced."""
    read = probe.tool("read")
    returned: list[str] = []

    async def one(key: str) -> None:
        outcome = await lane.call_in_task(read, {"id": key, "gate": key})
        returned.append(str(outcome.value))

    async with Scheduler(max_parallel=2) as lane:
        tasks = [asyncio.create_task(one(str(i))) for i in range(5)]
        await settle_loop()
        assert probe.starts() == ["0", "1"] and probe.peak == 2  # the cap, in order
        for key in ["1", "3", "2"]:  # later calls finish first
            probe.gate(key).set()
            await settle_loop()
        assert returned == []  # call 0 still runs: nothing after it may be delivered
        assert probe.peak == 2
        for key in ["0", "4"]:
            probe.gate(key).set()
        await asyncio.gather(*tasks)
    assert returned == ["0", "1", "2", "3", "4"]
    assert probe.starts() == ["0", "1", "2", "3", "4"]
    assert probe.peak == 2


async def test_cancelling_the_task_of_a_call_run_in_it_abandons_the_call(probe: Probe) -> None:
    """A call run in its caller's task ends with that task: it is answered abandoned, and the
    lane carries on with the calls after it."""
    read = probe.tool("read")
    async with Scheduler(max_parallel=1) as lane:
        first = asyncio.create_task(lane.call_in_task(read, {"id": "a", "gate": "never"}))
        await settle_loop()
        second = lane.submit(read, {"id": "b"})
        assert probe.starts() == ["a"]
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        assert (await lane.wait(second)).value == "b"
    events = [data for kind, data in lane.logged_events() if kind == "tool_call"]
    assert [data["seq"] for data in events] == [1, 2]
    assert probe.log == [("start", "a"), ("end", "a"), ("start", "b"), ("end", "b")]


async def test_stop_cancels_a_call_running_in_its_callers_task(probe: Probe) -> None:
    read = probe.tool("read")
    lane = Scheduler()
    caller = asyncio.create_task(lane.call_in_task(read, {"id": "a", "gate": "never"}))
    await settle_loop()
    assert probe.active == {"a"}
    await lane.stop()
    assert probe.active == set()  # cancelled, and stop() waited for it to unwind
    assert caller.cancelled()


# -- the dispatch seam and failures as data --------------------------------------------------


def _dispatching(result: Any) -> Any:
    async def dispatch(tool: Tool, args: dict[str, Any], run_ctx: Any) -> Any:
        if isinstance(result, BaseException):
            raise result
        return result

    return dispatch


def _noop_tool(name: str = "t") -> Tool:
    async def run(args: dict[str, Any]) -> None:
        return None

    return Tool(name, execute=run)


@pytest.mark.parametrize(
    ("returned", "expected"),
    [
        (42, Outcome(value=42)),
        ({"a": [1]}, Outcome(value={"a": [1]})),
        (ToolResult("fine"), Outcome(value="fine")),
        (ToolResult("disk full", is_error=True), Outcome(error={"tool": "t", "message": "disk full"})),
        (ToolResult({"code": 7}, is_error=True), Outcome(error={"tool": "t", "message": '{"code": 7}'})),
        (Outcome(value="as is"), Outcome(value="as is")),
        # an error outcome keeps its message, with the tool name re-stamped from the call
        (Outcome(error={"tool": "other", "message": "nope"}), Outcome(error={"tool": "t", "message": "nope"})),
        (Outcome(error={"message": "x", "extra": "dropped"}), Outcome(error={"tool": "t", "message": "x"})),
        # malformed error outcomes become the generic failure
        (Outcome(error={"tool": "t"}), Outcome(error={"tool": "t", "message": "tool call failed"})),
        (Outcome(error="boom"), Outcome(error={"tool": "t", "message": "tool call failed"})),  # type: ignore[arg-type]
        (Outcome(error={"message": 5}), Outcome(error={"tool": "t", "message": "tool call failed"})),  # type: ignore[dict-item]
        (Outcome(error={"message": ""}), Outcome(error={"tool": "t", "message": "tool call failed"})),
    ],
)  # fmt: skip
async def test_dispatch_results_are_normalised(returned: Any, expected: Outcome) -> None:
    async with Scheduler(_dispatching(returned)) as lane:
        assert await lane.call(_noop_tool(), {}) == expected


class _Detailed(Exception):
    def __init__(self) -> None:
        super().__init__("the visible message")
        self.secret = "attribute detail"


async def test_a_raised_exception_becomes_exactly_two_strings(
    caplog: pytest.LogCaptureFixture,
) -> None:
    try:
        raise KeyError("cause detail")
    except KeyError as cause:
        error = _Detailed()
        error.__cause__ = cause
    with caplog.at_level(logging.DEBUG, logger="toolnexus.scheduling"):
        async with Scheduler(_dispatching(error)) as lane:
            outcome = await lane.call(_noop_tool("boom"), {})
    assert outcome == Outcome(error={"tool": "boom", "message": "the visible message"})
    assert [r.levelname for r in caplog.records] == ["DEBUG"]  # ordinary: not a warning
    assert set(outcome.error or {}) == {"tool", "message"}
    assert all(type(v) is str for v in (outcome.error or {}).values())
    for leaked in ("Traceback", "_Detailed", "cause detail", "attribute detail"):
        assert leaked not in str(outcome)
    assert "_Detailed" in caplog.text  # the operator's log gets the detail (at DEBUG)


@pytest.mark.parametrize("exc", [RuntimeError(), ValueError(""), TimeoutError()])
async def test_an_empty_exception_message_becomes_generic(exc: Exception) -> None:
    async with Scheduler(_dispatching(exc)) as lane:
        assert (await lane.call(_noop_tool(), {})).error == {
            "tool": "t",
            "message": "tool call failed",
        }


async def test_a_broken_str_still_yields_an_outcome() -> None:
    class Broken(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no str for you")

    async with Scheduler(_dispatching(Broken())) as lane:
        assert (await lane.call(_noop_tool(), {})).error == {
            "tool": "t",
            "message": "tool call failed",
        }


async def test_long_messages_are_clamped() -> None:
    async with Scheduler(_dispatching(RuntimeError("x" * 5000))) as lane:
        message = (await lane.call(_noop_tool(), {})).error["message"]  # type: ignore[index]
    assert message == "x" * 2000 + "… (truncated)"
    async with Scheduler(_dispatching(RuntimeError("y" * 2000))) as lane:
        assert (await lane.call(_noop_tool(), {})).error["message"] == "y" * 2000  # type: ignore[index]


async def test_sync_dispatch_values_and_raises_are_accepted() -> None:
    def sync_value(tool: Tool, args: dict[str, Any], run_ctx: Any) -> int:
        return 7

    def sync_raise(tool: Tool, args: dict[str, Any], run_ctx: Any) -> int:
        raise OSError("sync boom")

    async with Scheduler(sync_value) as lane:
        assert (await lane.call(_noop_tool(), {})).value == 7
    async with Scheduler(sync_raise) as lane:
        assert (await lane.call(_noop_tool(), {})).error["message"] == "sync boom"  # type: ignore[index]


async def test_a_cancelled_call_does_not_complete_and_the_lane_carries_on(
    probe: Probe,
) -> None:
    async def cancelled(args: dict[str, Any]) -> None:
        raise asyncio.CancelledError

    gone = Tool("gone", execute=cancelled, hints=ToolHints(read_only=True))
    read = probe.tool("read")
    async with Scheduler() as lane:
        tickets = [lane.submit(gone, {}), lane.submit(read, {"id": "after"})]
        outcomes = await _wait_all(lane, tickets)
        assert outcomes[0].error == {"tool": "gone", "message": "tool call did not complete"}
        assert outcomes[1].value == "after"
        assert (await lane.call(read, {"id": "later"})).value == "later"


async def test_a_worker_cancelled_from_outside_answers_its_call(probe: Probe) -> None:
    read = probe.tool("read")
    async with Scheduler() as lane:
        ticket = lane.submit(read, {"id": "a", "gate": "a"})
        (worker,) = lane._workers
        worker.cancel()
        outcome = await lane.wait(ticket)
        assert outcome.error == {"tool": "read", "message": "tool call did not complete"}
        assert (await lane.call(read, {"id": "b"})).value == "b"


async def test_default_dispatch_validates_then_executes() -> None:
    ran: list[dict[str, Any]] = []

    async def execute(args: dict[str, Any]) -> str:
        ran.append(args)
        return "done"

    t = Tool(
        "strict",
        input_schema={
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "required": ["n"],
        },
        execute=execute,
    )
    async with Scheduler() as lane:
        bad = await lane.call(t, {"n": "five"})
        good = await lane.call(t, {"n": 5})
    assert bad.error is not None and "n: 'five' is not of type 'integer'" in bad.error["message"]
    assert good.value == "done"
    assert ran == [{"n": 5}]


# -- submit and wait never raise -------------------------------------------------------------


async def test_submit_answers_bad_submissions_at_once() -> None:
    lane = Scheduler()
    not_a_tool = lane.submit("read_file", {})  # type: ignore[arg-type]
    bad_args = lane.submit(_noop_tool(), ["not", "an", "object"])
    assert not_a_tool.done and bad_args.done
    assert (await lane.wait(not_a_tool)).error == {
        "tool": "'read_file'",
        "message": "'read_file' is not a toolnexus Tool",
    }
    assert (await lane.wait(bad_args)).error == {
        "tool": "t",
        "message": "arguments must be an object, got list",
    }
    assert (await lane.call(_noop_tool(), None)).ok  # None means no arguments
    assert lane.logged_events()[0][1]["arguments"] == {}
    await lane.stop()


def test_submit_outside_an_event_loop_is_answered_not_raised() -> None:
    lane = Scheduler()
    ticket = lane.submit(_noop_tool(), {})
    outcome = asyncio.run(lane.wait(ticket))
    assert outcome.error is not None
    assert "running event loop" in outcome.error["message"]


async def test_wait_refuses_foreign_tickets_without_raising() -> None:
    a, b = Scheduler(), Scheduler()
    ticket = a.submit(_noop_tool("mine"), {})
    foreign = await b.wait(ticket)
    assert foreign.error == {
        "tool": "mine",
        "message": "this ticket was not issued by this scheduler",
    }
    junk = await b.wait("ticket")  # type: ignore[arg-type]
    assert junk.error == {
        "tool": "'ticket'",
        "message": "this ticket was not issued by this scheduler",
    }
    assert (await a.wait(ticket)).ok
    await a.stop()
    await b.stop()


async def test_wait_with_timeout_gives_up_but_the_call_carries_on(probe: Probe) -> None:
    read = probe.tool("read")
    async with Scheduler() as lane:
        ticket = lane.submit(read, {"id": "slow", "gate": "slow"})
        early = await lane.wait(ticket, timeout=0)
        assert early.error is not None
        assert early.error["message"] == "no outcome within 0 s; the call may still be running"
        probe.gate("slow").set()
        assert (await lane.wait(ticket, timeout=10)).value == "slow"
        assert (await lane.wait(ticket)).value == "slow"  # answered again, same outcome


async def test_cancelling_a_waiter_does_not_cancel_the_call(probe: Probe) -> None:
    read = probe.tool("read")
    async with Scheduler() as lane:
        ticket = lane.submit(read, {"id": "a", "gate": "a"})
        waiter = asyncio.create_task(lane.wait(ticket))
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        probe.gate("a").set()
        assert (await lane.wait(ticket)).value == "a"


async def test_cancelling_a_call_s_waiter_does_not_cancel_the_call(probe: Probe) -> None:
    read = probe.tool("read")
    async with Scheduler() as lane:
        waiter = asyncio.create_task(lane.call(read, {"id": "a", "gate": "a"}))
        await settle_loop()
        assert probe.starts() == ["a"]
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        await settle_loop()
        assert ("end", "a") not in probe.log  # the tool is still running
        probe.gate("a").set()
        await settle_loop()
        assert probe.log[-1] == ("end", "a")
        assert (await lane.call(read, {"id": "b"})).value == "b"  # the lane carries on


async def _turns_until(awaitable: Any) -> int:
    """Loop turns between awaiting ``awaitable`` and its result."""
    turns = 0
    task = asyncio.ensure_future(awaitable)
    while not task.done():
        await asyncio.sleep(0)
        turns += 1
    return turns


async def test_call_awaits_its_own_future_without_a_shield() -> None:
    """``call`` is the ticket's only waiter, so it awaits the lane's future itself: one loop
    turn fewer per call than `wait`, which shields the future for its other waiters."""
    tool = _noop_tool()
    async with Scheduler() as lane:

        async def waited() -> Outcome:
            return await lane.wait(lane.submit(tool, {}))

        await lane.call(tool, {})  # warm
        assert await _turns_until(lane.call(tool, {})) == await _turns_until(waited()) - 1


# -- stop ------------------------------------------------------------------------------------


async def test_stop_answers_everyone_in_order_and_keeps_settled_outcomes(probe: Probe) -> None:
    read, write = probe.tool("read"), probe.tool("write", read_only=False)
    lane = Scheduler(max_parallel=2)
    t1 = lane.submit(read, {"id": "1", "gate": "1"})  # running
    t2 = lane.submit(read, {"id": "2"})  # settles, but waits for 1 to commit
    t3 = lane.submit(write, {"id": "3"})  # queued behind the barrier
    for _ in range(10):
        await asyncio.sleep(0)
    committed: list[int] = []
    _record_commits([t1, t2, t3], committed)
    await lane.stop()
    outcomes = await _wait_all(lane, [t1, t2, t3])
    abandoned = "code run is over; tool call abandoned"
    assert outcomes == [
        Outcome(error={"tool": "read", "message": abandoned}),
        Outcome(value="2"),
        Outcome(error={"tool": "write", "message": abandoned}),
    ]
    await asyncio.sleep(0)
    assert committed == [1, 2, 3]
    assert probe.active == set()  # the running call was cancelled
    assert probe.starts() == ["1", "2"]  # the queued one never started
    assert lane.stopped


async def test_stop_is_safe_twice_and_later_submissions_are_answered(probe: Probe) -> None:
    lane = Scheduler()
    await lane.stop()
    await lane.stop()
    outcome = await lane.call(probe.tool("read"), {"id": "x"})
    assert outcome.error == {"tool": "read", "message": "code run is over; scheduler is gone"}
    assert probe.log == []


async def test_wait_never_hangs_on_a_stopped_lane(probe: Probe) -> None:
    lane = Scheduler()
    ticket = lane.submit(probe.tool("read"), {"id": "a", "gate": "never"})
    waiter = asyncio.create_task(lane.wait(ticket))
    await asyncio.sleep(0)
    await lane.stop()
    assert (await waiter).error is not None


async def test_leaving_the_context_manager_stops_the_lane(probe: Probe) -> None:
    async with Scheduler() as lane:
        ticket = lane.submit(probe.tool("read"), {"id": "a", "gate": "never"})
    assert lane.stopped
    assert (await lane.wait(ticket)).error is not None


async def test_stop_waits_only_a_grace_period_for_tools_ignoring_cancellation(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import toolnexus.scheduling._scheduler as module

    monkeypatch.setattr(module, "STOP_GRACE_SECONDS", 0.01)
    release = asyncio.Event()

    async def stubborn(args: dict[str, Any]) -> None:
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                continue

    lane = Scheduler()
    ticket = lane.submit(Tool("stubborn", execute=stubborn), {})
    await asyncio.sleep(0)
    with caplog.at_level(logging.WARNING, logger="toolnexus.scheduling"):
        await lane.stop()
    assert "ignored cancellation" in caplog.text
    assert (await lane.wait(ticket)).error is not None
    release.set()
    await asyncio.sleep(0.01)


# -- snapshots and the audit trail -----------------------------------------------------------


async def test_a_tool_mutating_its_arguments_cannot_change_the_audit_record() -> None:
    received: list[dict[str, Any]] = []

    async def mutate(args: dict[str, Any]) -> None:
        received.append(args)
        args["path"] = "/etc/passwd"
        args["nested"]["x"].append(99)

    raw = {"path": "notes.txt", "nested": {"x": [1]}}
    async with Scheduler() as lane:
        await lane.call(Tool("mutate", execute=mutate), raw)
    ((_, data),) = lane.logged_events()
    assert data["arguments"] == {"path": "notes.txt", "nested": {"x": [1]}}
    assert raw == {"path": "notes.txt", "nested": {"x": [1]}}  # the caller's dict too
    assert received[0] is not raw


async def test_live_objects_reach_neither_the_tool_nor_the_log() -> None:
    received: list[dict[str, Any]] = []

    async def look(args: dict[str, Any]) -> None:
        received.append(args)

    sock = socket.socket()
    lock = threading.Lock()
    try:
        async with Scheduler() as lane:
            await lane.call(
                Tool("look", execute=look),
                {"sock": sock, "fn": print, "lock": lock, "t": (1, 2), 3: "int key"},
            )
    finally:
        sock.close()
    (args,) = received
    ((_, data),) = lane.logged_events()
    for snap in (args, data["arguments"]):
        assert snap["sock"].startswith("<socket.socket")
        assert snap["fn"] == repr(print)
        assert snap["lock"].startswith("<unlocked _thread.lock")
        assert snap["t"] == [1, 2]
        assert snap["3"] == "int key"
    assert args is not data["arguments"]


async def test_one_tool_call_event_per_started_call_in_submission_order(probe: Probe) -> None:
    read, write = probe.tool("read"), probe.tool("write", read_only=False)
    session = Session()
    session.append("user_message", {"content": "hi"})
    async with Scheduler(session=session, max_parallel=2, call_id="call_9") as lane:
        tickets = [
            lane.submit(read, {"id": "a"}),
            lane.submit(write, {"id": "b"}),
            lane.submit(read, {"id": "c", "gate": "never"}),
            lane.submit(read, {"id": "d", "gate": "never"}),
            lane.submit(read, {"id": "e"}),  # never starts: the pool is full when stop() comes
        ]
        await _wait_all(lane, tickets[:2])
        for _ in range(5):
            await asyncio.sleep(0)
    # (each call's call_timing event is checked in tests/test_view_recording.py)
    # Given the outer call's id, ids follow docs/scheduling.md ("<call_id>:code:<seq>"); the
    # source stays the lane's owner's.
    assert [e for e in lane.logged_events() if e[0] == "tool_call"] == [
        ("tool_call", {"id": "call_9:code:1", "name": "read", "arguments": {"id": "a"},
                       "mode": "parallel", "seq": 1, "source": "scheduler"}),
        ("tool_call", {"id": "call_9:code:2", "name": "write", "arguments": {"id": "b"},
                       "mode": "exclusive", "seq": 2, "source": "scheduler",
                       "waited_for": {"seq": 1, "resource": "*"}}),
        ("tool_call", {"id": "call_9:code:3", "name": "read",
                       "arguments": {"id": "c", "gate": "never"},
                       "mode": "parallel", "seq": 3, "source": "scheduler",
                       "waited_for": {"seq": 2, "resource": "*"}}),
        ("tool_call", {"id": "call_9:code:4", "name": "read",
                       "arguments": {"id": "d", "gate": "never"},
                       "mode": "parallel", "seq": 4, "source": "scheduler",
                       "waited_for": {"seq": 2, "resource": "*"}}),
    ]  # fmt: skip
    assert lane.session is session
    kinds = [e.type for e in session.events if e.type != "call_timing"]
    assert kinds == ["user_message"] + ["tool_call"] * 4
    assert session.messages() == [{"role": "user", "content": "hi"}]  # history untouched


async def test_event_ids_without_a_call_id_and_audit_off(probe: Probe) -> None:
    read = probe.tool("read")
    async with Scheduler() as lane:
        await lane.call(read, {"id": "a"})
    assert lane.logged_events()[0][1]["id"] == "call:1"
    assert isinstance(lane.session, Session)
    async with Scheduler(audit=False) as quiet:
        await quiet.call(read, {"id": "a"})
    assert quiet.logged_events() == [] and len(quiet.session) == 0


# -- context and configuration ---------------------------------------------------------------

REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("REQUEST_ID", default="unset")


async def test_creator_contextvars_are_visible_and_calls_do_not_leak_into_each_other() -> None:
    seen: list[str] = []

    async def look(args: dict[str, Any]) -> None:
        seen.append(REQUEST_ID.get())
        REQUEST_ID.set(f"changed by {args['i']}")
        await asyncio.sleep(0)

    def sync_look(args: dict[str, Any]) -> None:
        seen.append(REQUEST_ID.get())

    token = REQUEST_ID.set("req-42")
    lane = Scheduler(max_parallel=1)  # one worker runs every call in turn
    REQUEST_ID.reset(token)
    async_tool = Tool("look", execute=look, hints=ToolHints(read_only=True))
    sync_tool = Tool("sync_look", execute=sync_look, hints=ToolHints(read_only=True))
    tickets = [lane.submit(async_tool, {"i": i}) for i in range(3)]
    tickets.append(lane.submit(sync_tool, {}))
    await _wait_all(lane, tickets)
    await lane.stop()
    assert seen == ["req-42"] * 4
    assert REQUEST_ID.get() == "unset"


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"max_parallel": 0}, "max_parallel must be a positive int, got 0"),
        ({"max_parallel": -3}, "max_parallel must be a positive int"),
        ({"max_parallel": True}, "max_parallel must be a positive int"),
        ({"max_parallel": 2.5}, "max_parallel must be a positive int"),
        ({"dispatch": "not callable"}, "dispatch must be an async callable"),
        ({"session": {"events": []}}, "session must be a toolnexus.session.Session, got dict"),
        ({"call_id": 12}, "call_id must be a string"),
    ],
)
def test_misconfiguration_is_refused_before_anything_starts(
    options: dict[str, Any], match: str
) -> None:
    with pytest.raises(ConfigurationError, match=match) as info:
        Scheduler(**options)
    assert isinstance(info.value, ValueError)


def test_repr_and_properties() -> None:
    lane = Scheduler(max_parallel=3)
    assert lane.max_parallel == 3
    assert repr(lane) == "<Scheduler max_parallel=3 0 outstanding>"
    asyncio.run(lane.stop())
    assert repr(lane) == "<Scheduler max_parallel=3 stopped>"
