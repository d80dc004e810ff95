"""Every speed target of the library, each as a ratio to its floor measured in the same run.

Exits non-zero when a target is missed. Not part of CI: a shared machine's noise moves wall
clocks, so the variants of each row are interleaved and repeated, and medians are compared.
Rows (``docs/performance.md`` explains each floor):

* ``rule``: the pure rule deciding undeclared calls, against the safe/unsafe rule it
  generalised (``tests/previous_rule.py``), same workload (target <= 1.0, with 10 % noise);
* ``run_batch``: 100 no-op async calls through ``run_batch`` against ``Semaphore(10)`` plus
  ``asyncio.gather`` of the same calls, JSON arguments decoded in both (target <= 2.0);
* ``client``: ``client.run`` with an in-process model (``FunctionModel``) asking for 100
  no-op async calls in one response, per call, against the same ``Semaphore(10)`` plus
  ``gather`` floor (target <= 4.0: 20 us per call where that floor is 5 us; ``bench/peers.py``
  measures smolagents and pydantic-ai beside it);
* ``monty sub-call``: a program awaiting a no-op tool N times, per call, against
  pydantic-monty's own awaited round trip (``AsyncMonty``, an async external function)
  (target <= 1.15), and against the sync floor (a sync external function) (target <= 1.6);
  each also with ``MontyRuntime(pin_cpu=True)`` (the ``pinned`` rows), floors unpinned;
* ``monty warm start``: a trivial program on a warm runtime against pydantic-monty's own
  ``feed_run`` of it on a warm pool, timed inside its thread (target <= 1.2); also against
  ``AsyncMonty``'s checkout and ``feed_run`` timed from the loop (``AsyncMonty`` row);
* ``v8 sub-call``: the same program in JavaScript, per call, against a JSON-lines round trip to
  a Deno child that echoes lines (``read()`` and ``writeSync``), the faster median of asyncio's
  subprocess streams and a raw protocol on the pipes (target <= 1.4); each of our runs starts
  after 0.2 s idle, as between model turns, so no spare's boot overlaps it; also with
  ``V8Runtime(pin_cpu=True)`` (the ``pinned`` row), the floor unpinned;
* ``v8 back-to-back``: trivial programs run back to back against one Deno boot (target <= 0.6);
* ``client_http``: ``client.run`` against a minimal OpenAI-style server on 127.0.0.1 (its own
  process), per call, beside the in-process run, and this process's CPU time per call:
  printed, no target (the server's own time is in the first).

Run: ``python bench/all.py [--only ROW ...] [--repeats 7] [--calls 200]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pydantic_monty as monty

from toolnexus import Tool, ToolCall, ToolHints, create_client, run_batch
from toolnexus.codemode import run_program
from toolnexus.codemode.runtimes import MontyRuntime, V8Runtime
from toolnexus.scheduling import SchedulingRule
from toolnexus.testing import FunctionModel

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from previous_rule import SchedulingRule as PreviousRule

Row = tuple[str, float, float, float]  # name, ours, floor, target ratio
RESULTS: list[Row] = []


def report(name: str, ours: float, floor: float, target: float, unit: str = "us") -> None:
    scale = 1e6 if unit == "us" else 1e3
    ratio = ours / floor
    verdict = "ok" if ratio <= target else "MISSED"
    print(
        f"{name:<30} {ours * scale:10.2f} {unit}   floor {floor * scale:10.2f} {unit}   "
        f"ratio {ratio:5.2f}  target <= {target:<4}  {verdict}",
        flush=True,
    )
    RESULTS.append((name, ours, floor, target))


def interleaved(variants: dict[str, Callable[[], float]], repeats: int) -> dict[str, float]:
    """Median of each variant, run in turn ``repeats`` times after one warm-up round."""
    for run in variants.values():
        run()
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeats):
        for name, run in variants.items():
            samples[name].append(run())
    return {name: statistics.median(values) for name, values in samples.items()}


async def ainterleaved(
    variants: dict[str, Callable[[], Awaitable[float]]], repeats: int
) -> dict[str, float]:
    for run in variants.values():
        await run()
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeats):
        for name, run in variants.items():
            samples[name].append(await run())
    return {name: statistics.median(values) for name, values in samples.items()}


# -- the rule ----------------------------------------------------------------------------------


def _drive(rule: Any, n: int = 20_000, cap: int = 10) -> float:
    running: list[int] = []
    start = time.perf_counter()
    for i in range(n):
        _, started = rule.submit("exclusive" if i % 10 == 9 else "parallel")
        running.extend(started)
        while len(running) >= cap or (running and i % 10 == 9):
            running.extend(rule.settle(running.pop(0))[1])
    while running:
        running.extend(rule.settle(running.pop(0))[1])
    return (time.perf_counter() - start) / n


def bench_rule(repeats: int) -> None:
    times = interleaved(
        {
            "new": lambda: _drive(SchedulingRule(10)),
            "old": lambda: _drive(PreviousRule(10)),
        },
        repeats,
    )
    report("rule, undeclared calls", times["new"], times["old"], 1.1)


# -- run_batch ---------------------------------------------------------------------------------


async def _noop_fn(n: int, label: str = "x") -> int:
    return n


async def _noop_execute(args: dict[str, Any]) -> int:
    return await _noop_fn(**args)


NOOP_TOOL = Tool(
    "noop",
    "Returns n.",
    {"type": "object", "properties": {"n": {"type": "integer"}, "label": {"type": "string"}}},
    execute=_noop_execute,
    hints=ToolHints(read_only=True),
)


def _noop_calls(n: int) -> list[ToolCall]:
    """``n`` calls of ``noop``, their arguments JSON text as a model sends them."""
    return [ToolCall(f"c{i}", "noop", f'{{"n": {i}, "label": "item {i}"}}') for i in range(n)]


async def _gathered(calls: list[ToolCall]) -> float:
    """The floor, per call: ``Semaphore(10)`` plus ``gather`` of the calls' no-op function,
    their JSON arguments decoded."""
    semaphore = asyncio.Semaphore(10)

    async def one(call: ToolCall) -> int:
        async with semaphore:
            assert isinstance(call.arguments, str)
            return await _noop_fn(**json.loads(call.arguments))

    start = time.perf_counter()
    await asyncio.gather(*(one(c) for c in calls))
    return (time.perf_counter() - start) / len(calls)


async def _rounds(
    variants: dict[str, Callable[[], Awaitable[float]]], repeats: int, per_round: int
) -> dict[str, float]:
    """The median over ``repeats`` rounds of each variant's median of ``per_round`` runs."""
    rounds: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeats):
        for name, value in (await ainterleaved(variants, per_round)).items():
            rounds[name].append(value)
    return {name: statistics.median(values) for name, values in rounds.items()}


