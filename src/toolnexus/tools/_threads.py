"""The threads synchronous tools run in: a bounded pool that a stuck call cannot shrink.

A thread cannot be interrupted. When a sync tool's call times out, the call is answered at its
deadline, but its thread keeps running the tool until the tool returns, perhaps never. In a
plain fixed-size pool each such thread is lost for good, so 64 hung calls would starve every
later sync tool (all file built-ins are sync). Here a timed-out call is *written off*: it no
longer counts against the pool's size, so a new thread takes its place; the stuck thread
leaves the pool when its tool finally returns.
"""

from __future__ import annotations

import collections
import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

__all__ = ["TOOL_THREADS", "ToolThreads"]

IDLE_SECONDS = 60.0
"""An idle thread ends after this long; the next call starts a new one."""


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
    any sensible ``max_parallel`` while still bounding a runaway.
    """

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
        self._queue: collections.deque[_Job] = collections.deque()
        self._threads = 0  # alive, written-off ones included
        self._idle = 0  # threads waiting for a job
        self._wakeups = 0  # notifications sent that no waiting thread has taken up yet
        self._written_off = 0  # running calls that no longer count against size

    def submit(self, fn: Callable[[], Any]) -> _Job:
        """Run ``fn()`` on a pool thread; its result or exception lands in ``job.future``."""
        job = _Job(fn)
        with self._lock:
            self._queue.append(job)
            if self._idle > self._wakeups:  # an idle thread that no job has woken yet
                self._wakeups += 1
                self._ready.notify()
            elif self._threads - self._written_off < self.size:
                self._start_thread()
        return job

    def write_off(self, job: _Job) -> None:
        """Stop counting ``job`` against the pool (it timed out; its thread may never return)."""
        with self._lock:
            if job.written_off or job.future.done():
                return
            job.written_off = True
            self._written_off += 1
            free = self._threads - self._written_off < self.size
            if self._queue and not self._idle and free:  # its place is free: serve the queue
                self._start_thread()

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
            with self._lock:
                while not self._queue:
                    self._idle += 1
                    self._ready.wait(IDLE_SECONDS)
                    self._idle -= 1
                    if self._wakeups:  # woken for a job (or as good as): look at the queue
                        self._wakeups -= 1
                    elif not self._queue:  # idle for IDLE_SECONDS: end
                        self._threads -= 1
                        return
                job = self._queue.popleft()
            if job.future.set_running_or_notify_cancel():
                try:
                    result = job.fn()
                except BaseException as exc:
                    job.future.set_exception(exc)
                else:
                    job.future.set_result(result)
            with self._lock:
                if job.written_off:  # back from a stuck call: the pool may be full without us
                    self._written_off -= 1
                    if self._threads - self._written_off > self.size:
                        self._threads -= 1
                        return


TOOL_THREADS = ToolThreads()
"""The process-wide pool every sync tool runs in."""


def run_in_context(fn: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    """``fn(*args)`` bound to a copy of the caller's contextvars, to run on a pool thread."""
    context = contextvars.copy_context()
    return lambda: context.run(fn, *args)
