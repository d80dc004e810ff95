"""Durable work longer than one workflow history: batches, programs and agent runs continue as
new before their history nears Temporal's limits, and nothing about the rule, the outcomes or
the session changes across the boundary.

Against a real Temporal dev server. ``continue_after`` (events per run) is set low in most
tests so that a few dozen calls cross several boundaries; the long batch uses the defaults.
Durations (2 cores, shared): the 20,000-call batch (150-character results, no payload store)
2-3 minutes, in CI; the 30,000-sub-call program (2.5-4 minutes) and the 50,000-call batch (5-6.5
minutes) run with ``TOOLNEXUS_TEMPORAL_LONG=1``, to keep CI within its 20 minutes (the
600-sub-call program crossing boundaries inside and between steps runs in CI).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHistory

from fake_provider import FakeProvider, Turn
from temporal_worker import padded_line
from test_client import client_for
from test_temporal import (  # noqa: F401  (workers: a fixture)
    FAST,
    assert_completed_calls_ran_once,
    assert_unsafe_calls_ran_alone,
    intervals,
    peak,
    same_events,
    timing_facts,
    workers,
)
from toolnexus import ToolCall, ToolHints, tool
from toolnexus.codemode.runtimes import MontyRuntime
from toolnexus.temporal import file_store, replayer, run_batch, run_program, start_run, worker

pytestmark = pytest.mark.temporal


@tool(hints=ToolHints(read_only=True, idempotent=True))
async def noop(n: int) -> int:
    """Return n."""
    return n


LONG = pytest.mark.skipif(
    not os.environ.get("TOOLNEXUS_TEMPORAL_LONG"),
    reason="minutes on 2 shared cores, past CI's budget: set TOOLNEXUS_TEMPORAL_LONG=1",
)


async def runs_of(client: Client, workflow_id: str) -> list[WorkflowHistory]:
    """The histories of every run of a workflow, oldest first (following continue-as-new)."""
    histories: list[WorkflowHistory] = []
    run_id: str | None = None
    while True:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        histories.append(history)
        started = history.events[0].workflow_execution_started_event_attributes
        if not started.continued_execution_run_id:
            return histories[::-1]
        run_id = started.continued_execution_run_id


def history_bytes(history: WorkflowHistory) -> int:
    return sum(event.ByteSize() for event in history.events)


async def long_batch(client: Client, pool: Any, count: int, store: Path | None) -> None:
    """Without a store, each result is a 150-character line: 20,000 of them (3.6 MB as
    Temporal stores them) cannot travel in the workflow's answer or its carried state, and come
    back as parts read from the histories. The worker is a process of its own (``pool``),
    which coverage does not trace: traced, its tens of thousands of activities take a third
    longer, and the modules it runs are measured in process by the other tests."""
    if store:
        name, expected = "noop", list(range(count))
    else:
        name, expected = "padded", [padded_line(i) for i in range(count)]
    calls = [ToolCall(f"c{i}", name, {"n": i}) for i in range(count)]
    workflow_id = f"long-{uuid.uuid4()}"
    outcomes = await run_batch(
        client, calls, task_queue=pool.queue, max_parallel=100, workflow_id=workflow_id
    )
    assert [o.value for o in outcomes] == expected  # every outcome, in order
    runs = await runs_of(client, workflow_id)
    assert len(runs) >= 3
    assert all(len(run.events) < 12_000 for run in runs)  # far from the 51,200 cap
    assert all(history_bytes(run) < 10 * 1024 * 1024 for run in runs)
    answer = await client.get_workflow_handle(workflow_id).result()
    if not store:  # the answer held parts: the runs whose histories hold the results
        assert len(answer["runs"]) >= 2
        assert sum(isinstance(o, int) for o in answer["outcomes"]) > count // 2
    options = {"data_converter": client.data_converter} if store else {}
    for run in runs[:2]:
        await replayer(**options).replay_workflow(run)  # each run replays on its own


@pytest.mark.timeout(900)
async def test_a_batch_of_20000_calls_continues_as_new_and_returns_every_outcome(
    temporal_address: str,
    workers: Any,  # noqa: F811
) -> None:
    """No payload store, and results too many to carry or return whole: later runs carry only
    the calls not yet run, and the outcomes left in earlier runs' histories as run numbers."""
    await long_batch(await Client.connect(temporal_address), workers(1), 20_000, None)