def _in_process_client(calls: list[ToolCall]) -> Any:
    """A client whose in-process model asks for ``calls`` in one response, then answers."""

    def model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        return calls if messages[-1]["role"] == "user" else "done"

    return create_client(model=FunctionModel(model), code_mode="native")


def bench_run_batch(repeats: int, n: int = 100) -> None:
    calls = _noop_calls(n)

    async def batched() -> float:
        start = time.perf_counter()
        outcomes = await run_batch(calls, [NOOP_TOOL])
        elapsed = (time.perf_counter() - start) / n
        assert all(o.ok for o in outcomes), outcomes[0]
        return elapsed

    variants: dict[str, Callable[[], Awaitable[float]]] = {
        "gather": lambda: _gathered(calls),
        "batch": batched,
    }
    times = asyncio.run(_rounds(variants, repeats, 20))  # 20 batches each, interleaved
    report("run_batch, per call", times["batch"], times["gather"], 2.0)


# -- client.run in process --------------------------------------------------------------------


def bench_client(repeats: int, n: int = 100) -> None:
    """``client.run`` with an in-process model asking for ``n`` no-op calls in one response,
    per call, against ``Semaphore(10)`` plus ``gather`` of the same calls: 20 us per call on
    the machine of ``docs/performance.md``, whose floor there is ~5 us (target <= 4.0)."""
    calls = _noop_calls(n)
    client = _in_process_client(calls)

    async def looped() -> float:
        start = time.perf_counter()
        result = await client.run("go", tools=[NOOP_TOOL])
        elapsed = (time.perf_counter() - start) / n
        assert len(result.tool_calls) == n, result.text
        assert result.text == "done", result.text
        assert not any(record.is_error for record in result.tool_calls)
        return elapsed

    variants: dict[str, Callable[[], Awaitable[float]]] = {
        "gather": lambda: _gathered(calls),
        "client": looped,
    }
    times = asyncio.run(_rounds(variants, repeats, 10))
    report("client.run, per call", times["client"], times["gather"], 4.0)


