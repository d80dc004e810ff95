"""The agent loop: ask the model, run its tool calls by the rule, hand results back, repeat.

One turn: the model's response streams in; each tool call is submitted to the turn's scheduler
lane as soon as its arguments are complete; after the response, outcomes are collected in
emitted order and handed back in the provider's shape. The loop ends when the model answers
without tools (``"done"``) or after ``max_turns`` (``"incomplete"``). Cancelling it stops the
turn's lane (running tools are cancelled) and still leaves every tool call of a received
response in the transcript with a result (the real one where the call had finished); a
response cut off mid-stream is not recorded in the transcript.

Nothing that ran goes unrecorded: a streamed turn that never enters the transcript (refused,
past the context window, failed, cut off, cancelled) after its first calls had started has
each of them recorded all the same (`_Run.dropped`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from toolnexus._json import encodable_data, encodable_text, json_problem
from toolnexus.client._history import own_state_only
from toolnexus.client._models import InProcessStyle
from toolnexus.client._output import OUTPUT_TOOL, Output
from toolnexus.client._result import (
    DoneEvent,
    RunResult,
    RunStatus,
    StreamEvent,
    TextDelta,
    ToolCallEvent,
    ToolCallRecord,
    ToolResultEvent,
    UsageEvent,
    made_record,
)
from toolnexus.client._turn import (
    PENDING,
    RelayHandler,
    TurnCalls,
)
from toolnexus.client._turn_rule import (
    AskForOutput,
    Decision,
    Stop,
    TurnRule,
    call_without_an_id,
    calls_deadline,
    count_retries,
    provider_stop,
    turn_tool_choice,
)
from toolnexus.client.styles import AssistantTurn, Style, Usage
from toolnexus.codemode import (
    DEFAULT_SDK_THRESHOLD,
    CodeMode,
    filter_tools,
    visible_tools,
)
from toolnexus.codemode.runtimes import CodeRuntime
from toolnexus.errors import ConfigurationError, ProviderError, ProviderProtocolError
from toolnexus.scheduling import (
    Outcome,
    Scheduler,
    ToolCall,
    record_tool_result,
    snapshot,
    transcript_arguments,
)
from toolnexus.session import Session, events
from toolnexus.tools import (
    Guards,
    Tool,
    Toolkit,
    ToolResult,
    dispatch_call,
    is_relay,
    outcome_from_value,
)
from toolnexus.tools.tiers import tool_tiers

__all__ = [
    "LoopConfig",
    "Meter",
    "agent_loop",
    "call_without_an_id",
    "check_tool_choice",
    "count_retries",
    "model_response",
    "provider_stop",
    "turn_tool_choice",
]

CANCELLED = "the run was cancelled before this call finished"
DROPPED = (
    "its turn was dropped before the call finished ({why}): the call was stopped, and the "
    "model is not told of it"
)
"""The outcome of a started call whose turn never enters the transcript (see `_Run.dropped`)."""


class Meter(Protocol):
    """Spending limits checked *as they are spent*, not after a run.

    The loop asks `check` before every model request and `tool_call` before every
    tool call; it reports each response's usage to `spend` (a whole response's before its
    calls start; a streamed one's at its end, when its first calls may already be running). A
    reason (a sentence) stops the run as ``"incomplete"`` (``RunResult.stopped_by``) or fails
    that one call. The agent runtime meters a whole tree of agents this way, so recursive
    delegation cannot outspend its budget while the runs are still going.
    """

    def check(self) -> str | None:
        """Why no further model request may be made, or ``None``."""
        ...

    def spend(self, usage: Usage) -> None:
        """A response's tokens were spent."""
        ...

    def tool_call(self) -> str | None:
        """Count one tool call about to run; why it may not, or ``None``."""
        ...


