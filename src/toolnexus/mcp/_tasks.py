"""Programs and direct calls as MCP tasks: call now, fetch later.

Both protocol generations are served, each to the clients that negotiated it:

* **2025-11-25** (the experimental core form): ``initialize`` declares
  ``capabilities.tasks`` (``list``, ``cancel``, ``requests.tools.call``), the tools declare
  ``execution.taskSupport: "optional"``, a ``tools/call`` whose params carry ``task: {ttl}``
  is answered at once with ``CreateTaskResult`` (``{"task": {...}}``), and the client follows
  it with ``tasks/get``, ``tasks/result`` (waits for the end, then the ``CallToolResult``),
  ``tasks/list`` and ``tasks/cancel``.
* **2026-07-28** (the stable ``io.modelcontextprotocol/tasks`` extension): ``server/discover``
  lists the extension; a ``tools/call`` from a client that declares it in the request's
  capabilities is answered with ``resultType: "task"``, and the client polls ``tasks/get``
  (the result or error inline once the task ends), ``tasks/update`` and ``tasks/cancel``.

A task runs the very handler a plain ``tools/call`` runs (`Gateway._call_tool`), so the
scheduling rule, approvals and the audit log apply to it exactly as to a plain call; the
progress that handler reports becomes the task's ``statusMessage``, and a question it asks
(an approval, an upstream's relayed request) makes the task ``input_required``: on 2025-11-25
until a ``tasks/result`` request is open to carry the question; on 2026-07-28 ``tasks/get``
shows the questions as ``inputRequests`` and the client answers them with ``tasks/update``.

Ownership (see ``docs/mcp_server.md``, "Tasks"): a task belongs to the credential the client
sent (the ``Authorization`` header, hashed), else to its MCP session (2025-era streamable
HTTP) or connection (stdio). A task of another owner is "not found", exactly like an id that
was never issued. A 2026-07-28 client without a credential has no session: its task id, 256
random bits, is then the bearer secret, as the extension's security notes allow.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import secrets
import time
import uuid
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from mcp import types
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    SERVER_INFO_META_KEY,
)
from mcp_types.methods import serialize_server_result
from mcp_types.version import LATEST_MODERN_VERSION, MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolnexus.mcp._relay import Parked
from toolnexus.tools import Tool

__all__ = [
    "DEFAULT_TTL_MS",
    "MAX_TTL_MS",
    "RELATED_TASK",
    "TASKS_EXTENSION",
    "TaskBackend",
    "TaskState",
    "TaskSupport",
]

logger = logging.getLogger("toolnexus.mcp")

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
"""The 2026-07-28 tasks extension's identifier."""

RELATED_TASK = "io.modelcontextprotocol/related-task"
"""The ``_meta`` key that ties a ``tasks/result`` answer to its task (2025-11-25)."""

MISSING_CAPABILITY = -32021
"""JSON-RPC error: the client did not declare a capability the request needs (2026-07-28)."""

TASK_CANCELLED = -32000
"""JSON-RPC error ``tasks/result`` answers for a task that was cancelled (server-defined)."""

DEFAULT_TTL_MS = 3_600_000
"""A task is kept an hour from its creation when the client asks for no TTL."""

MIN_TTL_MS = 1_000
MAX_TTL_MS = 86_400_000
"""A requested TTL is clamped to one second .. one day (a task is not kept forever)."""

POLL_INTERVAL_MS = 500
"""The polling interval suggested to clients."""

MAX_TASKS_PER_OWNER = 1_000
"""The most live tasks one owner may hold; one more is refused (-32602), not queued."""

MAX_WAITERS = 16
"""The most ``tasks/result`` requests that may wait on one task at once; one more is answered
at once with an error saying to poll ``tasks/get`` (a client polling ``tasks/result`` in a
tight loop cannot pile up open streams)."""

TERMINAL = frozenset({"completed", "failed", "cancelled"})

Status = Literal["working", "input_required", "completed", "failed", "cancelled"]