# -- client.run over HTTP ----------------------------------------------------------------------

SERVER = """
import asyncio, json

N = {n}
CALLS = [
    {{"id": f"c{{i}}", "type": "function",
     "function": {{"name": "noop", "arguments": json.dumps({{"n": i, "label": f"item {{i}}"}})}}}}
    for i in range(N)
]
USAGE = {{"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}}


def completion(message, finish):
    choice = {{"index": 0, "message": message, "finish_reason": finish}}
    body = {{"id": "x", "object": "chat.completion", "created": 0, "model": "test-model",
            "choices": [choice], "usage": USAGE}}
    return json.dumps(body).encode()


ASK = completion({{"role": "assistant", "content": None, "tool_calls": CALLS}}, "tool_calls")
DONE = completion({{"role": "assistant", "content": "done"}}, "stop")


async def serve(reader, writer):
    while True:
        try:
            head = await reader.readuntil(b"\\r\\n\\r\\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        length = 0
        for line in head.split(b"\\r\\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        body = await reader.readexactly(length)
        answer = DONE if b'"role":"tool"' in body or b'"role": "tool"' in body else ASK
        writer.write(
            b"HTTP/1.1 200 OK\\r\\ncontent-type: application/json\\r\\n"
            + f"content-length: {{len(answer)}}\\r\\n\\r\\n".encode() + answer
        )
        await writer.drain()


async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    print(f"http://127.0.0.1:{{server.sockets[0].getsockname()[1]}}", flush=True)
    await server.serve_forever()


asyncio.run(main())
"""


def bench_client_http(repeats: int, n: int = 100) -> None:
    """``client.run`` against an OpenAI-style endpoint on 127.0.0.1 (a minimal asyncio server
    in its own process, its two answers made in advance) asking for ``n`` no-op calls in one
    response, per call, beside the in-process run; and the CPU time of this process per call.
    No target: the server's own time is in the first; printed for the record."""
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER.format(n=n)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        over_http = create_client(
            base_url=url + "/v1", model="test-model", api_key="k", code_mode="native"
        )
        in_process = _in_process_client(_noop_calls(n))

        cpu: dict[str, list[float]] = {"http": [], "in process": []}

        def timed(name: str, client: Any) -> Callable[[], Awaitable[float]]:
            async def run() -> float:
                start, used = time.perf_counter(), time.process_time()
                result = await client.run("go", tools=[NOOP_TOOL])
                elapsed = (time.perf_counter() - start) / n
                cpu[name].append((time.process_time() - used) / n)
                assert len(result.tool_calls) == n, result.text
                assert result.text == "done", result.text
                return elapsed

            return run

        async def main() -> dict[str, float]:
            variants = {
                "http": timed("http", over_http),
                "in process": timed("in process", in_process),
            }
            times = await ainterleaved(variants, repeats)
            await over_http.aclose()
            return times

        times = asyncio.run(main())
        used = {name: statistics.median(values) for name, values in cpu.items()}
        print(
            f"{'client.run over HTTP, per call':<30} {times['http'] * 1e6:10.2f} us   "
            f"in process {times['in process'] * 1e6:10.2f} us   (no target: the server's time "
            "is in it)",
            flush=True,
        )
        print(
            f"{'  its CPU time in the client':<30} {used['http'] * 1e6:10.2f} us   "
            f"in process {used['in process'] * 1e6:10.2f} us   (this process only)",
            flush=True,
        )
    finally:
        server.kill()
        server.wait()


# -- Code Mode: Monty --------------------------------------------------------------------------