@dataclass
class LoopConfig:
    """Everything a run needs besides the prompt, the tools and the history."""

    style: Style
    mode: CodeMode
    max_turns: int
    max_concurrency: int
    runtime: CodeRuntime | None = None
    guards: Guards = field(default_factory=Guards)
    deps: Any = None
    tiers: bool | None = None
    relay_handler: RelayHandler | None = None
    request_gate: asyncio.Semaphore | None = None
    meter: Meter | None = None
    fallback: tuple[Style, ...] = ()
    tool_choice: str | None = None
    tool_choice_every_turn: bool = False
    hosted_call_timeout: float | None = 240.0
    calls_timeout: float | None = 600.0
    sdk_threshold: int = DEFAULT_SDK_THRESHOLD
    always_loaded: tuple[str, ...] = ()


class _Run:
    """The state of one run: transcript, session, records."""

    def __init__(
        self,
        config: LoopConfig,
        prompt: str,
        tools: Sequence[Tool],
        history: Sequence[dict[str, Any]],
        session: Session,
        output: Output | None = None,
    ) -> None:
        self.config = config
        self.output = output
        self.session = session
        # recorded as sent: a lone surrogate goes out (and into the log) as U+FFFD
        self.session.append(*events.user_message(encodable_text(prompt)))
        self.messages = config.style.opening(history, prompt)
        self.records: list[ToolCallRecord] = []
        self.usage = Usage()
        self.turns = 0  # the model's replies so far (as the turn rule counts them)
        self.text = ""
        offered = _offered_tools(config, tools)
        if output is not None:  # offered directly, whatever the mode: the run's way to end
            offered = [*[t for t in offered if t.name != OUTPUT_TOOL], output.tool]
        check_tool_choice(config.tool_choice, offered)
        if config.style.hosted_code:
            _check_hosted(offered)
        self.kit = Toolkit(offered)
        self.definitions = config.style.tool_definitions(offered)
        if isinstance(config.style, InProcessStyle):  # shown as data what a program may call
            granted = filter_tools(tools, config.guards.permissions)
            self.definitions = config.style.with_program_tools(self.definitions, granted)
        self.ctx = config.guards.context(config.deps, session=session)
        # a turn waiting for the host to answer relay calls: its calls and outcomes so far
        self.waiting: tuple[list[ToolCall], list[Outcome], int] | None = None
        self.stopped_by: str | None = None  # why the rule stopped the run early
        self.models: list[str] = []  # the model that answered each turn
        # what the run does next, decided by the turn rule from each reply and its outcomes
        self.rule = TurnRule(config.max_turns, output.retries if output is not None else None)
        self.decision: Decision | None = None
        self.decoded: dict[int, tuple[ToolCall, Any]] = {}  # id(call) -> (call, its arguments)
        # what later requests must carry (AssistantTurn.state), per endpoint: a container or
        # a previous_response_id names something only the endpoint that made it has
        self.states: dict[str, dict[str, Any]] = {}
        # id(entry) -> (entry, endpoint) of each transcript entry a fallback endpoint made;
        # every other entry (the history's included) counts as the primary endpoint's own
        self.origins: dict[int, tuple[dict[str, Any], str]] = {}

    def result(self, status: RunStatus) -> RunResult:
        pending = []
        if self.waiting is not None:
            calls, outcomes, _ = self.waiting
            pending = [c for c, o in zip(calls, outcomes, strict=True) if o is PENDING]
        return RunResult(
            self.text,
            self.messages,
            self.records,
            self.turns,
            self.usage,
            status,
            self.session,
            pending,
            self,
            self.stopped_by,
            list(self.models),
            self.output.value if self.output is not None and self.output.received else None,
        )

    def decode(self, call: ToolCall) -> Any:
        """The call's arguments, decoded once per call (for the transcript, the records and
        the call itself): a JSON object, or the raw text when it is not one."""
        # keyed by id, and holding the call: while it is held its id cannot be reused by a
        # later call (ToolCall's own hash would need hashable arguments, which dicts are not)
        held = self.decoded.get(id(call))
        if held is None or held[0] is not call:
            held = self.decoded[id(call)] = (call, transcript_arguments(call))
        return held[1]

    def record(self, call: ToolCall, outcome: Outcome) -> ToolCallRecord:
        """The call's record, appended to the run's (made without the frozen dataclass's
        ``__init__``: see `made_record`)."""
        entry = made_record(
            call.id,
            call.name,
            snapshot(self.decode(call)),  # a copy of its own
            outcome.text,
            outcome.error is not None,
            outcome.metadata,
        )
        self.records.append(entry)
        return entry

    def ask_for_output(self, asked: AskForOutput) -> None:
        """Tell the model to answer through the output tool (the rule counted the try: when
        the tries had run out it stopped the run instead, and the request is left out of the
        transcript, which holds only what was sent)."""
        self.messages.append({"role": "user", "content": asked.message})
        self.session.append(*events.user_message(asked.message))

    def fell_back(self, failed: Style, next_style: Style, error: ProviderError) -> None:
        """Log that ``failed`` could not answer and ``next_style`` is asked instead."""
        self.session.log_event(
            *events.fallback(
                self.turns + 1,
                failed=f"{failed.model} at {failed.base_url}",
                error=error.message,
                next=f"{next_style.model} at {next_style.base_url}",
            )
        )

    def sent_to(self, style: Style) -> list[dict[str, Any]]:
        """The transcript as ``style`` is sent it: as it is to the endpoint whose every turn
        it holds, else with the other endpoints' turns in their neutral form (`own_state_only`:
        a fallback is never sent another endpoint's opaque state, nor is the primary a
        fallback's)."""
        primary = self.config.style.endpoint
        endpoint = style.endpoint
        if endpoint == primary and not self.origins:
            return self.messages
        origins = self.origins

        def foreign(entry: dict[str, Any]) -> bool:
            made = origins.get(id(entry))
            return (made[1] if made is not None and made[0] is entry else primary) != endpoint

        return own_state_only(style, self.messages, foreign)

    def state_for(self, style: Style) -> dict[str, Any]:
        """What ``style``'s requests must carry: the state its own endpoint's turns left (a
        fallback starts from the full transcript, never from another's response id)."""
        return self.states.get(style.endpoint, {})

    def answered(self, reply: AssistantTurn, by: Style | None = None) -> None:
        """Record a model response: the moment it is known, before its calls start (whole
        responses), so a log saved at any later moment holds the calls that may have run.
        ``by``: the style that answered (a fallback's; else the client's own).

        A refused or cut-off response ends the run and never enters the transcript: sent
        again, it would only be refused again (the provider's advice is to leave it out).
        """
        answering = by or self.config.style
        self.decision = self.rule.reply(
            reply.ending,
            reply.calls,
            stop_reason=reply.stop_reason,
            stop_details=reply.stop_details,
            sender=f"the model at {self.config.style.base_url}",
        )
        self.turns = self.rule.turns
        self.usage.add(reply.usage)
        if self.config.meter is not None:
            self.config.meter.spend(reply.usage)
        self.text = reply.text
        # a bookkeeping record of the request (what it cost), for toolnexus.view
        response = model_response(self.turns, answering.model, reply.usage, reply.stop_reason)
        self.session._append_json(*response)
        if reply.ending in ("refused", "context_window"):
            self.provider_stopped(reply)
            return
        self.states.setdefault(answering.endpoint, {}).update(reply.state)
        transcript = reply.transcript
        self.messages.extend(transcript)
        if answering.endpoint != self.config.style.endpoint:
            for entry in transcript:
                self.origins[id(entry)] = (entry, answering.endpoint)
        calls = []
        for call in reply.calls:
            entry = {"id": call.id, "name": call.name, "arguments": self.decode(call)}
            if call.caller is not None:
                entry["caller"] = dict(call.caller)
            calls.append(entry)
        # built here from decoded JSON and text: JSON-shaped already, so not copied again
        recorded = reply.recorded if answering.keeps_state else None
        # the endpoint is whose state it is: a later run sends it to that endpoint only
        said = events.assistant_message(
            reply.text, calls, recorded, answering.family, answering.endpoint
        )
        self.session._append_json(*said)

    def provider_stopped(self, reply: AssistantTurn) -> None:
        """The provider ended the run (a refusal, or a conversation past the context window):
        logged as a ``model_stop`` event (the rule's `Stop` says how the run ends)."""
        self.session.log_event(
            *events.model_stop(
                self.turns, reply.stop_reason or reply.ending, reply.stop_details, reply.text
            )
        )

    def dropped(
        self, turn: int, calls: list[ToolCall], known: list[Outcome | None], why: str
    ) -> list[ToolCallRecord]:
        """Record the calls of a turn that never enters the transcript (refused, past the
        context window, failed or cut off after its first calls had started streaming).

        Each call may have run (a write may have happened), so each is kept: in the run's
        records (``RunResult.tool_calls``, ``ProviderError.partial``), with its real outcome
        when it had finished and `DROPPED` otherwise, and in the session as a
        ``call_outside_transcript`` bookkeeping event (which no message is made of: the
        transcript holds no turn for it to answer).
        """
        records = []
        for call, outcome in zip(calls, known, strict=True):
            if outcome is None or outcome is PENDING:
                outcome = Outcome.failure(call.name, DROPPED.format(why=why), "dropped")
            record = self.record(call, outcome)
            records.append(record)
            data = events.CallOutsideTranscriptData(
                turn=turn,
                tool_call_id=call.id,
                name=call.name,
                arguments=record.arguments,
                content=record.output,
                is_error=record.is_error,
                why=why,
            )
            # built from a snapshot and text: JSON-shaped, with any lone surrogate mended
            self.session._append_json(events.CALL_OUTSIDE_TRANSCRIPT, encodable_data(data))
        return records

    def results(self, calls: list[ToolCall], outcomes: list[Outcome]) -> None:
        self.messages.extend(self.config.style.results(calls, outcomes))
        for call, outcome in zip(calls, outcomes, strict=True):
            record_tool_result(self.session, call, outcome)
        received = self.output is not None and self.output.received
        self.decision = self.rule.settle(calls, outcomes, self.allowed_retries, received=received)

    def allowed_retries(self, name: str) -> int | None:
        """The ``retries`` of the offered tool ``name`` (``None``: not set, or no such tool)."""
        tool = self.kit.get(name)
        return None if tool is None else tool.retries


