"""Behaviour both runtimes share, through run_program and the real sandboxes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from typing import Any

import pytest

from helpers import Probe, RuntimeFactory
from toolnexus import Tool, ToolHints
from toolnexus.codemode import run_program
from toolnexus.codemode.runtimes import CodeRuntime, MontyRuntime, V8Runtime
from toolnexus.codemode.runtimes._monty_run import WorkerWatch, worker_alive
from toolnexus.errors import ConfigurationError


def program(runtime: CodeRuntime, *, python: str, javascript: str) -> str:
    return python if runtime.language == "python" else javascript


def echo_tool() -> Tool:
    async def execute(args: dict[str, Any]) -> Any:
        return {"echo": args}

    return Tool(
        "echo",
        "Echo the arguments.",
        {"type": "object"},
        execute=execute,
        hints=ToolHints(read_only=True),
    )


def failing_tool() -> Tool:
    def execute(args: dict[str, Any]) -> Any:
        raise RuntimeError("disk is on fire")

    return Tool("breaks", "Always fails.", {"type": "object"}, execute=execute)


def worker_exited(pid: int) -> bool:
    """Whether process ``pid`` has exited as a whole (its last thread too): what a pidfd
    reports. ``/proc`` shows a killed process as a zombie a moment before that."""
    watch = WorkerWatch(pid)
    try:
        return not watch.alive()
    finally:
        watch.close()


async def wait_until(condition: Any, turns: int = 5000) -> None:
    """Let the loop run until ``condition()`` holds (fails the test rather than hanging)."""
    for _ in range(turns):
        if condition():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("condition never held")


async def test_result_and_logs_in_order(runtime: CodeRuntime) -> None:
    code = program(
        runtime,
        python='import sys\nprint("one")\nprint("two", file=sys.stderr)\nprint("three")\n40 + 2',
        javascript='console.log("one"); console.error("two"); console.log("three"); return 40 + 2',
    )
    out = await run_program(code, [], runtime=runtime)
    assert out == {"result": 42, "logs": ["one", {"stderr": "two"}, "three"]}


async def test_tool_results_reach_the_program(runtime: CodeRuntime) -> None:
    code = program(
        runtime,
        python='r = await tools.echo({"x": 1})\nr["echo"]["x"] + 1',
        javascript="const r = await tools.echo({x: 1}); return r.echo.x + 1",
    )
    assert await run_program(code, [echo_tool()], runtime=runtime) == {"result": 2, "logs": []}


@pytest.mark.parametrize("cap", [3, 10])
async def test_fan_out_overlaps_up_to_the_cap(runtime: CodeRuntime, probe: Probe, cap: int) -> None:
    read = probe.tool("read")
    code = program(
        runtime,
        python='import asyncio\nawait asyncio.gather(*[tools.read({"id": f"r{i}", "gate": "g"}) for i in range(10)])',
        javascript='return await Promise.all([...Array(10).keys()].map(i => tools.read({id: `r${i}`, gate: "g"})))',
    )
    run = asyncio.ensure_future(run_program(code, [read], runtime=runtime, max_parallel=cap))
    await wait_until(lambda: len(probe.active) == cap)
    await asyncio.sleep(0.05)  # give a wrong scheduler the chance to start more
    assert len(probe.active) == cap
    probe.gate("g").set()
    out = await run
    assert out["result"] == [f"r{i}" for i in range(10)]
    assert probe.peak == cap
    assert probe.starts() == [f"r{i}" for i in range(10)]


async def test_exclusive_sub_calls_run_alone_in_program_order(
    runtime: CodeRuntime, probe: Probe
) -> None:
    read, write = probe.tool("read"), probe.tool("write", read_only=False)
    code = program(
        runtime,
        python=(
            "import asyncio\nawait asyncio.gather(tools.read({'id': 'a', 'steps': 3}), "
            "tools.write({'id': 'b'}), tools.read({'id': 'c'}), tools.write({'id': 'd'}))"
        ),
        javascript=(
            "return await Promise.all([tools.read({id: 'a', steps: 3}), tools.write({id: 'b'}),"
            " tools.read({id: 'c'}), tools.write({id: 'd'})])"
        ),
    )
    out = await run_program(code, [read, write], runtime=runtime)
    assert out["result"] == ["a", "b", "c", "d"]
    assert probe.overlaps == []
    assert probe.starts() == ["a", "b", "c", "d"]


async def test_tool_error_is_catchable_with_tool_and_message(runtime: CodeRuntime) -> None:
    code = program(
        runtime,
        python="try:\n    await tools.breaks({})\nexcept ToolError as e:\n    r = str(e)\nr",
        javascript=(
            "try { await tools.breaks({}) } catch (e) {"
            " return [e instanceof ToolError, e.tool, e.message, Object.keys(e)] }"
        ),
    )
    out = await run_program(code, [failing_tool()], runtime=runtime)
    if runtime.language == "python":
        assert out["result"] == "disk is on fire"
    else:
        assert out["result"] == [True, "breaks", "disk is on fire", ["tool"]]


async def test_uncaught_tool_error_fails_the_run_with_the_tools_message(
    runtime: CodeRuntime,
) -> None:
    code = program(runtime, python="await tools.breaks({})", javascript="await tools.breaks({})")
    out = await run_program(code, [failing_tool()], runtime=runtime)
    assert out["error"] == {"kind": "exception", "message": "tool 'breaks' failed: disk is on fire"}
    assert out["calls"] == [
        {"name": "breaks", "arguments": {}, "status": "error", "message": "disk is on fire"}
    ]


async def test_a_program_error_is_an_exception_with_its_message(runtime: CodeRuntime) -> None:
    code = program(runtime, python="x = 1\n1 / 0", javascript="x = 1;\nnull.boom")
    out = await run_program(code, [], runtime=runtime)
    assert out["error"]["kind"] == "exception"
    assert ("ZeroDivisionError" if runtime.language == "python" else "TypeError") in (
        out["error"]["message"]
    )
    assert "line 2" in out["error"]["message"] or '", line 2' in out["error"]["message"]


async def test_a_result_that_is_not_json_is_invalid_output(runtime: CodeRuntime) -> None:
    code = program(runtime, python="{1, 2}", javascript="return new Set([1, 2])")
    out = await run_program(code, [], runtime=runtime)
    assert out["error"]["kind"] == "invalid_output"
    assert "Set" in out["error"]["message"] or "set" in out["error"]["message"]


async def test_a_busy_loop_is_killed_at_the_deadline_and_logs_are_kept(
    make_runtime: RuntimeFactory,
) -> None:
    runtime = make_runtime(timeout=0.5)
    code = program(
        runtime,
        python='print("before")\nwhile True:\n    pass',
        javascript='console.log("before"); while (true) {}',
    )
    out = await run_program(code, [], runtime=runtime)
    assert out["error"]["kind"] == "timeout"
    assert "0.5 s" in out["error"]["message"]
    assert out["logs"] == ["before"]
    again = program(runtime, python="1", javascript="return 1")
    assert await run_program(again, [], runtime=runtime) == {"result": 1, "logs": []}


async def test_a_busy_loop_after_an_await_is_killed_too(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime(timeout=0.5)
    code = program(
        runtime,
        python="await tools.echo({})\nwhile True:\n    pass",
        javascript="await tools.echo({}); while (true) {}",
    )
    out = await run_program(code, [echo_tool()], runtime=runtime)
    assert out["error"]["kind"] == "timeout"
    assert out["calls"] == [{"name": "echo", "arguments": {}, "status": "ok"}]


async def test_waiting_on_tools_counts_against_the_time_budget(
    make_runtime: RuntimeFactory, probe: Probe
) -> None:
    read = probe.tool("read")
    runtime = make_runtime(timeout=0.3)
    code = program(
        runtime,
        python='await tools.read({"gate": "never"})',
        javascript='await tools.read({gate: "never"})',
    )
    out = await run_program(code, [read], runtime=runtime)
    assert out["error"]["kind"] == "timeout"
    assert out["calls"][0]["status"] == "abandoned"
    assert probe.active == set()  # the lane cancelled the call when the run ended


async def test_output_past_the_budget_is_truncated_and_the_run_succeeds(
    make_runtime: RuntimeFactory,
) -> None:
    runtime = make_runtime(max_output=100)
    code = program(
        runtime,
        python='for i in range(1000):\n    print("line", i)\n"done"',
        javascript='for (let i = 0; i < 1000; i++) console.log("line", i); return "done"',
    )
    out = await run_program(code, [], runtime=runtime)
    assert out["result"] == "done"
    assert out["logs"][-1].startswith("[toolnexus: output truncated")
    kept = out["logs"][:-1]
    assert kept == [f"line {i}" for i in range(len(kept))]
    assert sum(len(line) + 1 for line in kept) <= 100


async def test_sub_call_floods_abort_the_run(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime(max_sub_calls=5)
    code = program(
        runtime,
        python="while True:\n    await tools.echo({})",
        javascript="while (true) await tools.echo({})",
    )
    out = await run_program(code, [echo_tool()], runtime=runtime)
    assert out["error"]["kind"] == "abort"
    assert "max_sub_calls" in out["error"]["message"]
    assert [c["status"] for c in out["calls"]] == ["ok"] * 5
    again = program(
        runtime, python="await tools.echo({})", javascript="return await tools.echo({})"
    )
    assert (await run_program(again, [echo_tool()], runtime=runtime))["result"] == {"echo": {}}


async def test_memory_bombs_abort_and_the_next_run_works(make_runtime: RuntimeFactory) -> None:
    bombs = {
        "python": ['a = []\nwhile True:\n    a.append("x" * 1000000)', 'x = "a" * (10 ** 9)'],
        "javascript": [
            'const a = []; while (true) a.push("x".repeat(1e6) + Math.random())',
            "const a = []; while (true) a.push(new Uint8Array(1e7).fill(1))",
        ],
    }
    runtime = make_runtime(max_memory=64 * 2**20, timeout=20)
    for bomb in bombs[runtime.language]:
        out = await run_program(bomb, [], runtime=runtime)
        assert out["error"]["kind"] == "abort", out
        assert "out of memory" in out["error"]["message"]
    again = program(runtime, python="1", javascript="return 1")
    assert await run_program(again, [], runtime=runtime) == {"result": 1, "logs": []}


async def test_deep_recursion_is_an_exception(runtime: CodeRuntime) -> None:
    code = program(
        runtime,
        python="def f(n):\n    return f(n + 1)\nf(0)",
        javascript="function f(n) { return f(n + 1) }\nreturn f(0)",
    )
    out = await run_program(code, [], runtime=runtime)
    assert out["error"]["kind"] == "exception"
    assert "Recursion" in out["error"]["message"] or "call stack" in out["error"]["message"]
    again = program(runtime, python="5", javascript="return 5")
    assert await run_program(again, [], runtime=runtime) == {"result": 5, "logs": []}


async def test_concurrent_runs_never_see_each_others_tools_or_logs(runtime: CodeRuntime) -> None:
    def named(name: str) -> Tool:
        async def execute(args: dict[str, Any]) -> Any:
            await asyncio.sleep(0.01)
            return name

        return Tool(name, "", {"type": "object"}, execute=execute, hints=ToolHints(read_only=True))

    def code(name: str) -> str:
        return program(
            runtime,
            python=f'print("{name}")\nr = await tools["{name}"]({{}})\nprint(r)\nr',
            javascript=f'console.log("{name}"); const r = await tools["{name}"]({{}}); console.log(r); return r',
        )

    first, second = await asyncio.gather(
        run_program(code("alpha"), [named("alpha")], runtime=runtime),
        run_program(code("beta"), [named("beta")], runtime=runtime),
    )
    assert first == {"result": "alpha", "logs": ["alpha", "alpha"]}
    assert second == {"result": "beta", "logs": ["beta", "beta"]}
    leak = program(runtime, python='tools["alpha"]', javascript='return typeof tools["alpha"]')
    out = await run_program(leak, [named("beta")], runtime=runtime)
    assert out.get("result") == "undefined" or out["error"]["kind"] in ("exception", "type_error")


def busy_after_start() -> tuple[Tool, asyncio.Event, str, str]:
    """A ``started`` tool, set when a program calls it, and programs that call it and then
    loop forever: a test knows the program is running without guessing how long that takes."""
    started = asyncio.Event()

    async def execute(args: dict[str, Any]) -> Any:
        started.set()
        return True

    tool = Tool("started", "Say the program runs.", {"type": "object"}, execute=execute)
    python = "await tools.started({})\nwhile True:\n    pass"
    javascript = "await tools.started({}); while (true) {}"
    return tool, started, python, javascript


async def test_cancel_aborts_a_running_program(runtime: CodeRuntime) -> None:
    tool, started, python, javascript = busy_after_start()
    code = program(runtime, python=python, javascript=javascript)
    run = asyncio.ensure_future(run_program(code, [tool], runtime=runtime))
    await asyncio.wait_for(started.wait(), 30)
    await runtime.cancel()
    out = await run
    assert out["error"] == {"kind": "abort", "message": "the run was cancelled"}


async def test_cancelling_the_caller_kills_the_program(runtime: CodeRuntime) -> None:
    tool, started, python, javascript = busy_after_start()
    code = program(runtime, python=python, javascript=javascript)
    run = asyncio.ensure_future(run_program(code, [tool], runtime=runtime))
    await asyncio.wait_for(started.wait(), 30)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    again = program(runtime, python="2", javascript="return 2")
    assert await run_program(again, [], runtime=runtime) == {"result": 2, "logs": []}


@pytest.mark.parametrize("runtime_class", [MontyRuntime, V8Runtime])
@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("timeout", 0),
        ("timeout", -1),
        ("timeout", float("nan")),
        ("max_memory", 0),
        ("max_memory", 1.5),
        ("max_output", "big"),
        ("max_sub_calls", True),
    ],
)
def test_budgets_are_validated_at_construction(
    runtime_class: type[Any], option: str, value: object
) -> None:
    with pytest.raises(ConfigurationError, match=f"runtime option {option} must be"):
        runtime_class(**{option: value})


def test_budget_defaults() -> None:
    for runtime in (MontyRuntime(), V8Runtime()):
        b = runtime.budgets
        assert (b.timeout, b.max_memory, b.max_output, b.max_sub_calls) == (
            30.0,
            256 * 2**20,
            1_000_000,
            1000,
        )


async def test_a_sandbox_process_that_dies_is_reported_as_substrate_exit(
    runtime: CodeRuntime,
) -> None:
    import os
    import signal

    killed: list[int] = []

    async def kill_the_sandbox(args: dict[str, Any]) -> str:
        if isinstance(runtime, MontyRuntime):
            run = next(iter(runtime._active))
            assert run.pid is not None
            pid = run.pid
        else:
            assert isinstance(runtime, V8Runtime)
            pid = next(iter(runtime._active)).process.pid
        os.kill(pid, signal.SIGKILL)  # from outside the runtime: not a kill it ordered
        killed.append(pid)
        await asyncio.sleep(0.2)
        return "done"

    sabotage = Tool("sabotage", "", {"type": "object"}, execute=kill_the_sandbox)
    code = program(
        runtime,
        python="await tools.sabotage({})\n1",
        javascript="await tools.sabotage({}); return 1",
    )
    out = await run_program(code, [sabotage], runtime=runtime)
    assert killed
    assert out["error"]["kind"] == "substrate_exit", out
    again = program(runtime, python="3", javascript="return 3")
    assert await run_program(again, [], runtime=runtime) == {"result": 3, "logs": []}


async def test_every_run_starts_from_fresh_global_state(runtime: CodeRuntime) -> None:
    first = program(runtime, python="leak = 41\nleak", javascript="globalThis.leak = 41; return 41")
    second = program(
        runtime,
        python="try:\n    r = leak\nexcept NameError:\n    r = 'fresh'\nr",
        javascript="return typeof globalThis.leak === 'undefined' ? 'fresh' : globalThis.leak",
    )
    assert (await run_program(first, [], runtime=runtime))["result"] == 41
    out = await run_program(second, [], runtime=runtime)
    assert out.get("result") == "fresh" or out["error"]["kind"] == "type_error"


def test_a_runtime_outlives_its_event_loop() -> None:
    for runtime in (MontyRuntime(timeout=5), V8Runtime(timeout=5)):
        code = program(runtime, python="1 + 1", javascript="return 1 + 1")
        assert asyncio.run(run_program(code, [], runtime=runtime))["result"] == 2
        assert asyncio.run(run_program(code, [], runtime=runtime))["result"] == 2
        asyncio.run(runtime.aclose())


async def test_more_concurrent_runs_than_workers_all_finish() -> None:
    runtime = MontyRuntime(timeout=20, max_workers=1)
    tool = echo_tool()
    try:
        outs = await asyncio.gather(
            *(
                run_program(
                    f'r = await tools.echo({{"n": {i}}})\nr["echo"]["n"]', [tool], runtime=runtime
                )
                for i in range(24)
            )
        )
    finally:
        await runtime.aclose()
    assert [o.get("result") for o in outs] == list(range(24))


@pytest.mark.parametrize("language", ["python", "javascript"])
async def test_a_queued_program_s_time_budget_starts_when_it_gets_a_worker(language: str) -> None:
    """With one worker busy for most of the budget, a program queued behind it still has its
    whole budget once it runs: waiting for a worker is not running."""
    budget = 6.0
    runtime: CodeRuntime = (
        MontyRuntime(timeout=budget, max_workers=1)
        if language == "python"
        else V8Runtime(timeout=budget, max_concurrent=1)
    )
    ret = "" if language == "python" else "return "
    release = asyncio.Event()
    holding = asyncio.Event()
    order: list[str] = []

    async def hold(args: dict[str, Any]) -> str:
        order.append("first holds the worker")
        holding.set()
        await release.wait()
        return "released"

    async def work(args: dict[str, Any]) -> str:
        order.append("second runs")
        await asyncio.sleep(budget / 2)  # half its budget, after waiting two thirds of it
        return "worked"

    tools = [Tool("hold", "", {"type": "object"}, execute=hold)]
    tools.append(Tool("work", "", {"type": "object"}, execute=work))
    try:
        first = asyncio.ensure_future(
            run_program(f"{ret}await tools.hold({{}})", tools, runtime=runtime)
        )
        await holding.wait()
        second = asyncio.ensure_future(
            run_program(f"{ret}await tools.work({{}})", tools, runtime=runtime)
        )
        await asyncio.sleep(budget * 2 / 3)  # the second waits for the only worker meanwhile
        order.append("first released")
        release.set()
        assert await first == {"result": "released", "logs": []}
        assert await second == {"result": "worked", "logs": []}
    finally:
        release.set()
        await runtime.aclose()
    assert order == ["first holds the worker", "first released", "second runs"]


async def test_v8_keeps_two_spares_so_back_to_back_runs_find_one_booted() -> None:
    # With one spare, a run right after another waited for the spare started as the first run
    # ended (a whole Deno boot on the critical path). Two spares: the next run takes the one
    # that booted during the previous run.
    runtime = V8Runtime(timeout=10)
    try:
        first = await run_program("return 1", [], runtime=runtime)
        assert first["result"] == 1
        assert len(runtime._spares) == 2
        await asyncio.wait_for(asyncio.wrap_future(runtime._spares[0]), 30)  # one booted
        booted = runtime._spares[0].result()
        second = await run_program("return 2", [], runtime=runtime)
        assert second["result"] == 2
        assert booted not in [s.result() for s in runtime._spares if s.done()]  # it ran the program
        assert len(runtime._spares) == 2
    finally:
        await runtime.aclose()


async def test_v8_replies_that_become_ready_in_one_loop_turn_leave_in_one_write(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Three calls waiting on one event commit in the same loop turn: their three replies
    reach the child in one write to its pipe, not three."""
    from toolnexus.codemode.runtimes import _v8

    writes: list[bytes] = []
    write = _v8._Conversation._write

    def counted(self: Any, data: bytes) -> None:
        writes.append(data)
        write(self, data)

    monkeypatch.setattr(_v8._Conversation, "_write", counted)
    gate = asyncio.Event()
    entered: list[int] = []

    async def execute(args: dict[str, Any]) -> Any:
        entered.append(args["i"])
        await gate.wait()
        return args["i"]

    tool = Tool(
        "held", "Waits.", {"type": "object"}, execute=execute, hints=ToolHints(read_only=True)
    )
    runtime = V8Runtime(timeout=20)
    code = "return await Promise.all([0, 1, 2].map((i) => tools.held({i})))"
    try:
        run = asyncio.ensure_future(run_program(code, [tool], runtime=runtime))
        await wait_until(lambda: len(entered) == 3)
        gate.set()
        out = await run
        assert out == {"result": [0, 1, 2], "logs": []}, out
        replies = [w for w in writes if b'"t": "result"' in w]
        assert len(replies) == 1, writes
        assert replies[0].count(b"\n") == 3
    finally:
        await runtime.aclose()


