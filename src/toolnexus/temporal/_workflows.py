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

Any length: one workflow run's history is capped (51,200 events, 50 MB). Before a run nears the
cap (Temporal suggests it, or the history passes ``continue_after`` events or `HISTORY_BYTES`),
the workflow stops starting calls, lets the ones it started finish (a boundary lasts as long as
the slowest running call), and continues as new: the next run gets the batch, the outcomes so far
and the position to go on from. Every call before that position has committed and holds no
resource, so a fresh rule from there decides exactly what the old one would have: the cap, the
barrier and the per-resource order hold across the boundary. Positions are global, so activity
ids stay unique and deterministic across runs; bookkeeping activities carry the run's number.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    FailureError,
    TimeoutError,
    TimeoutType,
)

with workflow.unsafe.imports_passed_through():
    from toolnexus.client import (
        RUN_CALLS,
        AskForOutput,
        Continue,
        RunCalls,
        Stop,
        TurnRule,
        calls_deadline,
        output_accepted,
    )
    from toolnexus.codemode import CODE_MODE_NAMING
    from toolnexus.scheduling import HostReason, SchedulingRule
    from toolnexus.temporal._activities import (
        CALL_TOOL,
        CLASSIFY,
        MODEL_TURN,
        OPENING,
        PROGRAM_STEP,
        RESULTS,
    )
    from toolnexus.temporal._wire import (
        PAYLOAD_BUDGET,
        call_from_wire,
        failure_to_wire,
        outcome_from_wire,
        outcome_to_wire,
        stored_size,
    )
    from toolnexus.tools import Resources, ToolResult, outcome_from_value

__all__ = [
    "BATCH_WORKFLOW",
    "CONTINUE_AFTER",
    "HISTORY_BYTES",
    "LOST",
    "LOST_AGAIN",
    "PROGRAM_WORKFLOW",
    "RUN_WORKFLOW",
    "TOO_LARGE",
    "BatchWorkflow",
    "ProgramWorkflow",
    "RunWorkflow",
]

BATCH_WORKFLOW = "toolnexus.batch"
RUN_WORKFLOW = "toolnexus.run"
PROGRAM_WORKFLOW = "toolnexus.program"

CONTINUE_AFTER = 10_000
"""A run continues as new once its history has this many events (Temporal's hard cap is
51,200 and it warns from 10,240), unless Temporal suggested it sooner."""

HISTORY_BYTES = 8 * 1024 * 1024
"""... or once its history takes this many bytes (the cap is 50 MB, warnings from 10 MB)."""

CLASSIFY_CHUNK = 500
"""Calls classified by one activity: a batch of any size is classified in parts, as the rule
reaches them, so no classification is one oversized payload."""


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
OUT_OF_TIME = (
    "the call ran out of time: it was still running after {seconds:g} s "
    "(Timings.start_to_close); give it a longer start_to_close if it needs more"
)
OUT_OF_TIME_AGAIN = (
    "the call ran out of time {attempts} times: each attempt was still running after "
    "{seconds:g} s (Timings.start_to_close); give it a longer start_to_close if it needs more"
)
NO_STORE = (
    "; connect the caller and the workers with "
    "data_converter=toolnexus.temporal.file_store(directory) to lift the limit"
)


def _too_big(value: Any, store: bool) -> int | None:
    """The size Temporal would store for ``value``, when it would not fit one payload (with
    no store to hold it); else ``None``."""
    if store:
        return None
    size = stored_size(value, workflow.payload_converter())
    return size if size > PAYLOAD_BUDGET else None


class Plan:
    """What a workflow run was asked (cap, timings, limits) and when it should end its run."""

    def __init__(self, request: dict[str, Any]) -> None:
        self.max_parallel: int = request["max_parallel"]
        self.timings: dict[str, Any] = request["timings"]
        self.store: bool = request.get("store", False)
        self.continue_after: int = request.get("continue_after", CONTINUE_AFTER)
        self.run: int = request.get("state", {}).get("run", 0)
        self.permissions: dict[str, Any] | None = request.get("permissions")  # the caller's
        self.progressed = False  # set once this run has done some work (a call, a step)

    def boundary(self) -> bool:
        """Whether this run's history is near its limits: time to continue as new (never
        before the run has made progress, so every run moves the work on)."""
        if not self.progressed:
            return False
        info = workflow.info()
        return (
            info.is_continue_as_new_suggested()
            or info.get_current_history_length() >= self.continue_after
            or info.get_current_history_size() >= HISTORY_BYTES
        )

    def bookkeeping_id(self, name: str) -> str:
        """A bookkeeping activity's id, unique across the runs of one workflow."""
        return name if self.run == 0 else f"{name}@{self.run}"