@LONG
@pytest.mark.timeout(1800)
async def test_a_batch_of_50000_calls_with_a_payload_store(
    temporal_address: str,
    tmp_path: Path,
    workers: Any,  # noqa: F811
) -> None:
    client = await Client.connect(temporal_address, data_converter=file_store(tmp_path))
    await long_batch(client, workers(1, store=tmp_path), 50_000, tmp_path)


async def test_the_rule_holds_across_continue_as_new_boundaries(
    temporal_address: str,
    workers: Any,  # noqa: F811
) -> None:
    pool = workers(2)
    client = await Client.connect(temporal_address)
    calls: list[ToolCall] = []
    for i in range(48):
        if i % 8 == 7:
            calls.append(ToolCall(f"w{i}", "write", {"key": f"w{i}", "seconds": 0.05}))
        elif i % 3 == 0:
            file = f"f{i % 2}"
            calls.append(ToolCall(f"s{i}", "save", {"key": f"s{i}", "file": file, "seconds": 0.05}))
        else:
            calls.append(ToolCall(f"r{i}", "read", {"key": f"r{i}", "seconds": 0.05}))
    workflow_id = f"rule-{uuid.uuid4()}"
    outcomes = await asyncio.wait_for(
        run_batch(
            client,
            calls,
            task_queue=pool.queue,
            max_parallel=3,
            timings=FAST,
            workflow_id=workflow_id,
            continue_after=60,
        ),
        90,
    )
    expected = [
        {"read": "read", "write": "wrote", "save": "saved"}[c.name]
        + f" {c.id}"
        + (f" to {c.arguments['file']}" if c.name == "save" else "")  # type: ignore[index]
        for c in calls
    ]
    assert [o.value for o in outcomes] == expected
    runs = await runs_of(client, workflow_id)
    assert len(runs) >= 3  # it did cross boundaries
    scheduled = [
        event.activity_task_scheduled_event_attributes
        for run in runs
        for event in run.events
        if event.HasField("activity_task_scheduled_event_attributes")
    ]
    ids = [a.activity_id for a in scheduled if a.activity_type.name == "toolnexus.call_tool"]
    assert ids == [f"{i}:{c.id}" for i, c in enumerate(calls)]  # unique across runs, in order
    for run in runs:
        await replayer().replay_workflow(run)  # each run replays on its own
    effects = pool.effects()
    assert_completed_calls_ran_once(effects)
    spans = intervals(effects, {})
    assert len(spans) == len(calls)
    assert peak(spans) <= 3
    assert_unsafe_calls_ran_alone(spans)
    by_call = {s["call"]: s for s in spans}
    saves = [c.id for c in calls if c.name == "save"]
    for file in ("f0", "f1"):
        mine = [s for s in saves if calls[int(s[1:])].arguments["file"] == file]  # type: ignore[index]
        for first, second in itertools.pairwise(mine):
            assert by_call[first]["end"] <= by_call[second]["start"]  # per-resource order

    small = f"small-{uuid.uuid4()}"  # the same batch under the defaults: one run, as before
    again = await run_batch(client, calls, task_queue=pool.queue, max_parallel=3, workflow_id=small)
    assert [o.value for o in again] == expected
    assert len(await runs_of(client, small)) == 1