async def test_v8_a_sub_call_takes_one_task_and_one_scheduled_callback() -> None:
    """Each call gets one task, whose one step runs the tool (the lane runs it right in that
    task), commits it and writes the reply: per call, one task and one callback scheduled,
    where a call stepped outside any task cost a worker task of the lane and three callbacks
    more (the lane's future handing the outcome back, and the write a turn later)."""
    loop = asyncio.get_running_loop()
    tasks: list[int] = []
    scheduled: list[int] = []
    call_soon = loop.call_soon

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        tasks.append(1)
        return asyncio.Task(coro, loop=loop, **kwargs)

    def counted(*args: Any, **kwargs: Any) -> Any:
        scheduled.append(1)
        return call_soon(*args, **kwargs)

    async def execute(args: dict[str, Any]) -> int:
        return 0

    noop = Tool("noop", "No-op.", {"type": "object"}, execute=execute)
    runtime = V8Runtime(timeout=20)

    async def costs(calls: int) -> tuple[int, int]:
        code = f"for (let i = 0; i < {calls}; i++) await tools.noop({{}}); return {calls}"
        tasks.clear()
        scheduled.clear()
        loop.set_task_factory(factory)
        loop.call_soon = counted  # type: ignore[method-assign]
        try:
            out = await run_program(code, [noop], runtime=runtime)
        finally:
            loop.set_task_factory(None)
            del loop.call_soon
        assert out == {"result": calls, "logs": []}, out
        return len(tasks), len(scheduled)

    try:
        await costs(1)  # the first run boots the spares
        with_calls, without = await costs(40), await costs(0)
        assert with_calls[0] - without[0] == 40  # one task per call
        assert with_calls[1] - without[1] == 40  # and one callback: that task's step
    finally:
        await runtime.aclose()