def _continue(request: dict[str, Any], plan: Plan, **state: Any) -> str:
    """End this run and go on in a new one with ``state`` (raises, as Temporal does); returns
    only when the carried state would not fit one payload (no store): then the reason."""
    carried = {**request, "state": {**state, "run": plan.run + 1}}
    size = _too_big(carried, plan.store)
    if size is None:
        workflow.continue_as_new(carried)
    return (
        f"the state carried into the next run ({size:,} bytes as Temporal stores it) passes "
        f"Temporal's 2 MB payload limit{NO_STORE}"
    )


@workflow.defn(name=BATCH_WORKFLOW)
class BatchWorkflow:
    """Runs a batch of tool calls by the scheduling rule; returns their outcomes in order."""

    @workflow.run
    async def run(self, request: dict[str, Any]) -> dict[str, Any]:
        # a later run gets only the calls not yet run; the ones before are outcomes already
        plan = Plan(request)
        state = request.get("state", {})
        done: list[Any] = state.get("outcomes", [])
        runs: list[str] = state.get("runs", [])
        calls: list[dict[str, Any] | None] = [*([None] * len(done)), *request["calls"]]
        recorded: set[int] = set()
        outcomes, finished = await run_calls(calls, done, plan, "", plan.boundary, recorded)
        if not finished:
            rest = {**request, "calls": calls[len(outcomes) :]}
            around = {**rest, "state": {"run": plan.run + 1}}
            carried, runs = _fit(outcomes, calls, plan.store, around, recorded, runs)
            state = {"outcomes": carried, "runs": runs, "run": plan.run + 1}
            _check_fits({**rest, "state": state}, plan.store, "the state carried into its next run")
            workflow.continue_as_new({**rest, "state": state})
        outcomes, runs = _fit(outcomes, calls, plan.store, {}, recorded, runs)
        answer = {"outcomes": outcomes, "runs": runs}
        _check_fits(answer, plan.store, "its answer")
        return answer


TOO_LARGE = "toolnexus.too_large"
"""The failure type of a batch whose outcomes cannot be fitted into one payload at all."""


def _check_fits(value: dict[str, Any], store: bool, what: str) -> None:
    """Fail the batch, clearly, when ``value`` would not fit one payload even with its results
    left in the history: Temporal would refuse the payload and retry the workflow task forever
    (the batch would stall instead of ending)."""
    size = _too_big(value, store)
    if size is not None:
        message = (
            f"the batch cannot go on: {what} takes {size:,} bytes as Temporal stores it, past "
            f"its 2 MB payload limit, even with every result left in the history{NO_STORE}"
        )
        raise ApplicationError(message, type=TOO_LARGE, non_retryable=True)


