"""One Monty run: the driver thread's conversation with the sandbox, and its link to the loop.

The event loop owns the run's sub-call tasks; a driver thread owns the Monty session and the
logs. They talk through ``loop.call_soon_threadsafe`` (driver → loop: "the program called a
tool") and a queue (loop → driver: "this call committed", in commit order). The driver's whole
life (wait for a worker slot, check out a session, feed the prelude, wait for the type check,
run the program, return the session) happens in its one thread, so no step of a run ever waits
on a thread another run holds.
"""

from __future__ import annotations

import ast
import asyncio
import collections
import contextlib
import functools
import logging
import math
import os
import queue
import select
import signal
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

import pydantic_monty as monty

from toolnexus.codemode._schema_types import python_attribute, python_literal
from toolnexus.codemode.runtimes._base import (
    Budgets,
    HostCaller,
    LogCapture,
    ProgramFailure,
    ToolCaller,
)
from toolnexus.codemode.runtimes._pinning import Pins
from toolnexus.scheduling import DID_NOT_COMPLETE, Outcome, snapshot

__all__ = [
    "HOST_CALL",
    "HOST_FUNCTION",
    "Run",
    "SpareSession",
    "Stopped",
    "TypeProblems",
    "inspect_program",
    "prelude",
    "program_problem",
    "worker_alive",
]

logger = logging.getLogger("toolnexus.codemode")

HOST_CALL = "_toolnexus_call"
"""The one external function the prelude's tool functions call."""

HOST_FUNCTION = "_toolnexus_host"
"""The external function behind ``search_tools`` and ``describe_tool``: answered at once by the
host, never a tool call."""

_PRELUDE = """\
class Tools:
    def __getitem__(self, name):
        if name not in _toolnexus_functions:
            raise KeyError("no tool named " + repr(name))
        return _toolnexus_functions[name]

def _toolnexus_bind(name):
    async def call(args=None):
        return %(await)s_toolnexus_call(name, {} if args is None else args)
    return call

_toolnexus_functions = {name: _toolnexus_bind(name) for name in %(names)s}
tools = Tools()
ToolError = RuntimeError

async def search_tools(query, limit=5):
    return _toolnexus_host("search_tools", {"query": query, "limit": limit})

async def describe_tool(name):
    return _toolnexus_host("describe_tool", {"name": name})
%(attributes)s
"""

REFUSED_NAMES = {
    "locals": "locals() is not available in the sandbox (in pydantic-monty 1.4 it crashes the "
    "interpreter); refer to your variables by name",
}
"""Names a program may not use, with why: refused before anything runs, by a syntax scan."""


def program_problem(code: str) -> str | None:
    """Why ``code`` is refused before it runs, or ``None``: a syntax error (with its line and
    column, rather than a type checker's rendering of it), or a refused name.

    Only a name the program really uses counts (not one inside a string or a comment). A
    program Python parses may still use syntax Monty lacks; the sandbox reports that itself.
    """
    return inspect_program(code)[0]


def inspect_program(code: str) -> tuple[str | None, bool]:
    """``program_problem(code)``, and whether the program may await tool calls concurrently.

    Why it matters: a program that awaits one call at a time is served by sync host calls (the
    worker stops once per call, one round trip); only concurrent awaits need Monty's futures
    (two round trips per call). Concurrency in Monty needs the ``asyncio`` module (``gather``),
    so a program that imports nothing and never names ``asyncio`` (nor ``__import__``) cannot
    await concurrently. The test is conservative: the bare word anywhere, even in a string or a
    comment, keeps the futures.
    """
    try:
        tree = compile(
            code, "<program>", "exec", ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        )
    except SyntaxError as exc:
        where = f" (line {exc.lineno}, column {exc.offset})" if exc.lineno else ""
        source = (exc.text or "").strip()
        shown = f": {source}" if source else ""
        return f"SyntaxError: {exc.msg}{where}{shown}; nothing was run", True
    except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes, absurd nesting
        name = type(exc).__name__
        return f"SyntaxError: the program cannot be parsed ({name}); nothing was run", True
    concurrent = "asyncio" in code or "__import__" in code
    if code.isascii() and "import" not in code and not any(n in code for n in REFUSED_NAMES):
        # Nothing the walk below looks for can be there (an identifier spelled in other
        # characters may normalise to a refused name, hence ASCII only): most programs skip it.
        return None, concurrent
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in REFUSED_NAMES:
            problem = f"NameError: {REFUSED_NAMES[node.id]} (line {node.lineno}); nothing was run"
            return problem, True
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            concurrent = True
    return None, concurrent


