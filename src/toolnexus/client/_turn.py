"""The tool calls of one model turn: submitted as they arrive, answered in emitted order."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from toolnexus.client._turn_rule import CALLS_LATE, HOSTED_LATE
from toolnexus.codemode import CodeMode, RunContext, collapse_message, collapsed, parse_mode
from toolnexus.scheduling import Outcome, Scheduler, Ticket, ToolCall, caller_id, precheck, snapshot
from toolnexus.tools import (
    Prechecked,
    Toolkit,
    maybe_await,
    outcome_from_exception,
    outcome_from_value,
)
from toolnexus.tools.relay import is_relay

__all__ = [
    "CALLS_LATE",
    "HOSTED_LATE",
    "PENDING",
    "RelayHandler",
    "TurnCalls",
]


PENDING = Outcome.failure("relay", "waiting for the host's answer", "pending")

NO_CALL_ID = (
    "the provider sent this call without a call id, so no result could be sent back for it; "
    "it was not run"
)


def _for_call(ctx: RunContext[Any], call_id: str, caller: str | None) -> RunContext[Any]:
    """``dataclasses.replace(ctx, call_id=..., caller=...)`` without its per-field work."""
    made: RunContext[Any] = object.__new__(type(ctx))
    made.__dict__.update(ctx.__dict__, call_id=call_id, caller=caller)
    return made


"""The stand-in outcome of a relay call that no handler answered: the run becomes pending."""


RelayHandler = Callable[[ToolCall], Any]
"""``handler(call) -> result`` (sync or async): answers a relay tool's call."""


class TurnCalls:
    """Feeds one turn's calls into its scheduler lane.

    A call that cannot run (collapsed under ``"code"`` mode, an unknown tool, arguments that are
    not JSON or do not match the schema) is answered at once and takes no turn in the lane; the
    loop goes on. Every other call is submitted the moment it is known, so while a response is
    still streaming its first calls may already be running.
    """

    def __init__(
        self,
        lane: Scheduler,
        kit: Toolkit,
        mode: CodeMode,
        ctx: RunContext[Any],
        relay_handler: RelayHandler | None = None,
        meter: Any = None,
        direct: Sequence[str] = (),
        decode: Callable[[ToolCall], Any] | None = None,
        hosting: bool = False,
    ) -> None:
        self._lane = lane
        self._hosting = hosting  # tools are offered to hosted programs: callers are checked
        self._decode = decode  # the run's once-per-call decoding of arguments
        self._meter = meter
        self._direct = frozenset(direct)  # called directly even under "code" mode
        self._kit = kit
        self._mode = mode
        self._collapses = parse_mode(mode) == "code"  # direct calls may be refused at all
        self._ctx = ctx
        self._relay_handler = relay_handler
        self.calls: list[ToolCall] = []
        self.hosted = False  # whether a provider-hosted program made any of the calls
        self._answers: list[Ticket | Outcome | asyncio.Task[Outcome]] = []

    def submit(self, call: ToolCall) -> None:
        """Queue ``call`` (never raises)."""
        self.calls.append(call)
        if call.caller is not None:
            self.hosted = True
        if not call.id:  # its result could not be sent back: a call that ran unrecorded
            self._answers.append(Outcome.failure(call.name, NO_CALL_ID, "refused"))
            return
        if (
            self._collapses
            and call.name not in self._direct
            and collapsed(self._mode, call.name, call)
        ):
            # refused before hooks or approval can see it
            refusal = collapse_message(call.name)
            self._answers.append(Outcome.failure(call.name, refusal, "refused"))
            return
        decoded = None  # text the run decoded strictly already (a mapping is checked here)
        if self._decode is not None and isinstance(call.arguments, str):
            decoded = self._decode(call)
        checked = precheck(
            call,
            self._kit,
            decoded if isinstance(decoded, dict) else None,
            self._ctx.session,
            hosting=self._hosting,
        )
        if isinstance(checked, Outcome):
            self._answers.append(checked)
            return
        refused = self._meter.tool_call() if self._meter is not None else None
        if refused is not None:  # a budget ran out: the call is answered, not run
            message = f"{refused}; the call was not run"
            self._answers.append(Outcome.failure(call.name, message, "refused"))
            return
        tool, args = checked
        if is_relay(tool):  # answered by the host, not run here: no turn in the lane
            if self._relay_handler is None:
                self._answers.append(PENDING)
            else:
                self._answers.append(asyncio.ensure_future(self._relay(call, args)))
            return
        caller = None if call.caller is None else caller_id(call.caller)
        ctx = _for_call(self._ctx, call.id, caller)
        self._answers.append(self._lane.submit(tool, args, Prechecked(ctx), call_id=call.id))

    async def _relay(self, call: ToolCall, args: dict[str, Any]) -> Outcome:
        assert self._relay_handler is not None
        request = ToolCall(call.id, call.name, snapshot(args))  # the handler's own copy
        try:
            return outcome_from_value(call.name, await maybe_await(self._relay_handler(request)))
        except Exception as exc:
            return outcome_from_exception(call.name, exc)

    async def outcomes(
        self, deadline: float | None = None, late: str = CALLS_LATE
    ) -> AsyncIterator[tuple[ToolCall, Outcome]]:
        """Each call with its outcome, in emitted order.

        ``deadline``: seconds from now by which every call must be answered; then the lane is
        stopped: a call that had finished still gets its outcome, and one still running is
        cancelled and answered with ``late`` (formatted with ``seconds``), saying it was late.
        """
        # One timer for the whole turn, not a timed wait per call: when it fires, the lane is
        # stopped, which delivers what already finished (in order) and cancels what still
        # runs; those calls are answered as late.
        loop = asyncio.get_running_loop()
        stopping: list[asyncio.Task[None]] = []
        timer = None
        if deadline is not None:
            timer = loop.call_later(
                deadline, lambda: stopping.append(loop.create_task(self._lane.stop()))
            )
        try:
            for call, answer in zip(self.calls, self._answers, strict=True):
                if isinstance(answer, Outcome):
                    yield call, answer
                    continue
                if isinstance(answer, asyncio.Task):
                    yield call, await answer
                    continue
                known = self._lane._known(answer)  # most are done by now: no coroutine then
                outcome = known if known is not None else await self._lane.wait(answer)
                if stopping and outcome.reason == "abandoned":  # the lane stopped: it was late
                    outcome = Outcome.failure(call.name, late.format(seconds=deadline), "late")
                yield call, outcome
        finally:
            if timer is not None:
                timer.cancel()
            for task in stopping:
                await task

    async def finished(self) -> list[Outcome | None]:
        """Each call's outcome if it is already known, else ``None``, without waiting: what a
        turn cut short can still report truthfully. After the lane stopped, a call that had
        finished running is known even when an earlier one had not (``stop`` delivers it)."""
        known: list[Outcome | None] = []
        for answer in self._answers:
            if isinstance(answer, Outcome):
                known.append(answer)
            elif isinstance(answer, asyncio.Task):
                done = answer.done() and not answer.cancelled()
                known.append(answer.result() if done else None)
            else:
                outcome = await self._lane.wait(answer) if answer.done else None
                abandoned = outcome is not None and outcome.reason == "abandoned"
                known.append(None if abandoned else outcome)
        return known

    def cancel(self) -> None:
        """Stop waiting for relay answers (the lane is stopped by its owner)."""
        for answer in self._answers:
            if isinstance(answer, asyncio.Task):
                answer.cancel()
