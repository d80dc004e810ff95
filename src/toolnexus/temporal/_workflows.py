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
import json
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, TimeoutError

with workflow.unsafe.imports_passed_through():
    from toolnexus.scheduling import SchedulingRule
    from toolnexus.scheduling._outcome import outcome_from_value
    from toolnexus.temporal._activities import (
        CALL_TOOL,
        CLASSIFY,
        MODEL_TURN,
        OPENING,
        PROGRAM_STEP,
        RESULTS,
    )
    from toolnexus.temporal._wire import failure_to_wire, outcome_to_wire
    from toolnexus.tools import Resources, ToolResult

__all__ = [
    "BATCH_WORKFLOW",
    "LOST",
    "LOST_AGAIN",
    "PROGRAM_WORKFLOW",
    "RUN_WORKFLOW",
    "BatchWorkflow",
    "ProgramWorkflow",
    "RunWorkflow",
]

BATCH_WORKFLOW = "toolnexus.batch"
RUN_WORKFLOW = "toolnexus.run"
PROGRAM_WORKFLOW = "toolnexus.program"


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


MAX_PROGRAM_STEPS = 1000
"""The most rounds of sub-calls a durable program may make (each re-runs it once)."""

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
                return {
                    "messages": messages,
                    "turns": turns,
                    "status": "error",
                    "error": str(cause),
                }
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


@workflow.defn(name=PROGRAM_WORKFLOW)
class ProgramWorkflow:
    """A Code Mode program whose sub-calls are activities, by the scheduling rule."""

    @workflow.run
    async def run(self, request: dict[str, Any]) -> dict[str, Any]:
        return await run_program_steps(
            request["code"],
            request["language"],
            request["call_id"],
            request["max_parallel"],
            request["timings"],
        )


async def run_program_steps(
    code: str,
    language: str,
    call_id: str,
    max_parallel: int,
    timings: dict[str, Any],
    prefix: str = "",
) -> dict[str, Any]:
    """Run a program step by step: each step (an activity, free of side effects) re-runs it
    with the outcomes recorded so far and returns the sub-calls it makes next; those run as
    activities by the rule, and their outcomes are recorded for the next step.

    A sub-call's id is ``"<call_id>:code:<n>"``, as in process. Every sub-call of a step is
    answered before the next step: the program is waiting for them, and a step cannot hand an
    outcome to a program that is not running.
    """
    recorded: list[dict[str, Any]] = []
    entries: list[dict[str, Any]] = []
    for step in range(MAX_PROGRAM_STEPS):
        request = {"code": code, "language": language, "recorded": recorded}
        result = await workflow.execute_activity(
            PROGRAM_STEP,
            request,
            activity_id=f"{prefix}step:{step}",
            start_to_close_timeout=timedelta(seconds=timings["start_to_close"]),
            heartbeat_timeout=timedelta(seconds=timings["heartbeat"]),
            retry_policy=RetryPolicy(maximum_attempts=timings["idempotent_attempts"]),
        )
        if "done" in result:
            output: dict[str, Any] = json.loads(result["done"])
            if "error" in output:
                output["calls"] = entries
            return output
        if "diverged" in result:
            error = {"kind": "nondeterministic", "message": result["diverged"]}
            return {"error": error, "logs": [], "calls": entries}
        first = len(recorded) + 1
        calls = [
            {"id": f"{call_id}:code:{first + n}", "name": c["name"], "arguments": c["arguments"]}
            for n, c in enumerate(result["calls"])
        ]
        classified = await _quick(CLASSIFY, calls, f"{prefix}classify:{step}")
        outcomes = await run_calls(calls, classified, max_parallel, timings, f"{prefix}code:")
        for call, outcome in zip(calls, outcomes, strict=True):
            recorded.append(
                {"name": call["name"], "arguments": call["arguments"], "outcome": outcome}
            )
            entry = {"name": call["name"], "arguments": call["arguments"], "status": "ok"}
            if outcome["error"] is not None:
                entry |= {"status": "error", "message": outcome["error"]["message"]}
            entries.append(entry)
    message = f"the program made sub-calls in more than {MAX_PROGRAM_STEPS} rounds"
    return {"error": {"kind": "limit", "message": message}, "logs": [], "calls": entries}


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
            if "program" in facts:  # run_code: a durable program, not one activity
                program = _program_call(
                    call, facts["program"], max_parallel, timings, f"{prefix}{index}:"
                )
                running[seq] = asyncio.ensure_future(program)
                continue
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
        declared = facts["resources"]
        resources = Resources(**declared) if declared is not None else None
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


async def _program_call(
    call: dict[str, Any],
    program: dict[str, Any],
    max_parallel: int,
    timings: dict[str, Any],
    prefix: str,
) -> dict[str, Any]:
    """A ``run_code`` call run durably; its outcome is what the in-process tool returns."""
    output = await run_program_steps(
        program["code"], program["language"], call["id"], max_parallel, timings, prefix
    )
    result = ToolResult(output=output, is_error="error" in output)
    return outcome_to_wire(outcome_from_value(call["name"], result), call["name"])


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
    return failure_to_wire(call["name"], message)