async def _noop_async() -> int:
    return 0


def _noop_sync() -> int:
    return 0


async def _noop_code(args: dict[str, Any]) -> int:
    return 0


NOOP_CODE = Tool(
    "noop", "Does nothing.", {"type": "object"}, execute=_noop_code, hints=ToolHints(read_only=True)
)


async def _program(code: str, runtime: Any, tools: list[Tool]) -> float:
    start = time.perf_counter()
    out = await run_program(code, tools, runtime=runtime)
    elapsed = time.perf_counter() - start
    if "error" in out:
        raise RuntimeError(f"benchmark program failed: {out['error']}")
    return elapsed


def bench_monty(repeats: int, calls: int) -> None:
    awaited = f"for i in range({calls}):\n    await noop()\n{calls}"
    synced = f"for i in range({calls}):\n    noop()\n{calls}"
    ours_calls = f"for i in range({calls}):\n    await tools.noop({{}})\n{calls}"
    empty = f"for i in range({calls}):\n    pass\n{calls}"

    async def main() -> None:
        runtime = MontyRuntime(type_check=False)
        pinned = MontyRuntime(type_check=False, pin_cpu=True)
        async_pool = monty.AsyncMonty(min_processes=1, max_processes=2)
        sync_pool = monty.Monty(min_processes=1, max_processes=2)
        await async_pool.__aenter__()
        sync_pool.__enter__()
        try:

            async def own_awaited(code: str) -> float:
                async with async_pool.checkout() as session:
                    start = time.perf_counter()
                    await session.feed_run(
                        code, external_lookup={"noop": _noop_async}, skip_type_check=True
                    )
                    return time.perf_counter() - start

            def own_sync(code: str) -> float:
                with sync_pool.checkout() as session:
                    start = time.perf_counter()
                    session.feed_run(
                        code, external_lookup={"noop": _noop_sync}, skip_type_check=True
                    )
                    return time.perf_counter() - start

            async def in_thread(code: str) -> float:
                return await asyncio.to_thread(own_sync, code)

            times = await ainterleaved(
                {
                    "ours": lambda: _program(ours_calls, runtime, [NOOP_CODE]),
                    "ours_empty": lambda: _program(empty, runtime, [NOOP_CODE]),
                    "pinned": lambda: _program(ours_calls, pinned, [NOOP_CODE]),
                    "pinned_empty": lambda: _program(empty, pinned, [NOOP_CODE]),
                    "awaited": lambda: own_awaited(awaited),
                    "awaited_empty": lambda: own_awaited(empty),
                    "sync": lambda: in_thread(synced),
                    "sync_empty": lambda: in_thread(empty),
                },
                repeats,
            )
            ours = (times["ours"] - times["ours_empty"]) / calls
            floor = (times["awaited"] - times["awaited_empty"]) / calls
            sync_floor = (times["sync"] - times["sync_empty"]) / calls
            report("monty sub-call", ours, floor, 1.15)
            report("monty sub-call, sync", ours, sync_floor, 1.6)
            ours_pinned = (times["pinned"] - times["pinned_empty"]) / calls
            report("monty sub-call, pinned", ours_pinned, floor, 1.15)
            report("monty sub-call, sync, pinned", ours_pinned, sync_floor, 1.6)

            async def ours_warm() -> float:
                await asyncio.sleep(0.1)  # idle, as between model turns
                return await _program("1", runtime, [])

            async def pinned_warm() -> float:
                await asyncio.sleep(0.1)
                return await _program("1", pinned, [])

            async def own_warm_in_thread() -> float:
                await asyncio.sleep(0.1)
                return await asyncio.to_thread(_own_warm_sync, sync_pool)

            async def own_warm_awaited() -> float:
                await asyncio.sleep(0.1)
                start = time.perf_counter()
                async with async_pool.checkout() as session:
                    await session.feed_run("1", skip_type_check=True)
                return time.perf_counter() - start

            warm = await ainterleaved(
                {
                    "ours": ours_warm,
                    "pinned": pinned_warm,
                    "own": own_warm_in_thread,
                    "own_awaited": own_warm_awaited,
                },
                repeats,
            )
            report("monty warm start", warm["ours"], warm["own"], 1.2, unit="ms")
            report("monty warm start, pinned", warm["pinned"], warm["own"], 1.2, unit="ms")
            # The same against AsyncMonty timed from the loop, as an asyncio caller of
            # pydantic-monty would see it (the floor above is timed inside its thread, so it
            # leaves out the hand-offs to and from the loop that any asyncio caller pays).
            awaited_warm = warm["own_awaited"]
            report("monty warm start, AsyncMonty", warm["ours"], awaited_warm, 1.2, unit="ms")
        finally:
            await runtime.aclose()
            await pinned.aclose()
            await async_pool.__aexit__(None, None, None)
            sync_pool.__exit__(None, None, None)

    asyncio.run(main())