def model_response(turn: int, model: str, usage: Usage, stop_reason: str | None) -> events.Entry:
    """The ``model_response`` bookkeeping event of one model request and its cost."""
    return events.model_response(
        turn,
        model,
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
        stop_reason,
    )


def check_tool_choice(choice: str | None, offered: Sequence[Tool]) -> None:
    """Refuse a tool choice the run's offered tools cannot honour, before any request."""
    if choice is None or choice in ("auto", "none"):
        return
    names = [t.name for t in offered]
    if choice == "required" and names:
        return
    if choice in names:
        return
    listed = ", ".join(names) or "no tools"
    raise ConfigurationError(
        f"tool_choice={choice!r} cannot be honoured: this run offers {listed} (after the "
        "permission policy, the Code Mode mode and tool tiers); name one of them, or use "
        "'auto', 'none' or 'required'."
    )


def _check_hosted(offered: Sequence[Tool]) -> None:
    """Refuse a relay tool offered to a provider-hosted program, before any request: the
    program would wait, paused on the provider's side, for an answer only the host gives.

    Raises:
        ConfigurationError: naming the tool and the fix.
    """
    for offered_tool in offered:
        if "hosted" in offered_tool.callers and is_relay(offered_tool):
            raise ConfigurationError(
                f"tool {offered_tool.name!r} is a relay tool and cannot be called by a "
                "provider-hosted program (the program would wait for the host's answer until "
                "the provider gives up); give it callers=('direct',)."
            )