async def test_workers_killed_at_a_boundary_lose_and_duplicate_nothing(
    temporal_address: str,
    workers: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    first = workers(2)
    client = await Client.connect(temporal_address)
    calls = [ToolCall(f"r{i}", "read", {"key": f"r{i}", "seconds": 0.05}) for i in range(30)]
    calls += [ToolCall(f"w{i}", "write", {"key": f"w{i}", "seconds": 0.05}) for i in range(6)]
    workflow_id = f"boundary-{uuid.uuid4()}"
    batch = asyncio.ensure_future(
        run_batch(
            client,
            calls,
            task_queue=first.queue,
            max_parallel=4,
            timings=FAST,
            workflow_id=workflow_id,
            continue_after=50,
        )
    )
    handle = client.get_workflow_handle(workflow_id)
    deadline = time.monotonic() + 30
    opening: str | None = None
    while time.monotonic() < deadline:  # the moment a second run exists: the boundary
        try:
            run_id = (await handle.describe()).run_id
        except Exception:  # not started yet
            await asyncio.sleep(0.01)
            continue
        opening = opening or run_id
        if run_id != opening:
            break
        await asyncio.sleep(0.005)
    else:
        pytest.fail("the batch never continued as new")
    killed = {pid: first.kill(pid) for pid in (p.pid for p in first.processes)}
    second = workers(2, queue=first.queue, log=first.log)  # fresh workers take over
    outcomes = await asyncio.wait_for(batch, 90)
    assert len(outcomes) == len(calls)
    effects = second.effects()
    assert_completed_calls_ran_once(effects)  # nothing that finished ran again
    for call, outcome in zip(calls, outcomes, strict=True):
        ends = [x for x in effects if x["call"] == call.id and x["event"] == "end"]
        if outcome.ok:  # lost nothing: every result returned is the call's own, once
            assert outcome.value == f"{'read' if call.name == 'read' else 'wrote'} {call.id}"
            assert len(ends) == 1
        else:  # a write whose worker died: failed as data, never run twice
            assert call.name == "write" and "lost" in outcome.error["message"]  # type: ignore[index]
            assert len([x for x in effects if x["call"] == call.id]) == 1
    assert_unsafe_calls_ran_alone(intervals(effects, killed))


async def durable_program(
    client: Client, rounds: int, per_round: int, continue_after: int | None = None
) -> None:
    """A program of ``rounds`` fan-outs of ``per_round`` sub-calls; checks its result and that
    it crossed boundaries."""
    program = f"""
import asyncio
total = 0
for round in range({rounds}):
    got = await asyncio.gather(*[tools.noop({{"n": round * {per_round} + i}}) for i in range({per_round})])
    total = total + sum(got)
total
"""
    queue = f"q-{uuid.uuid4()}"
    workflow_id = f"program-{uuid.uuid4()}"
    runtime = MontyRuntime(max_sub_calls=rounds * per_round + 1, timeout=120)  # per step
    options = {} if continue_after is None else {"continue_after": continue_after}
    async with worker(
        client, task_queue=queue, tools=[noop], code_runtime=runtime, max_concurrent_activities=20
    ):
        output = await run_program(
            client, program, task_queue=queue, workflow_id=workflow_id, **options
        )
    assert output.get("result") == sum(range(rounds * per_round)), output.get("error")
    assert len(await runs_of(client, workflow_id)) >= 3


async def test_a_durable_program_continues_as_new_inside_and_between_steps(
    temporal_address: str, tmp_path: Path
) -> None:
    """600 sub-calls in 3 rounds, a run every ~300 events: boundaries fall inside a round's
    sub-calls (the step in progress is carried) and between steps."""
    client = await Client.connect(temporal_address)
    await durable_program(client, 3, 200, continue_after=300)


@LONG
@pytest.mark.timeout(1200)
async def test_a_durable_program_with_30000_sub_calls(
    temporal_address: str, tmp_path: Path
) -> None:
    """About 2.5-4 minutes on 2 shared cores."""
    client = await Client.connect(temporal_address, data_converter=file_store(tmp_path))
    await durable_program(client, 3, 10_000)


async def test_a_durable_agent_run_across_boundaries_equals_the_in_process_run(
    temporal_address: str, provider: FakeProvider
) -> None:
    def route(body: dict[str, Any]) -> Turn:
        answered = sum(1 for m in body["messages"] if m.get("role") == "tool")
        if answered >= 24:
            return Turn(text=f"done after {answered} results")
        turn = answered // 4
        return Turn(calls=[(f"c{turn}-{k}", "noop", {"n": turn * 4 + k}) for k in range(4)])

    provider.router = route
    client = client_for(provider, "openai")
    temporal = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4()}"
    async with worker(temporal, task_queue=queue, tools=[noop], client=client):
        handle = await start_run(
            temporal, "go", task_queue=queue, timings=FAST, continue_after=40, max_turns=20
        )
        durable = await asyncio.wait_for(handle.result(), 120)
        runs = await runs_of(temporal, handle.id)
    local = await client.run("go", tools=[noop])
    assert len(runs) >= 3  # it crossed boundaries
    assert durable.status == local.status == "done"
    assert durable.text == local.text == "done after 24 results"
    assert durable.turns == local.turns == 7
    assert durable.messages == local.messages
    assert durable.tool_calls == local.tool_calls
    assert same_events(durable.session, local.session)
    assert timing_facts(durable) == timing_facts(local)