@dataclasses.dataclass
class TaskState:
    """What a client may learn of a task: its status, timestamps, TTL, and once it ended, its
    ``CallToolResult`` (wire form) or JSON-RPC error."""

    task_id: str
    status: Status
    created: float  # seconds since the epoch
    updated: float
    ttl_ms: int
    message: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = None  # 2026-07-28, while input_required

    @property
    def expired(self) -> bool:
        """Past its TTL (counted from creation)."""
        return time.time() > self.created + self.ttl_ms / 1000

    def legacy(self) -> dict[str, Any]:
        """The 2025-11-25 ``Task`` object."""
        return {
            "taskId": self.task_id,
            "status": self.status,
            **({"statusMessage": self.message} if self.message is not None else {}),
            "createdAt": _iso(self.created),
            "lastUpdatedAt": _iso(self.updated),
            "ttl": self.ttl_ms,
            "pollInterval": POLL_INTERVAL_MS,
        }

    def modern(self) -> dict[str, Any]:
        """The 2026-07-28 ``DetailedTask``: the result or error inline once it ended."""
        task = {
            "taskId": self.task_id,
            "status": self.status,
            **({"statusMessage": self.message} if self.message is not None else {}),
            "createdAt": _iso(self.created),
            "lastUpdatedAt": _iso(self.updated),
            "ttlMs": self.ttl_ms,
            "pollIntervalMs": POLL_INTERVAL_MS,
        }
        if self.status == "input_required" and self.input_requests:
            task["inputRequests"] = self.input_requests
        if self.status == "completed" and self.result is not None:
            task["result"] = _sieved(self.result, LATEST_MODERN_VERSION)
        if self.status == "failed":
            task["error"] = self.error or {"code": INTERNAL_ERROR, "message": "the task failed"}
        return task


class TaskBackend(Protocol):
    """Where durable tasks live (`toolnexus.mcp._durable.DurableTasks`); the in-memory store
    below holds every other task."""

    def takes(self, params: types.CallToolRequestParams) -> bool:
        """Whether the call ``params`` becomes a durable task."""
        ...

    async def create(
        self, owner: str | None, params: types.CallToolRequestParams, ttl_ms: int
    ) -> TaskState:
        """Start the task durably; returns once ``tasks/get`` would find it."""
        ...

    async def find(self, owner: str | None, task_id: str) -> TaskState | None:
        """The task's state now, or ``None`` (unknown, another owner's, or expired)."""
        ...

    async def wait(self, owner: str | None, task_id: str) -> TaskState | None:
        """The task's state once it ended, or ``None`` as for `find`."""
        ...

    async def cancel(self, owner: str | None, task_id: str) -> TaskState | None:
        """Ask the task to stop; its state, or ``None`` as for `find`."""
        ...

    def listed(self, owner: str | None) -> list[TaskState]:
        """The owner's durable tasks this process knows of."""
        ...


@dataclasses.dataclass
class _Local:
    """An in-memory task: its state, its owner, and the asyncio task running it."""

    state: TaskState
    owner: str | None
    done: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    runner: asyncio.Task[None] | None = None
    channels: list[Any] = dataclasses.field(default_factory=list)  # waiting tasks/result:
    # (session, request id) of each, whose stream may carry what the task asks
    channel_open: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    answering: asyncio.Future[dict[str, Any]] | None = None  # the open round's answers

    async def input_responses(self, requests: Mapping[str, BaseModel]) -> dict[str, Any]:
        """2026-07-28: show ``requests`` on ``tasks/get`` (the task ``input_required``) and
        wait for a ``tasks/update`` that answers at least one of them (see `answer`); its
        responses to them."""
        wire = {
            key: request.model_dump(by_alias=True, mode="json", exclude_none=True)
            for key, request in requests.items()
        }
        self.answering = asyncio.get_running_loop().create_future()
        self.status("input_required", "waiting for the client's answer (tasks/update)")
        self.state.input_requests = wire
        try:
            return await self.answering
        finally:
            self.answering = None
            self.state.input_requests = None
            self.status("working", "answered")

    def answer(self, responses: Mapping[str, Any]) -> bool:
        """A ``tasks/update``'s responses, for the questions shown now: only those asked (an
        answer to a question not asked yet, or of an earlier round, answers nothing, and is
        not kept for later), and only the first update that answers one (a round takes one
        answer). Whether it answered one."""
        asked = self.state.input_requests or {}
        given = {key: value for key, value in responses.items() if key in asked}
        if not given or self.answering is None or self.answering.done():
            return False
        self.answering.set_result(given)
        return True

    def status(self, status: Status, message: str) -> None:
        if self.state.status not in TERMINAL:
            self.state.status, self.state.message = status, message
            self.state.updated = time.time()

    def note(self, message: str | None) -> None:
        if message and self.state.status not in TERMINAL:
            self.state.message = message
            self.state.updated = time.time()

    def finish(self, status: Status, message: str, **outcome: Any) -> None:
        if self.state.status in TERMINAL:
            return  # a result is produced once
        self.state.status = status
        self.state.message = message
        self.state.result = outcome.get("result")
        self.state.error = outcome.get("error")
        self.state.updated = time.time()
        self.done.set()