def _offered_tools(config: LoopConfig, tools: Sequence[Tool]) -> list[Tool]:
    """The tools the model is offered: the mode's view of the granted tools, tiered in native
    mode (Code Mode programs call tools directly: no tiers there)."""
    granted = filter_tools(tools, config.guards.permissions)
    visible = visible_tools(
        config.mode,
        tools,
        granted,
        runtime=config.runtime,
        policy=config.guards.permissions,
        sdk_threshold=config.sdk_threshold,
        always_loaded=config.always_loaded,
    )
    if config.mode == "native":
        return tool_tiers(visible, enabled=config.tiers)
    return visible


async def agent_loop(
    config: LoopConfig,
    prompt: str,
    tools: Sequence[Tool],
    history: Sequence[dict[str, Any]],
    session: Session,
    *,
    stream: bool,
    output: Output | None = None,
    watched: bool = True,
) -> AsyncIterator[StreamEvent]:
    """Run the loop, yielding events; the last one is [`DoneEvent`][toolnexus.client.DoneEvent].

    ``watched``: whether the caller reads the events on the way. ``client.run`` reads only
    the last one, so its runs make no event per call (see `drive`).
    """
    run = _Run(config, prompt, tools, history, session, output)
    async for event in drive(run, stream=stream, watched=watched):
        yield event