class _CountedStops(MontyRuntime):
    """A Monty runtime whose workers allow only ``stops`` suspensions per run."""

    def __init__(self, stops: int) -> None:
        super().__init__(timeout=20, type_check=False)
        self.stops = stops

    def _limits(self) -> Any:
        return {**super()._limits(), "max_suspensions": self.stops}


async def test_a_monty_program_awaiting_one_call_at_a_time_stops_its_worker_once_per_call() -> None:
    """A program that never awaits concurrently is served by sync host calls: 30 calls fit in
    30 worker suspensions (with a future per call they take 60); a program that may await
    concurrently (it imports asyncio) still gets futures, so its calls still overlap."""
    calls = 30
    runtime = _CountedStops(calls)
    tool = echo_tool()
    sequential = f"n = 0\nfor i in range({calls}):\n    r = await tools.echo({{'i': i}})\n"
    sequential += "    n += r['echo']['i']\nn"
    gathered = "import asyncio\n"
    gathered += f"rs = await asyncio.gather(*[tools.echo({{'i': i}}) for i in range({calls})])\n"
    gathered += "sum(r['echo']['i'] for r in rs)"
    try:
        out = await run_program(sequential, [tool], runtime=runtime)
        assert out.get("result") == sum(range(calls)), out
        out = await run_program(gathered, [tool], runtime=runtime)
        assert "result" not in out, out  # futures: two suspensions per call, past the limit
        runtime.stops = 4 * calls
        out = await run_program(gathered, [tool], runtime=runtime)
        assert out.get("result") == sum(range(calls)), out
    finally:
        await runtime.aclose()


