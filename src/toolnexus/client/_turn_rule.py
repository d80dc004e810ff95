"""The turn rule: what an agent run does next, as a pure state machine (sans-I/O).

Inputs, in this order each turn: "a model request is about to be made" (`TurnRule.request`),
the model's reply (its ending and its calls, `TurnRule.reply`), and the outcomes of those calls
(`TurnRule.settle`, or `TurnRule.waiting` while some wait for the host). Outputs are decisions,
small frozen values: ask the model (`Ask`), run the reply's calls (`RUN_CALLS`), go on to the
next request (`CONTINUE`; `PAUSED` for a paused turn sent back as it is), ask the model for
its structured output (`ASK_OUTPUT`), or stop (`Stop`, with the run's status and the reason).

The rule owns every limit of a run: ``max_turns``, each tool's ``retries`` (counted per tool
and per response), the output type's ``output_retries`` and its ``final_result`` tool, the
provider's own stops (a refusal, a full context window), the refusal of a call without an id
and a spending budget's verdict before each request. It knows nothing of asyncio, providers,
tools or time: both loops execute it, the in-process ``client.run`` (`client._loop.drive`) and
the durable ``RunWorkflow``, which must decide identically on every replay of its history. So
a limit enforced by one loop is enforced by the other by construction, and every decision can
be tested exhaustively without an event loop (``tests/test_turn_rule.py``), as the scheduling
rule's are.

    rule = TurnRule(max_turns=5)
    rule.request()                        # -> Ask(turn=1)
    rule.reply("answered", [call])        # -> RUN_CALLS
    rule.settle([call], [outcome], allowed)  # -> CONTINUE (or a Stop: a tool's retries ran out)
    rule.request()                        # -> Ask(turn=2)
    rule.reply("answered", [])            # -> DONE
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from toolnexus.client._output import ASK_FOR_OUTPUT, OUTPUT_TOOL
from toolnexus.scheduling import Outcome, ToolCall

__all__ = [
    "ASK_OUTPUT",
    "CALLS_LATE",
    "CONTINUE",
    "DEFAULT_RETRIES",
    "DONE",
    "HOSTED_LATE",
    "PAUSED",
    "PENDING",
    "RUN_CALLS",
    "Ask",
    "AskForOutput",
    "Continue",
    "RunCalls",
    "Stop",
    "StopStatus",
    "TurnRule",
    "call_without_an_id",
    "calls_deadline",
    "count_retries",
    "output_accepted",
    "provider_stop",
    "turn_tool_choice",
]

DEFAULT_RETRIES = 1
"""How often the model may try again a tool whose ``retries`` is ``None``."""

StopStatus = Literal["done", "incomplete", "refused", "pending", "error"]
"""A stopped run's status (``RunResult.status``); ``"error"``: the run fails with a
`ProviderError` whose message is the stop's reason."""


@dataclass(frozen=True, slots=True)
class Ask:
    """Make the model request of turn ``turn`` (from 1)."""

    turn: int


@dataclass(frozen=True, slots=True)
class RunCalls:
    """Run the reply's calls, then `TurnRule.settle` their outcomes."""


@dataclass(frozen=True, slots=True)
class Continue:
    """Go on to the next model request; ``paused``: the reply was a paused turn without
    calls, sent back as it is (the provider continues it)."""

    paused: bool = False


@dataclass(frozen=True, slots=True)
class AskForOutput:
    """The model answered in text where a structured result was asked for: add ``message``
    (a user turn) to the transcript, then make the next request. Counted as one try of the
    output tool already."""

    message: str = ASK_FOR_OUTPUT


@dataclass(frozen=True, slots=True)
class Stop:
    """The run ends with ``status``.

    ``reason``: why the rule stopped it early (``RunResult.stopped_by``: a tool's retries, a
    provider's refusal, a budget), or, for ``"error"``, the error's message; ``None`` when it
    ended as it should (``"done"``) or at ``max_turns``. Final, except ``"pending"``: the run
    waits for the host's answers and goes on once they are settled.
    """

    status: StopStatus
    reason: str | None = None


RUN_CALLS = RunCalls()
CONTINUE = Continue()
PAUSED = Continue(paused=True)
ASK_OUTPUT = AskForOutput()
DONE = Stop("done")
PENDING = Stop("pending")

Decision = Ask | RunCalls | Continue | AskForOutput | Stop
"""Everything the rule may decide."""

_Phase = Literal["request", "reply", "calls", "ended"]