async def resume_loop(
    run: _Run, answers: Mapping[str, Any], *, stream: bool, watched: bool = True
) -> AsyncIterator[StreamEvent]:
    """Continue a pending run: the host's answers complete the waiting turn, then the loop goes on.

    ``watched``: as for `agent_loop`.

    Raises:
        ConfigurationError: the run is not pending, or an answer is missing.
    """
    if run.waiting is None:
        raise ConfigurationError("this run is not pending: there is nothing to resume.")
    calls, outcomes, first_record = run.waiting
    missing = [
        c.id for c, o in zip(calls, outcomes, strict=True) if o is PENDING and c.id not in answers
    ]
    if missing:
        raise ConfigurationError(f"answers are missing for the pending calls {missing}.")
    for call, outcome in zip(calls, outcomes, strict=True):
        if outcome is PENDING:
            _check_answer(call.id, answers[call.id])
    done = [
        outcome_from_value(c.name, answers[c.id]) if o is PENDING else o
        for c, o in zip(calls, outcomes, strict=True)
    ]
    run.waiting = None
    del run.records[first_record:]  # the turn's records again, complete and in emitted order
    for call, before, outcome in zip(calls, outcomes, done, strict=True):
        record = run.record(call, outcome)
        if before is PENDING and watched:
            yield ToolResultEvent(record)
    run.results(calls, done)
    async for event in drive(run, stream=stream, watched=watched):
        yield event


def _check_answer(call_id: str, answer: Any) -> None:
    """Refuse an answer that cannot be handed to the model, before the run stops waiting.

    Raises:
        ConfigurationError: naming the call and what is wrong; the run stays pending.
    """
    value = answer
    if isinstance(answer, Outcome):
        value = answer.value if answer.error is None else answer.error.get("message")
    elif isinstance(answer, ToolResult):
        value = answer.output
    problem = json_problem(value, f"the answer for {call_id!r}", foreign_ok=True)
    if problem:
        raise ConfigurationError(
            f"{problem}; pass JSON data (or a string). The run is still pending: resume it again "
            "with corrected answers."
        )


