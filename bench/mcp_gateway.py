"""The MCP gateway on a scripted task over the official filesystem MCP server: what an MCP client
puts in its model's context, and how long the tool calls take. Prints figures side by side.

The task: read 20 files, summarise them, write the summary to one file.

* **Direct**: the client offers the filesystem server's tools to the model as they are; the
  model reads the 20 files one call after another and writes the summary. Its context holds
  every tool definition and every file's full text.
* **Through the gateway** (``toolnexus mcp serve``): the client offers ``run_code``; the model
  writes one program that reads the files at once, summarises and writes. Its context holds the
  ``run_code`` definition (the SDK), the program and what the program returns.

Bytes are measured on the wire (JSON of the definitions, the calls the model makes and their
results); tokens are estimated as bytes / 4. Needs npm (the server is installed from the npm
registry once, into the temporary directory).

Run: ``python bench/mcp_gateway.py``
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

PACKAGE = "@modelcontextprotocol/server-filesystem@2026.8.31"
FILES = 20


def filesystem_server() -> str | None:
    npm = shutil.which("npm")
    if npm is None:
        return None
    prefix = Path(tempfile.gettempdir()) / "toolnexus-tests-npm" / "server-filesystem-2026.8.31"
    binary = prefix / "node_modules" / ".bin" / "mcp-server-filesystem"
    if not binary.exists():
        subprocess.run(
            [npm, "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(prefix),
             PACKAGE],
            check=True, timeout=300, capture_output=True,
        )  # fmt: skip
    return str(binary)


def notes(root: Path) -> list[Path]:
    paths = []
    for i in range(FILES):
        path = root / f"note{i:02}.md"
        body = "\n".join(f"- point {j} of note {i}: " + "lorem ipsum " * 8 for j in range(12))
        path.write_text(f"# Note {i}\n\nSummary: topic {i % 5}.\n\n{body}\n")
        paths.append(path)
    return paths


def size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, default=str).encode())


async def direct(server: str, root: Path, paths: list[Path]) -> tuple[int, float]:
    """Context bytes and tool time when the model calls the server's tools itself."""
    params = StdioServerParameters(command=server, args=[str(root)])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = await session.list_tools()
        context = size([t.model_dump(exclude_none=True) for t in listed.tools])
        started = time.perf_counter()
        summary = []
        for path in paths:  # one tool call per model turn: each result enters the context
            arguments = {"path": str(path)}
            result = await session.call_tool("read_text_file", arguments)
            assert isinstance(result, types.CallToolResult)
            context += size(arguments) + size([c.model_dump() for c in result.content])
            summary.append(result.content[0].text.splitlines()[2])  # type: ignore[union-attr]
        arguments = {"path": str(root / "summary.md"), "content": "\n".join(summary)}
        result = await session.call_tool("write_file", arguments)
        context += size(arguments) + size([c.model_dump() for c in result.content])  # type: ignore[union-attr]
        return context, time.perf_counter() - started


PROGRAM = """
import asyncio
texts = await asyncio.gather(*[
    tools.fs_read_text_file({"path": p}) for p in PATHS
])
summary = [t["content"].splitlines()[2] for t in texts]
await tools.fs_write_file({"path": OUT, "content": "\\n".join(summary)})
len(summary)
"""


async def gateway(server: str, root: Path, paths: list[Path]) -> tuple[int, float]:
    """Context bytes and tool time when the model writes one program through the gateway."""
    config = root.parent / "gateway.json"
    config.write_text(json.dumps({"mcpServers": {"fs": {"command": server, "args": [str(root)]}}}))
    command = ["-m", "toolnexus.cli", "mcp", "serve", "--config", str(config)]
    params = StdioServerParameters(command=sys.executable, args=command)
    program = PROGRAM.replace("PATHS", json.dumps([str(p) for p in paths])).replace(
        "OUT", json.dumps(str(root / "summary-code.md"))
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = await session.list_tools()
        context = size([t.model_dump(exclude_none=True) for t in listed.tools])
        started = time.perf_counter()
        arguments = {"code": program, "description": "Summarise the notes into one file."}
        result = await session.call_tool("run_code", arguments)
        elapsed = time.perf_counter() - started
        assert isinstance(result, types.CallToolResult)
        assert not result.is_error, result.content
        context += size(arguments) + size([c.model_dump() for c in result.content])
        return context, elapsed


async def main() -> None:
    server = filesystem_server()
    if server is None:
        print("npm is not installed: the official filesystem MCP server cannot be; nothing run")
        return
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "notes"
        root.mkdir()
        paths = notes(root)
        await gateway(server, root, paths)  # warm the sandbox and the server once
        direct_bytes, direct_time = await direct(server, root, paths)
        code_bytes, code_time = await gateway(server, root, paths)
        assert (root / "summary.md").read_text() == (root / "summary-code.md").read_text()
    print(f"read {FILES} files, summarise, write one (official filesystem MCP server)")
    for name, sent in (("tools offered directly", direct_bytes), ("through run_code", code_bytes)):
        print(f"    context, {name:27} {sent:8,} bytes  ~{sent // 4:6,} tokens")
    print(f"    saved                               {1 - code_bytes / direct_bytes:8.0%}")
    print(f"    tool time, one call after another   {direct_time * 1e3:8.0f} ms")
    print(f"    tool time, one program (fan-out)    {code_time * 1e3:8.0f} ms")
    print("    the two summaries are identical: yes")


if __name__ == "__main__":
    asyncio.run(main())
