"""Clients of the gateway's tasks for the tests: a plain HTTP client speaking the 2025-11-25
wire (httpx, JSON-RPC over streamable HTTP, as any client sends it), and the python SDK's
``ClientSession`` on 2026-07-28 with the tasks extension (a ``ResultClaim`` for
``resultType: "task"`` that polls ``tasks/get``, the SDK's own mechanism for an extension's
result shape)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, Literal

import httpx
from mcp import ClientSession, types
from mcp.client.extension import ClaimContext, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from pydantic import ConfigDict, Field

from conftest import free_port, listening

TASKS = "io.modelcontextprotocol/tasks"
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def serve_command(config: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "toolnexus.cli", "mcp", "serve", "--config", str(config), *extra]


@contextmanager
def http_gateway(config: Path, *extra: str, port: int | None = None) -> Iterator[Any]:
    """The gateway over streamable HTTP in a process of its own; yields ``(process, url)``."""
    port = port or free_port()
    command = serve_command(config, "--transport", "http", "--port", str(port), *extra)
    log = open(config.with_name(f"gateway-{port}.log"), "ab")  # noqa: SIM115
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, env=dict(os.environ))
    try:
        if not listening(port, process, seconds=60):
            process.kill()
            raise AssertionError(f"the gateway did not start: {config.with_name(log.name)}")
        yield process, f"http://127.0.0.1:{port}/mcp"
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
        log.close()


class Wire:
    """A 2025-11-25 client over plain HTTP: one MCP session (``Mcp-Session-Id``)."""

    def __init__(self, url: str, headers: dict[str, str] | None = None) -> None:
        self.url = url
        self.headers = {**ACCEPT, **(headers or {})}
        self.http = httpx.AsyncClient(timeout=120)
        self.ids = 0
        self.session_id: str | None = None
        self.initialized: dict[str, Any] = {}

    async def open(self, capabilities: dict[str, Any] | None = None) -> Wire:
        params = {
            "protocolVersion": "2025-11-25",
            "capabilities": capabilities or {},
            "clientInfo": {"name": "wire", "version": "1"},
        }
        self.initialized = (await self.rpc("initialize", params))["result"]
        await self.http.post(
            self.url,
            headers=self._headers(),
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        )
        return self

    async def close(self) -> None:
        await self.http.aclose()

    def _headers(self) -> dict[str, str]:
        headers = dict(self.headers)
        if self.session_id is not None:
            headers["Mcp-Session-Id"] = self.session_id
            headers["Mcp-Protocol-Version"] = "2025-11-25"
        return headers

    async def rpc(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The JSON-RPC response (``result`` or ``error``) to one request."""
        self.ids += 1
        number = self.ids
        body = {"jsonrpc": "2.0", "id": number, "method": method, "params": params}
        response = await self.http.post(self.url, headers=self._headers(), json=body)
        if self.session_id is None:
            self.session_id = response.headers.get("mcp-session-id")
        if "text/event-stream" in response.headers.get("content-type", ""):
            messages = [
                json.loads(line[5:])
                for line in response.text.splitlines()
                if line.startswith("data:") and line[5:].strip()
            ]
        else:
            messages = [response.json()]
        answers = [m for m in messages if m.get("id") == number]
        assert answers, (response.status_code, response.text[:500])
        answer: dict[str, Any] = answers[-1]
        return answer

    async def rpc_answering(
        self, method: str, params: dict[str, Any], answer: Any
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """One request whose SSE stream may carry the server's own requests (an approval's
        ``elicitation/create``): each is answered with ``answer(request)`` as it arrives.
        Returns the response and the server's requests seen."""
        self.ids += 1
        number = self.ids
        body = {"jsonrpc": "2.0", "id": number, "method": method, "params": params}
        asked: list[dict[str, Any]] = []
        async with self.http.stream("POST", self.url, headers=self._headers(), json=body) as got:
            async for line in got.aiter_lines():
                if not line.startswith("data:") or not line[5:].strip():
                    continue
                message = json.loads(line[5:])
                if "method" in message and "id" in message:  # the server asks
                    asked.append(message)
                    reply = {"jsonrpc": "2.0", "id": message["id"], "result": answer(message)}
                    await self.http.post(self.url, headers=self._headers(), json=reply)
                elif message.get("id") == number:
                    return message, asked
        raise AssertionError(f"no answer to {method}")

    async def call_as_task(self, name: str, arguments: dict[str, Any], ttl: Any = 60_000) -> Any:
        """``tools/call`` augmented with a task: the ``CreateTaskResult``'s task."""
        params = {"name": name, "arguments": arguments, "task": {"ttl": ttl}}
        answer = await self.rpc("tools/call", params)
        assert "result" in answer, answer
        return answer["result"]["task"]

    async def task(self, method: str, task_id: str) -> dict[str, Any]:
        return await self.rpc(f"tasks/{method}", {"taskId": task_id})


@asynccontextmanager
async def wire(
    url: str, headers: dict[str, str] | None = None, capabilities: dict[str, Any] | None = None
) -> AsyncIterator[Wire]:
    client = await Wire(url, headers).open(capabilities)
    try:
        yield client
    finally:
        await client.close()


class TaskIdParams(types.RequestParams):
    task_id: str = Field(alias="taskId")


class GetTask(types.Request[TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskIdParams
    name_param = "taskId"  # the extension asks for Mcp-Name: <taskId> on tasks/*


class CancelTask(types.Request[TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskIdParams
    name_param = "taskId"


class UpdateParams(TaskIdParams):
    input_responses: dict[str, Any] = Field(alias="inputResponses")


class UpdateTask(types.Request[UpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: UpdateParams
    name_param = "taskId"


class DetailedTask(types.Result):
    """What ``tasks/get`` answers on 2026-07-28."""

    model_config = ConfigDict(extra="allow")

    task_id: str = Field(alias="taskId")
    status: str
    status_message: str | None = Field(default=None, alias="statusMessage")
    ttl_ms: int | None = Field(default=None, alias="ttlMs")
    poll_interval_ms: int | None = Field(default=None, alias="pollIntervalMs")
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = Field(default=None, alias="inputRequests")


class CreatedTask(types.Result):
    """A ``CreateTaskResult`` (``resultType: "task"``)."""

    model_config = ConfigDict(extra="allow")

    result_type: Literal["task"] = Field(alias="resultType")
    task_id: str = Field(alias="taskId")
    status: str
    ttl_ms: int | None = Field(default=None, alias="ttlMs")
    poll_interval_ms: int | None = Field(default=None, alias="pollIntervalMs")


class Polling:
    """The SDK client's resolution of a task: poll ``tasks/get`` until it ends; what it saw.
    With ``answer``, a task's ``inputRequests`` are answered by ``tasks/update``, each with
    ``answer(request)`` (keyed as asked, plus a ``"not-asked"`` key the gateway must ignore)."""

    def __init__(self, answer: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> None:
        self.created: list[CreatedTask] = []
        self.seen: list[DetailedTask] = []
        self.answer = answer
        self.asked: list[dict[str, Any]] = []

    async def _answer(self, got: DetailedTask, ctx: ClaimContext) -> None:
        assert self.answer is not None and got.input_requests, got
        self.asked.extend(got.input_requests.values())
        responses = {key: self.answer(request) for key, request in got.input_requests.items()}
        responses["not-asked"] = {"action": "accept", "content": {"approve": True}}  # ignored
        params = UpdateParams(taskId=got.task_id, inputResponses=responses)
        await ctx.session.send_request(UpdateTask(params=params), types.EmptyResult)

    async def resolve(self, created: CreatedTask, ctx: ClaimContext) -> types.CallToolResult:
        self.created.append(created)
        while True:
            got = await ctx.session.send_request(
                GetTask(params=TaskIdParams(taskId=created.task_id)), DetailedTask
            )
            self.seen.append(got)
            if got.status == "completed" and got.result is not None:
                return types.CallToolResult.model_validate(got.result, by_name=False)
            if got.status in ("failed", "cancelled"):
                raise AssertionError(f"the task ended {got.status}: {got.error}")
            if got.status == "input_required" and self.answer is not None:
                await self._answer(got, ctx)
                continue
            await asyncio.sleep((got.poll_interval_ms or 500) / 1000 / 5)


async def never_asked(context: Any, params: Any) -> Any:
    """An elicitation callback for `modern_session`: it declares elicitation, and fails the
    test if a task's question comes as a request rather than in ``inputRequests``."""
    raise AssertionError("a task's question came as a request, not in inputRequests")


async def task_state(session: ClientSession, task_id: str, until: set[str]) -> DetailedTask:
    """``tasks/get`` (2026-07-28) polled until the task's status is one of ``until``."""
    deadline = asyncio.get_running_loop().time() + 30
    while True:
        got = await session.send_request(GetTask(params=TaskIdParams(taskId=task_id)), DetailedTask)
        if got.status in until:
            return got
        assert asyncio.get_running_loop().time() < deadline, got
        await asyncio.sleep(0.05)


@asynccontextmanager
async def modern_session(
    url: str, polling: Polling | None = None, elicitation_callback: Any = None
) -> AsyncIterator[ClientSession]:
    """The python SDK client on 2026-07-28; with ``polling``, it declares the tasks extension
    and resolves task results by polling; with ``elicitation_callback``, it declares
    elicitation (the callback itself is never asked: a task's questions come by polling)."""
    extensions = {TASKS: {}} if polling is not None else None
    claims = (
        {TASKS: [ResultClaim(result_type="task", model=CreatedTask, resolve=polling.resolve)]}
        if polling is not None
        else None
    )
    async with (
        streamable_http_client(url) as (read, write),
        ClientSession(
            read,
            write,
            extensions=extensions,
            result_claims=claims,
            elicitation_callback=elicitation_callback,
        ) as session,
    ):
        await session.discover()
        yield session
