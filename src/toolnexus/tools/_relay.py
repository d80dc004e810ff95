"""Relay tools: declared to the model, answered by the host application (a front end, a human)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolnexus.tools._tool import Tool

__all__ = ["RELAY_SOURCE", "is_relay", "relay_tool"]

RELAY_SOURCE = "relay"


def _always(args: Mapping[str, Any]) -> bool:
    return True


def _unanswered(args: Mapping[str, Any]) -> Any:
    raise RuntimeError(
        "a relay tool is answered by the host: give the client a relay_handler, or resume the "
        "pending run with client.resume(result, answers)"
    )


def relay_tool(
    name: str, description: str = "", input_schema: Mapping[str, Any] | None = None
) -> Tool:
    """A tool the model can call whose calls the host application answers.

    With a client ``relay_handler(call) -> result`` the answer comes from it; without one the run
    stops with ``status="pending"``, listing the calls in ``RunResult.pending``, and
    ``await client.resume(result, answers)`` carries on. Relay calls always run concurrently:
    nothing runs on this machine.
    """
    return Tool(
        name,
        description,
        dict(input_schema) if input_schema is not None else {"type": "object"},
        execute=_unanswered,
        concurrency_safe=_always,
        source=RELAY_SOURCE,
    )


def is_relay(tool: Tool) -> bool:
    """Whether ``tool`` was made by [`relay_tool`][toolnexus.tools.relay.relay_tool]."""
    return tool.source == RELAY_SOURCE