class _TaskIdParams(types.RequestParams):
    """``{"taskId": ...}``, the params of ``tasks/get``, ``tasks/result`` and ``tasks/cancel``."""

    task_id: str = Field(alias="taskId", max_length=200)


class _UpdateParams(_TaskIdParams):
    """``tasks/update`` (2026-07-28): responses to a task's input requests."""

    input_responses: dict[str, Any] = Field(default_factory=dict, alias="inputResponses")


class _TaskRequest(BaseModel):
    """The ``task`` field of a task-augmented ``tools/call`` (2025-11-25)."""

    model_config = ConfigDict(extra="allow", strict=True)

    ttl: int | None = None


class TaskHost(Protocol):
    """What the tasks capability uses of its gateway (``Gateway`` is one).

    Why a protocol: the gateway makes its tasks capability, so this module naming the
    gateway's class would make the two modules import each other.
    """

    @property
    def mode(self) -> str:
        """The gateway's mode (``"code"`` or ``"both"``)."""
        ...

    @property
    def granted(self) -> Sequence[Tool]:
        """The tools the gateway's policy grants."""
        ...

    @property
    def server(self) -> Any:
        """The gateway's lowlevel MCP ``Server``."""
        ...

    @property
    def _parked(self) -> Parked:
        """The programs waiting for answers to their questions."""
        ...

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> Any:
        """The gateway's own ``tools/call`` handler."""
        ...


