"""The durable batch: the scheduling rule driven inside a Temporal workflow.

Why this works: [`SchedulingRule`][toolnexus.scheduling.SchedulingRule] is a pure state machine
(no I/O, no clock, no randomness). Its inputs here are the batch (the workflow's input), each
call's class (an activity's result) and which activities finished (history events), all of them
recorded, so every decision it makes replays identically. The cap, the barrier of an unsafe call
and the per-resource order therefore hold for the run as a whole, whichever workers run the
activities: only this workflow decides what starts.

Each call is one activity whose id is ``"<position>:<model call id>"``. A replay that would
schedule a different call at a position (the batch or the code changed under a running
workflow) produces a different activity id, and Temporal fails the replay as nondeterministic
instead of handing one call another's result.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, TimeoutError

with workflow.unsafe.imports_passed_through():
    from toolnexus.scheduling import SchedulingRule
    from toolnexus.temporal._activities import (
        CALL_TOOL,
        CLASSIFY,
        MODEL_TURN,
        OPENING,
        RESULTS,
    )
    from toolnexus.tools import Resources

__all__ = [
    "BATCH_WORKFLOW",
    "LOST",
    "LOST_AGAIN",
    "RUN_WORKFLOW",
    "BatchWorkflow",
    "RunWorkflow",
]

BATCH_WORKFLOW = "toolnexus.batch"
RUN_WORKFLOW = "toolnexus.run"


async def _quick(activity: str, arg: Any, activity_id: str) -> Any:
    """A bookkeeping activity (classify, build messages): a pure function of its input, so
    it may be repeated; it is still recorded, so a replay uses the recorded answer."""
    return await workflow.execute_activity(
        activity,
        arg,
        activity_id=activity_id,
        start_to_close_timeout=timedelta(seconds=60),
        retry_policy=RetryPolicy(maximum_attempts=5),
    )


LOST = "the worker running this call was lost; not retried because the tool is not idempotent"
LOST_AGAIN = "the worker running this call was lost {attempts} times; not retried again"


@workflow.defn(name=BATCH_WORKFLOW)
class BatchWorkflow:
    """Runs a batch of tool calls by the scheduling rule; returns their outcomes in order."""

    @workflow.run
    async def run(self, request: dict[str, Any]) -> dict[str, Any]:
        calls: list[dict[str, Any]] = request["calls"]
        classified = await _quick(CLASSIFY, calls, "classify")
        outcomes = await run_calls(calls, classified, request["max_parallel"], request["timings"])
        return {"outcomes": outcomes}


@workflow.defn(name=RUN_WORKFLOW)
class RunWorkflow:
    """A whole agent run: each model request and each tool call is an activity.

    The loop is the client's: ask the model, run its calls by the rule, hand the outcomes back,
    until it answers without calls or ``max_turns`` is reached. The messages are built by the
    workers' client (its provider's shape), through activities, so this code stays pure.
    """

    @workflow.run
    async def run(self, request: dict[str, Any]) -> dict[str, Any]:
        messages = await _quick(OPENING, request["prompt"], "opening")
        turns: list[dict[str, Any]] = []
        for number in range(request["max_turns"]):
            try:
                reply = await workflow.execute_activity(
                    MODEL_TURN,
                    messages,
                    activity_id=f"model:{number}",
                    start_to_close_timeout=timedelta(seconds=request["model_timeout"]),
                    retry_policy=RetryPolicy(maximum_attempts=3),
                )
            except ActivityError as exc:
                cause = exc.cause if exc.cause is not None else exc
                return {"messages": messages, "turns": turns, "status": "error",
                        "error": str(cause)}  # fmt: skip
            messages.append(reply["message"])
            turn: dict[str, Any] = {"reply": reply, "outcomes": []}
            turns.append(turn)
            calls = reply["calls"]
            if not calls:
                return {"messages": messages, "turns": turns, "status": "done"}
            classified = await _quick(CLASSIFY, calls, f"classify:{number}")
            turn["outcomes"] = await run_calls(
                calls, classified, request["max_parallel"], request["timings"], f"{number}:"
            )
            answers = {"calls": calls, "outcomes": turn["outcomes"]}
            messages += await _quick(RESULTS, answers, f"results:{number}")
        return {"messages": messages, "turns": turns, "status": "incomplete"}


async def run_calls(
    calls: list[dict[str, Any]],
    classified: list[dict[str, Any]],
    max_parallel: int,
    timings: dict[str, Any],
    prefix: str = "",
) -> list[dict[str, Any]]:
    """Drive the rule over ``calls``: start activities as it says, settle them as they end.

    A call answered by its classification (unknown tool, bad arguments) takes no place in the
    lane, exactly as in process. Returns one outcome (JSON data) per call, in emitted order.
    """
    rule = SchedulingRule(max_parallel)
    outcomes: list[dict[str, Any] | None] = [None] * len(calls)
    position: dict[int, int] = {}  # lane sequence number -> index in the batch
    running: dict[int, Any] = {}  # lane sequence number -> activity handle

    def start(started: list[int]) -> None:
        for seq in started:
            index = position[seq]
            call, facts = calls[index], classified[index]
            attempts = timings["idempotent_attempts"] if facts["idempotent"] else 1
            running[seq] = workflow.start_activity(
                CALL_TOOL,
                {"call": call, "seq": seq},
                activity_id=f"{prefix}{index}:{call['id']}",
                start_to_close_timeout=timedelta(seconds=timings["start_to_close"]),
                heartbeat_timeout=timedelta(seconds=timings["heartbeat"]),
                retry_policy=RetryPolicy(maximum_attempts=attempts),
            )

    for index, facts in enumerate(classified):
        if "answer" in facts:
            outcomes[index] = facts["answer"]
            continue
        declared = facts["reads"] is not None
        resources = Resources(reads=facts["reads"], writes=facts["writes"]) if declared else None
        seq, started = rule.submit(facts["mode"], resources)
        position[seq] = index
        start(started)
    while running:
        await workflow.wait(list(running.values()), return_when=asyncio.FIRST_COMPLETED)
        for seq in sorted(s for s, handle in running.items() if handle.done()):
            handle = running.pop(seq)
            index = position[seq]
            outcomes[index] = _outcome(handle, calls[index], classified[index], timings)
            start(rule.settle(seq)[1])
    return [o for o in outcomes if o is not None]


def _outcome(
    handle: Any, call: dict[str, Any], facts: dict[str, Any], timings: dict[str, Any]
) -> dict[str, Any]:
    """The finished activity's outcome; a lost worker is a failed call, as data."""
    error = handle.exception()
    if error is None:
        result: dict[str, Any] = handle.result()
        return result
    if isinstance(error, ActivityError) and isinstance(error.cause, TimeoutError):
        if facts["idempotent"]:
            message = LOST_AGAIN.format(attempts=timings["idempotent_attempts"])
        else:
            message = LOST
    else:
        message = f"the call failed on its worker: {error}"
    return {"value": None, "error": {"tool": call["name"], "message": message}, "metadata": None}
