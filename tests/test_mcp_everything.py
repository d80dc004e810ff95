"""toolnexus's MCP client against the reference server, ``@modelcontextprotocol/server-everything``,
over stdio, streamable HTTP and SSE, with all three handlers given: every tool is listed (the
ones the server offers only to clients declaring elicitation, sampling and roots, and the
task-only one, included) and callable, and every content part of the content tools comes back
as the server sent it (compared with the same call made through the SDK's own ``Client``).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import re
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.types import ElicitRequestParams

from npm_tools import install, node, package
from toolnexus.scheduling import ToolCall, run_batch
from toolnexus.tools.mcp import ContentParts, mcp_servers

DATA = "data:text/plain;base64," + base64.b64encode(b"hello from a data URL").decode()
CALLS: dict[str, dict[str, Any]] = {
    "echo": {"message": "hi"},
    "get-annotated-message": {"messageType": "success", "includeImage": True},
    "get-env": {},
    "get-resource-links": {"count": 3},
    "get-resource-reference": {"resourceType": "Blob", "resourceId": 2},
    "get-roots-list": {},
    "get-structured-content": {"location": "Chicago"},
    "get-sum": {"a": 2, "b": 3},
    "get-tiny-image": {},
    "gzip-file-as-resource": {"data": DATA, "outputType": "resource"},
    "toggle-simulated-logging": {},
    "toggle-subscriber-updates": {},
    "trigger-long-running-operation": {"duration": 1, "steps": 2},
    "trigger-elicitation-request": {},
    "trigger-url-elicitation": {"url": "https://example.com/approve"},
    "trigger-sampling-request": {"prompt": "Say hi"},
    "simulate-research-query": {"topic": "tides"},
}
CONTENT_TOOLS = [
    "get-annotated-message", "get-resource-links", "get-resource-reference", "get-tiny-image",
    "gzip-file-as-resource", "get-structured-content",
]  # fmt: skip


@pytest.fixture(scope="module")
def everything() -> tuple[Path, Path]:
    folder, why = install()
    if why is not None:
        pytest.skip(f"server-everything could not be installed: {why}")
    return node(folder), package(folder, "@modelcontextprotocol/server-everything") / "dist"


async def elicit(context: Any, params: ElicitRequestParams) -> Any:
    from mcp.types import ElicitRequestFormParams, ElicitResult

    if isinstance(params, ElicitRequestFormParams):
        return ElicitResult(action="accept", content={"name": "Ada"})
    return ElicitResult(action="accept")  # URL mode: the user agreed to open it


async def sample(context: Any, params: Any) -> Any:
    from mcp.types import CreateMessageResult, TextContent

    return CreateMessageResult(
        role="assistant", content=TextContent(type="text", text="hi there"), model="test-model"
    )


HANDLERS = {"elicitation_handler": elicit, "sampling_handler": sample, "roots": ["file:///work"]}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@contextlib.contextmanager
def served(runtime: tuple[Path, Path], transport: str) -> Iterator[int]:
    port = _free_port()
    process = subprocess.Popen(
        [str(runtime[0]), str(runtime[1] / "index.js"), transport],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(600):
            with socket.socket() as client:
                if client.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if process.poll() is not None:
                raise RuntimeError("server-everything did not start")
            time.sleep(0.05)
        yield port
    finally:
        process.terminate()
        process.wait(10)


async def _all_listed(tools: Any, count: int) -> None:
    """The conditional tools arrive by notifications/tools/list_changed after initialisation."""
    for _ in range(400):
        if len(tools) >= count:
            return
        await asyncio.sleep(0.05)


CLOCK = re.compile(r"\d{1,2}:\d{2}:\d{2}(\s?[AP]M)?")


def _timeless(parts: list[Any]) -> list[Any]:
    """``parts`` with the clock times the server writes into its dynamic resources blanked
    (two calls a second apart differ only there); a blob is compared decoded."""
    out = []
    for part in parts:
        resource = part.get("resource")
        if isinstance(resource, dict):
            resource = dict(resource)
            if "blob" in resource:
                raw = base64.b64decode(resource["blob"])  # gzip output (binary) stays as sent
                if raw[:2] != b"\x1f\x8b":
                    resource["blob"] = CLOCK.sub("T", raw.decode())
            if "text" in resource:
                resource["text"] = CLOCK.sub("T", resource["text"])
            part = {**part, "resource": resource}
        elif part.get("type") == "text":
            part = {**part, "text": CLOCK.sub("T", part["text"])}
        out.append(part)
    return out


async def _sdk_content(runtime: tuple[Path, Path]) -> dict[str, Any]:
    """The content tools' results as the SDK's own Client reads them."""
    from mcp import Client, StdioServerParameters

    server = StdioServerParameters(command=str(runtime[0]), args=[str(runtime[1] / "index.js")])
    found = {}
    async with Client(server, mode="legacy") as client:
        for name in CONTENT_TOOLS:
            result = await client.call_tool(name, CALLS[name])
            found[name] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return found


@pytest.mark.timeout(300)
@pytest.mark.parametrize("transport", ["stdio", "streamableHttp", "sse"])
async def test_every_tool_of_server_everything_is_listed_and_callable_and_every_part_kept(
    transport: str, everything: tuple[Path, Path]
) -> None:
    nodejs, dist = everything
    with contextlib.ExitStack() as stack:
        if transport == "stdio":
            entry: dict[str, Any] = {"command": str(nodejs), "args": [str(dist / "index.js")]}
        else:
            port = stack.enter_context(served(everything, transport))
            path = "/mcp" if transport == "streamableHttp" else "/sse"
            entry = {"url": f"http://127.0.0.1:{port}{path}"}
            if transport == "sse":
                entry["type"] = "sse"
        entry.update(HANDLERS, timeout=60, connect_timeout=60)
        async with mcp_servers({"e": entry}) as tools:
            assert not tools.failures
            await _all_listed(tools, len(CALLS))
            listed = sorted(t.name.removeprefix("e_") for t in tools)
            assert listed == sorted(CALLS)
            calls = [ToolCall(name, f"e_{name}", args) for name, args in CALLS.items()]
            outcomes = dict(zip(CALLS, await run_batch(calls, tools), strict=True))
        failed = {name: o.error for name, o in outcomes.items() if not o.ok}
        assert failed == {}
    assert "Ada" in outcomes["trigger-elicitation-request"].text
    assert "hi there" in outcomes["trigger-sampling-request"].text
    assert "file:///work" in outcomes["get-roots-list"].text
    if transport != "stdio":
        print(f"server-everything over {transport}: {len(listed)} tools listed and called")
        return
    sent = await _sdk_content(everything)
    kept = 0
    for name in CONTENT_TOOLS:
        outcome = outcomes[name]
        whole = (outcome.metadata or {}).get("mcp")
        if whole is not None:  # structuredContent with parts beside it, or _meta
            assert _timeless(whole["content"]) == _timeless(sent[name]["content"]), name
            kept += len(whole["content"])
        elif isinstance(outcome.value, ContentParts):
            assert _timeless(list(outcome.value)) == _timeless(sent[name]["content"]), name
            kept += len(outcome.value)
        else:  # structured content, or one plain text part
            structured = sent[name].get("structuredContent")
            assert outcome.value in (structured, sent[name]["content"][0].get("text")), name
            kept += len(sent[name]["content"])
    total = sum(len(sent[name]["content"]) for name in CONTENT_TOOLS)
    print(
        f"server-everything over {transport}: {len(listed)} tools listed, {kept}/{total} parts kept"
    )
    assert kept == total