def _own_warm_sync(pool: monty.Monty) -> float:
    start = time.perf_counter()
    with pool.checkout() as session:
        session.feed_run("1", skip_type_check=True)
    return time.perf_counter() - start


# -- Code Mode: V8 -----------------------------------------------------------------------------

ECHO = """
const decoder = new TextDecoder();
const encoder = new TextEncoder();
const chunk = new Uint8Array(1 << 16);
let buffered = "";
Deno.stdout.writeSync(encoder.encode('{"t":"ready"}\\n'));
for (;;) {
  const size = await Deno.stdin.read(chunk);
  if (size === null) break;
  buffered += decoder.decode(chunk.subarray(0, size), { stream: true });
  let end;
  while ((end = buffered.indexOf("\\n")) >= 0) {
    const message = JSON.parse(buffered.slice(0, end));
    buffered = buffered.slice(end + 1);
    Deno.stdout.writeSync(encoder.encode(JSON.stringify({ t: "call", id: message.id }) + "\\n"));
  }
}
"""
"""The floor's Deno side: the fastest way found to serve JSON lines in Deno (``read()`` into a
buffer and ``writeSync``; the readable stream and an awaited ``write`` took twice as long per
line), the same calls the runtime's host script makes."""


def _deno() -> str:
    from deno import find_deno_bin  # type: ignore[import-untyped]

    return str(find_deno_bin())


def _deno_argv(script: str) -> list[str]:
    return [_deno(), "run", "--quiet", "--no-prompt", script]


_DENO_ENV = {**os.environ, "NO_COLOR": "1", "DENO_NO_UPDATE_CHECK": "1"}


def _deno_boot(script: str) -> float:
    """One Deno boot: spawn until its first line."""
    start = time.perf_counter()
    process = subprocess.Popen(
        _deno_argv(script), stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=_DENO_ENV
    )
    assert process.stdout is not None
    process.stdout.readline()
    elapsed = time.perf_counter() - start
    process.kill()
    process.wait()
    return elapsed