def _fit(
    outcomes: list[Any],
    calls: list[dict[str, Any] | None],
    store: bool,
    around: dict[str, Any],
    recorded: set[int],
    runs: list[str],
) -> tuple[list[Any], list[str]]:
    """``outcomes``, fitted into one payload together with ``around`` (needed only without a
    payload store), and the runs whose histories hold the outcomes left there.

    When they do not fit, every result this run's activities returned goes back as a part
    instead: the number of the run (an index into the returned runs) whose history holds it,
    which the caller reads back (the activity id is ``"<position>:<call id>"``: the caller
    knows it). A number takes a few bytes, so the outcomes of any batch fit, and the next run
    starts with its payloads far from the limit. An outcome no activity returned (a program's
    output, an answer of the classification) cannot be left in the history: the largest of
    those become failures that say so, until the rest fit.

    ``recorded``: the indexes of the outcomes this run's activities returned.
    """
    if _too_big({**around, "runs": runs, "outcomes": outcomes}, store) is None:
        return outcomes, runs
    if recorded:
        this_run = len(runs)
        runs = [*runs, workflow.info().run_id]
        outcomes = [this_run if i in recorded else o for i, o in enumerate(outcomes)]
    total = _too_big({**around, "runs": runs, "outcomes": outcomes}, store)
    if total is None:
        return outcomes, runs
    converter = workflow.payload_converter()
    fitted = list(outcomes)
    sizes = sorted(
        ((stored_size(o, converter), i) for i, o in enumerate(outcomes) if isinstance(o, dict)),
        reverse=True,
    )
    for size, index in sizes:
        if total <= PAYLOAD_BUDGET:
            break
        message = (
            f"the call ran, but its result ({size:,} bytes as Temporal stores it) does not "
            f"fit in one payload with the batch's other results ({total:,} bytes in all; "
            f"Temporal's payload limit is 2 MB){NO_STORE}"
        )
        call = calls[index]
        fitted[index] = failure_to_wire(call["name"] if call else "the tool", message)
        total -= size - stored_size(fitted[index], converter)
    return fitted, runs


@workflow.defn(name=RUN_WORKFLOW)
class RunWorkflow:
    """A whole agent run: each model request and each tool call is an activity.

    The loop is the client's: what happens after each reply and after its calls' outcomes is
    decided by the client's own turn rule (``TurnRule``, ``client/_turn_rule.py``),
    which the in-process loop executes too, so a durable run stops where ``client.run`` stops
    (``max_turns``, each tool's ``retries``, ``output_retries``, a refusal, a call without an
    id) with the same status and reason. The rule is pure, so it decides alike on every replay.
    A turn's calls are bounded in all by the workers' client's ``calls_timeout``, as in
    process. The messages are built by the workers' client (its provider's shape), through
    activities, so this code stays pure. A long run continues as new between turns, or inside
    a turn's batch, carrying the messages, the turns so far, the tries counted and the
    outcomes of the batch in progress.
    """

    @workflow.run
    async def run(self, request: dict[str, Any]) -> dict[str, Any]:
        plan = Plan(request)
        state = request.get("state", {})
        output: dict[str, Any] | None = request.get("output")
        if "messages" in state:
            messages: list[dict[str, Any]] = state["messages"]
        else:
            messages = await _quick(OPENING, request["prompt"], "opening")
        turns: list[dict[str, Any]] = state.get("turns", [])
        partial: list[Any] | None = state.get("partial")
        retries = output["retries"] if output is not None else None
        tries = state.get("tries", {})  # a run continued inside a turn's batch settles it
        rule = TurnRule(
            request["max_turns"],
            retries,
            turns=len(turns),
            tries=tries,
            settling=partial is not None,
        )
        while True:
            number = len(turns) - (1 if partial is not None else 0)
            decided: RunCalls | Continue | AskForOutput | Stop = RUN_CALLS
            if partial is None:
                asked = rule.request()
                if isinstance(asked, Stop):  # max_turns
                    return _ended(plan, messages, turns, None, asked.status, asked.reason)
                if plan.boundary():
                    error = _continue(
                        request,
                        plan,
                        messages=messages,
                        turns=turns,
                        partial=None,
                        tries=dict(rule.tries),
                    )
                    return _ended(plan, messages, turns, error)
                size = _too_big(messages, plan.store)
                if size is not None:
                    return _ended(plan, messages, turns, _transcript_too_big(size))
                try:
                    reply = await _model_turn(request, plan, messages, number, output)
                except ActivityError as exc:
                    return _ended(plan, messages, turns, *_model_failure(exc, request))
                plan.progressed = True
                turns.append({"reply": reply, "outcomes": [], "waits": []})
                if reply.get("calls_timeout") is not None:  # from the end of the response
                    turns[-1]["deadline"] = workflow.now().timestamp() + reply["calls_timeout"]
                ending = reply.get("ending", "answered")
                decided = rule.reply(
                    ending,
                    [call_from_wire(c) for c in reply["calls"]],
                    stop_reason=reply.get("stop_reason"),
                    stop_details=reply.get("stop_details"),
                )
                if isinstance(decided, Stop) and decided.status == "error":  # a call without
                    return _ended(plan, messages, turns, decided.reason)  # an id: nothing ran
                if ending in ("refused", "context_window"):  # never in the transcript
                    assert isinstance(decided, Stop)
                    return _ended(plan, messages, turns, None, decided.status, decided.reason)
                messages.extend(reply["transcript"])
                done: list[Any] = []
            else:
                done = partial
            partial = None
            turn = turns[-1]
            calls = turn["reply"]["calls"]
            if isinstance(decided, RunCalls):
                waits = turn.setdefault("waits", [])
                allowed = turn.setdefault("retries", {})
                outcomes, finished = await run_calls(
                    calls,
                    done,
                    plan,
                    f"{number}:",
                    plan.boundary,
                    waits=waits,
                    allowed=allowed,
                    output=output,
                    deadline=_calls_deadline(turn),
                    run=True,
                )
                if not finished:
                    error = _continue(
                        request,
                        plan,
                        messages=messages,
                        turns=turns,
                        partial=outcomes,
                        tries=dict(rule.tries),
                    )
                    turn["outcomes"] = outcomes
                    return _ended(plan, messages, turns, error)
                turn["outcomes"] = outcomes
                answers = {"calls": calls, "outcomes": outcomes}
                size = _too_big(answers, plan.store)
                if size is not None:
                    return _ended(plan, messages, turns, _transcript_too_big(size))
                name = plan.bookkeeping_id(f"results:{number}")
                messages += await _quick(RESULTS, answers, name)
                made = [call_from_wire(c) for c in calls]
                settled = [outcome_from_wire(o) for o in outcomes]
                received = output is not None and output_accepted(made, settled)
                decided = rule.settle(made, settled, allowed.get, received=received)
            if isinstance(decided, Stop):  # done, or a tool's (or the output's) tries ran out
                return _ended(plan, messages, turns, None, decided.status, decided.reason)
            if isinstance(decided, AskForOutput):  # text where a structured result was asked
                messages.append({"role": "user", "content": decided.message})
                turn["asked_for_output"] = True
            # else the next turn: after calls, or a paused turn sent back as it is


