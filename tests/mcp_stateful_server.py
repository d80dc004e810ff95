"""A real MCP server whose tools share mutable state (the SDK's MCPServer, over stdio).

Its tools return the live state, as a benchmark's stateful tools do; the gateway's programs
must still read each call's result as it was when the call finished
(``tests/test_result_snapshot.py`` says why). Run: python tests/mcp_stateful_server.py
"""

from __future__ import annotations

import asyncio
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("stateful")
items: dict[str, list[int]] = {"a": [], "b": []}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def read(key: str, delay: float = 0.0) -> dict[str, Any]:
    """Read a key."""
    if delay:
        await asyncio.sleep(delay)
    return {"key": key, "items": items[key], "all": items}


@server.tool()
async def write(key: str, n: int, delay: float = 0.0) -> dict[str, Any]:
    """Append to a key."""
    if delay:
        await asyncio.sleep(delay)
    items[key].append(n)
    return {"key": key, "items": items[key]}


if __name__ == "__main__":
    server.run("stdio")