class TurnRule:
    """The state of one agent run's turns.

    Args:
        max_turns: The most model requests the run may make (a positive int).
        output_retries: The output type's tries (an int >= 0), in a run that asks for one;
            ``None``: a text answer ends the run.
        turns: Model replies the run already had (a durable run continued as new).
        tries: The tries counted so far, per tool (likewise).
        settling: The run goes on inside the calls of its last reply (a durable run continued
            as new inside a turn's batch): the next input is `settle`.

    Each method takes the input its phase expects: `request` before each model request,
    then `reply`, then (when it said `RUN_CALLS`) `settle` (or `waiting`). Once it has
    stopped (a `Stop` other than `PENDING`), every input is answered with that same stop.

    Raises:
        RuntimeError: an input out of its phase (a loop's bug, never a model's doing).
    """

    __slots__ = ("_ended", "_phase", "max_turns", "output_retries", "tries", "turns")

    def __init__(
        self,
        max_turns: int,
        output_retries: int | None = None,
        *,
        turns: int = 0,
        tries: Mapping[str, int] | None = None,
        settling: bool = False,
    ) -> None:
        self.max_turns = max_turns
        self.output_retries = output_retries
        self.turns = turns
        """Model replies so far (each request's, a refused one's included)."""
        self.tries: collections.Counter[str] = collections.Counter(tries or {})
        """Per tool, the responses that asked it to be tried again."""
        self._phase: _Phase = "calls" if settling else "request"
        self._ended: Stop | None = None

    @property
    def ended(self) -> Stop | None:
        """The run's final stop, once it has one."""
        return self._ended

    @property
    def phase(self) -> str:
        """What the rule waits for: ``"request"``, ``"reply"``, ``"calls"`` or ``"ended"``."""
        return self._phase

    def request(self, budget: Callable[[], str | None] | None = None) -> Ask | Stop:
        """A model request is about to be made: `Ask` it, or `Stop` (``max_turns`` reached,
        or ``budget()``, asked only when a turn is left, gave a reason not to)."""
        if self._ended is not None:
            return self._ended
        if self._phase != "request":
            raise self._out_of_phase("request")
        if self.turns >= self.max_turns:
            return self._end(Stop("incomplete"))
        if budget is not None and (reason := budget()) is not None:
            return self._end(Stop("incomplete", reason))
        self._phase = "reply"
        return Ask(self.turns + 1)

    def reply(
        self,
        ending: str,
        calls: Sequence[ToolCall],
        *,
        stop_reason: str | None = None,
        stop_details: Mapping[str, Any] | None = None,
        sender: str = "the model",
    ) -> RunCalls | Continue | AskForOutput | Stop:
        """The model replied (``ending``: the style's `Ending`): what the run does with it.

        A refused or cut-off reply stops the run (its calls are not run); a call without an id
        stops it with an error (no result can be sent back for it); calls are run; a paused
        turn without calls is sent back; a text answer ends the run, or, where an output type
        was asked for, is one try of the output tool and asks for the output. ``sender``
        names who sent the reply, in the no-call-id error.
        """
        if self._ended is not None:
            return self._ended
        if self._phase != "reply":
            raise self._out_of_phase("reply")
        self.turns += 1
        if ending in ("refused", "context_window"):
            status, reason = provider_stop(ending, stop_reason, stop_details)
            return self._end(Stop(status, reason))
        nameless = call_without_an_id(calls, sender)
        if nameless is not None:
            return self._end(Stop("error", nameless))
        if calls:
            self._phase = "calls"
            return RUN_CALLS
        self._phase = "request"
        if ending == "paused":
            return PAUSED
        if self.output_retries is None:
            return self._end(DONE)
        self.tries[OUTPUT_TOOL] += 1
        if self.tries[OUTPUT_TOOL] > self.output_retries:
            return self._end(Stop("incomplete", _past_retries(OUTPUT_TOOL, self.output_retries)))
        return ASK_OUTPUT

    def waiting(self) -> Stop:
        """Some of the calls wait for the host's answers: the run is `PENDING`, and goes on
        when their outcomes are settled (nothing is counted before)."""
        if self._ended is not None:
            return self._ended
        if self._phase != "calls":
            raise self._out_of_phase("calls")
        return PENDING

    def settle(
        self,
        calls: Sequence[ToolCall],
        outcomes: Sequence[Outcome],
        allowed: Callable[[str], int | None],
        *,
        received: bool = False,
    ) -> Continue | Stop:
        """The reply's calls have their outcomes: count the tries they asked for
        (`count_retries`, with ``allowed(name)`` the tool's ``retries``), and go on, or stop
        (a tool past its retries; ``received``: the output tool accepted the run's result)."""
        if self._ended is not None:
            return self._ended
        if self._phase != "calls":
            raise self._out_of_phase("calls")
        reason = count_retries(self.tries, calls, outcomes, allowed)
        if reason is not None:
            return self._end(Stop("incomplete", reason))
        if received:
            return self._end(DONE)
        self._phase = "request"
        return CONTINUE

    def _out_of_phase(self, phase: _Phase) -> RuntimeError:
        return RuntimeError(f"the turn rule expects a {self._phase} next, not a {phase}")

    def _end(self, stop: Stop) -> Stop:
        self._phase = "ended"
        self._ended = stop
        return stop


