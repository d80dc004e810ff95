"""``MontyRuntime``: Python programs in pydantic-monty's sandboxed interpreter.

Why the sync snapshot API (and not ``AsyncMonty``): it is the fastest path, and it has no
background thread calling into asyncio, which with ``AsyncMonty`` can abort the host process at
interpreter exit (``../shared/design/RUNTIMES.md``).

How a run goes. A driver thread (one per run, so the event loop never blocks on the sandbox)
feeds a small prelude that defines ``tools`` and ``ToolError``, then the program. Every
``await tools.x(...)`` surfaces as a snapshot: the driver hands the call to the event loop,
which submits it to ``call_tool`` at once (so the lane sees calls in program order), and tells
the program "future" without waiting. When every guest task waits on the host, the driver
blocks until at least one outcome has committed and resumes with every committed one, in commit
order. The program is type-checked against the SDK first (see ``_monty_checker.py``).

Why the host enforces the wall clock: Monty's own duration limit counts execution only, not time
suspended on the host, so a run waiting on slow tools would outlive its budget. At the deadline
the host kills the worker process (SIGKILL); the pool replaces it.
"""

from __future__ import annotations

import asyncio
import contextlib
import keyword
import logging
import os
import queue
import signal
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pydantic_monty as monty

from toolnexus.codemode._schema_types import python_literal
from toolnexus.codemode.runtimes._base import (
    Budgets,
    LogCapture,
    ProgramFailure,
    RunReport,
    ToolCaller,
    json_shape_problem,
)
from toolnexus.codemode.runtimes._monty_checker import CheckerCache
from toolnexus.errors import ConfigurationError
from toolnexus.scheduling import Outcome, snapshot

__all__ = ["MontyRuntime"]

logger = logging.getLogger("toolnexus.codemode")

HOST_CALL = "_toolnexus_call"
"""The one external function the prelude's tool functions call."""

_PRELUDE = """\
class Tools:
    def __getitem__(self, name):
        if name not in _toolnexus_functions:
            raise KeyError("no tool named " + repr(name))
        return _toolnexus_functions[name]

def _toolnexus_bind(name):
    async def call(args=None):
        return await _toolnexus_call(name, {} if args is None else args)
    return call

_toolnexus_functions = {name: _toolnexus_bind(name) for name in %(names)s}
tools = Tools()
ToolError = RuntimeError
%(attributes)s
"""

_STOP = object()
"""Put on a run's outcome queue to wake a driver that must give up (kill, cancel)."""


def _attribute_name(name: str) -> bool:
    return (
        name.isidentifier()
        and name.isascii()
        and not name.startswith("_")
        and not (keyword.iskeyword(name))
    )


def _prelude(tool_names: Sequence[str]) -> str:
    names = "[" + ", ".join(python_literal(n) for n in tool_names) + "]"
    attributes = "\n".join(
        f"tools.{n} = _toolnexus_functions[{python_literal(n)}]"
        for n in tool_names
        if _attribute_name(n)
    )
    return _PRELUDE % {"names": names, "attributes": attributes}