class TaskSupport:
    """The tasks capability of one gateway: the ``tools/call`` interception, the ``tasks/*``
    handlers, the in-memory task store and, with ``--durable``, the durable backend.

    Registered on the gateway's lowlevel ``Server`` through the SDK's own seams: a server
    middleware (it answers a task-augmented ``tools/call`` with its ``CreateTaskResult`` and
    adds ``capabilities.tasks`` to the 2025-era ``initialize`` result), request handlers for
    the ``tasks/*`` methods, and ``Server.extensions`` for the 2026-07-28 extension.
    """

    def __init__(self, gateway: TaskHost) -> None:
        self.gateway = gateway
        self.durable: TaskBackend | None = None
        self._tasks: dict[str, _Local] = {}
        self._connections: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
        self._waiting: dict[str, int] = {}  # task id -> tasks/result requests waiting on it
        server = gateway.server
        server.extensions[TASKS_EXTENSION] = {}
        server.middleware.append(self._middleware)
        handlers: list[tuple[str, type[BaseModel], Callable[..., Awaitable[Any]]]] = [
            ("tasks/get", _TaskIdParams, self._get),
            ("tasks/result", _TaskIdParams, self._result),
            ("tasks/list", types.PaginatedRequestParams, self._list),
            ("tasks/cancel", _TaskIdParams, self._cancel),
            ("tasks/update", _UpdateParams, self._update),
        ]
        for method, params_type, handler in handlers:
            server.add_request_handler(method, params_type, handler)

    # -- which calls become tasks ----------------------------------------------------------------

    def taskable(self, name: object) -> bool:
        """``run_code`` and, in ``"both"`` mode, every tool offered directly."""
        from toolnexus.codemode import RUN_CODE_NAME

        if name == RUN_CODE_NAME:
            return True
        return self.gateway.mode == "both" and any(t.name == name for t in self.gateway.granted)

    def _with_task_support(self, listing: Any) -> Any:
        """A 2025-era ``tools/list`` result, each tool that may run as a task and does not
        say so marked ``execution.taskSupport: "optional"`` (the gateway runs the task,
        whatever the upstream supports). An upstream's own ``"optional"`` or ``"required"``
        is passed on as it is: the listing stays verbatim where it can."""
        if not isinstance(listing, dict) or not isinstance(listing.get("tools"), list):
            return listing
        tools = [
            _marked_taskable(tool)
            if isinstance(tool, dict) and self.taskable(tool.get("name"))
            else tool
            for tool in listing["tools"]
        ]
        return {**listing, "tools": tools}

    async def _middleware(self, ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        if ctx.method == "initialize":
            return _with_legacy_capability(await call_next(ctx))
        if ctx.method == "tools/list" and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return self._with_task_support(await call_next(ctx))
        if ctx.method != "tools/call" or not isinstance(ctx.params, dict):
            return await call_next(ctx)
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        raw = dict(ctx.params)
        asked = raw.pop("task", None)
        wanted = _declares_extension(ctx) if modern else asked is not None
        if not wanted or not self.taskable(raw.get("name")):
            return await call_next(ctx)
        if not modern and not _initialized(ctx):
            return await call_next(ctx)  # the runner refuses it as it refuses any early call
        try:
            params = types.CallToolRequestParams.model_validate(raw, by_name=False)
            requested = _TaskRequest.model_validate(asked if asked is not None else {})
        except ValidationError:
            raise MCPError(
                INVALID_PARAMS,
                "a task-augmented tools/call needs a tool name, arguments as an object and "
                'task as {"ttl": milliseconds}',
            ) from None
        state = await self.create(ctx, params, _ttl(requested.ttl))
        if modern:
            return {
                "resultType": "task",
                **_without_inline(state.modern()),
                "_meta": {SERVER_INFO_META_KEY: self.gateway.server.server_info_stamp},
            }
        return {"task": state.legacy()}

    # -- the store ---------------------------------------------------------------------------------

    async def create(self, ctx: Any, params: types.CallToolRequestParams, ttl_ms: int) -> TaskState:
        """Start a task for the call ``params`` and return its first state.

        Raises:
            MCPError: the owner holds `MAX_TASKS_PER_OWNER` live tasks already.
        """
        owner = self.owner(ctx)
        self._sweep()
        live = sum(1 for t in self._tasks.values() if t.owner == owner)
        if live >= MAX_TASKS_PER_OWNER:
            raise MCPError(
                INVALID_PARAMS,
                f"this client holds {live} tasks already; fetch or cancel some first",
            )
        if self.durable is not None and self.durable.takes(params):
            return await self.durable.create(owner, params, ttl_ms)
        now = time.time()
        state = TaskState(secrets.token_urlsafe(32), "working", now, now, ttl_ms, "started")
        local = _Local(state, owner)
        self._tasks[state.task_id] = local
        local.runner = asyncio.get_running_loop().create_task(self._execute(local, ctx, params))
        return state

    async def _execute(self, local: _Local, ctx: Any, params: types.CallToolRequestParams) -> None:
        """Run the call by the gateway's own ``tools/call`` handler, into the task."""
        task_ctx = dataclasses.replace(ctx, session=_TaskSession(ctx.session, local))
        try:
            result = await self.gateway._call_tool(task_ctx, params)
            while isinstance(result, types.InputRequiredResult) and result.request_state:
                # 2026-07-28: the call asked; its next round comes with the client's answers
                responses = await self._answers(local, result)
                again = {"request_state": result.request_state, "input_responses": responses}
                result = await self.gateway._call_tool(task_ctx, params.model_copy(update=again))
        except asyncio.CancelledError:
            local.finish("cancelled", "cancelled by the client")
            return
        except MCPError as exc:
            error = exc.error.model_dump(by_alias=True, mode="json", exclude_none=True)
            local.finish("failed", exc.error.message, error=error)
            return
        except Exception:
            logger.exception("a task's call failed")
            error = {"code": INTERNAL_ERROR, "message": "the call failed inside the gateway"}
            local.finish("failed", error["message"], error=error)
            return
        if not isinstance(result, types.CallToolResult):
            error = {"code": INTERNAL_ERROR, "message": "the call needs input a task cannot ask"}
            local.finish("failed", error["message"], error=error)
            return
        wire = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        local.finish("completed", "failed as data" if result.is_error else "done", result=wire)

    async def _answers(self, local: _Local, asked: types.InputRequiredResult) -> dict[str, Any]:
        """The client's answers to a round's questions (by ``tasks/update``); none when the
        call stops waiting for them first (past its budget the question is refused as timed
        out, and the program goes on): the task never waits for an answer no one needs."""
        assert asked.request_state is not None
        answered = asyncio.ensure_future(local.input_responses(asked.input_requests or {}))
        dropped = asyncio.ensure_future(self.gateway._parked.unanswerable(asked.request_state))
        try:
            await asyncio.wait({answered, dropped}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # the task was cancelled: so is its parked call
            self.gateway._parked.cancel(asked.request_state)
            raise
        finally:
            answered.cancel()
            dropped.cancel()
        if answered.done() and not answered.cancelled():
            return answered.result()
        return {}

    def owner(self, ctx: Any) -> str | None:
        """Who a request speaks for (see the module's docstring)."""
        request = getattr(ctx, "request", None)
        headers = getattr(request, "headers", None)
        credential = headers.get("authorization") if headers is not None else None
        if credential:
            return "auth:" + hashlib.sha256(credential.encode("utf-8", "replace")).hexdigest()
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return None  # stateless and anonymous: the task id is the bearer secret
        connection = getattr(ctx.session, "_connection", None)
        session_id = getattr(connection, "session_id", None)
        if session_id:
            return f"session:{session_id}"
        if connection is None:
            return None
        known = self._connections.get(connection)
        if known is None:
            known = self._connections[connection] = f"connection:{uuid.uuid4().hex}"
        return known

    def _sweep(self) -> None:
        """Forget the tasks past their TTL (a running one is cancelled first)."""
        for task_id, local in list(self._tasks.items()):
            if local.state.expired:
                if local.runner is not None and not local.runner.done():
                    local.runner.cancel()
                del self._tasks[task_id]

    def _local(self, ctx: Any, task_id: str) -> _Local | None:
        self._sweep()
        local = self._tasks.get(task_id)
        if local is None or local.owner != self.owner(ctx):
            return None
        return local

    async def _find(self, ctx: Any, task_id: str) -> TaskState:
        """The task's state, or the "not found" error (unknown, foreign and expired alike)."""
        local = self._local(ctx, task_id)
        if local is not None:
            return local.state
        if self.durable is not None:
            found = await self.durable.find(self.owner(ctx), task_id)
            if found is not None:
                return found
        raise _not_found()

    # -- tasks/* -----------------------------------------------------------------------------------

    async def _get(self, ctx: Any, params: _TaskIdParams) -> dict[str, Any]:
        modern = _check_modern(ctx)
        state = await self._find(ctx, params.task_id)
        return state.modern() if modern else state.legacy()

    async def _result(self, ctx: Any, params: _TaskIdParams) -> dict[str, Any]:
        """Wait for the task to end; its ``CallToolResult``, or its error."""
        _check_modern(ctx)
        state = await self._find(ctx, params.task_id)
        if state.status not in TERMINAL:
            state = await self._wait(ctx, params.task_id)
        related = {RELATED_TASK: {"taskId": state.task_id}}
        if state.status == "completed" and state.result is not None:
            result = _sieved(state.result, ctx.protocol_version)
            meta = {**(result.get("_meta") or {}), **related}
            return {**result, "_meta": meta}
        if state.status == "failed":
            error = state.error or {}
            raise MCPError(
                int(error.get("code", INTERNAL_ERROR)),
                str(error.get("message", "the task failed")),
                related,
            )
        raise MCPError(TASK_CANCELLED, "the task was cancelled before it finished", related)

    async def _wait(self, ctx: Any, task_id: str) -> TaskState:
        """The task's state once it ended, waited for by at most `MAX_WAITERS` requests.

        Raises:
            MCPError: too many requests wait on it already, or it is gone meanwhile.
        """
        waiting = self._waiting.get(task_id, 0)
        if waiting >= MAX_WAITERS:
            raise MCPError(
                INVALID_PARAMS,
                f"{waiting} tasks/result requests wait on this task already; poll tasks/get "
                f"every {POLL_INTERVAL_MS} ms instead",
            )
        self._waiting[task_id] = waiting + 1
        try:
            local = self._local(ctx, task_id)
            if local is not None:  # its stream carries what the task asks (input_required)
                channel = (ctx.session, ctx.request_id)
                local.channels.append(channel)
                local.channel_open.set()
                try:
                    await local.done.wait()
                finally:
                    local.channels.remove(channel)
                return local.state
            waited = None
            if self.durable is not None:
                waited = await self.durable.wait(self.owner(ctx), task_id)
            if waited is None:
                raise _not_found()
            return waited
        finally:
            self._waiting[task_id] -= 1
            if not self._waiting[task_id]:
                del self._waiting[task_id]

    async def _list(self, ctx: Any, params: types.PaginatedRequestParams) -> dict[str, Any]:
        """The caller's tasks, newest first (2025-11-25; one page)."""
        modern = _check_modern(ctx)
        self._sweep()
        owner = self.owner(ctx)
        mine = [t.state for t in self._tasks.values() if t.owner == owner]
        if owner is None:
            mine = []  # anonymous 2026 clients: ids are secrets, never listed
        if self.durable is not None and owner is not None:
            mine += self.durable.listed(owner)
        mine.sort(key=lambda s: s.created, reverse=True)
        return {"tasks": [s.modern() if modern else s.legacy() for s in mine]}

    async def _cancel(self, ctx: Any, params: _TaskIdParams) -> dict[str, Any]:
        """Stop a working task. A task that ended is refused on 2025-11-25 (-32602) and
        acknowledged on 2026-07-28 (cancellation is eventual there); either way its result
        stays as it was."""
        modern = _check_modern(ctx)
        state = await self._find(ctx, params.task_id)
        if state.status in TERMINAL:
            if modern:
                return {}
            raise MCPError(INVALID_PARAMS, f"cannot cancel the task: it is already {state.status}")
        local = self._local(ctx, params.task_id)
        if local is not None and local.runner is not None:
            local.runner.cancel()
            await asyncio.wait({local.runner}, timeout=5)
            state = local.state
        elif self.durable is not None:
            cancelled = await self.durable.cancel(self.owner(ctx), params.task_id)
            state = cancelled if cancelled is not None else state
        return {} if modern else state.legacy()

    async def _update(self, ctx: Any, params: _UpdateParams) -> dict[str, Any]:
        """``tasks/update`` (2026-07-28): answers to the task's ``inputRequests``. Keys that
        are not outstanding are ignored, as the extension says (a durable task never asks),
        and the update is acknowledged: an answer to a question not asked yet is dropped, not
        kept for when it is (see `_Local.answer`); each answer is checked against what its
        question needs (one of another shape refuses the call as malformed, never runs it)."""
        _check_modern(ctx)
        local = self._local(ctx, params.task_id)
        if local is None:
            await self._find(ctx, params.task_id)  # a durable task, or "not found"
        elif not local.answer(params.input_responses):
            logger.info("a tasks/update that answers no question asked now was ignored")
        return {}


class _TaskSession:
    """The request's session, seen by a task's call: its progress also becomes the task's
    status message (the request that started the task has been answered already)."""

    def __init__(self, session: Any, local: _Local) -> None:
        self._session = session
        self._local = local

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        self._local.note(message)
        await self._session.report_progress(progress, total, message)

    async def elicit_form(self, message: str, requested_schema: Any, *args: Any) -> Any:
        """Ask the client (an approval) while the task runs: the task is ``input_required``
        until a ``tasks/result`` request of its client is open, and the question rides that
        request's stream (the request that started the task was answered long ago), as the
        2025-11-25 tasks flow has it. (On 2026-07-28 a question never comes here: the call
        parks it as an ``InputRequiredResult`` round, which the task shows on ``tasks/get``.)"""
        local = self._local
        if self._session_modern():
            return await self._session.elicit_form(message, requested_schema, *args)
        local.status("input_required", f"waiting for the client's answer: {message[:200]}")
        try:
            while not local.channels:
                local.channel_open.clear()
                await local.channel_open.wait()
            session, request_id = local.channels[-1]
            return await session.elicit_form(
                message, requested_schema, related_request_id=request_id
            )
        finally:
            local.status("working", "answered")

    async def send_request(self, request: Any, result_type: Any, *args: Any, **kw: Any) -> Any:
        """A request of the gateway's to the client while the task runs (an approval, or an
        upstream's question relayed): as `elicit_form`, on a ``tasks/result`` stream of the
        task's client, the task ``input_required`` meanwhile."""
        local = self._local
        if self._session_modern():
            return await self._session.send_request(request, result_type, *args, **kw)
        local.status("input_required", f"waiting for the client's answer ({request.method})")
        try:
            while not local.channels:
                local.channel_open.clear()
                await local.channel_open.wait()
            session, request_id = local.channels[-1]
            related = ServerMessageMetadata(related_request_id=request_id)
            return await session.send_request(request, result_type, metadata=related)
        finally:
            local.status("working", "answered")

    def _session_modern(self) -> bool:
        connection = getattr(self._session, "_connection", None)
        return getattr(connection, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS


def _sieved(result: dict[str, Any], version: str) -> dict[str, Any]:
    """A stored ``CallToolResult`` in the shape of protocol ``version`` (as the SDK shapes a
    plain call's result: fields of other revisions dropped)."""
    try:
        return serialize_server_result("tools/call", version, result)
    except (KeyError, ValueError, ValidationError):
        return result


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def _ttl(requested: int | None) -> int:
    """The TTL a task gets: the requested one clamped to `MIN_TTL_MS` .. `MAX_TTL_MS`."""
    if requested is None:
        return DEFAULT_TTL_MS
    return max(MIN_TTL_MS, min(int(requested), MAX_TTL_MS))


def _without_inline(task: dict[str, Any]) -> dict[str, Any]:
    """A ``CreateTaskResult`` carries the task's fields, never a result or error."""
    return {k: v for k, v in task.items() if k not in ("result", "error")}


def _not_found() -> MCPError:
    return MCPError(INVALID_PARAMS, "Failed to retrieve task: Task not found")


def _declares_extension(ctx: Any) -> bool:
    """Whether a 2026-07-28 request declares the tasks extension in its capabilities."""
    meta = ctx.meta if isinstance(ctx.meta, dict) else {}
    declared = meta.get(CLIENT_CAPABILITIES_META_KEY)
    extensions = declared.get("extensions") if isinstance(declared, dict) else None
    return isinstance(extensions, dict) and TASKS_EXTENSION in extensions


def _check_modern(ctx: Any) -> bool:
    """Whether the request is 2026-07-28's; there, one that does not declare the extension is
    refused (-32021), as the extension requires.

    Raises:
        MCPError: a 2026-07-28 request without the extension.
    """
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    if not _declares_extension(ctx):
        raise MCPError(
            MISSING_CAPABILITY,
            "Missing required client capability",
            {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
        )
    return True


def _initialized(ctx: Any) -> bool:
    connection = getattr(ctx.session, "_connection", None)
    return bool(getattr(connection, "initialize_accepted", True))


def _with_legacy_capability(result: Any) -> Any:
    """The 2025-era ``initialize`` result, with ``capabilities.tasks`` added."""
    if not isinstance(result, dict):
        return result
    capabilities = result.get("capabilities")
    if not isinstance(capabilities, dict):
        return result
    tasks: dict[str, Any] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    return {**result, "capabilities": {**capabilities, "tasks": tasks}}


def _marked_taskable(tool: dict[str, Any]) -> dict[str, Any]:
    """``tool`` (a listed tool) with ``taskSupport: "optional"`` unless it already allows or
    requires tasks."""
    execution = tool.get("execution") or {}
    if isinstance(execution, dict) and execution.get("taskSupport") in ("optional", "required"):
        return tool
    return {**tool, "execution": {**execution, "taskSupport": "optional"}}