MODEL_FAILED = "a model request failed"
MODEL_ATTEMPTS = 3
"""How often a model request is made when its worker is lost (within ``model_timeout``)."""


async def _model_turn(
    request: dict[str, Any],
    plan: Plan,
    messages: list[dict[str, Any]],
    number: int,
    output: dict[str, Any] | None,
) -> dict[str, Any]:
    """The model's reply to ``messages`` (turn ``number``, from 0), as an activity.

    ``model_timeout`` bounds the turn with its retries: a worker lost in the middle (noticed
    by its heartbeat) makes the request again elsewhere, within what is left of it.
    """
    limit = timedelta(seconds=request["model_timeout"])
    heartbeat = timedelta(seconds=plan.timings["heartbeat"])
    reply: dict[str, Any] = await workflow.execute_activity(
        MODEL_TURN,
        {"messages": messages, "turn": number, "output": output}
        | ({"permissions": plan.permissions} if plan.permissions is not None else {}),
        activity_id=f"model:{number}",
        start_to_close_timeout=limit,
        schedule_to_close_timeout=limit,
        heartbeat_timeout=min(heartbeat, limit),
        retry_policy=RetryPolicy(maximum_attempts=MODEL_ATTEMPTS),
    )
    return reply


def _model_failure(exc: ActivityError, request: dict[str, Any]) -> tuple[str, str, None, Any]:
    """(error, status, stopped_by, the provider's error) of a model turn that failed: the
    provider's own error as the client raised it (its message, HTTP status and detail), or a
    turn past ``model_timeout``."""
    cause = exc.cause if exc.cause is not None else exc
    if isinstance(cause, ApplicationError) and cause.type == "ProviderError":
        said = cause.details[0] if cause.details else {}
        return cause.message, "error", None, said
    if isinstance(cause, TimeoutError) and cause.type == TimeoutType.HEARTBEAT:
        message = (
            f"the worker making this model request was lost each time it was made "
            f"({MODEL_ATTEMPTS} times); the run ends here"
        )
        return message, "error", None, None
    if isinstance(cause, TimeoutError):
        seconds = request["model_timeout"]
        message = (
            f"the model did not finish its turn within {seconds:g} s (start_run's "
            "model_timeout), its retries included; raise model_timeout, or bound the turn "
            "with the workers' client (turn_timeout, max_tokens in request_params)"
        )
        return message, "error", None, {"status": None, "detail": None, "kind": "ProviderTimeout"}
    message = cause.message if isinstance(cause, FailureError) else str(cause)
    return message or MODEL_FAILED, "error", None, None


