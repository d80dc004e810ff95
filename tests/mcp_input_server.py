"""The test server (``tests/mcp_server.py``) with tools that ask the client for input in both
generations of the protocol, recording how each was asked.

At 2026-07-28 a tool asks through an ``InputRequiredResult`` (SEP-2322: the client answers and
calls again); at older revisions through a server-initiated request. ``ask_form``, ``sample_it``
and ``list_them`` use the SDK's resolvers (``Resolve(Elicit/Sample/ListRoots)``), which pick
the mechanism from the negotiated version; ``ask_url`` does it by hand (the resolvers have no
URL mode). ``how_asked`` returns what was recorded: ``[tool, protocol version, mechanism]``.

Hostile tools: ``ask_forever`` answers every round with another ``InputRequiredResult``;
``huge_state`` asks with a ``request_state`` of ``megabytes`` MB.

Run: python tests/mcp_input_server.py [stdio | http PORT]
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Annotated, Any

sys.path.insert(0, str(Path(__file__).parent))

from mcp.server.elicitation import ElicitationResult
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.resolve import Elicit, ListRoots, Resolve, Sample
from mcp.types import (
    CallToolResult,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    InputRequiredResult,
    ListRootsResult,
    SamplingMessage,
    TextContent,
)

from mcp_server import Order, server

asked: list[list[str | None]] = []


def _record(tool: str, ctx: Context) -> str:
    how = "input_required" if ctx.input_responses is not None else "request"
    asked.append([tool, ctx.protocol_version, how])
    return how


def order() -> Elicit[Order]:
    return Elicit("What would you like?", Order)


def question(prompt: str) -> Sample:
    message = SamplingMessage(role="user", content=TextContent(type="text", text=prompt))
    return Sample([message], max_tokens=50)


def roots_of() -> ListRoots:
    return ListRoots()


@server.tool()
async def ask_form(
    ctx: Context, answer: Annotated[ElicitationResult[Order], Resolve(order)]
) -> dict[str, Any]:
    """Asks for an order (form elicitation)."""
    how = _record("ask_form", ctx)
    data = answer.data.model_dump() if answer.action == "accept" else None
    return {"action": answer.action, "data": data, "how": how}


@server.tool()
async def sample_it(
    prompt: str, ctx: Context, reply: Annotated[CreateMessageResult, Resolve(question)]
) -> dict[str, Any]:
    """Asks the client's model (sampling)."""
    how = _record("sample_it", ctx)
    content = reply.content
    text = content.text if isinstance(content, TextContent) else str(content)
    return {"text": text, "how": how}


@server.tool()
async def list_them(
    ctx: Context, listed: Annotated[ListRootsResult, Resolve(roots_of)]
) -> dict[str, Any]:
    """The client's roots."""
    how = _record("list_them", ctx)
    return {"roots": [str(root.uri) for root in listed.roots], "how": how}


URL = "https://example.com/connect"


@server.tool()
async def ask_url(ctx: Context) -> dict[str, Any] | InputRequiredResult:
    """Asks the user to open a URL (URL-mode elicitation)."""
    if ctx.protocol_version == "2026-07-28":
        answers = ctx.input_responses or {}
        if "connect" not in answers:
            request = ElicitRequest(
                params=ElicitRequestURLParams(
                    message="Connect your account", url=URL, elicitation_id="e1"
                )
            )
            return InputRequiredResult(input_requests={"connect": request}, request_state="s1")
        answer = answers["connect"]
        assert isinstance(answer, ElicitResult)
        return {"action": answer.action, "how": _record("ask_url", ctx), "state": ctx.request_state}
    result = await ctx.elicit_url("Connect your account", URL, "e1")
    return {"action": result.action, "how": _record("ask_url", ctx)}


@server.tool()
def how_asked() -> list[list[str | None]]:
    """What the tools recorded: [tool, protocol version, mechanism]."""
    return asked


@server.tool()
async def ask_forever(ctx: Context) -> CallToolResult | InputRequiredResult:
    """Never satisfied: every round asks again."""
    rounds = int((ctx.request_state or "0").split(":")[-1]) + 1
    request = ElicitRequest(
        params=ElicitRequestFormParams(
            message=f"Round {rounds}",
            requested_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
        )
    )
    return InputRequiredResult(input_requests={"q": request}, request_state=f"round:{rounds}")


@server.tool()
async def huge_state(megabytes: int, ctx: Context) -> str | InputRequiredResult:
    """Asks with a request_state of ``megabytes`` MB (its echo would be as big)."""
    if ctx.request_state is not None:
        return f"echoed {len(ctx.request_state)} characters"
    request = ElicitRequest(
        params=ElicitRequestFormParams(
            message="Anything?",
            requested_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
        )
    )
    state = "x" * (megabytes * 1024 * 1024)
    return InputRequiredResult(input_requests={"q": request}, request_state=state)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        asyncio.run(server.run_streamable_http_async(port=int(sys.argv[2])))
    else:
        server.run("stdio")