def count_retries(
    counts: collections.Counter[str],
    calls: Sequence[ToolCall],
    outcomes: Sequence[Outcome],
    allowed: Callable[[str], int | None],
) -> str | None:
    """Count, in ``counts``, the tools one response's calls asked to try again; the reason the
    run stops when a tool went past its ``retries`` (the first such tool in call order), else
    ``None``.

    One response's calls are counted once per tool: three calls of one tool asking for another
    try in one response are one retry of that tool. ``allowed(name)``: the tool's ``retries``
    (``None``: `DEFAULT_RETRIES`).
    """
    asked = dict.fromkeys(  # in call order, each tool once
        call.name
        for call, outcome in zip(calls, outcomes, strict=True)
        if outcome.reason == "retry"
    )
    reason = None
    for name in asked:
        counts[name] += 1
        limit = allowed(name)
        limit = DEFAULT_RETRIES if limit is None else limit
        if counts[name] > limit and reason is None:
            reason = _past_retries(name, limit)
    return reason


def _past_retries(name: str, limit: int) -> str:
    return f"tool '{name}' needed another try more often than its retries ({limit}) allow"


def output_accepted(calls: Sequence[ToolCall], outcomes: Sequence[Outcome]) -> bool:
    """Whether the output tool accepted one of a turn's calls: the run's result came."""
    return any(
        call.name == OUTPUT_TOOL and outcome.error is None
        for call, outcome in zip(calls, outcomes, strict=True)
    )


def call_without_an_id(calls: Sequence[ToolCall], model: str = "the model") -> str | None:
    """Why a reply holding a call without an id ends the run (``None``: every call has one):
    its result cannot be sent back (the next request would be refused), so it was not run.
    ``model`` names who sent it."""
    nameless = [call.name for call in calls if not call.id]
    if not nameless:
        return None
    return (
        f"{model} sent the tool call {nameless[0]!r} without a call id: no result can be sent "
        "back for it, so it was not run (is the server speaking this style's wire format?)"
    )


def provider_stop(
    ending: str, stop_reason: str | None, details: Mapping[str, Any] | None
) -> tuple[Literal["refused", "incomplete"], str]:
    """The status and ``stopped_by`` of a run the provider ended: a refusal, or a conversation
    past the context window."""
    reason = stop_reason or ending
    if ending == "refused":
        said = ", ".join(f"{k}: {v}" for k, v in (details or {}).items() if k != "type")
        return "refused", f"the provider refused to answer ({reason}" + (
            f"; {said})" if said else ")"
        )
    return "incomplete", (
        f"the conversation no longer fits the model's context window ({reason}): the answer "
        "was cut off; shorten the history or start a new conversation"
    )


CALLS_LATE = (
    "the call did not finish within {seconds:g} s (calls_timeout: the most a turn's tool calls "
    "may take in all); it was cancelled. Raise calls_timeout or make the tool faster"
)
HOSTED_LATE = (
    "the call did not finish within {seconds:g} s (hosted_call_timeout): the provider's "
    "program waiting for it would give up first, so it was answered as failed; raise "
    "hosted_call_timeout or make the tool faster"
)


def calls_deadline(
    calls_timeout: float | None, hosted_call_timeout: float | None, hosted: bool
) -> tuple[float | None, str]:
    """How long a turn's calls may take in all, and what a call still running then is told
    (a template of ``seconds``): ``calls_timeout``, or the shorter ``hosted_call_timeout``
    when a provider-hosted program made one of the calls (``hosted``) and waits for them."""
    limit, late = calls_timeout, CALLS_LATE
    hosted_limit = hosted_call_timeout if hosted else None
    if hosted_limit is not None and (limit is None or hosted_limit <= limit):
        limit, late = hosted_limit, HOSTED_LATE
    return limit, late


def turn_tool_choice(choice: str | None, every_turn: bool, turns: int) -> str | None:
    """The tool choice of the request after ``turns`` answered turns: ``choice`` on the first
    turn (or every turn, when ``every_turn``), else ``None`` (the style sends ``"auto"`` where
    the wire needs it)."""
    if choice is None or (turns > 0 and not every_turn):
        return None
    return choice
