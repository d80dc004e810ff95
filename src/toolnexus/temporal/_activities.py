"""The activities a toolnexus worker offers: classify a batch, run one tool call, ask the model.

Activities run on workers, with the real tools; the workflow only schedules them. A tool that
raises does not fail its activity: the failure is the call's outcome, recorded like any result,
so Temporal never retries a call because the tool said no. The only failures Temporal sees are a
lost worker (a heartbeat or start-to-close timeout), and only calls of idempotent tools are
tried again after one.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from toolnexus.client import (
    ACCEPTED,
    OUTPUT_TOOL,
    Client,
    RelayHandler,
    check_tool_choice,
    output_tool,
    turn_tool_choice,
)
from toolnexus.codemode import (
    RUN_CODE_NAME,
    default_runtime,
    program_output,
    render_sdk,
)
from toolnexus.codemode.runtimes import CodeRuntime, RunReport
from toolnexus.errors import ConfigurationError, ProviderError
from toolnexus.scheduling import Outcome, Scheduler, ToolCall, precheck, run_batch, snapshot
from toolnexus.temporal._wire import (
    PAYLOAD_BUDGET,
    call_from_wire,
    call_to_wire,
    outcome_from_wire,
    outcome_to_wire,
    permissions_from_wire,
    stored_size,
)
from toolnexus.tools import (
    Prechecked,
    RunContext,
    Tool,
    Toolkit,
    classify,
    dispatch_call,
    filter_tools,
    maybe_await,
    outcome_from_exception,
    outcome_from_value,
)
from toolnexus.tools.relay import is_relay

__all__ = [
    "CALL_TOOL",
    "CLASSIFY",
    "MODEL_TURN",
    "OPENING",
    "PROGRAM_STEP",
    "RESULTS",
    "ModelActivities",
    "ProgramActivities",
    "ToolActivities",
]

CLASSIFY = "toolnexus.classify"
CALL_TOOL = "toolnexus.call_tool"

DEFAULT_HEARTBEAT = timedelta(seconds=10)


class ToolActivities:
    """The tool activities of one worker, over its tools (matched by name with the caller's)."""

    def __init__(
        self,
        tools: Toolkit | Sequence[Tool],
        code_language: str = "python",
        client: Client | None = None,
    ) -> None:
        """``client``: the worker's client, whose guards (``permissions``, approval handler,
        hooks, ``deps``) the calls of durable agent runs get, as the calls of ``client.run``
        do; a durable batch runs as the in-process ``run_batch`` does, without them."""
        self.kit = tools if isinstance(tools, Toolkit) else Toolkit(tools)
        self.code_language = code_language
        self.guards: RunContext[Any] | None = None
        self.relay_handler: RelayHandler | None = None
        policy = None
        if client is not None:
            config = client._config
            policy = config.guards.permissions
            self.relay_handler = config.relay_handler
            self.guards = config.guards.context(config.deps)
        self.run_kit = Toolkit(filter_tools(list(self.kit), policy))  # what a run is offered

    @activity.defn(name=CLASSIFY)
    async def classify(
        self, request: list[dict[str, Any]] | dict[str, Any]
    ) -> list[dict[str, Any]]:
        """Each call's class and declared resources, or its answer when it cannot run (an
        unknown tool, arguments that are not JSON or do not match the schema); and the tool's
        ``retries`` (``None`` when not set), which the run counts its tries against.

        ``request``: the calls, or ``{"calls": [...], "run": bool, "output": {"schema",
        "retries"} | None}``. The calls of an agent run (``run``) may call only the tools the
        worker's client's ``permissions`` allow, as in process; in a run with an output type,
        its ``final_result`` calls are answered here, by the output tool's schema (accepted,
        or field errors the model may fix), as in process.

        Recorded in the history, so a replay schedules from exactly these facts, whatever the
        workers' tools look like by then.
        """
        calls = request if isinstance(request, list) else request["calls"]
        asked = {} if isinstance(request, list) else request
        kit = self.run_kit if asked.get("run") else self.kit  # a denied tool is unknown there
        if asked.get("permissions") is not None:  # the caller's, narrowing the tools further
            kit = Toolkit(filter_tools(list(kit), permissions_from_wire(asked["permissions"])))
        output = asked.get("output")
        if output is not None:  # the output tool replaces a tool of its name, as in process
            made = output_tool(output["schema"], output["retries"], _accepted)
            kit = Toolkit([*(t for t in kit if t.name != OUTPUT_TOOL), made])
        classified: list[dict[str, Any]] = []
        for data in calls:
            call = call_from_wire(data)
            known = kit.get(call.name)
            retries = None if known is None else known.retries
            checked = precheck(call, kit)
            if isinstance(checked, Outcome):
                answer = outcome_to_wire(checked, call.name)
                classified.append({"answer": answer, "retries": retries})
                continue
            tool, args = checked
            if output is not None and tool.name == OUTPUT_TOOL:
                accepted = outcome_to_wire(Outcome(value=ACCEPTED), call.name)
                classified.append({"answer": accepted, "retries": retries})
                continue
            mode, resources = classify(tool, args)
            hints = tool.hints
            facts: dict[str, Any] = {
                "mode": mode,
                "resources": None if resources is None else resources.to_json(),
                "idempotent": hints is not None and hints.idempotent is True,
                "retries": retries,
            }
            if tool.name == RUN_CODE_NAME:  # run as a durable program, its sub-calls activities
                facts["program"] = {"code": args["code"], "language": self.code_language}
            classified.append(facts)
        return classified

    @activity.defn(name=CALL_TOOL)
    async def call_tool(self, request: dict[str, Any]) -> dict[str, Any]:
        """Run one call and return its outcome (a tool's failure included) as JSON data.

        It runs exactly as an in-process batch of one runs it (``toolnexus.run_batch``): the
        same checks, the same span, the same outcome; a call of an agent run (``"run"`` in
        ``request``) runs as ``client.run`` runs it, under the worker's client's guards
        (approval, hooks, ``deps``). This worker heartbeats meanwhile.
        """
        call = call_from_wire(request["call"])
        async with _heartbeating():
            if request.get("run") and self.guards is not None:
                outcome = await _guarded(call, self.run_kit, self.guards, self.relay_handler)
            else:
                outcome = (await run_batch([call], self.kit))[0]
        return outcome_to_wire(outcome, call.name, activity.payload_converter())


async def _guarded(
    call: ToolCall, kit: Toolkit, guards: RunContext[Any], relay_handler: RelayHandler | None
) -> Outcome:
    """One call of an agent run, through the dispatch every in-process run's call takes:
    approval (refused without a handler when the tool needs it), before-hooks, the tool,
    after-hooks, in a lane of its own (so a tool's ``timeout`` holds). A relay tool's call is
    answered by the client's ``relay_handler``, as in process; without one it fails as data
    (a durable run cannot wait for the host)."""
    checked = precheck(call, kit)
    if isinstance(checked, Outcome):
        return checked
    tool, args = checked
    if is_relay(tool):
        if relay_handler is None:
            return Outcome.failure(call.name, NO_RELAY_HANDLER)
        try:
            answer = relay_handler(ToolCall(call.id, call.name, snapshot(args)))
            return outcome_from_value(call.name, await maybe_await(answer))
        except Exception as exc:
            return outcome_from_exception(call.name, exc)
    ctx = dataclasses.replace(guards, call_id=call.id)
    async with Scheduler(dispatch_call, max_parallel=1, audit=False) as lane:
        return await lane.wait(lane.submit(tool, args, Prechecked(ctx), call_id=call.id))


@contextlib.asynccontextmanager
async def _heartbeating() -> AsyncIterator[None]:
    """Tell the server this worker is alive, three times per heartbeat timeout, while the
    block runs."""
    timeout = activity.info().heartbeat_timeout or DEFAULT_HEARTBEAT
    interval = max(timeout.total_seconds() / 3, 0.05)

    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(interval)

    beating = asyncio.create_task(beat())
    try:
        yield
    finally:
        beating.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beating


def _check_choice(choice: str | None, offered: Sequence[Tool]) -> None:
    """Refuse, for good, a run whose ``tool_choice`` names a tool its caller's permissions
    took away (in process, the client refuses it before any request)."""
    try:
        check_tool_choice(choice, offered)
    except ConfigurationError as exc:
        raise ApplicationError(str(exc), type="ConfigurationError", non_retryable=True) from None


NO_RELAY_HANDLER = (
    "a relay tool is answered by the host, and a durable run cannot wait for it: give the "
    "workers' client a relay_handler"
)

OPENING = "toolnexus.opening"
MODEL_TURN = "toolnexus.model_turn"
RESULTS = "toolnexus.results"


class ModelActivities:
    """The model side of a durable agent run: the worker's toolnexus ``Client`` builds the
    messages in its provider's shape and makes each model request."""

    def __init__(self, client: Client, kit: Toolkit) -> None:
        """Raises:
        ConfigurationError: the client's ``tool_choice`` names a tool ``kit`` does not have
            (as ``client.run`` refuses it before any request).
        """
        config = client._config
        self.style = config.style
        self.tools = filter_tools(list(kit), config.guards.permissions)  # offered, as in process
        self.definitions = self.style.tool_definitions(self.tools)
        self.tool_choice = config.tool_choice
        self.every_turn = config.tool_choice_every_turn
        self.calls_timeout = config.calls_timeout
        if self.tool_choice != OUTPUT_TOOL:  # offered by the runs that ask for an output
            check_tool_choice(self.tool_choice, self.tools)

    @activity.defn(name=OPENING)
    async def opening(self, prompt: str) -> list[dict[str, Any]]:
        """The first messages of a run: the client's system prompt, then ``prompt``."""
        return self.style.opening([], prompt)

    @activity.defn(name=MODEL_TURN)
    async def model_turn(self, request: list[dict[str, Any]] | dict[str, Any]) -> dict[str, Any]:
        """One model request, as ``client.run`` makes it: the same tools offered (with the
        output tool of a run that asks for an output type) and the client's ``tool_choice``
        on the same turns.

        ``request``: ``{"messages", "turn" (answered turns before this one), "output"}`` and
        the caller's ``"permissions"`` when it gave some, or the messages alone (a run
        started by an earlier version). The client retried what was
        worth retrying already, so a provider error ends the run rather than being retried
        again; this worker heartbeats meanwhile, so a lost worker is noticed and the request
        is made again elsewhere, within the run's ``model_timeout``.
        """
        if isinstance(request, list):
            messages, turns, output = request, 0, None
        else:
            messages, turns, output = request["messages"], request["turn"], request["output"]
        definitions = self.definitions
        permissions = None if isinstance(request, list) else request.get("permissions")
        if output is not None or permissions is not None:
            offered = self.tools
            if permissions is not None:  # the caller's, narrowing what the run is offered
                offered = filter_tools(offered, permissions_from_wire(permissions))
                if self.tool_choice != OUTPUT_TOOL:
                    _check_choice(self.tool_choice, offered)
            if output is not None:
                made = output_tool(output["schema"], output["retries"], _accepted)
                offered = [*(t for t in offered if t.name != OUTPUT_TOOL), made]
            definitions = self.style.tool_definitions(offered)
        choice = turn_tool_choice(self.tool_choice, self.every_turn, turns)
        try:
            async with _heartbeating():
                turn = await self.style.respond(
                    messages,
                    definitions,
                    stream=False,
                    on_text=_ignore,
                    on_call=_ignore,
                    tool_choice=choice,
                )
        except ProviderError as exc:
            raise ApplicationError(
                exc.message,
                {
                    "status": exc.status,
                    "detail": exc.detail,
                    "kind": type(exc).__name__,  # the cause's class, rebuilt by the client
                    "retry_after": getattr(exc, "retry_after", None),
                },
                type="ProviderError",
                non_retryable=True,
            ) from None
        return {
            "text": turn.text,
            "calls": [call_to_wire(call) for call in turn.calls],
            "usage": dataclasses.asdict(turn.usage),
            "transcript": turn.transcript,
            # as JSON text: Temporal's payloads sort an object's keys, and the session log
            # keeps the provider's message exactly as it came
            "recorded_json": json.dumps(turn.recorded) if self.style.keeps_state else None,
            "family": self.style.family,
            "endpoint": self.style.endpoint,  # whose state ``recorded`` is
            "ending": turn.ending,
            "stop_reason": turn.stop_reason,
            "stop_details": turn.stop_details,
            "model": self.style.model,
            "calls_timeout": self.calls_timeout,  # how long the turn's calls may take in all
        }

    @activity.defn(name=RESULTS)
    async def results(self, request: dict[str, Any]) -> list[dict[str, Any]]:
        """The messages that hand a turn's outcomes back, in the provider's shape."""
        calls = [call_from_wire(c) for c in request["calls"]]
        outcomes = [outcome_from_wire(o) for o in request["outcomes"]]
        return self.style.results(calls, outcomes)


async def _ignore(_: object) -> None:
    return None


def _accepted(_: object) -> str:
    return ACCEPTED


PROGRAM_STEP = "toolnexus.program_step"

QUIET_SECONDS = 0.05
"""After a program's first new sub-call, how long a step waits for its siblings (a fan-out
issues them back to back) before it hands the batch to the workflow."""


class ProgramActivities:
    """One step of a durable Code Mode program: re-run it with the sub-call outcomes recorded
    so far, up to the sub-calls it makes next.

    Why re-run rather than resume: a sandbox's state cannot be stored in Temporal's history,
    but a program's sub-calls and their outcomes can. Run again with those outcomes handed
    back at once, a program makes the same calls in the same order, so it reaches the point
    where it stopped without any side effect repeated; what it asks for next is new. A program
    whose calls depend on anything else (the clock, randomness) is caught: its replayed calls
    differ from the recorded ones, and the step says so instead of guessing.
    """

    def __init__(self, kit: Toolkit, runtime: CodeRuntime | None = None) -> None:
        self.tools = [t for t in kit if t.name != RUN_CODE_NAME]
        self.runtime = runtime

    @activity.defn(name=PROGRAM_STEP)
    async def program_step(self, request: dict[str, Any]) -> dict[str, Any]:
        """``{"done": output}`` (what ``run_program`` returns, as JSON text: Temporal would sort
        its keys), ``{"calls": [...]}`` (the new sub-calls, in the order the program made
        them) or ``{"diverged": message}``."""
        runtime = self.runtime
        if runtime is None or runtime.language != request["language"]:
            runtime = default_runtime(request["language"])
        recorded: list[dict[str, Any]] = request["recorded"]
        made: list[dict[str, Any]] = []
        new_call = asyncio.Event()
        diverged: list[str] = []

        async def call_tool(name: str, args: Any) -> Outcome:
            index = len(made)
            made.append({"name": name, "arguments": snapshot(args)})
            if index < len(recorded):
                before = recorded[index]
                if before["name"] == name and before["arguments"] == made[index]["arguments"]:
                    return outcome_from_wire(before["outcome"])
                diverged.append(
                    f"replayed, the program's call {index + 1} was {name} with "
                    f"{made[index]['arguments']!r}, where it had been {before['name']} with "
                    f"{before['arguments']!r}: a durable program must make the same calls "
                    "given the same results (no clock, no randomness)"
                )
            new_call.set()
            await asyncio.Event().wait()  # never answered in this step: the step ends first
            raise AssertionError("unreachable")

        sdk = render_sdk(runtime.language, self.tools)
        names = [t.name for t in self.tools]
        run = asyncio.ensure_future(
            runtime.run(request["code"], tool_names=names, call_tool=call_tool, sdk=sdk)
        )
        async with _heartbeating():
            report = await _until_new_calls(run, new_call, made)
        if diverged:
            return {"diverged": diverged[0]}
        if report is None:
            result: dict[str, Any] = {"calls": made[len(recorded) :]}
        else:
            output = program_output(report, [])  # the workflow knows the calls and adds them
            result = {"done": json.dumps(output, ensure_ascii=False)}
        if request.get("store"):
            return result
        size = stored_size(result, activity.payload_converter())
        if size <= PAYLOAD_BUDGET:
            return result
        what = "output" if report is not None else "next round of sub-calls"
        message = (
            f"the program's {what} takes {size:,} bytes as Temporal stores it, past its 2 MB "
            "payload limit; return less (or make fewer calls at once), or connect the caller "
            "and the workers with data_converter=toolnexus.temporal.file_store(directory)"
        )
        failed = {"error": {"kind": "limit", "message": message}, "logs": []}
        return {"done": json.dumps(failed, ensure_ascii=False)}


async def _until_new_calls(
    run: asyncio.Future[RunReport], new_call: asyncio.Event, made: list[dict[str, Any]]
) -> RunReport | None:
    """The run's report, or ``None`` once it has made new calls and gone quiet (the run is
    then stopped: the next step runs it again with their outcomes)."""
    waiting: asyncio.Future[Any] = asyncio.ensure_future(new_call.wait())
    try:
        await asyncio.wait({run, waiting}, return_when=asyncio.FIRST_COMPLETED)
        if run.done():
            return run.result()
        count = -1
        while count != len(made) and not run.done():
            count = len(made)
            await asyncio.wait({run}, timeout=QUIET_SECONDS)
        if run.done() and not new_call.is_set():
            return run.result()
        return None
    finally:
        waiting.cancel()
        if not run.done():
            run.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await run
