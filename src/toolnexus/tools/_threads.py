"""The threads synchronous tools run in: a bounded pool that a stuck call cannot shrink.

A thread cannot be interrupted. When a sync tool's call times out, the call is answered at its
deadline, but its thread keeps running the tool until the tool returns, perhaps never. In a
plain fixed-size pool each such thread is lost for good, so 64 hung calls would starve every
later sync tool (all file built-ins are sync). Here a timed-out call is *written off*: it no
longer counts against the pool's size, so a new thread takes its place; the stuck thread
leaves the pool when its tool finally returns.
"""

from __future__ import annotations

import contextvars
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

__all__ = ["TOOL_THREADS", "ToolRaised", "ToolThreads", "carriable"]


class _Job:
    __slots__ = ("fn", "future", "written_off")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.future: Future[Any] = Future()
        self.written_off = False


class ToolThreads:
    """At most ``size`` sync tool calls at once, not counting calls written off.

    Why 64 by default, and not the event loop's executor: on a 2-core machine that has 6
    threads, which would silently cap ten overlapping blocking reads at six; sixty-four cover
    any sensible ``max_parallel`` while still bounding a runaway. Built like the standard
    ``ThreadPoolExecutor`` (a C queue of jobs, a semaphore counting idle threads), which keeps
    a call's thread hop as cheap as there.
    """

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)  # one token per thread waiting for a job
        self._lock = threading.Lock()
        self._threads = 0  # alive, written-off ones included
        self._written_off = 0  # running calls that no longer count against size

    def submit(self, fn: Callable[[], Any]) -> _Job:
        """Run ``fn()`` on a pool thread; its result or exception lands in ``job.future``."""
        job = _Job(fn)
        self._jobs.put(job)
        if not self._idle.acquire(blocking=False):  # no idle thread will take it: start one
            with self._lock:
                if self._threads - self._written_off < self.size:
                    self._start_thread()
        return job

    def write_off(self, job: _Job) -> None:
        """Stop counting ``job`` against the pool (it timed out; its thread may never return)."""
        with self._lock:
            if job.written_off or job.future.done():
                return
            job.written_off = True
            self._written_off += 1
            if self._jobs.qsize() and self._threads - self._written_off < self.size:
                self._start_thread()  # its place is free again: serve the queue

    @property
    def stuck(self) -> int:
        """Calls written off whose thread is still running them."""
        with self._lock:
            return self._written_off

    def _start_thread(self) -> None:
        self._threads += 1
        threading.Thread(target=self._work, name="toolnexus-tool", daemon=True).start()

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job.future.set_running_or_notify_cancel():
                try:
                    result = job.fn()
                except BaseException as exc:
                    job.future.set_exception(carriable(exc))
                else:
                    job.future.set_result(result)
            with self._lock:
                if job.written_off:  # back from a stuck call: the pool may be full without us
                    self._written_off -= 1
                    if self._threads - self._written_off > self.size:
                        self._threads -= 1
                        return
            self._idle.release()


TOOL_THREADS = ToolThreads()
"""The process-wide pool every sync tool runs in."""


class ToolRaised(Exception):
    """What a sync tool raised, when an asyncio future cannot carry it as it is.

    Why: ``StopIteration`` cannot be set on an asyncio future (the copy from the thread's
    future fails in a loop callback, and the call is never answered), and a ``SystemExit``,
    ``KeyboardInterrupt``, ``CancelledError`` or other ``BaseException`` raised by a tool
    on its own thread is the tool's failure, not the host's exit or a cancellation: carried
    as it is, it would end the awaiting task instead of failing the call.
    """


def carriable(exc: BaseException) -> BaseException:
    """``exc``, or a `ToolRaised` standing in for it when it is not an ordinary exception."""
    if isinstance(exc, Exception) and not isinstance(exc, (StopIteration, StopAsyncIteration)):
        return exc
    text = str(exc)
    raised = f"the tool raised {type(exc).__name__}"
    carried = ToolRaised(f"{raised}: {text}" if text else raised)
    carried.__cause__ = exc
    return carried


def run_in_context(fn: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    """``fn(*args)`` bound to a copy of the caller's contextvars, to run on a pool thread."""
    context = contextvars.copy_context()
    return lambda: context.run(fn, *args)