class _LoopTurns:
    """Counts the event loop's waits for I/O (one per loop turn) while in use."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.turns = 0

    def __enter__(self) -> _LoopTurns:
        selector = self.loop._selector  # type: ignore[attr-defined]
        select = selector.select

        def counted(timeout: float | None = None) -> Any:
            self.turns += 1
            return select(timeout)

        selector.select = counted
        return self

    def __exit__(self, *exc_info: object) -> None:
        del self.loop._selector.select  # type: ignore[attr-defined]


async def test_a_monty_sub_call_that_never_suspends_costs_the_loop_two_turns() -> None:
    """A sub-call wakes the loop once: one turn starts the call's task, the next runs the
    call through the lane to its commit and hands the outcome back (the lane runs a call that
    may start at once in that task: no worker task, no hand-back through the loop; that was
    five turns). Counted over 40 calls, with a margin for the run's own start and end."""
    if not hasattr(asyncio.get_running_loop(), "_selector"):
        pytest.skip("counts the turns of a selector event loop")
    calls = 40
    runtime = MontyRuntime(timeout=20, type_check=False)
    program = f"for i in range({calls}):\n    await tools.echo({{'i': i}})\n{calls}"
    try:
        await run_program("1", [echo_tool()], runtime=runtime)  # a warm worker
        with _LoopTurns() as counter:
            out = await run_program(program, [echo_tool()], runtime=runtime)
        assert out.get("result") == calls, out
        assert counter.turns <= 2 * calls + 10, counter.turns
    finally:
        await runtime.aclose()