async def drive(run: _Run, *, stream: bool, watched: bool = True) -> AsyncIterator[StreamEvent]:
    """Model turns until an answer without tools, ``max_turns``, or a pending relay call.

    Unless ``watched``, only the `DoneEvent` is yielded: text, call, result and usage events
    are not made at all. Each went up through four generators to a caller that dropped it,
    two per tool call, a measurable share of a run's cost per call.

    Raises:
        ProviderError: carrying the run so far as ``partial`` (status ``"error"``): the turns
            before the failure may have run tools with side effects.
    """
    rule = run.rule
    meter = run.config.meter
    budget = meter.check if meter is not None else None
    while True:
        asked = rule.request(budget)  # max_turns, and the meter's verdict
        if isinstance(asked, Stop):
            stop = asked
            break
        turn = asked.turn
        run.session._append_json(*events.turn_start(turn))  # an int: JSON as it is
        try:
            async for event in _turn(run, stream=stream, watched=watched):
                if not isinstance(event, AssistantTurn):
                    yield event
        except ProviderError as exc:
            run.session.log_event(*events.turn_end(turn, exc.message))
            exc.partial = run.result("error")
            raise
        run.session._append_json(*events.turn_end(turn))
        decided = run.decision  # from the reply, or from its calls' outcomes
        if isinstance(decided, Stop):  # refused, retries or output, done, pending
            stop = decided
            break
        if isinstance(decided, AskForOutput):  # text where a structured result was asked for
            run.ask_for_output(decided)
        # else the next turn: after calls, or a paused turn sent back as it is
    run.stopped_by = stop.reason
    yield DoneEvent(run.result(stop.status))


def not_callers_fault(error: ProviderError) -> bool:
    """Whether another endpoint might answer where this one failed: no answer at all, a server
    error, or a rate limit (after the retries); not a refusal of the request itself."""
    return error.status is None or error.status == 429 or error.status >= 500


def _tool_choice(run: _Run) -> str | None:
    """This turn's tool choice: the configured one on the first turn (or every turn, when
    asked), else ``None`` (the style sends ``"auto"`` where the wire needs it)."""
    config = run.config
    return turn_tool_choice(config.tool_choice, config.tool_choice_every_turn, run.turns)


