"""A real run to draw: native calls (two reads together, a write alone, a failure, a refusal)
and a Code Mode program (three reads together, then a write), through a real client loop."""

from __future__ import annotations

import asyncio
from typing import Any

from toolnexus import Session, ToolCall, ToolHints, create_client, tool
from toolnexus.client import RunResult
from toolnexus.testing import FunctionModel, ModelReply

HOSTILE = (
    "<img src=x onerror=\"document.title='pwned';document.body.appendChild("
    "document.createElement('marquee'))\"></script><script>document.title='pwned'</script>"
    '</svg><svg onload="document.title=\'pwned\'"></svg><a href="javascript:alert(1)">x</a>'
    "\u2028\u2029&amp;<!--"
)


class Meter:
    """Counts the calls in flight, as the tools see them."""

    def __init__(self) -> None:
        self.active = 0
        self.peak = 0

    async def hold(self, seconds: float) -> None:
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            await asyncio.sleep(seconds)
        finally:
            self.active -= 1


PROGRAM = """
import asyncio
texts = await asyncio.gather(*[tools.read_file({"path": p}) for p in ["x.txt", "y.txt", "z.txt"]])
await tools.write_file({"path": "out.txt", "text": "joined"})
await tools.delete_file({"path": "old.txt"})
texts
"""


async def demo_run(hostile: bool = False) -> tuple[RunResult, Meter]:
    """Run the demo and return its result (``result.session`` is the log) and the meter."""
    meter = Meter()

    @tool(hints=ToolHints(read_only=True))
    async def read_file(path: str) -> str:
        """Read a file."""
        await meter.hold(0.03 if path != "a.txt" else 0.06)
        if path == "missing.txt":
            raise FileNotFoundError("no such file: missing.txt")
        return HOSTILE if hostile else f"contents of {path}"

    @tool(hints=ToolHints(read_only=False))
    async def write_file(path: str, text: str) -> str:
        """Write a file."""
        await meter.hold(0.02)
        return f"wrote {len(text)} characters to {path}"

    @tool(hints=ToolHints(read_only=False), requires_approval=True)
    async def delete_file(path: str) -> str:
        """Delete a file."""
        return f"deleted {path}"

    @tool(hints=ToolHints(read_only=True), timeout=0.05)
    async def search(query: str) -> str:
        """Search the files (too slow: it always times out)."""
        await meter.hold(5.0)
        return "never"

    turns: list[Any] = [
        ModelReply(
            "Reading both, then writing.",
            [
                ToolCall("c1", "read_file", {"path": "a.txt"}),
                ToolCall("c2", "read_file", {"path": "b.txt"}),
                ToolCall("c3", "write_file", {"path": "c.txt", "text": "hello"}),
                ToolCall("c4", "read_file", {"path": "missing.txt"}),
                ToolCall("c5", "delete_file", {"path": "a.txt"}),
                ToolCall("c6", "search", {"query": "todo"}),
            ],
        ),
        ModelReply(
            "Now a program.",
            [
                ToolCall(
                    "c7",
                    "run_code",
                    {"code": PROGRAM, "description": "Read three files, write one, delete one"},
                )
            ],
        ),
        "Done: " + (HOSTILE if hostile else "all files read."),
    ]

    def model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        return turns[sum(m["role"] == "assistant" for m in messages)]

    async def approve(name: str, args: dict[str, Any]) -> bool:
        await asyncio.sleep(0.01)  # the user thinks it over
        return bool(args.get("path") == "old.txt")

    client = create_client(
        model=FunctionModel(model, name="demo-model"),
        code_mode="both",
        approval_handler=approve,
        max_parallel=4,
    )
    result = await client.run(
        "Read a.txt and b.txt, then write c.txt.",
        tools=[read_file, write_file, delete_file, search],
        session=Session(),
    )
    return result, meter