async def test_a_sequential_monty_program_s_sub_calls_share_one_task() -> None:
    """A program without concurrent awaits has one call in flight at a time: its calls run one
    after another in one carrier task, so a run of 40 calls makes as many tasks as a run of one
    (a program that may await concurrently still gets a task per call, as its calls overlap)."""
    loop = asyncio.get_running_loop()
    created: list[int] = []

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        created.append(1)
        return asyncio.Task(coro, loop=loop, **kwargs)

    runtime = MontyRuntime(timeout=20, type_check=False)
    tool = echo_tool()

    async def tasks_of(calls: int, head: str = "") -> int:
        code = f"{head}n = 0\nfor i in range({calls}):\n    n += (await tools.echo({{'i': i}}))"
        code += "['echo']['i']\nn"
        created.clear()
        loop.set_task_factory(factory)
        try:
            out = await run_program(code, [tool], runtime=runtime)
        finally:
            loop.set_task_factory(None)
        assert out.get("result") == sum(range(calls)), out
        return len(created)

    try:
        await tasks_of(1)  # a warm worker
        assert await tasks_of(40) == await tasks_of(1)
        gathered = await tasks_of(40, "import asyncio\n")
        assert gathered >= await tasks_of(1, "import asyncio\n") + 39
    finally:
        await runtime.aclose()


async def test_a_call_a_stopped_monty_run_was_sent_before_the_stop_is_not_started() -> None:
    """The driver may hand the loop a call just before the run is stopped (killed at its
    deadline, cancelled); the loop meets it after the stop and starts nothing for it, whether
    the program awaits one call at a time (a carrier task) or may await concurrently."""
    from toolnexus.codemode.runtimes._base import Budgets, ProgramFailure
    from toolnexus.codemode.runtimes._monty_run import Run
    from toolnexus.scheduling import Outcome

    started: list[str] = []

    async def call_tool(name: str, args: Any) -> Outcome:
        started.append(name)
        return Outcome(value=1)

    loop = asyncio.get_running_loop()
    for concurrent in (False, True):
        run = Run(loop, call_tool, Budgets(), concurrent=concurrent)
        run.stop(ProgramFailure("abort", "the run was cancelled"))
        run._submit(0, "echo", {})
        await asyncio.sleep(0)
        assert started == [] and run.calls == {}, concurrent


async def test_a_monty_run_s_later_sub_calls_reach_the_loop_through_its_inbox() -> None:
    """Only a run's first sub-call wakes the loop with ``call_soon_threadsafe`` (a handle, the
    self-pipe); it opens the run's inbox (an eventfd the loop reads), and the later calls come
    through it: 40 calls, then the result, cost two such hand-offs, not 41."""
    if not hasattr(os, "eventfd"):
        pytest.skip("the inbox is an eventfd (Linux)")
    loop = asyncio.get_running_loop()
    runtime = MontyRuntime(timeout=20, type_check=False)
    program = "n = 0\nfor i in range(40):\n    n += (await tools.echo({'i': i}))['echo']['i']\nn"
    handed: list[Any] = []
    threadsafe = loop.call_soon_threadsafe

    def counted(callback: Any, *args: Any, **kwargs: Any) -> Any:
        handed.append(callback)
        return threadsafe(callback, *args, **kwargs)

    try:
        await run_program("1", [echo_tool()], runtime=runtime)  # a warm worker
        loop.call_soon_threadsafe = counted  # type: ignore[method-assign]
        try:
            out = await run_program(program, [echo_tool()], runtime=runtime)
        finally:
            del loop.call_soon_threadsafe  # type: ignore[method-assign]
        assert out.get("result") == sum(range(40)), out
        assert len(handed) <= 2, handed
    finally:
        await runtime.aclose()