_STOP = object()
"""Put on a run's outcome queue to wake a driver that must give up (kill, cancel)."""


def prelude(tool_names: Sequence[str], *, concurrent: bool = True) -> str:
    """The code fed before the program: ``tools``, one function per name, and ``ToolError``.

    With ``concurrent`` the tool functions await a future per call (the host answers calls in
    commit order, several may be in flight); without it each call is a sync host call the host
    answers before the program goes on.
    """
    names = "[" + ", ".join(python_literal(n) for n in tool_names) + "]"
    attributes = "\n".join(
        f"tools.{n} = _toolnexus_functions[{python_literal(n)}]"
        for n in tool_names
        if python_attribute(n)
    )
    awaited = "await " if concurrent else ""
    return _PRELUDE % {"names": names, "attributes": attributes, "await": awaited}


@functools.lru_cache(maxsize=32)
def _prelude(tool_names: tuple[str, ...], concurrent: bool) -> str:
    """`prelude`, kept for the tool sets of recent runs (runs mostly repeat one)."""
    return prelude(tool_names, concurrent=concurrent)


SpareKey = tuple[str, tuple[tuple[str, Any], ...]]
"""What a spare session was prepared for: the prelude it was fed and the limits of its
checkout."""


def spare_key(prelude_text: str, limits: monty.ResourceLimits) -> SpareKey:
    """The key of a session fed ``prelude_text`` under ``limits``."""
    return prelude_text, tuple(sorted(limits.items()))


