"""``MontyRuntime``: Python programs in pydantic-monty's sandboxed interpreter.

Why the sync snapshot API (and not ``AsyncMonty``): it is the fastest path, and it has no
background thread calling into asyncio, which with ``AsyncMonty`` can abort the host process at
interpreter exit (seen with pydantic-monty 1.4).

A run: the type check starts in a helper thread (``_monty_checker.py``) while a driver thread
(``_monty_run.py``) takes a worker slot, checks out a session and feeds the prelude (or takes
the spare session the run before it prepared, its prelude already fed); then the program runs,
its tool calls streaming into the loop's scheduler lane, their outcomes resumed in commit
order. The loop only waits for the result.

Why the host enforces the wall clock: Monty's own duration limit counts execution only, not time
suspended on the host, so a run waiting on slow tools would outlive its budget. At the deadline
the host kills the worker process (SIGKILL); the pool replaces it.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pydantic_monty as monty

from toolnexus._checks import positive_int
from toolnexus.codemode.runtimes._base import (
    MAX_LOOKUPS,
    Budgets,
    HostCaller,
    Patience,
    ProgramFailure,
    RunReport,
    ToolCaller,
    budget_timeout,
    json_shape_problem,
    out_of_memory,
    patience_deadline,
    run_deadline,
)
from toolnexus.codemode.runtimes._monty_checker import CheckerCache
from toolnexus.codemode.runtimes._monty_run import (
    Run,
    SpareSession,
    Stopped,
    TypeProblems,
    inspect_program,
)
from toolnexus.codemode.runtimes._pinning import CallerPins, own_cpus, unpin_thread
from toolnexus.scheduling import snapshot

__all__ = ["MontyRuntime"]

logger = logging.getLogger("toolnexus.codemode")

STOP_GRACE_SECONDS = 2.0
"""After a kill, how long to wait for the driver thread to notice, so its logs are complete."""


def _raised_by_host(exc: monty.MontyRuntimeError) -> bool:
    """Whether an uncaught exception is a tool failure the host raised into the program.

    Why the traceback and not the message: a program may raise ``RuntimeError`` with the very
    text of a tool failure it caught earlier. The host's failures surface in the prelude's
    tool function (its own source, fed before the program), so the innermost frame is not in
    the program's source; anything the program raises itself is.
    """
    frames = exc.traceback()
    return len(frames) >= 2 and frames[-1].filename != frames[0].filename


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
        warm_workers: Worker processes started ahead of the first run and kept warm. After a
            run, one more is kept with the prelude of that run's tools already fed, so the next
            run with the same tools starts at its program.
        pin_cpu: Pin each run, for its duration, to the CPU its event loop is on when it starts:
            the loop's thread, the run's driver thread and its worker process (Linux; elsewhere
            ignored). Sub-calls hop between the three, and a hop within one CPU is several
            times cheaper than across CPUs on a loaded machine; the price is that they share
            one CPU. Off by default; ``docs/performance.md`` has the figures both ways.

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
        pin_cpu: bool = False,
    ) -> None:
        self.budgets = Budgets(timeout, max_memory, max_output, max_sub_calls)
        for option, value in (("max_workers", max_workers), ("warm_workers", warm_workers)):
            positive_int(f"MontyRuntime {option}", value)
        self._type_check = bool(type_check)
        self._pin_cpu = bool(pin_cpu)
        self._caller_pins = CallerPins()
        # The CPUs the runtime's threads go back to: a thread started by a pinned one (the loop
        # during a pinned run) would otherwise inherit the pin for good.
        self._cpus = own_cpus()
        self._max_workers = max_workers
        self._warm_workers = min(warm_workers, max_workers)
        self._slots = threading.BoundedSemaphore(max_workers)  # sessions held by runs
        self._checkers = CheckerCache()
        self._spares = SpareSession()  # the next run's session, its prelude fed
        self._pool: monty.Monty | None = None
        self._pool_lock = threading.Lock()  # not asyncio's: a runtime may outlive its loop
        # Drivers wait for a slot inside their own thread, so size this generously: a waiting
        # thread costs little, and no run's progress depends on another run's thread.
        self._drivers = ThreadPoolExecutor(
            max_workers + 16,
            thread_name_prefix="toolnexus-monty",
            initializer=unpin_thread,
            initargs=(self._cpus,),
        )
        self._helpers = ThreadPoolExecutor(
            4,
            thread_name_prefix="toolnexus-monty-helper",
            initializer=unpin_thread,
            initargs=(self._cpus,),
        )
        self._active: set[Run] = set()

    def __repr__(self) -> str:
        return f"<MontyRuntime {self.budgets}>"

    async def run(
        self,
        code: str,
        *,
        tool_names: Sequence[str],
        call_tool: ToolCaller,
        sdk: str,
        patience: float | None = None,
        call_host: HostCaller | None = None,
    ) -> RunReport:
        """Run one Python program; see [`CodeRuntime`][toolnexus.codemode.runtimes.CodeRuntime].

        Blocks only the calling task, never the event loop. Cancelling it kills the program.
        """
        refused, concurrent = inspect_program(code)
        if refused:
            return RunReport(failure=ProgramFailure("exception", refused))
        loop = asyncio.get_running_loop()
        # The caller's patience counts from now; the runtime's time budget only from when the
        # program gets a worker (a queued program must not spend its budget waiting).
        waited_for = patience_deadline(loop.time(), patience)
        pool = await self._ensure_pool()
        # The type check runs beside the session checkout and the prelude, not before them.
        check = (
            self._helpers.submit(self._checkers.check, pool, sdk, code)
            if (self._type_check)
            else None
        )
        run = Run(loop, call_tool, self.budgets, concurrent=concurrent, call_host=call_host)
        if self._pin_cpu:
            run.cpu, run.cpus = self._caller_pins.acquire(), self._cpus
        self._active.add(run)
        try:
            self._drivers.submit(
                run.execute,
                pool,
                self._slots,
                self._limits(),
                code,
                list(tool_names),
                check,
                self._spares,
            )
            failure, value = await self._supervise(run, waited_for)
        finally:
            if run.cpu is not None:
                self._caller_pins.release()
            self._active.discard(run)
            run.close_inbox()
            run.drop_calls()
        return RunReport(value, failure, run.logs.finish())

    def prepare(self, sdk: str) -> None:
        """Start the worker pool and the type checker for ``sdk`` in the background.

        The first type check against a new SDK costs ~50 ms (the checker loads the stubs);
        ``run_code_tool`` calls this when it builds the tool, so the checker is warm by the time
        the model has written its program. Returns at once; never raises.
        """
        if self._type_check:
            self._helpers.submit(self._warm_checker, sdk)

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
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(self._helpers, self._spares.close)
            await loop.run_in_executor(self._helpers, self._checkers.close)
            await loop.run_in_executor(self._helpers, pool.__exit__, None, None, None)

    # -- internals -----------------------------------------------------------------------------

    def _limits(self) -> monty.ResourceLimits:
        b = self.budgets
        return {
            "max_memory": b.max_memory,
            "max_feed_duration_secs": b.timeout,
            "max_total_sleep_secs": b.timeout,
            "max_recursion_depth": 200,
            # Monty counts about two suspensions per call (the call, its future) and per lookup;
            # our own counters enforce max_sub_calls and MAX_LOOKUPS with a clear message, this
            # is the backstop, past both.
            "max_suspensions": 4 * (b.max_sub_calls + MAX_LOOKUPS) + 1000,
        }

    async def _ensure_pool(self) -> monty.Monty:
        pool = self._pool
        if pool is None:
            pool = await asyncio.get_running_loop().run_in_executor(self._helpers, self._start_pool)
        return pool

    def _start_pool(self) -> monty.Monty:
        with self._pool_lock:
            if self._pool is None:
                pool = monty.Monty(
                    min_processes=self._warm_workers,
                    # the runs' workers, the checkers' and the spare session's
                    max_processes=self._max_workers + CheckerCache.SIZE + 1,
                    request_timeout=self.budgets.timeout + 5.0,
                    max_checkouts_per_worker=500,
                )
                self._pool = pool.__enter__()
                self._spares.open(self._pool)
            return self._pool

    async def _supervise(
        self, run: Run, patience: Patience | None
    ) -> tuple[ProgramFailure | None, Any]:
        """Wait for the run's result; stop it past its time budget (counted from when it got a
        worker), past the caller's patience (counted from the call), or when the caller
        cancels."""
        loop = run.loop
        patience_ends = math.inf if patience is None else patience[0]
        late: ProgramFailure | None = None
        try:
            while True:
                # Why no wake-up when the run gets its worker: its budget starts then, so never
                # before now; waiting until the earliest either could end and then looking is
                # enough, and spares the loop a cross-thread hop on every run.
                started = run.started  # set by the driver thread, once
                if started is not None:
                    deadline, late = run_deadline(self.budgets, started, patience)
                else:
                    deadline = min(patience_ends, loop.time() + self.budgets.timeout)
                done = await run.until_done(deadline)
                if done or late is not None:
                    break
                queued = run.started is None
                if queued and patience is not None and loop.time() >= patience_ends:
                    late = patience[1]  # ran out while queued for a worker
                    break
        except asyncio.CancelledError:
            run.stop(ProgramFailure("abort", "the run was cancelled"))
            raise
        if not done:
            run.stop(late or budget_timeout(self.budgets))
            # give the killed driver a moment to notice, so the logs it captured are complete
            await asyncio.wait({asyncio.wrap_future(run.finished)}, timeout=STOP_GRACE_SECONDS)
        if run.stopped is not None:
            return run.stopped, None
        try:
            output = run.result.result()
        except Stopped as stopped:
            return stopped.failure, None
        except monty.MontyError as exc:
            return self._failure(run, exc), None
        except Exception as exc:  # not the program's doing: say so, with the detail logged
            logger.exception("the Monty driver failed")
            return ProgramFailure("substrate_exit", f"the Python sandbox failed: {exc!r}"), None
        if isinstance(output, TypeProblems):
            message = "the program does not type-check against the SDK (nothing ran):\n"
            return ProgramFailure("type_error", message + output.text), None
        problem = json_shape_problem(output)
        if problem:
            return ProgramFailure("invalid_output", problem), None
        return None, snapshot(output)

    def _failure(self, run: Run, exc: monty.MontyError) -> ProgramFailure:
        """Translate a Monty error (the one boundary where they are translated)."""
        if run.stopped is not None:
            return run.stopped
        if isinstance(exc, monty.MontyCrashedError):
            if exc.timed_out:
                return budget_timeout(self.budgets)
            return ProgramFailure("substrate_exit", f"the Python sandbox process died: {exc}")
        if isinstance(exc, monty.MontySyntaxError):
            return ProgramFailure("exception", exc.display("type-msg"))
        if not isinstance(exc, monty.MontyRuntimeError):
            return ProgramFailure("exception", str(exc))
        inner = exc.exception()
        kind, message = type(inner).__name__, str(inner)
        if kind == "MemoryError":
            return out_of_memory(self.budgets)
        if kind == "TimeoutError" and "limit" in message.lower():
            return budget_timeout(self.budgets)
        if kind == "RuntimeError" and message in run.failures and _raised_by_host(exc):
            return ProgramFailure("exception", f"tool '{run.failures[message]}' failed: {message}")
        return ProgramFailure("exception", exc.display("traceback"))