def _calls_deadline(turn: dict[str, Any]) -> tuple[float, str] | None:
    """When a turn's calls must all be answered (the workers' client's ``calls_timeout``,
    from the end of the model's response), and what a call still running then is told."""
    if "deadline" not in turn:
        return None
    limit, late = calls_deadline(turn["reply"]["calls_timeout"], None, hosted=False)
    return turn["deadline"], late.format(seconds=limit)


def _transcript_too_big(size: int) -> str:
    return (
        f"the run's transcript has grown to {size:,} bytes as Temporal stores it, past its "
        f"2 MB payload limit{NO_STORE}"
    )


def _ended(
    plan: Plan,
    messages: list[dict[str, Any]],
    turns: list[dict[str, Any]],
    error: str | None,
    status: str = "error",
    stopped_by: str | None = None,
    provider: Any = None,
) -> dict[str, Any]:
    """The run's answer; ``stopped_by``: why the loop stopped it early (a tool's retries);
    ``provider``: the status and detail of the provider's error that ended it."""
    result: dict[str, Any] = {"messages": messages, "turns": turns, "status": status}
    if error is not None:
        result["error"] = error
    if stopped_by is not None:
        result["stopped_by"] = stopped_by
    if provider:
        result["provider_error"] = provider
    size = _too_big(result, plan.store)
    if size is None:
        return result
    # too large to return whole without a store: the reason alone, the transcript left out
    error = f"{error}; and " if error is not None else ""
    return {
        "messages": [],
        "turns": [],
        "status": "error",
        "error": error + _transcript_too_big(size),
    }


@workflow.defn(name=PROGRAM_WORKFLOW)
class ProgramWorkflow:
    """A Code Mode program whose sub-calls are activities, by the scheduling rule."""

    @workflow.run
    async def run(self, request: dict[str, Any]) -> dict[str, Any]:
        plan = Plan(request)
        program = Program(request["code"], request["language"], request["call_id"], "")
        state = request.get("state", {})
        output = await program.run(plan, state, plan.boundary)
        if output is None:
            error = _continue(request, plan, **program.state())
            return program.failed("limit", error)
        size = _too_big(output, plan.store)
        if size is not None:
            message = (
                f"the program's output is {size:,} bytes as Temporal stores it, past its 2 MB "
                f"payload limit; return less{NO_STORE}"
            )
            return {"error": {"kind": "limit", "message": message}, "logs": [], "calls": []}
        return output


