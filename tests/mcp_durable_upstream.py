"""An upstream MCP server for the durable-task tests, over streamable HTTP, shared by every
gateway (worker) in a test, so that what it sees is what all of them did together.

Run: python tests/mcp_durable_upstream.py PORT EFFECTS_LOG

Its tools append what they do to EFFECTS_LOG as JSON lines (``{"event": "start"|"end",
"tool", "key", "active", "t"}``, ``active`` counting the calls running in this server at
that moment), so a test can check across gateway processes that reads overlapped at most up
to the cap, that a write ran alone, and that no write ran twice.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("durable-upstream")
state = {"active": 0, "peak": 0}
EFFECTS = sys.argv[2] if len(sys.argv) > 2 else "effects.jsonl"


def note(event: str, tool: str, key: str) -> None:
    line = {"event": event, "tool": tool, "key": key, "active": state["active"], "t": time.time()}
    with open(EFFECTS, "a", encoding="utf-8") as log:
        log.write(json.dumps(line) + "\n")


async def work(tool: str, key: str, seconds: float) -> None:
    state["active"] += 1
    state["peak"] = max(state["peak"], state["active"])
    note("start", tool, key)
    try:
        await asyncio.sleep(seconds)
    finally:
        state["active"] -= 1
        note("end", tool, key)


@server.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
async def read(key: str, seconds: float = 0.5) -> str:
    """Read a key (read-only, idempotent)."""
    await work("read", key, seconds)
    return f"read {key}"


@server.tool()
async def write(key: str, seconds: float = 0.5) -> str:
    """Write a key (no annotations: unsafe, not idempotent)."""
    await work("write", key, seconds)
    return f"wrote {key}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def stats() -> dict[str, int]:
    """The most calls that ran at once, over this server's life."""
    return {"peak": state["peak"]}


if __name__ == "__main__":
    asyncio.run(server.run_streamable_http_async(port=int(sys.argv[1])))