def _eventfds() -> int:
    """How many eventfds this process holds open."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            count += os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:[eventfd]"
    return count


async def test_a_monty_run_s_inbox_is_closed_once_both_sides_are_done_with_it() -> None:
    """The loop stops reading a run's inbox when the run is over and the driver stops writing
    when its program is; the second closes it. Runs that finish, that fail, that are killed at
    their deadline while calling tools, and that are cancelled mid-program (the driver is the
    second then) leave no eventfd open."""
    if sys.platform != "linux" or not hasattr(os, "eventfd"):
        pytest.skip("counts eventfds in /proc (Linux)")
    runtime = MontyRuntime(timeout=1, type_check=False)
    tool = echo_tool()

    async def slowly(args: dict[str, Any]) -> Any:
        await asyncio.sleep(0.02)
        return 1

    slow = Tool("slow", "Waits.", {"type": "object"}, execute=slowly)
    try:
        await run_program("1", [tool], runtime=runtime)  # a warm worker
        before = _eventfds()
        for _ in range(3):
            out = await run_program(
                "for i in range(5):\n    await tools.echo({})\n1", [tool], runtime=runtime
            )
            assert out.get("result") == 1, out
        out = await run_program(
            "await tools.echo({})\nawait tools.echo({})\n1 / 0", [tool], runtime=runtime
        )
        assert out["error"]["kind"] == "exception", out
        out = await run_program("while True:\n    await tools.slow({})", [slow], runtime=runtime)
        assert out["error"]["kind"] == "timeout", out
        await wait_until(lambda: _eventfds() == before)
        # cancelled mid-program: the loop lets go first, the driver closes it once it stops
        running = asyncio.ensure_future(
            run_program("while True:\n    await tools.slow({})", [slow], runtime=runtime)
        )
        await wait_until(lambda: _eventfds() > before)
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
        await wait_until(lambda: _eventfds() == before)
    finally:
        await runtime.aclose()


async def test_a_trivial_monty_run_costs_the_loop_two_turns() -> None:
    """A run that calls no tool wakes the loop once, for its result: two turns in all (the
    driver's hand-off resolves the future the task awaits, then the task). ``run_program``'s
    guard against a runtime that ignores its patience runs the run in the caller's task
    (``wait_for`` ran it in a task of its own), and the runtime awaits its result without
    ``asyncio.wait`` on a wrapped future: six turns before, three with only the first.

    A run may see one turn more: when the last run's hand-off was handled before its byte
    reached the loop's self-pipe, the byte wakes the next wait once for nothing. So the
    fewest turns over several runs is what is counted."""
    if not hasattr(asyncio.get_running_loop(), "_selector"):
        pytest.skip("counts the turns of a selector event loop")
    runtime = MontyRuntime(timeout=20, type_check=False)
    turns: list[int] = []
    try:
        await run_program("1", [], runtime=runtime)  # a warm worker
        for _ in range(5):
            with _LoopTurns() as counter:
                out = await run_program("1", [], runtime=runtime)
            assert out.get("result") == 1, out
            turns.append(counter.turns)
    finally:
        await runtime.aclose()
    assert min(turns) <= 2 and max(turns) <= 3, turns


class _CountedFeeds(MontyRuntime):
    """A Monty runtime whose pool records every feed, in order, by session."""

    def __init__(self) -> None:
        super().__init__(timeout=20, type_check=False)
        self.feeds: list[tuple[str, int]] = []

    def _start_pool(self) -> Any:
        pool = super()._start_pool()
        runtime = self

        class Session:
            def __init__(self, session: Any) -> None:
                self._session = session

            def __getattr__(self, name: str) -> Any:
                return getattr(self._session, name)

            def feed_run(self, code: str, **options: Any) -> Any:
                runtime.feeds.append(("prelude" if "_toolnexus_bind" in code else "run", id(self)))
                return self._session.feed_run(code, **options)

            def feed_start(self, code: str, **options: Any) -> Any:
                runtime.feeds.append(("program", id(self)))
                return self._session.feed_start(code, **options)

        class Checkout:
            def __init__(self, checkout: Any) -> None:
                self._checkout = checkout

            def __enter__(self) -> Session:
                return Session(self._checkout.__enter__())

            def __exit__(self, *exc_info: Any) -> Any:
                return self._checkout.__exit__(*exc_info)

        class Pool:
            def checkout(self, **options: Any) -> Checkout:
                return Checkout(pool.checkout(**options))

            def __exit__(self, *exc_info: Any) -> Any:
                return pool.__exit__(*exc_info)

        counted = Pool()
        self._pool = counted  # type: ignore[assignment]
        self._spares.open(counted)  # type: ignore[arg-type]
        return counted


async def test_a_monty_run_after_one_with_the_same_tools_starts_at_its_program() -> None:
    """Once a run's result is out, its driver prepares the next run's session (checked out,
    the prelude fed), so a run that follows one with the same tools feeds its worker once, the
    program; a run with other tools feeds its own prelude first, as before, and every run
    still gets a session no program ran in."""
    runtime = _CountedFeeds()
    tool = echo_tool()
    try:
        for _ in range(3):
            runtime.feeds.clear()
            out = await run_program("x = 1\nawait tools.echo({'i': 1})", [tool], runtime=runtime)
            assert out.get("result") == {"echo": {"i": 1}}, out
            for _ in range(500):  # the next run's session is prepared in the background
                if runtime._spares._held is not None:
                    break
                await asyncio.sleep(0.01)
        # the run: the program alone, in a session fed the prelude before it started
        run, spare = runtime.feeds
        assert run[0] == "program" and spare[0] == "prelude" and run[1] != spare[1]
        runtime.feeds.clear()
        out = await run_program("x", [tool, failing_tool()], runtime=runtime)  # other tools
        assert "NameError" in out["error"]["message"], out  # nothing of the last run is left
        assert [kind for kind, _ in runtime.feeds[:2]] == ["prelude", "program"]
    finally:
        await runtime.aclose()
    assert runtime._spares._held is None  # given back when the runtime closed


async def test_a_spare_monty_session_whose_worker_died_is_not_used() -> None:
    """A kept session whose worker died while it waited (killed, out of memory) is given back,
    and the run checks out a live worker as it would without a spare."""
    runtime = MontyRuntime(timeout=20, type_check=False)
    tool = echo_tool()
    try:
        out = await run_program("await tools.echo({'i': 1})", [tool], runtime=runtime)
        assert out.get("result") == {"echo": {"i": 1}}, out
        for _ in range(500):
            if runtime._spares._held is not None:
                break
            await asyncio.sleep(0.01)
        held = runtime._spares._held
        assert held is not None
        pid = held[2].worker_pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        for _ in range(500):  # gone, or a zombie
            if worker_exited(pid):
                break
            await asyncio.sleep(0.01)
        out = await run_program("await tools.echo({'i': 2})", [tool], runtime=runtime)
        assert out.get("result") == {"echo": {"i": 2}}, out
    finally:
        await runtime.aclose()


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="needs pidfds (Linux)")
async def test_a_spare_monty_session_s_worker_is_watched_without_reading_proc(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Taking a kept session asks whether its worker lives through a pidfd opened when it was
    kept (one poll), not by reading ``/proc/PID/stat`` on the run's critical path; a worker
    killed while kept is still noticed (as a zombie, before anyone reaps it)."""
    from toolnexus.codemode.runtimes import _monty_run

    read: list[int | None] = []

    def counted(pid: int | None) -> bool:
        read.append(pid)
        return worker_alive(pid)

    monkeypatch.setattr(_monty_run, "worker_alive", counted)
    runtime = MontyRuntime(timeout=20, type_check=False)
    tool = echo_tool()
    try:
        for i in range(3):  # the second and third take the session the run before kept
            out = await run_program(f"await tools.echo({{'i': {i}}})", [tool], runtime=runtime)
            assert out.get("result") == {"echo": {"i": i}}, out
            await wait_until(lambda: runtime._spares._held is not None)
        held = runtime._spares._held
        assert held is not None and held[2].worker_pid is not None
        os.kill(held[2].worker_pid, signal.SIGKILL)
        await wait_until(lambda: not held[3].alive())  # the whole process has exited
        out = await run_program("await tools.echo({'i': 9})", [tool], runtime=runtime)
        assert out.get("result") == {"echo": {"i": 9}}, out
    finally:
        await runtime.aclose()
    assert read == [], read


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="pinning is Linux only")
def test_the_current_cpu_is_asked_of_libc_not_read_from_proc(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pinned run starts by asking which CPU its loop is on: libc's ``sched_getcpu`` answers
    (about a microsecond) without reading ``/proc/thread-self/stat`` (about fourteen), and
    ``/proc`` still answers without it."""
    from toolnexus.codemode.runtimes import _pinning

    opened: list[str] = []
    real_open = open

    def counted(path: str, *args: Any, **kwargs: Any) -> Any:
        opened.append(path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(_pinning, "open", counted, raising=False)
    assert _pinning.current_cpu() in os.sched_getaffinity(0)
    assert opened == []
    monkeypatch.setattr(_pinning, "_getcpu", None)
    assert _pinning.current_cpu() in os.sched_getaffinity(0)
    assert opened == ["/proc/thread-self/stat"]


@pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="pinning is seen only with two CPUs or more (Linux)",
)
@pytest.mark.parametrize("pin_cpu", [True, False])
async def test_monty_pin_cpu_pins_the_loop_and_the_worker_for_the_run_only(pin_cpu: bool) -> None:
    """With ``pin_cpu`` the loop's thread and the run's worker process share one CPU while the
    program runs (a tool sees both pinned), and both have their affinity back afterwards;
    without it nothing is pinned."""
    runtime = MontyRuntime(timeout=20, type_check=False, pin_cpu=pin_cpu)
    everything = os.sched_getaffinity(0)
    seen: list[tuple[set[int], set[int]]] = []
    pids: list[int] = []

    async def execute(args: dict[str, Any]) -> int:
        (run,) = runtime._active
        assert run.pid is not None
        pids.append(run.pid)
        seen.append((os.sched_getaffinity(0), os.sched_getaffinity(run.pid)))
        return 1

    probe = Tool(
        "affinity", "Sees affinities.", {"type": "object"}, execute=execute, hints=ToolHints()
    )
    try:
        for _ in range(2):
            out = await run_program("await tools.affinity({})", [probe], runtime=runtime)
            assert out.get("result") == 1, out
            assert os.sched_getaffinity(0) == everything
            assert os.sched_getaffinity(pids[-1]) == everything
    finally:
        await runtime.aclose()
    for loop_cpus, worker_cpus in seen:
        if pin_cpu:
            assert len(loop_cpus) == 1
            assert worker_cpus == loop_cpus
        else:
            assert loop_cpus == worker_cpus == everything


@pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="pinning is seen only with two CPUs or more (Linux)",
)
@pytest.mark.parametrize("pin_cpu", [True, False])
async def test_v8_pin_cpu_pins_the_loop_and_the_deno_process_for_the_run_only(
    pin_cpu: bool,
) -> None:
    """With ``pin_cpu`` the loop's thread and every thread of the run's Deno process share one
    CPU while the program runs, and the loop has its affinity back afterwards; without it
    nothing is pinned."""
    runtime = V8Runtime(timeout=20, pin_cpu=pin_cpu)
    everything = os.sched_getaffinity(0)
    seen: list[tuple[set[int], list[set[int]]]] = []

    async def execute(args: dict[str, Any]) -> int:
        (child,) = runtime._active
        pid = child.process.pid
        threads = [os.sched_getaffinity(int(t)) for t in os.listdir(f"/proc/{pid}/task")]
        seen.append((os.sched_getaffinity(0), threads))
        return 1

    probe = Tool(
        "affinity", "Sees affinities.", {"type": "object"}, execute=execute, hints=ToolHints()
    )
    try:
        for _ in range(2):
            out = await run_program("return await tools.affinity({})", [probe], runtime=runtime)
            assert out.get("result") == 1, out
            assert os.sched_getaffinity(0) == everything
    finally:
        await runtime.aclose()
    assert len(seen) == 2
    for loop_cpus, threads in seen:
        assert len(threads) > 1  # Deno runs several threads: every one is pinned
        if pin_cpu:
            assert len(loop_cpus) == 1
            assert all(cpus == loop_cpus for cpus in threads)
        else:
            assert loop_cpus == everything
            assert all(cpus == everything for cpus in threads)


async def test_v8_replies_are_encoded_without_a_new_encoder_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``json.dumps`` of anything but a string makes a new C encoder each time: a third of a
    small reply's cost. Replies (values and failures) use one made once."""
    import json.encoder

    made: list[int] = []
    make = json.encoder.c_make_encoder
    assert make is not None

    def counted(*args: Any) -> Any:
        made.append(1)
        return make(*args)

    monkeypatch.setattr(json.encoder, "c_make_encoder", counted)

    async def execute(args: dict[str, Any]) -> Any:
        if args["i"] == 2:
            raise ValueError("two")
        return {"i": args["i"], "tags": ["a", "é"]}

    tool = Tool("f", "Echoes.", {"type": "object"}, execute=execute)
    runtime = V8Runtime(timeout=20)
    code = """
    const out = [];
    for (let i = 0; i < 4; i++) {
      try { out.push(await tools.f({i})); } catch (e) { out.push(e.message); }
    }
    return out"""
    try:
        out = await run_program(code, [tool], runtime=runtime)
    finally:
        await runtime.aclose()
    assert out["result"][2] == "two", out
    assert out["result"][3] == {"i": 3, "tags": ["a", "é"]}
    assert made == []


WHILE_A_CALL_IS_OUT = {
    "a timer": "await new Promise((r) => setTimeout(r, 30));",
    "an interval": (
        "await new Promise((r) => { let n = 0; const t = setInterval(() => "
        "{ if (++n === 3) { clearInterval(t); r(); } }, 10); });"
    ),
    # Deno loads its timer functions when first read; the host reads them then, not at
    # boot, and a timer made after that first use is counted like the first
    "a timer after timers were first used": (
        "clearTimeout(setTimeout(() => {}, 1)); clearInterval(setInterval(() => {}, 1)); "
        "await new Promise((r) => setTimeout(r, 30));"
    ),
    "an abort signal's timeout": (
        "const s = AbortSignal.timeout(30); "
        "await new Promise((r) => s.addEventListener('abort', r));"
    ),
    "a long chain of reactions": (
        "const deep = async (n) => (n ? await deep(n - 1) : 0); await deep(200);"
    ),
}


@pytest.mark.parametrize("wait", WHILE_A_CALL_IS_OUT.values(), ids=WHILE_A_CALL_IS_OUT.keys())
async def test_v8_a_program_waiting_on_its_own_work_is_not_held_by_a_call_that_is_out(
    wait: str,
) -> None:
    """The host reads replies blocking only when the program has nothing else to wait for:
    a call that answers only after the program's timer, interval, abort signal or chain of
    reactions led it to make a second call still gets that second call."""
    marked = asyncio.Event()

    async def slow(args: dict[str, Any]) -> str:
        await marked.wait()
        return "slow"

    async def mark(args: dict[str, Any]) -> str:
        marked.set()
        return "mark"

    read_only = ToolHints(read_only=True)  # the two overlap in the lane
    tools = [
        Tool("slow", "Slow.", execute=slow, hints=read_only),
        Tool("mark", "Mark.", execute=mark, hints=read_only),
    ]
    runtime = V8Runtime(timeout=10)
    code = f"const out = tools.slow({{}}); {wait} await tools.mark({{}}); return await out"
    try:
        assert await run_program(code, tools, runtime=runtime) == {"result": "slow", "logs": []}
    finally:
        await runtime.aclose()


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc")
async def test_v8_a_sub_call_wakes_only_the_deno_thread_that_runs_the_program(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While the program waits for a reply and nothing else, the host reads it blocking on
    its own thread: Deno's async read handed every read to its runtime's worker threads,
    which then woke the main thread (two more wake-ups per sub-call)."""
    from toolnexus.codemode.runtimes import _v8

    def worker_switches(pid: int) -> int:
        total = 0
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/comm") as comm:
                if not comm.read().startswith("tokio"):
                    continue
            with open(f"/proc/{pid}/task/{task}/status") as status:
                text = status.read()
            total += int(text.split("voluntary_ctxt_switches:")[1].split()[0])
        return total

    counts: list[int] = []
    attach = _v8._Child.attach
    kill = _v8._Child.kill

    async def attached(self: Any) -> None:
        await attach(self)
        counts.append(worker_switches(self.process.pid))

    def killed(self: Any) -> None:
        if self.alive and len(counts) % 2:
            counts.append(worker_switches(self.process.pid))
        kill(self)

    monkeypatch.setattr(_v8._Child, "attach", attached)
    monkeypatch.setattr(_v8._Child, "kill", killed)

    async def execute(args: dict[str, Any]) -> int:
        return 0

    noop = Tool("noop", "No-op.", {"type": "object"}, execute=execute)
    runtime = V8Runtime(timeout=20, spares=0)
    code = "for (let i = 0; i < 200; i++) await tools.noop({}); return 1"
    try:
        assert (await run_program(code, [noop], runtime=runtime))["result"] == 1
    finally:
        await runtime.aclose()
    assert len(counts) == 2
    assert counts[1] - counts[0] < 40  # 200 calls: about 260 with the async read
