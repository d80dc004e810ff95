"""A toolnexus Temporal worker for the tests, run as its own process.

Run: python tests/temporal_worker.py ADDRESS TASK_QUEUE EFFECTS_LOG [MODEL_BASE_URL]

With a model base URL (an OpenAI-style endpoint), the worker also makes the model requests of
durable agent runs. With TOOLNEXUS_TEST_STORE set to a directory, its Temporal client keeps
large payloads there (``toolnexus.temporal.file_store``).

Its tools append what they do to EFFECTS_LOG as JSON lines ({"event": "start"|"end", "call",
"tool", "pid", "t"}), so a test can see, across processes, what ran when and where, and which
calls completed. A worker killed mid-call leaves a "start" without an "end".
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

from temporalio.client import Client

from toolnexus import Resources, ToolHints, create_client, tool
from toolnexus.temporal import file_store, worker


def effects_log(path: str) -> Any:
    def note(event: str, call: str, tool_name: str) -> None:
        line = {
            "event": event,
            "call": call,
            "tool": tool_name,
            "pid": os.getpid(),
            "t": time.time(),
        }
        with open(path, "a", encoding="utf-8") as log:
            log.write(json.dumps(line) + "\n")

    return note


def tools(path: str) -> list[Any]:
    note = effects_log(path)

    @tool(hints=ToolHints(read_only=True, idempotent=True))
    async def read(key: str, seconds: float = 0.2) -> str:
        """Read a key (safe, idempotent)."""
        note("start", key, "read")
        await asyncio.sleep(seconds)
        note("end", key, "read")
        return f"read {key}"

    @tool
    async def write(key: str, seconds: float = 0.2) -> str:
        """Write a key (unsafe, not idempotent)."""
        note("start", key, "write")
        await asyncio.sleep(seconds)
        note("end", key, "write")
        return f"wrote {key}"

    @tool(resources=lambda args: Resources(writes=[args["file"]]))
    async def save(key: str, file: str, seconds: float = 0.2) -> str:
        """Save to a file (declares the file it writes)."""
        note("start", key, "save")
        await asyncio.sleep(seconds)
        note("end", key, "save")
        return f"saved {key} to {file}"

    @tool(hints=ToolHints(read_only=True, idempotent=True))
    async def padded(n: int) -> str:
        """``n`` in a 150-character line (a result too many of which fill a payload)."""
        return padded_line(n)

    @tool(hints=ToolHints(read_only=True, idempotent=True))
    async def noop(n: int) -> int:
        """Return n."""
        return n

    @tool(hints=ToolHints(read_only=True))
    def big(size: int) -> str:
        """A result of the given size."""
        return "x" * size

    @tool(hints=ToolHints(read_only=True))
    def text(char: str, count: int) -> str:
        """``char`` repeated ``count`` times (a result whose stored size differs from its
        JSON text's)."""
        return char * count

    return [read, write, save, padded, noop, big, text]


def padded_line(n: int) -> str:
    """What ``padded`` returns for ``n``."""
    return f"{n:08d}".ljust(150, ".")


async def main(address: str, task_queue: str, log_path: str, base_url: str | None) -> None:
    store = os.environ.get("TOOLNEXUS_TEST_STORE")
    if store:
        client = await Client.connect(address, data_converter=file_store(store))
    else:
        client = await Client.connect(address)
    model = None
    if base_url is not None:
        model = create_client(base_url=base_url, model="test-model", style="openai", api_key="k")
    async with worker(client, task_queue=task_queue, tools=tools(log_path), client=model):
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4], sys.argv[4] if len(sys.argv) > 4 else None))
