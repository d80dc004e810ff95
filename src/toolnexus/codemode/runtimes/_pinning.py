"""Opt-in CPU pinning: a run's threads and worker process on the caller's CPU, then put back.

Why: most of a Code Mode sub-call is hand-offs between the event loop's thread, a driver
thread and a worker process. On a small, loaded machine each hand-off across CPUs is a
cross-CPU wake-up (tens of microseconds); on one CPU it is a context switch (a few). Pinning
all three to the CPU the loop runs on when the run starts makes a Monty sub-call about twice as
fast here (``docs/performance.md`` has the figures), at the price of the run's threads sharing
one CPU, so it is opt-in. Linux only (elsewhere it does nothing); every affinity it changes is
put back when the run ends.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import threading
from collections.abc import Callable

__all__ = ["CallerPins", "Pins", "current_cpu", "own_cpus", "unpin_thread"]


def own_cpus() -> set[int] | None:
    """The CPUs this process may run on now (``None`` where that is unknown)."""
    if sys.platform != "linux":
        return None
    return os.sched_getaffinity(0)


def unpin_thread(cpus: set[int] | None) -> None:
    """Give the calling thread ``cpus`` (a thread started by a pinned one inherits its pin)."""
    if sys.platform == "linux" and cpus:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, cpus)


def _libc_getcpu() -> Callable[[], int] | None:
    """libc's ``sched_getcpu``, where there is one (glibc, musl)."""
    if sys.platform != "linux":
        return None
    try:
        getcpu: Callable[[], int] = ctypes.CDLL(None).sched_getcpu
    except (OSError, AttributeError):
        return None
    getcpu.restype = ctypes.c_int  # type: ignore[attr-defined]
    getcpu.argtypes = ()  # type: ignore[attr-defined]
    return getcpu


_getcpu = _libc_getcpu()


def current_cpu() -> int | None:
    """The CPU the calling thread runs on now, or ``None`` where that is unknown (not Linux).

    Why libc's ``sched_getcpu`` first: it is one call (0.15 us here, a vDSO read where the
    kernel offers one), where reading ``/proc/thread-self/stat`` takes about 14 us, at every
    pinned run's start; ``/proc`` answers where there is no such function.
    """
    if sys.platform != "linux":
        return None
    if _getcpu is not None:
        cpu = _getcpu()
        if cpu >= 0:
            return cpu
    try:
        with open("/proc/thread-self/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        return int(fields[36])  # field 39 of proc(5); field 3 (the state) is the first here
    except (OSError, ValueError, IndexError):
        return None


class Pins:
    """Threads (by native id) pinned to ``cpu``, each with the affinity it had before."""

    def __init__(self, cpu: int) -> None:
        self.cpu = cpu
        self._before: list[tuple[int, set[int]]] = []

    def pin(self, tid: int) -> None:
        """Pin one thread (``0``: the calling one); one that is gone or not ours is left."""
        if sys.platform != "linux":
            return
        try:
            before = os.sched_getaffinity(tid)
            os.sched_setaffinity(tid, {self.cpu})
        except OSError:  # gone, or not allowed
            return
        self._before.append((tid if tid else threading.get_native_id(), before))

    def pin_process(self, pid: int) -> None:
        """Pin every thread of process ``pid`` (a worker process)."""
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:  # gone
            return
        for tid in tids:
            self.pin(int(tid))

    def release(self, to: set[int] | None = None) -> None:
        """Put back every affinity this changed (threads since gone are skipped): the one each
        had before, or ``to`` for all of them."""
        if sys.platform != "linux":
            return
        for tid, before in reversed(self._before):
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, before if to is None else to)
        self._before.clear()


class CallerPins:
    """The caller's (event loop's) thread pinned while at least one pinned run is in progress.

    Concurrent runs on the same loop share one pin (the CPU of the first); the last to finish
    puts the thread's affinity back.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[int, tuple[Pins, int]] = {}  # native thread id -> (pins, runs)

    def acquire(self) -> int | None:
        """Pin the calling thread to its current CPU (or join its pin); the CPU, or ``None``."""
        tid = threading.get_native_id()
        with self._lock:
            held = self._held.get(tid)
            if held is not None:
                self._held[tid] = (held[0], held[1] + 1)
                return held[0].cpu
            cpu = current_cpu()
            if cpu is None:
                return None
            pins = Pins(cpu)
            pins.pin(0)
            self._held[tid] = (pins, 1)
            return cpu

    def release(self) -> None:
        """One pinned run on the calling thread ended; the last one unpins it."""
        tid = threading.get_native_id()
        with self._lock:
            held = self._held.get(tid)
            if held is None:
                return
            pins, runs = held
            if runs > 1:
                self._held[tid] = (pins, runs - 1)
                return
            del self._held[tid]
        pins.release()