class Program:
    """A durable program's progress: run step by step, each step (an activity, free of side
    effects) re-runs it with the outcomes recorded so far and returns the sub-calls it makes
    next; those run as activities by the rule, and their outcomes are recorded for the next
    step.

    A sub-call's id is ``"<call_id>:code:<n>"``, as in process. Every sub-call of a step is
    answered before the next step: the program is waiting for them, and a step cannot hand an
    outcome to a program that is not running.
    """

    def __init__(
        self, code: str, language: str, call_id: str, prefix: str, run: bool = False
    ) -> None:
        self.code, self.language, self.call_id, self.prefix = code, language, call_id, prefix
        self.run_calls = run  # its sub-calls are an agent run's: they get its guards
        self.recorded: list[dict[str, Any]] = []
        self.entries: list[dict[str, Any]] = []
        self.step = 0
        self.pending: dict[str, Any] | None = None  # a step's sub-calls, partly answered

    def state(self) -> dict[str, Any]:
        """What the next run needs to go on."""
        return {
            "recorded": self.recorded,
            "entries": self.entries,
            "step": self.step,
            "pending": self.pending,
        }

    async def run(
        self, plan: Plan, state: dict[str, Any], boundary: Callable[[], bool]
    ) -> dict[str, Any] | None:
        """The program's output, or ``None`` at a boundary (see `state`)."""
        self.recorded = state.get("recorded", [])
        self.entries = state.get("entries", [])
        self.step = state.get("step", 0)
        self.pending = state.get("pending")
        while self.step < MAX_PROGRAM_STEPS:
            if self.pending is None:
                if boundary():
                    return None
                request = {
                    "code": self.code,
                    "language": self.language,
                    "recorded": self.recorded,
                    "store": plan.store,
                }
                size = _too_big(request, plan.store)
                if size is not None:
                    message = (
                        f"the program's recorded sub-call outcomes reached {size:,} bytes as "
                        f"Temporal stores them, past its 2 MB payload limit{NO_STORE}"
                    )
                    return self.failed("limit", message)
                timings = plan.timings
                result = await workflow.execute_activity(
                    PROGRAM_STEP,
                    request,
                    activity_id=plan.bookkeeping_id(f"{self.prefix}step:{self.step}"),
                    start_to_close_timeout=timedelta(seconds=timings["start_to_close"]),
                    heartbeat_timeout=timedelta(seconds=timings["heartbeat"]),
                    retry_policy=RetryPolicy(maximum_attempts=timings["idempotent_attempts"]),
                )
                plan.progressed = True
                if "done" in result:
                    output: dict[str, Any] = json.loads(result["done"])
                    if "error" in output:
                        output["calls"] = self.entries
                    return output
                if "diverged" in result:
                    return self.failed("nondeterministic", result["diverged"])
                first = len(self.recorded) + 1
                calls = [
                    {
                        "id": f"{CODE_MODE_NAMING.prefix(self.call_id)}{first + n}",
                        "name": c["name"],
                        "arguments": c["arguments"],
                    }
                    for n, c in enumerate(result["calls"])
                ]
                self.pending = {"calls": calls, "done": []}
            calls = self.pending["calls"]
            outcomes, finished = await run_calls(
                calls,
                self.pending["done"],
                plan,
                f"{self.prefix}code:",
                boundary,
                run=self.run_calls,
            )
            if not finished:
                self.pending["done"] = outcomes
                return None
            for call, outcome in zip(calls, outcomes, strict=True):
                self.recorded.append(
                    {"name": call["name"], "arguments": call["arguments"], "outcome": outcome}
                )
                entry = {"name": call["name"], "arguments": call["arguments"], "status": "ok"}
                if outcome["error"] is not None:
                    entry |= {"status": "error", "message": outcome["error"]["message"]}
                self.entries.append(entry)
            self.pending = None
            self.step += 1
        message = f"the program made sub-calls in more than {MAX_PROGRAM_STEPS} rounds"
        return self.failed("limit", message)

    def failed(self, kind: str, message: str) -> dict[str, Any]:
        """The program's output when it ends with an error of ``kind`` (its calls so far)."""
        return {"error": {"kind": kind, "message": message}, "logs": [], "calls": self.entries}


def _never() -> bool:
    return False


