"""The scheduling rule as a pure state machine (sans-I/O).

Inputs are calls in submission order, each with its mode, and "call N settled" events. Outputs
are decisions: "commit these calls" and "start these calls", as lists of sequence numbers.
Nothing here knows about asyncio, tasks, tools or time, so every ordering decision can be tested
exhaustively without an event loop, and the same rule can be replayed deterministically from
recorded inputs (a durable workflow engine would key each call by its sequence number).
[`Scheduler`][toolnexus.scheduling.Scheduler] drives it.

The rule (see ``docs/scheduling.md`` for the diagram):

* only the head of the pending queue may start (starts are FIFO);
* a ``parallel`` call starts when fewer than ``max_parallel`` calls are executing and no
  exclusive call holds the barrier;
* an ``exclusive`` call starts only when nothing is executing and every earlier call has
  committed; it then holds the barrier **through its own commit**, not merely its execution,
  so no other call can commit inside its window;
* a settled call commits only after every earlier call has committed.
"""

from __future__ import annotations

from collections import deque

from toolnexus.tools._safety import Mode

__all__ = ["Mode", "SchedulingRule"]


class SchedulingRule:
    """The state of one scheduler lane. Sequence numbers start at 1, in submission order.

    Args:
        max_parallel: The most calls that may execute at once (a positive int).

    Example::

        rule = SchedulingRule(max_parallel=2)
        rule.submit("parallel")   # -> (1, [1])       call 1 starts
        rule.submit("exclusive")  # -> (2, [])        call 2 waits for call 1 to commit
        rule.settle(1)            # -> ([1], [2])     commit 1, then start 2
    """

    __slots__ = (
        "_barrier",
        "_closed",
        "_cursor",
        "_modes",
        "_next",
        "_pending",
        "_running",
        "_settled",
        "max_parallel",
    )

    def __init__(self, max_parallel: int) -> None:
        if isinstance(max_parallel, bool) or not isinstance(max_parallel, int) or max_parallel < 1:
            raise ValueError(f"max_parallel must be a positive int, got {max_parallel!r}")
        self.max_parallel = max_parallel
        self._next = 1  # sequence number of the next submission
        self._cursor = 1  # the next call to commit (head-of-line)
        self._pending: deque[int] = deque()  # submitted, not started, in order
        self._modes: dict[int, Mode] = {}  # mode of every uncommitted call
        self._running: set[int] = set()  # started, not settled
        self._settled: set[int] = set()  # settled, waiting for their turn to commit
        self._barrier: int | None = None  # the exclusive call holding the lane, until it commits
        self._closed = False

    # -- inputs -------------------------------------------------------------------------------

    def submit(self, mode: Mode) -> tuple[int, list[int]]:
        """Queue a call; returns its sequence number and the calls that start now, in order."""
        if self._closed:
            raise RuntimeError("the lane is closed; no call can be submitted")
        if mode != "parallel" and mode != "exclusive":
            raise ValueError(f"mode must be 'parallel' or 'exclusive', got {mode!r}")
        seq = self._next
        self._next += 1
        self._modes[seq] = mode
        self._pending.append(seq)
        return seq, self._start_ready()

    def settle(self, seq: int) -> tuple[list[int], list[int]]:
        """Record that running call ``seq`` finished.

        Returns:
            The calls that commit now, then the calls that start now, each in order. Carry out
            the commits first: a call freed by a commit must not start before that commit.
        """
        running = self._running
        if seq not in running:
            raise ValueError(f"call {seq} is not running, so it cannot settle")
        running.remove(seq)
        if seq != self._cursor:  # an earlier call is still outstanding: wait for it
            self._settled.add(seq)
            return [], self._start_ready()
        committed = [seq]
        settled = self._settled
        cursor = seq + 1
        while cursor in settled:
            settled.remove(cursor)
            committed.append(cursor)
            cursor += 1
        self._cursor = cursor
        for done in committed:
            del self._modes[done]
        if self._barrier is not None and self._barrier < cursor:
            self._barrier = None
        return committed, self._start_ready()

    def close(self) -> list[tuple[int, bool]]:
        """Close the lane: every uncommitted call, in submission order, with whether it settled.

        The driver delivers a settled call's own outcome and abandons the others. After
        ``close()`` the rule takes no more input.
        """
        self._closed = True
        remaining = [(seq, seq in self._settled) for seq in range(self._cursor, self._next)]
        self._pending.clear()
        self._running.clear()
        self._settled.clear()
        self._modes.clear()
        self._barrier = None
        self._cursor = self._next
        return remaining

    # -- observations (for drivers, tests and benchmarks) --------------------------------------

    @property
    def running(self) -> frozenset[int]:
        """Calls started and not yet settled."""
        return frozenset(self._running)

    @property
    def pending(self) -> tuple[int, ...]:
        """Calls submitted and not yet started, in order."""
        return tuple(self._pending)

    @property
    def barrier(self) -> int | None:
        """The exclusive call holding the lane, if any."""
        return self._barrier

    @property
    def next_commit(self) -> int:
        """The sequence number of the next call to commit."""
        return self._cursor

    @property
    def idle(self) -> bool:
        """Whether every submitted call has committed."""
        return self._cursor == self._next

    # -- the rule -----------------------------------------------------------------------------

    def _start_ready(self) -> list[int]:
        started: list[int] = []
        pending, running, modes = self._pending, self._running, self._modes
        while pending and self._barrier is None:
            head = pending[0]
            if modes[head] == "parallel":
                if len(running) >= self.max_parallel:
                    break
            elif running or self._cursor != head:
                break
            else:
                self._barrier = head
            pending.popleft()
            running.add(head)
            started.append(head)
        return started
