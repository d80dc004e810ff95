"""A real MCP server for the tests (the SDK's MCPServer), over stdio or streamable HTTP.

Run: python tests/mcp_server.py [stdio | http PORT | sse PORT]
"""

from __future__ import annotations

import asyncio
import base64
import os
import sys
from typing import Annotated

from mcp.server.elicitation import ElicitationResult
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, ListRoots, Resolve, Sample
from mcp.types import (
    CreateMessageResult,
    ImageContent,
    ListRootsResult,
    SamplingMessage,
    TextContent,
    ToolAnnotations,
)
from pydantic import BaseModel

server = MCPServer("test-server")
state = {"active": 0, "peak": 0}


async def _work(delay: float) -> None:
    state["active"] += 1
    state["peak"] = max(state["peak"], state["active"])
    try:
        await asyncio.sleep(delay)
    finally:
        state["active"] -= 1


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def lookup(key: str, delay: float = 0.2) -> str:
    """Look a key up (read-only)."""
    await _work(delay)
    return f"value of {key}"


@server.tool()
async def store(key: str, delay: float = 0.2) -> str:
    """Store a key (no annotations: unsafe)."""
    await _work(delay)
    return f"stored {key}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def stats(reset: bool = True) -> dict[str, int]:
    """The most calls that ran at once since the last reset."""
    peak = state["peak"]
    if reset:
        state["peak"] = 0
    return {"peak": peak}


@server.tool()
def explode(message: str) -> str:
    """Always fails."""
    raise ValueError(message)


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Add a tool named ``name`` and tell the client that the tool list changed (on a
    ``subscriptions/listen`` stream at 2026-07-28, as a notification before)."""

    def added() -> str:
        return f"I am {name}"

    server.add_tool(added, name=name, description=f"A tool added while running: {name}.")
    if ctx.protocol_version == "2026-07-28":
        await ctx.notify_tools_changed()
    else:
        await ctx.session.send_tool_list_changed()
    return f"grew {name}"


class Order(BaseModel):
    """What ``ask`` asks for: a form with two defaults."""

    dish: str
    size: str = "large"
    count: int = 2


# The SDK's resolvers ask through an InputRequiredResult at 2026-07-28 and through a
# server-initiated request before (see tests/mcp_input_server.py, which records which).


def _order() -> Elicit[Order]:
    return Elicit("What would you like?", Order)


def _question(prompt: str) -> Sample:
    message = SamplingMessage(role="user", content=TextContent(type="text", text=prompt))
    return Sample([message], max_tokens=50)


def _roots() -> ListRoots:
    return ListRoots()


@server.tool()
async def ask(
    answer: Annotated[ElicitationResult[Order], Resolve(_order)],
) -> dict[str, object]:
    """Asks the user for an order (form elicitation) and returns the answer."""
    data = answer.data.model_dump() if answer.action == "accept" else None
    return {"action": answer.action, "data": data}


@server.tool()
async def sign_in(ctx: Context) -> str:
    """Sends the user to a page (URL elicitation) and returns their answer's action."""
    answer = await ctx.elicit_url("Sign in to continue", "https://example.com/sign-in", "in-1")
    return answer.action


@server.tool()
async def sample(prompt: str, reply: Annotated[CreateMessageResult, Resolve(_question)]) -> str:
    """Asks the client's model (sampling) and returns its text."""
    content = reply.content
    return content.text if isinstance(content, TextContent) else str(content)


@server.tool()
async def roots(listed: Annotated[ListRootsResult, Resolve(_roots)]) -> list[str]:
    """The client's roots."""
    return [str(root.uri) for root in listed.roots]


@server.tool()
def capabilities(ctx: Context) -> dict[str, object]:
    """What the client declared."""
    declared = ctx.client_capabilities
    return declared.model_dump(by_alias=True, exclude_none=True) if declared else {}


@server.tool()
async def progress(steps: int, ctx: Context) -> str:
    """Reports ``steps`` progress notifications, then finishes."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}")
    return "done"


@server.tool()
def image(megabytes: int) -> list[ImageContent]:
    """One PNG image part of about ``megabytes`` MB: PNG's signature, then zero bytes."""
    signature = b"\x89PNG\r\n\x1a\n"
    data = signature + bytes(megabytes * 1024 * 1024 // 3 * 3 - len(signature))
    return [ImageContent(type="image", data=base64.b64encode(data).decode(), mime_type="image/png")]


@server.tool()
def die() -> str:
    """Ends this server's process at once, as a crash would."""
    os._exit(1)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        asyncio.run(server.run_streamable_http_async(port=int(sys.argv[2])))
    elif len(sys.argv) > 2 and sys.argv[1] == "sse":
        asyncio.run(server.run_sse_async(port=int(sys.argv[2])))
    else:
        server.run("stdio")
