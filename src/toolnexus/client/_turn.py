"""The tool calls of one model turn: submitted as they arrive, answered in emitted order."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

from toolnexus.codemode import CodeMode, RunContext, collapse_message, collapsed
from toolnexus.scheduling import Outcome, Scheduler, Ticket, ToolCall
from toolnexus.scheduling._batch import precheck
from toolnexus.tools import Toolkit

__all__ = ["TurnCalls"]


class TurnCalls:
    """Feeds one turn's calls into its scheduler lane.

    A call that cannot run (collapsed under ``"code"`` mode, an unknown tool, arguments that are
    not JSON or do not match the schema) is answered at once and takes no turn in the lane; the
    loop goes on. Every other call is submitted the moment it is known, so while a response is
    still streaming its first calls may already be running.
    """

    def __init__(self, lane: Scheduler, kit: Toolkit, mode: CodeMode, ctx: RunContext) -> None:
        self._lane = lane
        self._kit = kit
        self._mode = mode
        self._ctx = ctx
        self.calls: list[ToolCall] = []
        self._answers: list[Ticket | Outcome] = []

    def submit(self, call: ToolCall) -> None:
        """Queue ``call`` (never raises)."""
        self.calls.append(call)
        if collapsed(self._mode, call.name, call):  # before hooks or approval can see it
            self._answers.append(Outcome.failure(call.name, collapse_message(call.name)))
            return
        checked = precheck(call, self._kit)
        if isinstance(checked, Outcome):
            self._answers.append(checked)
            return
        tool, args = checked
        ctx = dataclasses.replace(self._ctx, call_id=call.id)
        self._answers.append(self._lane.submit(tool, args, ctx))

    async def outcomes(self) -> AsyncIterator[tuple[ToolCall, Outcome]]:
        """Each call with its outcome, in emitted order."""
        for call, answer in zip(self.calls, self._answers, strict=True):
            outcome = answer if isinstance(answer, Outcome) else await self._lane.wait(answer)
            yield call, outcome
