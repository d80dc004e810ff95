"""What crosses Temporal: calls, classifications and outcomes as plain JSON data.

Workflow inputs, activity arguments and results are stored in the workflow's history, so they
are plain dictionaries (Temporal's default JSON converter), never live objects. Each payload is
limited (2 MB by default on the server): a tool result past `MAX_RESULT_BYTES` becomes a failed
call that says so, rather than a workflow that cannot record its own history.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from toolnexus.scheduling import Outcome, ToolCall, snapshot

__all__ = [
    "MAX_RESULT_BYTES",
    "Timings",
    "call_from_wire",
    "call_to_wire",
    "failure_to_wire",
    "outcome_from_wire",
    "outcome_to_wire",
]

MAX_RESULT_BYTES = 1_500_000
"""The largest tool result (encoded) a durable call records; Temporal's payload limit is 2 MB,
and the rest of the activity's result and the history's framing need room too."""


@dataclass(frozen=True)
class Timings:
    """How long a durable tool call may take, and how a lost worker is noticed.

    Attributes:
        start_to_close: The most one attempt of a call may run (default 10 minutes).
        heartbeat: A worker running a call reports every third of this; a call whose worker
            stops reporting for this long is taken as lost (default 10 s). Shorter notices a
            dead worker sooner, at the cost of more heartbeats.
        idempotent_attempts: How often a call of an idempotent tool is tried in all when its
            worker is lost (default 3). A call of any other tool is tried once.
    """

    start_to_close: timedelta = timedelta(minutes=10)
    heartbeat: timedelta = timedelta(seconds=10)
    idempotent_attempts: int = 3

    def to_wire(self) -> dict[str, float | int]:
        return {
            "start_to_close": self.start_to_close.total_seconds(),
            "heartbeat": self.heartbeat.total_seconds(),
            "idempotent_attempts": self.idempotent_attempts,
        }


def call_to_wire(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "name": call.name, "arguments": call.arguments}


def call_from_wire(data: dict[str, Any]) -> ToolCall:
    return ToolCall(data["id"], data["name"], data["arguments"])


def outcome_to_wire(outcome: Outcome, tool: str) -> dict[str, Any]:
    """The outcome of a call of ``tool`` as JSON data; a result past `MAX_RESULT_BYTES`
    becomes a failure that says so.

    The value travels as JSON text: Temporal's converter sorts the keys of the objects it
    stores, and a model should read a tool's result exactly as the tool wrote it, keys in the
    same order as in process. What JSON cannot hold is written from its snapshot.
    """
    value = json.dumps(snapshot(outcome.value), ensure_ascii=False, default=repr)
    size = len(value.encode("utf-8", "replace"))
    if size > MAX_RESULT_BYTES:
        message = (
            f"result too large for a durable run ({size:,} bytes, the limit is "
            f"{MAX_RESULT_BYTES:,}); return less, or write it to a file and return its path"
        )
        return {"value_json": None, "error": {"tool": tool, "message": message}, "metadata": None}
    return {"value_json": value, "error": outcome.error, "metadata": outcome.metadata}


def failure_to_wire(tool: str, message: str) -> dict[str, Any]:
    """A failed call as JSON data (a lost worker, say)."""
    return {"value_json": None, "error": {"tool": tool, "message": message}, "metadata": None}


def outcome_from_wire(data: dict[str, Any]) -> Outcome:
    error = data.get("error")
    if error is not None:
        return Outcome(error=dict(error), metadata=data.get("metadata"))
    value_json = data.get("value_json")
    value = None if value_json is None else json.loads(value_json)
    return Outcome(value=value, metadata=data.get("metadata"))
