"""What a durable run's workflow histories hold: when each call ran, and its recorded result.

Why from the history: the server already records, for every activity, when the workflow
scheduled it, when a worker started its last attempt and when it closed, on one clock (the
server's). Reading those times after the run costs the run nothing: carrying them in each
outcome instead made every payload larger (a 20,000-call batch's carried state passed what one
payload holds). A call's class and declared resources come from the same histories: they are
the recorded answers of the classification activities. The same reading gives the caller each
activity's recorded result, from which a batch's outcomes left in the histories are read back.

What the histories cannot give: what a call waited for and when the rule got it (the workflow's
rule decides that in memory, between history events): an agent run's workflow records those for
the calls that waited, in its turns. Nor the sub-calls of a ``run_code`` program inside a
durable run (the program's own steps hold those).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from temporalio.api.common.v1 import Payloads
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client as TemporalClient

from toolnexus.scheduling import Outcome, ToolCall
from toolnexus.session import Session, events

__all__ = ["ActivityTimes", "RunHistory", "read_history"]

_CLASSIFY = re.compile(r"^(?P<prefix>(?:\d+:)?)classify:(?P<first>\d+)(?:@\d+)?$")


@dataclass
class ActivityTimes:
    """When one activity was scheduled, started (its last attempt) and closed (epoch seconds;
    0.0 for what did not happen)."""

    scheduled: float = 0.0
    started: float = 0.0
    closed: float = 0.0


@dataclass
class RunHistory:
    """What the histories of every run of one workflow say of its activities: their times and
    the results of those that completed, by activity id (unique across the runs), and the
    classification facts of each call by its place (``"<prefix><index>"``, ``prefix`` being
    ``"<turn>:"`` in an agent run and empty in a batch)."""

    activities: dict[str, ActivityTimes] = field(default_factory=dict)
    results: dict[str, Payloads] = field(default_factory=dict)
    facts: dict[str, dict[str, Any]] = field(default_factory=dict)

    def record_call(
        self,
        session: Session,
        place: str,
        call: ToolCall,
        outcome: Outcome,
        lane: int,
        wait: list[Any] | None = None,
    ) -> float | None:
        """Append the ``call_timing`` event of the call at ``place`` (``"<prefix><index>"``),
        as the in-process lane writes it; returns when the call finished, or ``None`` when the
        history has no activity for it (a call answered by its classification, a program).

        ``wait``: what the workflow recorded of a call that waited for an earlier one
        (``[index, index waited for, resource, admitted]``), which the history does not hold;
        without it the event has no ``admitted`` and no ``waited_for``."""
        times = self.activities.get(f"{place}:{call.id}")
        if times is None or not times.closed:
            return None
        facts = self.facts.get(place, {})
        started = times.started or times.closed
        # admitted: when the call entered its lane; for a call that did not wait, when its
        # activity was scheduled (the lane admits and starts it at once)
        entered = float(wait[3]) if wait is not None else (times.scheduled or started)
        finished = max(times.closed, started)
        waited_for = None if wait is None else {"seq": int(wait[1]) + 1, "resource": wait[2]}
        entry = events.call_timing(
            call.id,
            call.name,
            lane,
            int(place.rpartition(":")[2]) + 1,
            facts.get("mode"),
            (min(entered, started), started, finished),
            outcome.error is None,
            error=None if outcome.error is None else outcome.error.get("message", ""),
            resources=facts.get("resources"),
            waited_for=waited_for,
        )
        session._append_json(*entry, at=finished)
        return float(finished)


async def read_history(temporal_client: TemporalClient, workflow_id: str) -> RunHistory:
    """The `RunHistory` of a finished workflow, from the histories of all its runs (following
    continue-as-new back to the first), each fetched once."""
    times = RunHistory()
    run_id: str | None = None
    while True:
        handle = temporal_client.get_workflow_handle(workflow_id, run_id=run_id)
        history = await handle.fetch_history()
        await _read_run(temporal_client, history.events, times)
        started = history.events[0].workflow_execution_started_event_attributes
        if not started.continued_execution_run_id:
            return times
        run_id = started.continued_execution_run_id


async def _read_run(
    temporal_client: TemporalClient, events: Sequence[HistoryEvent], times: RunHistory
) -> None:
    scheduled: dict[int, str] = {}  # scheduled event id -> activity id
    for event in events:
        at = event.event_time.ToMicroseconds() / 1e6
        if event.HasField("activity_task_scheduled_event_attributes"):
            activity_id = event.activity_task_scheduled_event_attributes.activity_id
            scheduled[event.event_id] = activity_id
            times.activities[activity_id] = ActivityTimes(scheduled=at)
            continue
        if event.HasField("activity_task_started_event_attributes"):
            attributes = event.activity_task_started_event_attributes
            times.activities[scheduled[attributes.scheduled_event_id]].started = at
            continue
        closed = _closed(event)
        if closed is not None:
            activity_id = scheduled[closed]
            times.activities[activity_id].closed = at
            if event.HasField("activity_task_completed_event_attributes"):
                times.results[activity_id] = event.activity_task_completed_event_attributes.result
                await _read_facts(temporal_client, activity_id, event, times)


def _closed(event: HistoryEvent) -> int | None:
    """The scheduled event id of the activity ``event`` closes (completed, failed, timed out
    or cancelled), or ``None``."""
    if event.HasField("activity_task_completed_event_attributes"):
        return event.activity_task_completed_event_attributes.scheduled_event_id
    if event.HasField("activity_task_failed_event_attributes"):
        return event.activity_task_failed_event_attributes.scheduled_event_id
    if event.HasField("activity_task_timed_out_event_attributes"):
        return event.activity_task_timed_out_event_attributes.scheduled_event_id
    if event.HasField("activity_task_canceled_event_attributes"):
        return event.activity_task_canceled_event_attributes.scheduled_event_id
    return None


async def _read_facts(
    temporal_client: TemporalClient, activity_id: str, event: HistoryEvent, times: RunHistory
) -> None:
    """The calls' classes and resources, from a classification activity's recorded answer."""
    match = _CLASSIFY.match(activity_id)
    if match is None:
        return
    payloads = event.activity_task_completed_event_attributes.result.payloads
    [answer] = await temporal_client.data_converter.decode(payloads, [list])
    first = int(match["first"])
    for offset, facts in enumerate(answer):
        if isinstance(facts, dict) and "answer" not in facts:
            times.facts[f"{match['prefix']}{first + offset}"] = facts
