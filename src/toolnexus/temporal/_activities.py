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
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from toolnexus._tracing import end_tool_span, tool_span
from toolnexus.client import Client
from toolnexus.errors import ProviderError
from toolnexus.scheduling import Outcome
from toolnexus.scheduling._batch import precheck
from toolnexus.scheduling._outcome import outcome_from_exception, outcome_from_value
from toolnexus.temporal._wire import (
    call_from_wire,
    call_to_wire,
    outcome_from_wire,
    outcome_to_wire,
)
from toolnexus.tools import Tool, Toolkit, classify

__all__ = [
    "CALL_TOOL",
    "CLASSIFY",
    "MODEL_TURN",
    "OPENING",
    "RESULTS",
    "ModelActivities",
    "ToolActivities",
]

CLASSIFY = "toolnexus.classify"
CALL_TOOL = "toolnexus.call_tool"

DEFAULT_HEARTBEAT = timedelta(seconds=10)


class ToolActivities:
    """The tool activities of one worker, over its tools (matched by name with the caller's)."""

    def __init__(self, tools: Toolkit | Sequence[Tool]) -> None:
        self.kit = tools if isinstance(tools, Toolkit) else Toolkit(tools)

    @activity.defn(name=CLASSIFY)
    async def classify(self, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each call's class and declared resources, or its answer when it cannot run (an
        unknown tool, arguments that are not JSON or do not match the schema).

        Recorded in the history, so a replay schedules from exactly these facts, whatever the
        workers' tools look like by then.
        """
        classified: list[dict[str, Any]] = []
        for data in calls:
            call = call_from_wire(data)
            checked = precheck(call, self.kit)
            if isinstance(checked, Outcome):
                classified.append({"answer": outcome_to_wire(checked, call.name)})
                continue
            tool, args = checked
            mode, resources = classify(tool, args)
            hints = tool.hints
            classified.append(
                {
                    "mode": mode,
                    "reads": None if resources is None else sorted(resources.reads),
                    "writes": None if resources is None else sorted(resources.writes),
                    "idempotent": hints is not None and hints.idempotent is True,
                }
            )
        return classified

    @activity.defn(name=CALL_TOOL)
    async def call_tool(self, request: dict[str, Any]) -> dict[str, Any]:
        """Run one call and return its outcome (a tool's failure included) as JSON data."""
        call = call_from_wire(request["call"])
        checked = precheck(call, self.kit)
        if isinstance(checked, Outcome):
            return outcome_to_wire(checked, call.name)
        tool, args = checked
        beating = asyncio.create_task(_heartbeat())
        span = tool_span(
            tool.name,
            lambda: {
                "gen_ai.tool.call.id": call.id,
                "toolnexus.call.seq": request.get("seq"),
                "toolnexus.temporal.attempt": activity.info().attempt,
            },
        )
        try:
            outcome = outcome_from_value(tool.name, await tool.invoke(args, None))
        except Exception as exc:
            outcome = outcome_from_exception(tool.name, exc)
        finally:
            beating.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beating
        end_tool_span(span, outcome.error)
        return outcome_to_wire(outcome, tool.name)


async def _heartbeat() -> None:
    """Tell the server this worker is alive, three times per heartbeat timeout."""
    timeout = activity.info().heartbeat_timeout or DEFAULT_HEARTBEAT
    interval = max(timeout.total_seconds() / 3, 0.05)
    while True:
        activity.heartbeat()
        await asyncio.sleep(interval)


OPENING = "toolnexus.opening"
MODEL_TURN = "toolnexus.model_turn"
RESULTS = "toolnexus.results"


class ModelActivities:
    """The model side of a durable agent run: the worker's toolnexus ``Client`` builds the
    messages in its provider's shape and makes each model request."""

    def __init__(self, client: Client, kit: Toolkit) -> None:
        self.style = client._config.style
        self.definitions = self.style.tool_definitions([t for n in kit.names if (t := kit.get(n))])

    @activity.defn(name=OPENING)
    async def opening(self, prompt: str) -> list[dict[str, Any]]:
        """The first messages of a run: the client's system prompt, then ``prompt``."""
        return self.style.opening([], prompt)

    @activity.defn(name=MODEL_TURN)
    async def model_turn(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """One model request. The client retried what was worth retrying already, so a
        provider error ends the run rather than being retried again."""
        try:
            turn = await self.style.respond(
                messages, self.definitions, stream=False, on_text=_ignore, on_call=_ignore
            )
        except ProviderError as exc:
            raise ApplicationError(str(exc), type="ProviderError", non_retryable=True) from None
        return {
            "text": turn.text,
            "calls": [call_to_wire(call) for call in turn.calls],
            "usage": {
                "input_tokens": turn.usage.input_tokens,
                "output_tokens": turn.usage.output_tokens,
            },
            "message": turn.message,
            "model": self.style.model,
        }

    @activity.defn(name=RESULTS)
    async def results(self, request: dict[str, Any]) -> list[dict[str, Any]]:
        """The messages that hand a turn's outcomes back, in the provider's shape."""
        calls = [call_from_wire(c) for c in request["calls"]]
        outcomes = [outcome_from_wire(o) for o in request["outcomes"]]
        return self.style.results(calls, outcomes)


async def _ignore(_: object) -> None:
    return None