async def _turn(
    run: _Run, *, stream: bool, watched: bool
) -> AsyncIterator[StreamEvent | AssistantTurn]:
    """One model round trip and its tool calls; yields events (when ``watched``), then the
    assistant turn."""
    config = run.config
    lane = Scheduler(
        dispatch_call, max_parallel=config.max_concurrency, audit=False, session=run.session
    )
    batch = TurnCalls(
        lane,
        run.kit,
        config.mode,
        run.ctx,
        config.relay_handler,
        config.meter,
        direct=(OUTPUT_TOOL,) if run.output is not None else (),
        decode=run.decode,
        hosting=config.style.hosted_code,
    )
    events: asyncio.Queue[StreamEvent | None] = asyncio.Queue()  # None: the response ended

    announced = False  # whether anything of a response reached the caller (no fallback then)

    async def on_text(text: str) -> None:
        nonlocal announced
        announced = True
        if watched:
            events.put_nowait(TextDelta(text))

    async def on_call(call: ToolCall) -> None:
        nonlocal announced
        announced = True
        batch.submit(call)  # starts now, while the response may still be streaming
        if watched:
            events.put_nowait(ToolCallEvent(call))

    async def respond() -> AssistantTurn:
        styles = (config.style, *config.fallback)
        async with config.request_gate or contextlib.nullcontext():  # a shared request cap
            for number, style in enumerate(styles, start=1):
                try:
                    turn = await style.respond(
                        run.sent_to(style),
                        run.definitions,
                        stream=stream,
                        on_text=on_text,
                        on_call=on_call,
                        on_complete=functools.partial(run.answered, by=style),
                        tool_choice=_tool_choice(run),
                        state=run.state_for(style),
                    )
                except ProviderError as exc:
                    if announced or number == len(styles) or not not_callers_fault(exc):
                        raise
                    run.fell_back(style, styles[number], exc)
                    continue
                run.models.append(style.model)
                return turn
        raise AssertionError("unreachable: the last style returns or raises")

    # Watched, the response is a task of its own, so that its text and calls reach the caller
    # while it streams; unwatched (``client.run``), nothing is passed on before it ends, and
    # it is awaited here: no task, no queue, no loop turns per response.
    responding: asyncio.Future[AssistantTurn] | None = None
    if watched:
        responding = asyncio.ensure_future(respond())
        responding.add_done_callback(lambda _: events.put_nowait(None))
    answered: list[Outcome] = []
    reply: AssistantTurn | None = None
    number = run.turns + 1
    why: str | None = None  # why the turn failed, when it did
    settled = False  # whether the calls of a dropped turn are recorded already
    try:
        try:
            if responding is None:
                reply = await respond()  # already recorded by run.answered (on_complete)
            else:
                while (event := await events.get()) is not None:
                    yield event
                reply = responding.result()  # already recorded by run.answered (on_complete)
        except ProviderError as exc:
            why = exc.message
            raise
        if watched:
            yield UsageEvent(reply.usage)
        if reply.ending not in ("answered", "paused"):  # not in the transcript
            if batch.calls:  # started while it streamed: stopped now, and each one recorded
                await lane.stop()
                known = await batch.finished()
                batch.cancel()
                settled = True
                for record in run.dropped(number, list(batch.calls), known, _dropped_why(reply)):
                    if watched:
                        yield ToolResultEvent(record)
            yield reply
            return
        first_record = len(run.records)
        deadline, late = calls_deadline(
            config.calls_timeout, config.hosted_call_timeout, batch.hosted
        )
        pending = False
        async for call, outcome in batch.outcomes(deadline, late):
            answered.append(outcome)
            if outcome is PENDING:
                pending = True
            else:
                record = run.record(call, outcome)
                if watched:
                    yield ToolResultEvent(record)
        refused = run.decision
        if isinstance(refused, Stop) and refused.status == "error":  # a call without an id
            raise ProviderProtocolError(None, refused.reason or "")
        if pending:
            run.waiting = (reply.calls, answered, first_record)  # resume() carries on
            run.decision = run.rule.waiting()
        elif reply.calls:
            run.results(reply.calls, answered)
        yield reply
    finally:
        if reply is None and responding is not None and _succeeded(responding):
            # cut short after the response arrived (and was recorded): its calls may have run
            reply = responding.result()
        cut_short = (
            reply is not None
            and reply.ending in ("answered", "paused")
            and run.waiting is None
            and len(answered) < len(reply.calls)
        )
        # a turn that never enters the transcript, whose calls had started while it streamed
        dropped = (
            not settled
            and bool(batch.calls)
            and (reply is None or reply.ending not in ("answered", "paused"))
        )
        if responding is not None and not responding.done():
            responding.cancel()
        await lane.stop()  # what finished is delivered, in order; what still ran is abandoned
        known = await batch.finished() if cut_short or dropped else []
        batch.cancel()
        if cut_short and reply is not None:
            # every call the transcript holds still gets a result, the real one where the
            # call had finished
            for index in range(len(answered), len(reply.calls)):
                result = known[index] if index < len(known) else None
                name = reply.calls[index].name
                answered.append(result or Outcome.failure(name, CANCELLED, "cancelled"))
            run.results(reply.calls, answered)
        elif dropped:
            reason = why or (_dropped_why(reply) if reply is not None else _CUT_SHORT)
            run.dropped(number, list(batch.calls), known, reason)


_CUT_SHORT = "the run was cancelled while the response was streaming"


def _dropped_why(reply: AssistantTurn) -> str:
    """Why a received turn is left out of the transcript, in words (see `provider_stop`)."""
    reason = reply.stop_reason or reply.ending
    if reply.ending == "refused":
        return f"the provider refused the turn ({reason})"
    return f"the conversation no longer fits the model's context window ({reason})"


def _succeeded(future: asyncio.Future[Any]) -> bool:
    return future.done() and not future.cancelled() and future.exception() is None
