"""Task-augmented MCP tool calls (the 2025-11-25 tasks of SEP-1686).

A tool whose ``execution.taskSupport`` is ``"required"`` cannot be called plainly (the server
answers -32601). It is called as a task, when its server declares task-augmented
``tools/call`` (``tasks.requests.tools.call``, see `takes_tasks`; the spec forbids a task
otherwise, whatever the tool says): ``tools/call`` with a ``task`` field creates it, then
``tasks/get`` is polled at the server's ``pollInterval`` until the task leaves ``working``, and
``tasks/result`` fetches the tool's result (it waits while the task is ``input_required``: the
server's elicitation and sampling requests reach the handlers meanwhile). A server answering
the ``tools/call`` with a plain ``CallToolResult`` ran it without a task: that is the result.
The task's progress comes on the create request's ``progressToken`` for as long as it runs
(not only until the ``CreateTaskResult``), so the caller names its own token and routes the
notifications (the SDK forgets a request's progress callback once it is answered). When the
call ends
before the task does (its timeout, a cancellation), the task is cancelled with
``tasks/cancel``.

The SDK has the task types but no client driver for them; the one request it cannot send
through ``ClientSession.send_request`` is the task-creating ``tools/call``, whose answer is a
``CreateTaskResult`` rather than the ``CallToolResult`` the SDK checks ``tools/call`` answers
against. That request goes through the session's own dispatcher, stamped as the session stamps
every request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

__all__ = ["MAX_POLL_SECONDS", "MIN_POLL_SECONDS", "call_as_task", "takes_tasks"]

logger = logging.getLogger("toolnexus.mcp")

MIN_POLL_SECONDS = 0.05
"""The shortest wait between two ``tasks/get`` (a server asking for 0 ms gets this)."""
MAX_POLL_SECONDS = 5.0
"""The longest wait between two ``tasks/get``, whatever the server asks."""
DEFAULT_POLL_SECONDS = 0.5
CANCEL_SECONDS = 5.0
"""How long a ``tasks/cancel`` may take when a call is abandoned."""


class TaskFailed(Exception):
    """A task ended without a result the call can return (its message says why)."""


def takes_tasks(capabilities: Any) -> bool:
    """Whether a server's capabilities declare task-augmented ``tools/call``
    (``tasks.requests.tools.call``): only then may a call be sent as a task."""
    tasks = getattr(capabilities, "tasks", None)
    tools = getattr(getattr(tasks, "requests", None), "tools", None)
    return getattr(tools, "call", None) is not None


async def _create(session: Any, name: str, args: dict[str, Any], token: str | None) -> Any:
    """The answer to the task-creating ``tools/call``: a ``CreateTaskResult``, or the
    ``CallToolResult`` of a server that ran the call plainly."""
    from mcp.types import (
        CallToolRequest,
        CallToolRequestParams,
        CallToolResult,
        CreateTaskResult,
        TaskMetadata,
    )

    request = CallToolRequest(
        params=CallToolRequestParams(name=name, arguments=args, task=TaskMetadata())
    )
    data = request.model_dump(by_alias=True, mode="json", exclude_none=True)
    if token is not None:
        data["params"].setdefault("_meta", {})["progressToken"] = token
    options: dict[str, Any] = {}
    session._stamp(data, options)
    raw = await session._dispatcher.send_raw_request(data["method"], data.get("params"), options)
    if isinstance(raw, dict) and "task" not in raw:
        return CallToolResult.model_validate(raw, by_name=False)
    return CreateTaskResult.model_validate(raw, by_name=False)


def _interval(task: Any) -> float:
    wanted = task.poll_interval
    if not isinstance(wanted, int | float) or wanted != wanted:  # absent, or NaN
        return DEFAULT_POLL_SECONDS
    return min(max(wanted / 1000, MIN_POLL_SECONDS), MAX_POLL_SECONDS)


async def call_as_task(
    session: Any,
    server: str,
    name: str,
    args: dict[str, Any],
    progress_token: str | None = None,
) -> Any:
    """Run ``name`` as a task on ``session``; the ``CallToolResult`` of ``tasks/result`` (or
    of the ``tools/call``, when the server ran it plainly). ``progress_token`` is sent as the
    call's ``progressToken``; the caller hears its notifications (see the module's text).

    Raises:
        TaskFailed: the server cancelled the task, or it finished without a tool result.
        mcp.shared.exceptions.MCPError: the server refused a request of the task.
    """
    from mcp.types import (
        CallToolResult,
        CancelTaskRequest,
        CancelTaskRequestParams,
        GetTaskPayloadRequest,
        GetTaskPayloadRequestParams,
        GetTaskRequest,
        GetTaskRequestParams,
        GetTaskResult,
    )
    from pydantic import ValidationError

    created = await _create(session, name, args, progress_token)
    if isinstance(created, CallToolResult):
        return created
    task = created.task
    task_id = task.task_id
    finished = False
    try:
        while task.status == "working":
            await asyncio.sleep(_interval(task))
            task = await session.send_request(
                GetTaskRequest(params=GetTaskRequestParams(task_id=task_id)), GetTaskResult
            )
        if task.status == "cancelled":
            finished = True
            raise TaskFailed(f"MCP server {server!r} cancelled the task of {name!r}")
        try:
            result = await session.send_request(
                GetTaskPayloadRequest(params=GetTaskPayloadRequestParams(task_id=task_id)),
                CallToolResult,
            )
        except ValidationError:
            finished = True
            raise TaskFailed(
                f"MCP server {server!r}: the task of {name!r} ended {task.status!r} but "
                "tasks/result held no tool result"
            ) from None
        finished = True
        return result
    finally:
        if not finished:
            # the call ended first (its timeout, a cancellation, a failed poll): end the task
            with contextlib.suppress(Exception):
                await asyncio.shield(
                    asyncio.wait_for(
                        session.send_request(
                            CancelTaskRequest(params=CancelTaskRequestParams(task_id=task_id)),
                            GetTaskResult,
                        ),
                        CANCEL_SECONDS,
                    )
                )
            logger.info("MCP server %r: cancelled the task of %r", server, name)