class SpareSession:
    """At most one worker session kept with a prelude already fed, for the next run that
    needs that very prelude under the same limits (thread-safe).

    Why: a run's first feed wakes its worker and the prelude is a second feed, together about
    half of a trivial run's wall time on a warm runtime. A run's driver thread prepares the
    next run's session once its own result is out (its caller no longer waits), so a run that
    follows one with the same tools starts at its program. The session holds nothing but the
    prelude, as a fresh one would. It takes one worker beyond the runs' own (the pool allows
    one more), and is given back when a run with other tools prepares its own, or when the
    runtime closes.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool: monty.Monty | None = None  # the pool it may hold a session of
        # key, checkout, session, and a watch on its worker
        self._held: tuple[SpareKey, Any, monty.MontySession, WorkerWatch] | None = None

    def open(self, pool: monty.Monty) -> None:
        """Keep sessions of ``pool`` from now on."""
        with self._lock:
            self._pool = pool

    def close(self) -> None:
        """Give back the kept session; keep none until `open` again."""
        with self._lock:
            held, self._held, self._pool = self._held, None, None
        if held is not None:
            held[3].close()
            _give_back(held[1])

    def take(self, pool: monty.Monty, key: SpareKey) -> tuple[Any, monty.MontySession] | None:
        """The kept session (its checkout, the session) if it was prepared for ``key`` in
        ``pool`` and its worker is still alive; it is the caller's from now on.

        Why the liveness check: the pool replaces a worker that died while idle when it is
        checked out, but a kept session was checked out already, so a worker that died while
        kept (killed, out of memory) would fail the run that takes it.
        """
        with self._lock:
            held = self._held
            if held is None or held[0] != key or self._pool is not pool:
                return None
            self._held = None
        alive = held[3].alive()
        held[3].close()
        if not alive:
            _give_back(held[1])
            return None
        return held[1], held[2]

    def prepare(self, pool: monty.Monty, key: SpareKey, limits: monty.ResourceLimits) -> None:
        """Check out a session of ``pool``, feed it the prelude of ``key`` and keep it (in
        place of any kept one). Blocks; never raises (a spare is only a head start)."""
        with self._lock:
            if self._pool is not pool or (self._held is not None and self._held[0] == key):
                return  # closed, or one is kept for this very prelude
        try:
            checkout = pool.checkout(limits=limits)
            session = checkout.__enter__()
        except Exception:
            logger.debug("preparing a spare Monty session failed", exc_info=True)
            return
        try:
            session.feed_run(key[0], skip_type_check=True, print_callback=_discard)
        except Exception:
            logger.debug("feeding a spare Monty session its prelude failed", exc_info=True)
            _give_back(checkout)
            return
        kept = (key, checkout, session, WorkerWatch(session.worker_pid))
        with self._lock:
            if self._pool is pool:
                held, self._held = self._held, kept
            else:  # closed meanwhile
                held = kept
        if held is not None:
            held[3].close()
            _give_back(held[1])


class WorkerWatch:
    """Whether a worker process still runs, asked cheaply and often (not thread-safe).

    Why a pidfd: it turns readable when the process ends (a zombie included), so the question
    is one ``poll`` with no wait (about a microsecond), where reading ``/proc/PID/stat`` costs
    about thirteen, on a warm start's critical path. It reports a process ended once its last
    thread has (``/proc`` shows a killed one as a zombie a moment earlier); either way a worker
    may die just after the question, and its run then fails as any run whose worker dies.
    Where there is no pidfd (not Linux, an old kernel), `worker_alive` answers.
    """

    def __init__(self, pid: int | None) -> None:
        self.pid = pid
        self._fd: int | None = None
        if pid is not None and hasattr(os, "pidfd_open"):
            with contextlib.suppress(OSError):  # gone already, or no pidfd here
                self._fd = os.pidfd_open(pid)

    def alive(self) -> bool:
        """Whether the process still runs (not gone, not a zombie)."""
        fd = self._fd
        if fd is None:
            return worker_alive(self.pid)
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return not poller.poll(0)

    def close(self) -> None:
        """Let go of the pidfd (a closed watch answers through `worker_alive`)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def worker_alive(pid: int | None) -> bool:
    """Whether process ``pid`` still runs (not gone, not a zombie); ``False`` for ``None``."""
    if pid is None:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            state = stat.read().rsplit(b")", 1)[1].split()[0]
        return state not in (b"Z", b"X")
    except FileNotFoundError:
        return False
    except (OSError, IndexError):  # no /proc (not Linux): whether it exists at all
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except OSError:
            return True
        return True


def _discard(stream: str, text: str) -> None:
    """A print callback that keeps nothing (a prelude prints nothing)."""


def _give_back(checkout: Any) -> None:
    with contextlib.suppress(Exception):  # a dead worker's session may complain
        checkout.__exit__(None, None, None)