async def run_calls(
    calls: Sequence[dict[str, Any] | None],
    done: list[Any],
    plan: Plan,
    prefix: str,
    boundary: Callable[[], bool],
    recorded: set[int] | None = None,
    waits: list[list[Any]] | None = None,
    allowed: dict[str, int | None] | None = None,
    output: dict[str, Any] | None = None,
    deadline: tuple[float, str] | None = None,
    run: bool = False,
) -> tuple[list[Any], bool]:
    """Drive the rule over ``calls`` from position ``len(done)`` (``done``: the outcomes of the
    calls before it, from earlier runs): start activities as it says, settle them as they end.

    Calls are classified and fed to the rule in order, a window ahead of what runs, so a batch
    of any size is classified in parts. A call answered by its classification (unknown tool,
    bad arguments) takes no place in the lane, exactly as in process.

    ``calls`` before ``len(done)`` may be ``None`` (calls a previous run finished), and their
    outcomes in ``done`` may be parts left in an earlier run's history (see `_fit`).
    ``recorded``, when given, receives the index of each outcome that is an activity's own
    result (so this run's history holds it). ``waits``, when given, receives
    ``[index, index waited for, resource, admitted]`` for each call that waited for an earlier
    one (``admitted``: the workflow's time when the rule got it): what the histories cannot
    tell of a call, kept only for the calls that waited, so it stays small. ``allowed``,
    when given, receives each called tool's ``retries`` (from its classification), which the
    run counts the model's tries against. ``output``: the output type's schema and tries, in a
    run that asks for one: its ``final_result`` calls are answered by their classification.
    ``deadline``: ``(workflow time, message)``: by then every call must be answered (the
    client's ``calls_timeout``); a call still running is cancelled, and it and every call not
    started yet are answered with ``message``, as the in-process turn answers them. ``run``:
    the calls are an agent run's (or a program's inside one): they get the guards of the
    workers' client (its permissions, approval handler, hooks), as in process.

    Returns the outcomes (JSON data, in emitted order) and whether all calls have one. When
    ``boundary()`` says this run's history is near its limits, no further call is fed to the
    rule; the ones it has are finished, and the outcomes so far are returned with ``False``.
    """
    rule = SchedulingRule(plan.max_parallel)
    timings = plan.timings
    outcomes: list[Any] = [*done, *([None] * (len(calls) - len(done)))]
    position: dict[int, int] = {}  # lane sequence number -> index in the batch, while it runs
    placed: dict[int, int] = {}  # the same for every call, to name the one a call waited for
    admitted: dict[int, float] = {}  # lane sequence number -> when the rule got it
    running: dict[int, Any] = {}  # lane sequence number -> activity handle
    facts_of: dict[int, dict[str, Any]] = {}  # index -> its classification
    window = 2 * plan.max_parallel  # what a boundary waits for: at most this many calls
    fed = len(done)  # the next index to feed to the rule
    stopping = False

    def start(started: list[int]) -> None:
        for seq in started:
            index = position[seq]
            wait = rule.waited_for(seq)
            if waits is not None and wait is not None:
                waits.append([index, placed[wait.call], wait.resource, admitted[seq]])
            call, facts = calls[index], facts_of[index]
            assert call is not None  # only calls before len(done) are None, and never run
            if "program" in facts:  # run_code: a durable program, not one activity
                prefixed = f"{prefix}{index}:"
                program = _program_call(call, facts["program"], plan, prefixed, run)
                running[seq] = asyncio.ensure_future(program)
                continue
            attempts = timings["idempotent_attempts"] if facts["idempotent"] else 1
            asked = {"call": call, "seq": seq, "run": True} if run else {"call": call, "seq": seq}
            running[seq] = workflow.start_activity(
                CALL_TOOL,
                asked,
                activity_id=f"{prefix}{index}:{call['id']}",
                start_to_close_timeout=timedelta(seconds=timings["start_to_close"]),
                heartbeat_timeout=timedelta(seconds=timings["heartbeat"]),
                retry_policy=RetryPolicy(maximum_attempts=attempts),
            )

    async def classify() -> None:
        """Make sure the call at ``fed`` is classified (with the part of the batch after it)."""
        if fed not in facts_of:
            chunk = calls[fed : fed + CLASSIFY_CHUNK]
            name = plan.bookkeeping_id(f"{prefix}classify:{fed}")
            asked: Any = chunk  # a batch's calls alone, as before there were options
            if run or plan.permissions is not None:
                asked = {"calls": chunk, "output": output, "run": run}
                if plan.permissions is not None:  # the caller's narrow the tools further
                    asked["permissions"] = plan.permissions
            for offset, facts in enumerate(await _quick(CLASSIFY, asked, name)):
                facts_of[fed + offset] = facts

    async def feed() -> None:
        nonlocal fed
        while fed < len(calls) and len(position) < window:
            await classify()
            index, facts = fed, facts_of[fed]
            fed += 1
            if allowed is not None:
                call = calls[index]
                assert call is not None  # only calls before len(done) are None, never fed
                allowed[call["name"]] = facts.get("retries")
            if "answer" in facts:
                del facts_of[index]
                outcomes[index] = facts["answer"]
                continue
            declared = facts["resources"]
            resources = Resources(**declared) if declared is not None else None
            seq, started = rule.submit(facts["mode"], resources)
            position[seq] = placed[seq] = index
            if waits is not None and seq not in started:
                admitted[seq] = workflow.now().timestamp()
            start(started)

    async def late(message: str) -> None:
        """Past the deadline: every call still running is cancelled and, with every call the
        rule still held, answered with ``message``; a call not fed yet keeps the answer of
        its classification (it could not have run), as in process."""
        nonlocal fed
        for handle in running.values():
            handle.cancel()
        running.clear()
        for index in position.values():  # running, or held by the rule, never started
            call = calls[index]
            assert call is not None  # only calls before len(done) are None, never fed
            outcomes[index] = failure_to_wire(call["name"], message, "late")
        position.clear()
        while fed < len(calls):
            await classify()
            index, facts = fed, facts_of.pop(fed)
            fed += 1
            call = calls[index]
            assert call is not None  # only calls before len(done) are None, never fed
            if allowed is not None:
                allowed[call["name"]] = facts.get("retries")
            outcomes[index] = facts.get("answer") or failure_to_wire(call["name"], message, "late")

    await feed()
    timer: asyncio.Future[None] | None = None
    if deadline is not None and running:
        timer = asyncio.ensure_future(
            asyncio.sleep(max(deadline[0] - workflow.now().timestamp(), 0))
        )
    while running:
        waiting = [*running.values(), *([timer] if timer is not None else [])]
        await workflow.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        for seq in sorted(s for s, handle in running.items() if handle.done()):
            handle = running.pop(seq)
            index = position.pop(seq)
            call = calls[index]
            assert call is not None
            facts = facts_of.pop(index)
            outcomes[index] = _outcome(handle, call, facts, timings)
            if recorded is not None and "program" not in facts and handle.exception() is None:
                recorded.add(index)
            start(rule.settle(seq)[1])
        plan.progressed = True
        if timer is not None and timer.done() and deadline is not None:
            if running or fed < len(calls):
                await late(deadline[1])
            break
        if not stopping and boundary():
            stopping = True
        if not stopping:
            await feed()
    if timer is not None and not timer.done():
        timer.cancel()
    finished = fed == len(calls)
    return [o for o in outcomes[:fed] if o is not None], finished