async def _deno_round_trips_streams(script: str, n: int) -> float:
    """Per round trip: one JSON line written, its JSON line reply read, ``n`` times, through
    asyncio's subprocess streams."""
    process = await asyncio.create_subprocess_exec(
        *_deno_argv(script),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=_DENO_ENV,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    await process.stdout.readline()
    start = time.perf_counter()
    for i in range(n):
        process.stdin.write(json.dumps({"t": "result", "id": i, "value": 0}).encode() + b"\n")
        await process.stdin.drain()
        json.loads(await process.stdout.readline())
    elapsed = (time.perf_counter() - start) / n
    process.kill()
    await process.wait()
    return elapsed


class _Lines(asyncio.SubprocessProtocol):
    """The child's complete stdout lines as they arrive, handed to the one waiting future."""

    def __init__(self) -> None:
        self.buffer = b""
        self.lines: list[bytes] = []
        self.waiter: asyncio.Future[None] | None = None
        self.exited = asyncio.get_running_loop().create_future()

    def process_exited(self) -> None:
        self.exited.set_result(None)

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        *lines, self.buffer = (self.buffer + data).split(b"\n")
        self.lines.extend(lines)
        if lines and self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    async def line(self) -> bytes:
        while not self.lines:
            self.waiter = asyncio.get_running_loop().create_future()
            await self.waiter
        return self.lines.pop(0)


async def _deno_round_trips_raw(script: str, n: int) -> float:
    """The same round trips through a raw protocol: lines split as they arrive, each request
    written straight to the pipe's transport (no stream, no ``drain``)."""
    loop = asyncio.get_running_loop()
    transport, lines = await loop.subprocess_exec(
        _Lines, *_deno_argv(script), stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=_DENO_ENV
    )
    stdin = transport.get_pipe_transport(0)
    assert isinstance(stdin, asyncio.WriteTransport)
    await lines.line()
    start = time.perf_counter()
    for i in range(n):
        stdin.write(json.dumps({"t": "result", "id": i, "value": 0}).encode() + b"\n")
        json.loads(await lines.line())
    elapsed = (time.perf_counter() - start) / n
    transport.kill()
    await lines.exited
    transport.close()
    return elapsed


def bench_v8(repeats: int, calls: int) -> None:
    ours_calls = f"for (let i = 0; i < {calls}; i++) await tools.noop({{}}); return {calls}"
    empty = f"for (let i = 0; i < {calls}; i++) {{}} return {calls}"
    with tempfile.TemporaryDirectory() as folder:
        script = str(Path(folder) / "echo.js")
        Path(script).write_text(ECHO)

        async def main() -> None:
            runtime = V8Runtime()
            pinned = V8Runtime(pin_cpu=True)
            try:

                def sub_call(runtime: V8Runtime) -> Callable[[], Awaitable[float]]:
                    async def ours() -> float:
                        # Idle first, as between model turns: the spares the last runs started
                        # have booted, so no boot competes for the CPUs (neither does one in
                        # the floor's timed round trips).
                        await asyncio.sleep(0.2)
                        with_calls = await _program(ours_calls, runtime, [NOOP_CODE])
                        await asyncio.sleep(0.2)
                        without = await _program(empty, runtime, [NOOP_CODE])
                        return (with_calls - without) / calls

                    return ours

                async def streams() -> float:
                    return await _deno_round_trips_streams(script, calls)

                async def raw() -> float:
                    return await _deno_round_trips_raw(script, calls)

                variants = {
                    "ours": sub_call(runtime),
                    "pinned": sub_call(pinned),
                    "streams": streams,
                    "raw": raw,
                }
                sub = await ainterleaved(variants, repeats)
                floor = min(sub["streams"], sub["raw"])
                report("v8 sub-call", sub["ours"], floor, 1.4)
                report("v8 sub-call, pinned", sub["pinned"], floor, 1.4)
                print(
                    f"{'':<30} floors: streams {sub['streams'] * 1e6:.2f} us, "
                    f"raw protocol {sub['raw'] * 1e6:.2f} us"
                )

                async def back_to_back() -> float:
                    runs = [await _program("return 1", runtime, []) for _ in range(5)]
                    return statistics.median(runs)

                async def boot() -> float:
                    return await asyncio.to_thread(_deno_boot, script)

                starts = await ainterleaved({"ours": back_to_back, "boot": boot}, repeats)
                report("v8 back-to-back", starts["ours"], starts["boot"], 0.6, unit="ms")
            finally:
                await runtime.aclose()
                await pinned.aclose()

        asyncio.run(main())


ROWS: dict[str, Callable[[argparse.Namespace], None]] = {
    "client": lambda o: bench_client(o.repeats),
    "client_http": lambda o: bench_client_http(o.repeats),
    "rule": lambda o: bench_rule(o.repeats),
    "run_batch": lambda o: bench_run_batch(o.repeats),
    "monty": lambda o: bench_monty(o.repeats, o.calls),
    "v8": lambda o: bench_v8(o.repeats, o.calls),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=sorted(ROWS), default=sorted(ROWS))
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--calls", type=int, default=200)
    options = parser.parse_args()
    print(f"{os.cpu_count()} CPUs; medians of {options.repeats} interleaved rounds")
    for name in options.only:
        ROWS[name](options)
    missed = [name for name, ours, floor, target in RESULTS if ours / floor > target]
    if missed:
        print(f"missed: {', '.join(missed)}")
        return 1
    print("every target met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