def _wake_up(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class CallInbox:
    """Sub-calls from a run's driver thread to the loop: a queue, and an eventfd the loop reads.

    Why not ``loop.call_soon_threadsafe`` per call: that makes a handle per call and wakes the
    loop through its self-pipe, whose reader ends each wake-up in a ``recv`` that raises
    ``BlockingIOError``; an eventfd read once per wake-up and a deque cost the loop about 9 %
    fewer instructions per sub-call, and the driver about 12 %. The loop opens one at a run's
    first sub-call (the call that opens it came the usual way) where it can (Linux, a loop with
    ``add_reader``).

    Closing: the loop stops reading (`stop_reading`, on the loop) and the driver stops writing
    (`stop_writing`, once its program is over); whichever comes second closes the descriptor,
    so it is never closed while a side may still use it (a number reused after ``close`` would
    take the other side's read or write).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, deliver: Any) -> None:
        """Open it and have ``loop`` call ``deliver(*item)`` for every item, in order (on the
        loop). Raises ``OSError`` or ``NotImplementedError`` where it cannot be had."""
        self._fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        try:
            loop.add_reader(self._fd, self._drain)
        except BaseException:
            os.close(self._fd)
            raise
        self._loop = loop
        self._deliver = deliver
        self._items: collections.deque[tuple[Any, ...]] = collections.deque()
        self._lock = threading.Lock()
        self._reading = True
        self._writing = True

    def put(self, *item: Any) -> None:
        """Driver thread: hand the loop one item."""
        self._items.append(item)
        os.eventfd_write(self._fd, 1)

    def _drain(self) -> None:
        try:
            os.eventfd_read(self._fd)
        except BlockingIOError:  # every item written so far went with an earlier read
            return
        items, deliver = self._items, self._deliver
        while items:
            deliver(*items.popleft())

    def stop_reading(self) -> None:
        """Loop: read no more (items not delivered yet are dropped)."""
        with self._lock:
            if not self._reading:
                return
        self._loop.remove_reader(self._fd)
        self._items.clear()
        with self._lock:
            self._reading = False
            last = not self._writing
        if last:
            os.close(self._fd)

    def stop_writing(self) -> None:
        """Driver thread: put no more."""
        with self._lock:
            self._writing = False
            last = not self._reading
        if last:
            os.close(self._fd)


class Stopped(Exception):
    """The run was stopped by the host (deadline, cancel, budget); ``failure`` says why."""

    def __init__(self, failure: ProgramFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


class TypeProblems:
    """The run's result when the program did not type-check: nothing ran."""

    def __init__(self, text: str) -> None:
        self.text = text


class Run:
    """One run, shared by the event loop and its driver thread."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        call_tool: ToolCaller,
        budgets: Budgets,
        *,
        concurrent: bool = True,
        call_host: HostCaller | None = None,
    ) -> None:
        self.loop = loop
        self.call_host = call_host
        self.concurrent = concurrent  # futures per call; else sync host calls
        self.cpu: int | None = None  # pin the driver thread and the worker here (opt-in)
        self.cpus: set[int] | None = None  # and give them these back after
        self.call_tool = call_tool
        self.budgets = budgets
        self.logs = LogCapture(budgets.max_output)
        self.result: Future[Any] = Future()  # the program's output, or why there is none
        self.finished: Future[None] = Future()  # the driver thread is done (session returned)
        self.started: float | None = None  # loop.time() when it got a worker's slot
        self.calls: dict[int, asyncio.Task[Any]] = {}  # loop side only
        self._next_call: asyncio.Future[tuple[int, str, Any]] | None = None  # the carrier's
        self.failures: dict[str, str] = {}  # failure message -> tool, to name an uncaught one
        self.stopped: ProgramFailure | None = None
        self._outcomes: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._pid: int | None = None
        self._lock = threading.Lock()  # pid and stopped: read by both threads
        self._wake: asyncio.Future[None] | None = None  # loop side: what until_done awaits
        self.inbox: CallInbox | None = None  # opened by the loop at the first sub-call
        self._inbox_possible = hasattr(os, "eventfd")
        self._driving = True  # the driver may still send calls (under _lock)
        self._dropped = False  # the host has cancelled the run's sub-calls (loop side)
        self.result.add_done_callback(self._result_in)

    @property
    def pid(self) -> int | None:
        """The worker process serving this run, once it has one."""
        with self._lock:
            return self._pid

    # -- loop side -----------------------------------------------------------------------------

    def _submit(self, call_id: int, name: str, args: Any) -> None:
        if self.stopped is not None:  # sent before the run was stopped: nobody waits for it
            return
        if self.inbox is None and self._inbox_possible:
            self._open_inbox()
        if self.concurrent:
            self.calls[call_id] = self.loop.create_task(self._call(call_id, name, args))
            return
        waiting, self._next_call = self._next_call, None
        if waiting is None:  # the first call: the carrier starts with it
            self.calls[-1] = self.loop.create_task(self._carry(call_id, name, args))
        elif not waiting.done():  # cancelled with its carrier: the run is over
            waiting.set_result((call_id, name, args))

    def _open_inbox(self) -> None:
        """Open the run's `CallInbox` (its later calls come through it), unless the driver is
        done with its program or none can be had here."""
        with self._lock:
            if not self._driving:
                return
            try:
                self.inbox = CallInbox(self.loop, self._submit)
            except (OSError, NotImplementedError, RuntimeError):
                self._inbox_possible = False

    def close_inbox(self) -> None:
        """Loop, once the run is over: stop reading the inbox (the driver closes it if it is
        still sending)."""
        with self._lock:  # kept: the driver lets go of it too
            inbox = self.inbox
            self._inbox_possible = False
        if inbox is not None:
            inbox.stop_reading()

    async def _carry(self, call_id: int, name: str, args: Any) -> None:
        """Run a sequential program's calls one after another, in one task (the carrier).

        Why one task for all of them: such a program has one call in flight at a time, so
        its calls need no task each; a future handed over per call costs the loop about 3 %
        fewer instructions per sub-call than a task made and unmade per call (the lane still
        runs each call in its own copy of its context). The future the next call is handed
        over on is made before this call's outcome goes to the driver, so it is in place
        whenever `_submit` brings that call.
        """
        loop = self.loop
        while True:
            outcome = await self._answered(name, args)
            self._next_call = waiting = loop.create_future()
            self._outcomes.put((call_id, outcome))  # straight to the driver
            call_id, name, args = await waiting

    async def _call(self, call_id: int, name: str, args: Any) -> Outcome:
        outcome = await self._answered(name, args)
        self.calls.pop(call_id, None)
        self._outcomes.put((call_id, outcome))  # straight to the driver, no extra loop turn
        return outcome

    async def _answered(self, name: str, args: Any) -> Outcome:
        """``call_tool``'s outcome, whatever happens in it: the program is always answered.

        A tool that cancels its own task (the lane runs a call that may start at once in the
        task awaiting it) raises ``CancelledError`` here just as the host's cancellation
        would; only the host's (`drop_calls`, `stop`) ends the task, a tool's own is undone
        and answered as a call that did not complete.
        """
        try:
            return await self.call_tool(name, args)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if self._dropped or task is None:
                raise
            task.uncancel()
            logger.warning("tool %r cancelled its own call before it finished", name)
            return Outcome.failure(name, DID_NOT_COMPLETE, "cancelled")
        except Exception:  # call_tool answers every failure itself; never leave a call unanswered
            logger.exception("call_tool raised for the tool %r", name)
            return Outcome.failure(name, "the call failed")

    def drop_calls(self) -> None:
        """Loop: cancel every sub-call still running (the run is over or stopped)."""
        self._dropped = True
        for task in list(self.calls.values()):
            task.cancel()

    async def until_done(self, deadline: float) -> bool:
        """Whether ``result`` is in, waiting for it until ``deadline`` (loop time; ``inf``: no
        limit) at the latest.

        Why not ``asyncio.wait`` on ``wrap_future(result)``: each of those chains one more
        future, one more loop turn between the driver's result and the waiting task; here the
        driver's one hand-off resolves the future the task awaits.
        """
        if self.result.done():
            return True
        loop = self.loop
        wake = self._wake = loop.create_future()
        timer = None if deadline == math.inf else loop.call_at(deadline, _wake_up, wake)
        try:
            await wake
        finally:
            self._wake = None
            if timer is not None:
                timer.cancel()
        return self.result.done()

    def _result_in(self, result: Future[Any]) -> None:
        """Driver thread (``result`` was just set): wake the loop if it waits for it."""
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
            self.loop.call_soon_threadsafe(self._woken)

    def _woken(self) -> None:
        wake = self._wake
        if wake is not None:
            _wake_up(wake)

    def stop(self, failure: ProgramFailure) -> None:
        """Kill the worker (if it has one yet) and wake the driver; the first reason wins."""
        with self._lock:
            if self.stopped is None:
                self.stopped = failure
            pid = self._pid
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):  # already gone
                os.kill(pid, signal.SIGKILL)
        self._outcomes.put(_STOP)
        self.drop_calls()

    # -- driver thread -------------------------------------------------------------------------

    def execute(
        self,
        pool: monty.Monty,
        slots: threading.Semaphore,
        limits: monty.ResourceLimits,
        code: str,
        tool_names: Sequence[str],
        check: Future[str | None] | None,
        spares: SpareSession | None = None,
    ) -> None:
        """The driver thread's whole job. Never raises: the outcome goes to ``result``.

        With ``spares``, the run takes a session kept with its prelude already fed when there
        is one, and once its result is out prepares one for the next run like it.
        """
        key: SpareKey | None = None
        try:
            key = spare_key(_prelude(tuple(tool_names), self.concurrent), limits)
            with slots:
                self._raise_if_stopped()
                self.started = self.loop.time()  # its time budget starts now
                spare = spares.take(pool, key) if spares is not None else None
                if spare is None:
                    checkout = pool.checkout(limits=limits)
                    session = checkout.__enter__()
                else:
                    checkout, session = spare
                try:
                    with self._lock:
                        self._pid = session.worker_pid
                    self._raise_if_stopped()  # stopped before the worker was known
                    pins = self._pin(session.worker_pid)
                    try:
                        value = self._run(session, code, key[0], check, fed=spare is not None)
                    finally:  # before the result: the caller sees affinities put back
                        self._done_driving()
                        if pins is not None:
                            pins.release(self.cpus)
                    self._set(value)
                finally:
                    _give_back(checkout)
        except BaseException as exc:
            if not self.result.done():
                self.result.set_exception(exc)
        finally:
            self.finished.set_result(None)
        if spares is not None and key is not None and self.stopped is None:
            spares.prepare(pool, key, limits)

    def _done_driving(self) -> None:
        """The program is over: send no more calls, and let go of the inbox."""
        with self._lock:
            self._driving = False
            inbox = self.inbox
        if inbox is not None:
            inbox.stop_writing()

    def _pin(self, worker_pid: int | None) -> Pins | None:
        """Pin this thread and the worker to ``cpu`` (when the run asks for it)."""
        if self.cpu is None:
            return None
        pins = Pins(self.cpu)
        pins.pin(0)
        if worker_pid is not None:
            pins.pin_process(worker_pid)
        return pins

    def _set(self, value: Any) -> None:
        if not self.result.done():
            self.result.set_result(value)

    def _raise_if_stopped(self) -> None:
        with self._lock:
            stopped = self.stopped
        if stopped is not None:
            raise Stopped(stopped)

    def _run(
        self,
        session: monty.MontySession,
        code: str,
        text: str,
        check: Future[str | None] | None,
        *,
        fed: bool = False,
    ) -> Any:
        """Feed the prelude ``text`` (unless the session was ``fed`` it already) and run the
        program to its result."""
        printer = self.logs.write
        if not fed:
            session.feed_run(text, skip_type_check=True, print_callback=printer)
        problems = check.result() if check is not None else None  # checked meanwhile
        if problems is not None:
            return TypeProblems(problems)
        snap = session.feed_start(code, skip_type_check=True, print_callback=printer)
        sub_calls = 0
        max_sub_calls = self.budgets.max_sub_calls
        concurrent = self.concurrent
        submit = self.loop.call_soon_threadsafe
        arrived: dict[int, Any] = {}
        while not isinstance(snap, monty.MontyComplete):
            if isinstance(snap, monty.FunctionSnapshot):
                # Each property of a snapshot converts from the sandbox's values anew: the
                # arguments are read once.
                if snap.is_os_function:
                    snap = snap.resume_not_handled()
                elif snap.function_name == HOST_FUNCTION and len(asked := snap.args) == 2:
                    snap = snap.resume(self._host(asked[0], asked[1]))
                elif snap.function_name != HOST_CALL or len(call := snap.args) != 2:
                    message = f"name '{snap.function_name}' is not defined"
                    snap = snap.resume({"exc_type": "NameError", "message": message})
                else:
                    sub_calls += 1
                    if sub_calls > max_sub_calls:
                        raise Stopped(
                            ProgramFailure(
                                "abort",
                                f"the program made more than {max_sub_calls} tool calls "
                                "(max_sub_calls)",
                            )
                        )
                    name, args = call
                    call_id = snap.call_id
                    inbox = self.inbox
                    if inbox is not None:
                        inbox.put(call_id, str(name), args)
                    else:  # the first call, or no inbox here
                        submit(self._submit, call_id, str(name), args)
                    if concurrent:
                        snap = snap.resume({"future": ...})
                    else:  # one call at a time: answer it here, no future round trip
                        snap = snap.resume(self._only_outcome())
            elif isinstance(snap, monty.NameLookupSnapshot):
                snap = snap.resume()
            elif isinstance(snap, monty.FutureSnapshot):
                snap = snap.resume(self._committed_results(snap.pending_call_ids, arrived))
            else:
                raise Stopped(ProgramFailure("substrate_exit", f"unexpected state {snap!r}"))
        return snap.output

    def _host(self, function: Any, args: Any) -> Any:
        """The answer to a host function: asked of ``call_host`` on the loop (where the session
        is written), waited for here; the loop has nothing else to do for this run meanwhile."""
        call_host = self.call_host
        name = str(function)
        if call_host is None:
            return {"exc_type": "RuntimeError", "message": f"{name} is not available in this run"}
        answered: Future[Outcome] = Future()

        def answer() -> None:
            try:
                answered.set_result(call_host(name, args))
            except BaseException as exc:  # never leave the driver waiting
                answered.set_exception(exc)

        self.loop.call_soon_threadsafe(answer)
        return self._answer(answered.result())

    def _committed_results(self, pending: list[int], arrived: dict[int, Any]) -> dict[int, Any]:
        """Block until one of ``pending`` committed; answer every committed one, in order."""
        wanted = set(pending)
        while not wanted & arrived.keys():
            self._take(arrived, block=True)
        while self._take(arrived, block=False):
            pass
        return {i: arrived.pop(i) for i in sorted(wanted & arrived.keys())}

    def _only_outcome(self) -> Any:
        """Block until the one call in flight committed (a program without concurrent awaits
        has no other); its answer."""
        item = self._outcomes.get()
        if item is _STOP:
            raise Stopped(self.stopped or ProgramFailure("abort", "the run was stopped"))
        return self._answer(item[1])

    def _take(self, arrived: dict[int, Any], *, block: bool) -> bool:
        try:
            item = self._outcomes.get(block=block)
        except queue.Empty:
            return False
        if item is _STOP:
            raise Stopped(self.stopped or ProgramFailure("abort", "the run was stopped"))
        call_id, outcome = item
        arrived[call_id] = self._answer(outcome)
        return True

    def _answer(self, outcome: Outcome) -> Any:
        if outcome.error is not None:
            message = outcome.error["message"]
            self.failures.setdefault(message, outcome.error["tool"])
            return {"exc_type": "RuntimeError", "message": message}
        return {"return_value": snapshot(outcome.value)}
