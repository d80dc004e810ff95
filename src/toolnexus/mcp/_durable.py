"""Durable ``run_code`` tasks: with ``toolnexus.durable`` in the config, a program started as
an MCP task is a ``toolnexus.program`` workflow on Temporal (`toolnexus.temporal`), so it
outlives the client's connection and the gateway process itself.

* **Where it runs.** Every gateway started with the same ``durable`` settings is a Temporal
  worker on that task queue, over its tools (the policy's grant; a tool that needs approval
  refuses, since a durable task has no one to ask). The workflow drives the scheduling rule,
  so the cap and the barrier hold for the program whichever worker runs its sub-calls, and a
  completed sub-call never runs again (docs/temporal.md).
* **Finding it again.** The task id is 256 random bits the client holds; the workflow id is
  derived from its SHA-256, so Temporal never stores the id itself and a forged id names no
  workflow. The workflow's memo keeps the TTL and, when the client sent a credential, its
  hash: after a restart, the id (and that credential, if one was used) is what proves
  ownership. While the process that created a task lives, the task is also bound to the
  session that created it, as an in-memory task is.
* **Audited once.** The gateway that creates the task writes its ``code_run`` event; its end
  is written as one ``task_result`` event by whichever gateway sees it first (a marker file
  per workflow, created exclusively, beside the audit log decides), never twice, whatever
  restarts or extra workers there were.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import secrets
import time
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from mcp import types
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client as TemporalClient
from temporalio.client import WorkflowExecutionStatus, WorkflowHandle
from temporalio.service import RPCError

from toolnexus.codemode import RUN_CODE_NAME
from toolnexus.errors import ConfigurationError
from toolnexus.mcp._tasks import TaskState
from toolnexus.session import events
from toolnexus.temporal import PROGRAM_WORKFLOW, start_program, worker
from toolnexus.tools import Tool, ToolResult, needs_approval

if TYPE_CHECKING:
    from toolnexus.mcp._gateway import Gateway

__all__ = ["DurableTasks", "durable_tasks", "workflow_id"]

logger = logging.getLogger("toolnexus.mcp")

MEMO = "toolnexus_task"
"""The memo key holding a durable task's TTL, creation time and owner (a credential hash)."""

WORKFLOW_PREFIX = "toolnexus-task-"

SCAN_SECONDS = 2.0
"""How often a gateway looks for running durable tasks of its queue it does not yet watch (a
task another gateway created, or one this gateway created before a restart)."""


def workflow_id(task_id: str) -> str:
    """The workflow of a task id: derived from its hash, so Temporal never holds the id."""
    return WORKFLOW_PREFIX + hashlib.sha256(task_id.encode("utf-8", "replace")).hexdigest()[:40]