class _Killed(Exception):
    """The run was stopped by the host; ``failure`` says why."""

    def __init__(self, failure: ProgramFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


class _Run:
    """One run, shared by the event loop and the driver thread.

    The loop owns ``calls`` (the tasks of outstanding sub-calls); the driver owns the session and
    the logs. They talk through ``loop.call_soon_threadsafe`` (driver → loop: a new call) and
    ``outcomes`` (loop → driver: a committed call, in commit order).
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        session: monty.MontySession,
        call_tool: ToolCaller,
        budgets: Budgets,
    ) -> None:
        self.loop = loop
        self.session = session
        self.pid = session.worker_pid
        self.call_tool = call_tool
        self.budgets = budgets
        self.logs = LogCapture(budgets.max_output)
        self.outcomes: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.calls: dict[int, asyncio.Task[Outcome]] = {}
        self.failures: dict[str, str] = {}  # failure message -> tool, to name an uncaught one
        self.stopped: ProgramFailure | None = None

    # -- loop side -----------------------------------------------------------------------------

    def submit(self, call_id: int, name: str, args: Any) -> None:
        task: asyncio.Task[Outcome] = asyncio.ensure_future(self.call_tool(name, args))
        self.calls[call_id] = task
        task.add_done_callback(lambda t: self._committed(call_id, t))

    def _committed(self, call_id: int, task: asyncio.Task[Outcome]) -> None:
        self.calls.pop(call_id, None)
        if not task.cancelled():
            self.outcomes.put((call_id, task.result()))

    def stop(self, failure: ProgramFailure) -> None:
        """Kill the worker and wake the driver; the first reason given wins."""
        if self.stopped is None:
            self.stopped = failure
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError):  # already gone
                os.kill(self.pid, signal.SIGKILL)
        self.outcomes.put(_STOP)
        for task in list(self.calls.values()):
            task.cancel()

    # -- driver thread -------------------------------------------------------------------------

    def drive(self, code: str, tool_names: Sequence[str]) -> Any:
        """Run the program to completion; returns its output. Runs in the driver thread."""
        printer = self.logs.write
        self.session.feed_run(_prelude(tool_names), skip_type_check=True, print_callback=printer)
        snap = self.session.feed_start(code, skip_type_check=True, print_callback=printer)
        sub_calls = 0
        arrived: dict[int, Any] = {}
        while not isinstance(snap, monty.MontyComplete):
            if isinstance(snap, monty.FunctionSnapshot):
                if snap.is_os_function:
                    snap = snap.resume_not_handled()
                elif snap.function_name != HOST_CALL or len(snap.args) != 2:
                    message = f"name '{snap.function_name}' is not defined"
                    snap = snap.resume({"exc_type": "NameError", "message": message})
                else:
                    sub_calls += 1
                    if sub_calls > self.budgets.max_sub_calls:
                        raise _Killed(
                            ProgramFailure(
                                "abort",
                                f"the program made more than {self.budgets.max_sub_calls} "
                                "tool calls (max_sub_calls)",
                            )
                        )
                    name, args = snap.args
                    self.loop.call_soon_threadsafe(self.submit, snap.call_id, str(name), args)
                    snap = snap.resume({"future": ...})
            elif isinstance(snap, monty.NameLookupSnapshot):
                snap = snap.resume()
            elif isinstance(snap, monty.FutureSnapshot):
                snap = snap.resume(self._committed_results(snap.pending_call_ids, arrived))
            else:
                raise _Killed(ProgramFailure("substrate_exit", f"unexpected state {snap!r}"))
        return snap.output

    def _committed_results(self, pending: list[int], arrived: dict[int, Any]) -> dict[int, Any]:
        """Block until one of ``pending`` committed; answer every committed one, in order."""
        wanted = set(pending)
        if not wanted & arrived.keys():
            self._take(arrived, block=True)
            while not wanted & arrived.keys():
                self._take(arrived, block=True)
        while self._take(arrived, block=False):
            pass
        return {i: arrived.pop(i) for i in sorted(wanted & arrived.keys())}

    def _take(self, arrived: dict[int, Any], *, block: bool) -> bool:
        try:
            item = self.outcomes.get(block=block)
        except queue.Empty:
            return False
        if item is _STOP:
            raise _Killed(self.stopped or ProgramFailure("abort", "the run was stopped"))
        call_id, outcome = item
        arrived[call_id] = self._answer(outcome)
        return True

    def _answer(self, outcome: Outcome) -> Any:
        if outcome.error is not None:
            message = outcome.error["message"]
            self.failures.setdefault(message, outcome.error["tool"])
            return {"exc_type": "RuntimeError", "message": message}
        return {"return_value": snapshot(outcome.value)}


class MontyRuntime:
    """Runs Python programs in the Monty sandbox (``pydantic-monty``); the default runtime.

    Args:
        timeout: Seconds of wall clock per run (tool waits included). Default 30.
        max_memory: Bytes of heap per run. Default 256 MiB.
        max_output: Bytes of logs kept per run. Default 1,000,000.
        max_sub_calls: Tool calls per run. Default 1,000.
        type_check: Type-check every program against the SDK before running it (default on);
            a program that does not check fails with kind ``type_error`` and never runs.
        max_workers: Runs at once; more runs wait for a free worker process.
        warm_workers: Worker processes started ahead of the first run and kept warm.

    Raises:
        ConfigurationError: a budget or option that is not a positive number, named.

    Example::

        runtime = MontyRuntime(timeout=10)
        out = await run_program("1 + 1", [], runtime=runtime)   # {"result": 2, "logs": []}
        await runtime.aclose()
    """

    language = "python"

    def __init__(
        self,
        *,
        timeout: float = 30.0,
        max_memory: int = 256 * 1024 * 1024,
        max_output: int = 1_000_000,
        max_sub_calls: int = 1000,
        type_check: bool = True,
        max_workers: int = 4,
        warm_workers: int = 1,
    ) -> None:
        self.budgets = Budgets(timeout, max_memory, max_output, max_sub_calls)
        for option, value in (("max_workers", max_workers), ("warm_workers", warm_workers)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(
                    f"MontyRuntime {option} must be a positive integer, got {value!r}."
                )
        self._type_check = bool(type_check)
        self._max_workers = max_workers
        self._warm_workers = min(warm_workers, max_workers)
        self._checkers = CheckerCache()
        self._pool: monty.Monty | None = None
        self._pool_lock = threading.Lock()  # not asyncio's: a runtime may outlive its loop
        self._threads = ThreadPoolExecutor(max_workers + 4, thread_name_prefix="toolnexus-monty")
        self._active: set[_Run] = set()

    def __repr__(self) -> str:
        return f"<MontyRuntime {self.budgets}>"

    async def run(
        self, code: str, *, tool_names: Sequence[str], call_tool: ToolCaller, sdk: str
    ) -> RunReport:
        """Run one Python program; see :class:`~toolnexus.codemode.runtimes.CodeRuntime`.

        Blocks only the calling task, never the event loop. Cancelling it kills the program.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.budgets.timeout
        pool = await self._ensure_pool()
        if self._type_check:
            problems = await self._in_thread(self._checkers.check, pool, sdk, code)
            if problems is not None:
                message = "the program does not type-check against the SDK (nothing ran):\n"
                return RunReport(failure=ProgramFailure("type_error", message + problems))
        checkout = pool.checkout(limits=self._limits())
        session = await self._in_thread(checkout.__enter__)
        run = _Run(loop, session, call_tool, self.budgets)
        self._active.add(run)
        try:
            failure, value = await self._supervise(run, code, tool_names, deadline)
        finally:
            self._active.discard(run)
            await asyncio.shield(self._release(checkout))
        return RunReport(value, failure, run.logs.finish())

    def prepare(self, sdk: str) -> None:
        """Start the worker pool and the type checker for ``sdk`` in the background.

        The first type check against a new SDK costs ~50 ms (the checker loads the stubs);
        ``run_code_tool`` calls this when it builds the tool, so the checker is warm by the time
        the model has written its program. Returns at once; never raises.
        """
        if self._type_check:
            self._threads.submit(self._warm_checker, sdk)

    def _warm_checker(self, sdk: str) -> None:
        try:
            self._checkers.check(self._start_pool(), sdk, "pass")
        except Exception:  # only a warm-up: the run itself reports any real problem
            logger.debug("warming the Monty type checker failed", exc_info=True)

    async def cancel(self) -> None:
        """Kill every run in progress; each reports kind ``abort``."""
        for run in list(self._active):
            run.stop(ProgramFailure("abort", "the run was cancelled"))

    async def aclose(self) -> None:
        """Kill running programs and stop the worker processes; a later run restarts them."""
        await self.cancel()
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            await self._in_thread(self._checkers.close)
            await self._in_thread(pool.__exit__, None, None, None)

    # -- internals -----------------------------------------------------------------------------

    def _limits(self) -> monty.ResourceLimits:
        b = self.budgets
        return {
            "max_memory": b.max_memory,
            "max_feed_duration_secs": b.timeout,
            "max_total_sleep_secs": b.timeout,
            "max_recursion_depth": 200,
            # Monty counts about two suspensions per call (the call, its future); our own counter
            # enforces max_sub_calls with a clear message, this is the backstop.
            "max_suspensions": 4 * b.max_sub_calls + 1000,
        }

    async def _ensure_pool(self) -> monty.Monty:
        pool = self._pool
        if pool is None:
            pool = await self._in_thread(self._start_pool)
        return pool

    def _start_pool(self) -> monty.Monty:
        with self._pool_lock:
            if self._pool is None:
                pool = monty.Monty(
                    min_processes=self._warm_workers,
                    max_processes=self._max_workers + 2,  # two more for warm type checkers
                    request_timeout=self.budgets.timeout + 5.0,
                    max_checkouts_per_worker=500,
                )
                self._pool = pool.__enter__()
            return self._pool

    async def _in_thread(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._threads, fn, *args)

    async def _release(self, checkout: monty.MontySession) -> None:
        try:
            await self._in_thread(checkout.__exit__, None, None, None)
        except Exception:  # a killed worker's session may complain on the way out
            logger.debug("Monty session exit failed", exc_info=True)

    async def _supervise(
        self, run: _Run, code: str, tool_names: Sequence[str], deadline: float
    ) -> tuple[ProgramFailure | None, Any]:
        """Drive the run in its thread; stop it at the deadline or on cancellation."""
        driver = asyncio.ensure_future(self._in_thread(run.drive, code, list(tool_names)))
        try:
            remaining = max(deadline - run.loop.time(), 0)
            done, _ = await asyncio.wait({driver}, timeout=remaining)
            if not done:
                run.stop(self._timeout_failure())
        except asyncio.CancelledError:
            run.stop(ProgramFailure("abort", "the run was cancelled"))
            await asyncio.gather(driver, return_exceptions=True)
            raise
        try:
            output = await driver
        except _Killed as killed:
            return run.stopped or killed.failure, None
        except monty.MontyError as exc:
            return self._failure(run, exc), None
        finally:
            for task in list(run.calls.values()):
                task.cancel()
        if run.stopped is not None:
            return run.stopped, None
        problem = json_shape_problem(output)
        if problem:
            return ProgramFailure("invalid_output", problem), None
        return None, snapshot(output)

    def _timeout_failure(self) -> ProgramFailure:
        return ProgramFailure(
            "timeout", f"the program ran past its {self.budgets.timeout:g} s time budget"
        )

    def _failure(self, run: _Run, exc: monty.MontyError) -> ProgramFailure:
        """Translate a Monty error (the one boundary where they are translated)."""
        if run.stopped is not None:
            return run.stopped
        if isinstance(exc, monty.MontyCrashedError):
            if exc.timed_out:
                return self._timeout_failure()
            return ProgramFailure("substrate_exit", f"the Python sandbox process died: {exc}")
        if isinstance(exc, monty.MontySyntaxError):
            return ProgramFailure("exception", exc.display("type-msg"))
        if not isinstance(exc, monty.MontyRuntimeError):
            return ProgramFailure("exception", str(exc))
        inner = exc.exception()
        kind, message = type(inner).__name__, str(inner)
        if kind == "MemoryError":
            limit = self.budgets.max_memory
            return ProgramFailure("abort", f"the program ran out of memory (limit {limit} bytes)")
        if kind == "TimeoutError" and "limit" in message.lower():
            return self._timeout_failure()
        if kind == "RuntimeError" and message in run.failures:
            return ProgramFailure("exception", f"tool '{run.failures[message]}' failed: {message}")
        return ProgramFailure("exception", exc.display("traceback"))