async def _program_call(
    call: dict[str, Any], program: dict[str, Any], plan: Plan, prefix: str, run: bool
) -> dict[str, Any]:
    """A ``run_code`` call run durably; its outcome is what the in-process tool returns.

    It runs inside the batch's own run, so a boundary waits for it to end. ``run``: the call
    is an agent run's, so its sub-calls get the run's guards."""
    steps = Program(program["code"], program["language"], call["id"], prefix, run)
    output = await steps.run(plan, {}, _never)
    assert output is not None  # no boundary inside a nested program
    result = ToolResult(output=output, is_error="error" in output)
    return outcome_to_wire(outcome_from_value(call["name"], result), call["name"])


def _outcome(
    handle: Any, call: dict[str, Any], facts: dict[str, Any], timings: dict[str, Any]
) -> dict[str, Any]:
    """The finished activity's outcome; a lost worker or a call out of time is a failed call,
    as data."""
    error = handle.exception()
    if error is None:
        result: dict[str, Any] = handle.result()
        return result
    attempts = timings["idempotent_attempts"] if facts["idempotent"] else 1
    reason: HostReason | None = None
    if isinstance(error, ActivityError) and isinstance(error.cause, TimeoutError):
        if error.cause.type == TimeoutType.START_TO_CLOSE:
            seconds = timings["start_to_close"]
            template = OUT_OF_TIME_AGAIN if attempts > 1 else OUT_OF_TIME
            message, reason = template.format(seconds=seconds, attempts=attempts), "late"
        elif attempts > 1:
            message, reason = LOST_AGAIN.format(attempts=attempts), "lost"
        else:
            message, reason = LOST, "lost"
    else:
        message = f"the call failed on its worker: {error}"
    return failure_to_wire(call["name"], message, reason)