class DurableTasks:
    """The durable backend of `toolnexus.mcp._tasks.TaskSupport` (see the module docstring)."""

    def __init__(self, gateway: Gateway, temporal: TemporalClient, task_queue: str) -> None:
        self.gateway = gateway
        self.temporal = temporal
        self.task_queue = task_queue
        self._owners: dict[str, str | None] = {}  # task id -> owner, for tasks made here
        self._states: dict[str, TaskState] = {}  # the last state seen of tasks made here
        self._watched: set[str] = set()  # workflow ids
        self._watchers: set[asyncio.Task[None]] = set()

    def takes(self, params: types.CallToolRequestParams) -> bool:
        """A ``run_code`` call with a program (anything else is answered as in memory)."""
        code = (params.arguments or {}).get("code")
        return params.name == RUN_CODE_NAME and isinstance(code, str) and bool(code.strip())

    async def create(
        self, owner: str | None, params: types.CallToolRequestParams, ttl_ms: int
    ) -> TaskState:
        """Start the program's workflow; returns once Temporal has accepted it."""
        arguments = params.arguments or {}
        task_id = secrets.token_urlsafe(32)
        wid = workflow_id(task_id)
        now = time.time()
        credential = owner if owner is not None and owner.startswith("auth:") else None
        call_id = f"task-{wid[len(WORKFLOW_PREFIX) :][:12]}"
        await start_program(
            self.temporal,
            arguments["code"],
            task_queue=self.task_queue,
            language=self.gateway.runtime.language,
            max_parallel=self.gateway.max_parallel,
            call_id=call_id,
            workflow_id=wid,
            memo={MEMO: {"owner": credential, "ttl_ms": ttl_ms, "created": now, "id": call_id}},
        )
        description = arguments.get("description")
        said = description if isinstance(description, str) else "a program"
        started = events.code_run(call_id, self.gateway.runtime.language, said, task=wid)
        self.gateway.session.log_event(*started)
        self.gateway.flush_audit()
        self._owners[task_id] = owner
        state = TaskState(task_id, "working", now, now, ttl_ms, "started")
        self._states[task_id] = state
        self.watch(wid)
        return state

    async def find(self, owner: str | None, task_id: str) -> TaskState | None:
        """The task's state now, or ``None`` (unknown, another owner's, or expired)."""
        if task_id in self._owners and self._owners[task_id] != owner:
            return None  # bound to its session while the process that made it lives
        loaded = await self._load(task_id)
        if loaded is None:
            return None
        state, recorded_owner, handle = loaded
        if recorded_owner is not None and recorded_owner != owner:
            return None
        if state.expired:
            if state.status == "working":
                with contextlib.suppress(RPCError):
                    await handle.cancel()
            return None
        if task_id in self._owners:
            self._states[task_id] = state
        return state

    async def wait(self, owner: str | None, task_id: str) -> TaskState | None:
        """The task's state once it ended (``None`` as for `find`)."""
        if await self.find(owner, task_id) is None:
            return None
        handle = self.temporal.get_workflow_handle(workflow_id(task_id))
        with contextlib.suppress(Exception):  # its end, whatever it was, is read below
            await handle.result()
        return await self.find(owner, task_id)

    async def cancel(self, owner: str | None, task_id: str) -> TaskState | None:
        """Ask the workflow to stop (its running sub-calls are cancelled through their
        heartbeats); the state after asking (cancellation is eventual)."""
        state = await self.find(owner, task_id)
        if state is None or state.status != "working":
            return state
        with contextlib.suppress(RPCError):
            await self.temporal.get_workflow_handle(workflow_id(task_id)).cancel()
        return await self.find(owner, task_id)

    def listed(self, owner: str | None) -> list[TaskState]:
        """The owner's durable tasks made by this process, as last seen."""
        return [
            self._states[t]
            for t, o in self._owners.items()
            if o == owner and t in self._states and not self._states[t].expired
        ]

    async def _load(
        self, task_id: str
    ) -> tuple[TaskState, str | None, WorkflowHandle[Any, Any]] | None:
        """The task's state from Temporal, its recorded owner and its handle; ``None`` when no
        workflow of this gateway's queue has that id's workflow id."""
        handle = self.temporal.get_workflow_handle(workflow_id(task_id))
        try:
            described = await handle.describe()
        except RPCError:
            return None
        if described.workflow_type != PROGRAM_WORKFLOW or described.task_queue != self.task_queue:
            return None
        info = (await described.memo()).get(MEMO)
        if not isinstance(info, Mapping):
            return None
        created = float(info.get("created", time.time()))
        ttl_ms = int(info.get("ttl_ms", 0))
        updated = described.close_time.timestamp() if described.close_time else time.time()
        state = TaskState(task_id, "working", created, updated, ttl_ms)
        status = described.status
        if status in (WorkflowExecutionStatus.RUNNING, WorkflowExecutionStatus.CONTINUED_AS_NEW):
            state.message = await self._progress(handle)
        elif status == WorkflowExecutionStatus.COMPLETED:
            output = await handle.result()
            state.status, state.message = "completed", "done"
            state.result = _call_tool_result(output)
        elif status == WorkflowExecutionStatus.CANCELED:
            state.status, state.message = "cancelled", "cancelled by the client"
        else:
            name = status.name.lower() if status is not None else "lost"
            state.status, state.message = "failed", f"the program's workflow was {name}"
            state.error = {"code": -32603, "message": state.message}
        owner = info.get("owner")
        return state, owner if isinstance(owner, str) else None, handle

    async def _progress(self, handle: WorkflowHandle[Any, Any]) -> str:
        """ "k of n sub-calls done", from the workflow's history (this run's)."""
        scheduled: set[int] = set()
        done = 0
        async for event in handle.fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                attributes = event.activity_task_scheduled_event_attributes
                if attributes.activity_type.name == "toolnexus.call_tool":
                    scheduled.add(event.event_id)
            elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
                completed = event.activity_task_completed_event_attributes
                done += completed.scheduled_event_id in scheduled
        return f"running ({done} of {len(scheduled)} sub-calls done)"

    # -- watching, for the audit log -------------------------------------------------------------

    def watch(self, wid: str) -> None:
        """Wait for the workflow ``wid`` to end in the background, then audit its end."""
        if wid in self._watched:
            return
        self._watched.add(wid)
        watcher = asyncio.get_running_loop().create_task(self._watch(wid))
        self._watchers.add(watcher)
        watcher.add_done_callback(self._watchers.discard)

    async def _watch(self, wid: str) -> None:
        handle = self.temporal.get_workflow_handle(wid)
        with contextlib.suppress(Exception):  # how it ended is read below
            await handle.result()
        try:
            described = await handle.describe()
            call_id = (await described.memo()).get(MEMO, {}).get("id")
            status = described.status.name.lower() if described.status else "lost"
            is_error = True
            if described.status == WorkflowExecutionStatus.COMPLETED:
                is_error = "error" in await handle.result()
        except Exception:
            logger.debug("could not read how durable task %s ended", wid, exc_info=True)
            return
        ended = events.TaskResultData(id=call_id, task=wid, status=status, is_error=is_error)
        self.audit_end(wid, ended)

    def audit_end(self, wid: str, data: events.TaskResultData) -> None:
        """Write a durable task's ``task_result`` event, unless a gateway wrote it already."""
        audit_log = self.gateway.audit_log
        if audit_log is None:
            return
        markers = audit_log.with_name(audit_log.name + ".tasks")
        try:
            markers.mkdir(exist_ok=True)
            os.close(os.open(markers / wid, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:
            return  # written once already (by this gateway or another)
        except OSError as exc:
            logger.error("could not mark durable task %s as audited: %s", wid, exc)
            return
        self.gateway.session.log_event(events.TASK_RESULT, data)
        self.gateway.flush_audit()

    async def scan(self) -> None:
        """Watch every running durable task of this queue, now and every `SCAN_SECONDS`."""
        query = f"WorkflowType = '{PROGRAM_WORKFLOW}' AND TaskQueue = '{self.task_queue}'"
        first = True
        while True:
            try:
                wanted = query if first else f"{query} AND ExecutionStatus = 'Running'"
                async for execution in self.temporal.list_workflows(wanted):
                    if execution.id.startswith(WORKFLOW_PREFIX):
                        self.watch(execution.id)
                first = False
            except RPCError:
                logger.debug("could not list durable tasks", exc_info=True)
            await asyncio.sleep(SCAN_SECONDS)


def _call_tool_result(output: dict[str, Any]) -> dict[str, Any]:
    """A program's output as the ``CallToolResult`` a plain ``run_code`` call returns."""
    text = json.dumps(output, ensure_ascii=False)
    result = types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=output,
        is_error="error" in output,
    )
    return result.model_dump(by_alias=True, mode="json", exclude_none=True)


def worker_tools(gateway: Gateway) -> list[Tool]:
    """The tools the gateway's worker runs: the policy's grant, and a tool that needs
    approval refusing every call (a durable task cannot ask anyone, and is never run
    unapproved)."""
    return [
        dataclasses.replace(t, execute=_refusal(t.name)) if needs_approval(t, gateway.policy) else t
        for t in gateway.granted
    ]


def _refusal(name: str) -> Any:
    def refuse(args: dict[str, Any]) -> ToolResult:
        return ToolResult(
            f"call to '{name}' needs approval, and a durable task has no one to ask; it was "
            "not run (call run_code without a task to be asked)",
            is_error=True,
        )

    return refuse


@contextlib.asynccontextmanager
async def durable_tasks(gateway: Gateway, settings: Mapping[str, Any]) -> AsyncIterator[None]:
    """Connect to Temporal, run the gateway's worker, and make its ``run_code`` tasks durable
    while the block runs.

    Raises:
        ConfigurationError: Temporal cannot be reached at ``settings["address"]``.
    """
    address, queue = settings["address"], settings["task_queue"]
    try:
        temporal = await TemporalClient.connect(address, namespace=settings["namespace"])
    except Exception as exc:
        raise ConfigurationError(
            f"toolnexus.durable: cannot reach Temporal at {address} ({exc}); start it, or "
            "remove the durable key to keep tasks in memory."
        ) from None
    backend = DurableTasks(gateway, temporal, queue)
    running = worker(
        temporal,
        task_queue=queue,
        tools=worker_tools(gateway),
        code_language=gateway.runtime.language,
        code_runtime=gateway.runtime,
    )
    async with running:
        gateway.tasks.durable = backend
        scanning = asyncio.get_running_loop().create_task(backend.scan())
        try:
            yield
        finally:
            gateway.tasks.durable = None
            scanning.cancel()
            for watcher in list(backend._watchers):
                watcher.cancel()
