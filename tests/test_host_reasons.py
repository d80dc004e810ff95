"""The host's reasons as values: where the host itself answers a call (a lane stopped, a turn's
deadline, a retry, a refusal, a denial), the outcome says why in ``Outcome.reason``, which the
host compares instead of message texts and which no model ever reads; durable runs carry it
through their payloads. And `ModelRetry` is a signal no ``except ToolnexusError`` swallows."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from toolnexus import Tool, ToolCall, create_client, run_batch, tool
from toolnexus.client._turn import CALLS_LATE, TurnCalls
from toolnexus.codemode import direct_dispatch
from toolnexus.errors import ModelRetry, ToolError, ToolnexusError
from toolnexus.scheduling import Outcome, Scheduler
from toolnexus.temporal._wire import failure_to_wire, outcome_from_wire, outcome_to_wire
from toolnexus.testing import FunctionModel
from toolnexus.tools import RunContext, Toolkit
from toolnexus.tools._calls import dispatch_call

SRC = Path(__file__).parent.parent / "src" / "toolnexus"


def never_finishing(name: str = "slow") -> Tool:
    async def execute(args: dict[str, Any]) -> str:
        await asyncio.Event().wait()
        return "never"

    return Tool(name, "waits forever", {"type": "object"}, execute=execute)


async def test_a_stopped_lane_answers_its_unfinished_call_as_abandoned_then_gone() -> None:
    lane = Scheduler(dispatch_call)
    ticket = lane.submit(never_finishing(), {})
    await asyncio.sleep(0)  # let it start
    await lane.stop()
    abandoned = await lane.wait(ticket)
    assert abandoned.reason == "abandoned"
    assert abandoned.error == {"tool": "slow", "message": "code run is over; tool call abandoned"}
    gone = await lane.wait(lane.submit(never_finishing(), {}))
    assert gone.reason == "gone"
    assert gone.error == {"tool": "slow", "message": "code run is over; scheduler is gone"}


async def test_a_call_past_the_turns_deadline_is_late_and_a_finished_one_keeps_no_reason() -> None:
    quick = Tool("quick", "", {"type": "object"}, execute=lambda args: "done")
    kit = Toolkit([never_finishing(), quick])
    lane = Scheduler(dispatch_call, audit=False)
    turn = TurnCalls(lane, kit, "native", RunContext())
    turn.submit(ToolCall("c1", "quick", "{}"))
    turn.submit(ToolCall("c2", "slow", "{}"))
    answered = [outcome async for _, outcome in turn.outcomes(deadline=0.2)]
    assert [o.reason for o in answered] == [None, "late"]
    assert answered[0].value == "done"
    assert answered[1].text == CALLS_LATE.format(seconds=0.2)
    await lane.stop()


async def test_a_call_collapsed_under_code_mode_is_refused() -> None:
    quick = Tool("quick", "", {"type": "object"}, execute=lambda args: "done")
    lane = Scheduler(dispatch_call, audit=False)
    turn = TurnCalls(lane, Toolkit([quick]), "code", RunContext())
    turn.submit(ToolCall("c1", "quick", "{}"))
    turn.submit(ToolCall("", "quick", "{}"))  # no call id: never run
    answered = [outcome async for _, outcome in turn.outcomes()]
    assert [o.reason for o in answered] == ["refused", "refused"]
    assert all(not o.ok for o in answered)
    await lane.stop()


async def test_a_call_the_approval_handler_refuses_is_denied() -> None:
    t = Tool("t", "", {"type": "object"}, execute=lambda args: "ran", requires_approval=True)
    outcome = await direct_dispatch(t, {}, RunContext(approval_handler=lambda n, a: False))
    assert outcome.reason == "denied"
    assert outcome.error == {"tool": "t", "message": "call to 't' was not approved"}


async def test_arguments_that_do_not_validate_and_model_retry_are_retries() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        raise ModelRetry("add smaller numbers")

    bad, retried = await run_batch(
        [ToolCall("c1", "add", '{"a": "x"}'), ToolCall("c2", "add", '{"a": 1, "b": 2}')], [add]
    )
    assert (bad.reason, retried.reason) == ("retry", "retry")
    assert retried.error == {"tool": "add", "message": "add smaller numbers"}


async def test_a_tool_failing_on_its_own_has_no_host_reason() -> None:
    def execute(args: dict[str, Any]) -> str:
        raise ToolError("t", "disk full")

    (failed,) = await run_batch(
        [ToolCall("c1", "t", "{}")], [Tool("t", "", {"type": "object"}, execute=execute)]
    )
    assert failed.reason is None and failed.error == {"tool": "t", "message": "disk full"}


async def test_model_retry_inside_a_tools_own_except_toolnexus_error_still_retries() -> None:
    """Before, ``ModelRetry`` was a ``ToolnexusError``: this tool's own handler turned the
    retry into an ordinary answer, and the model was never asked again."""
    tries: list[int] = []

    @tool
    def lookup(city: str) -> str:
        """Look a city up."""
        try:
            tries.append(1)
            if len(tries) == 1:
                raise ModelRetry(f"unknown city {city!r}; try 'Paris'")
            return "found"
        except ToolnexusError as exc:  # the tool's own handling of toolnexus failures
            return f"handled: {exc}"

    def model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        answered = [m for m in messages if m["role"] == "tool"]
        if len(answered) == 0:
            return [ToolCall("c1", "lookup", '{"city": "Pariss"}')]
        if len(answered) == 1:
            return [ToolCall("c2", "lookup", '{"city": "Paris"}')]
        return "done"

    client = create_client(model=FunctionModel(model), code_mode="native")
    result = await client.run("where?", tools=[lookup])
    first, second = result.tool_calls
    assert (first.is_error, first.output) == (True, "unknown city 'Pariss'; try 'Paris'")
    assert (second.is_error, second.output) == (False, "found")
    assert result.status == "done" and len(tries) == 2


def test_no_reason_is_shown_to_a_model() -> None:
    outcome = Outcome.failure("t", "code run is over; tool call abandoned", "abandoned")
    assert outcome.text == "code run is over; tool call abandoned"
    assert outcome.error == {"tool": "t", "message": "code run is over; tool call abandoned"}
    assert "reason" not in repr(outcome)
    assert outcome == Outcome.failure("t", "code run is over; tool call abandoned")


def test_a_reason_survives_a_durable_payload_and_an_older_payload_still_loads() -> None:
    for reason in ("late", "lost", "retry", "abandoned"):
        made = Outcome.failure("t", "m", reason)  # type: ignore[arg-type]
        assert outcome_from_wire(outcome_to_wire(made, "t")).reason == reason
        assert outcome_from_wire(failure_to_wire("t", "m", reason)).reason == reason  # type: ignore[arg-type]
    plain = outcome_to_wire(Outcome.failure("t", "m"), "t")
    assert "reason" not in plain  # a payload without a reason is as it was before
    before = {"value_json": None, "error": {"tool": "t", "message": "m"}, "metadata": None}
    assert outcome_from_wire(before).reason is None
    retry_before = before | {"metadata": {"retry": True}}
    assert outcome_from_wire(retry_before).reason == "retry"  # counted as it was then
    forged = before | {"reason": {"not": "a reason"}}
    assert outcome_from_wire(forged).reason is None
    assert outcome_from_wire(before | {"reason": "made up"}).reason is None
    value = outcome_from_wire({"value_json": "3", "error": None, "metadata": None})
    assert (value.value, value.reason) == (3, None)


def test_the_host_compares_no_outcome_message_texts() -> None:
    """The reasons replaced every comparison of an outcome's message with a known text."""
    compared = re.compile(
        r"""error\[["']message["']\]\s*(==|!=|in\b)|\.get\(["']message["']\)\s*(==|!=|in\b)"""
        r"|== ABANDONED|in \(ABANDONED|== SCHEDULER_GONE|metadata\.get\(RETRY\)"
    )
    found = [
        f"{path.relative_to(SRC)}:{number}"
        for path in sorted(SRC.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if compared.search(line)
    ]
    assert found == []
