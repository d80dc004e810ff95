"""The scheduling rule as a pure state machine (sans-I/O).

Inputs are calls in submission order, each with its safety class and, optionally, the
resources it declares, and "call N settled" events. Outputs are decisions: "commit these calls"
and "start these calls", as lists of sequence numbers. Nothing here knows about asyncio, tasks,
tools or time, so every ordering decision can be tested exhaustively without an event loop, and
the same rule can be replayed deterministically from recorded inputs (a durable workflow engine
keys each call by its sequence number). [`Scheduler`][toolnexus.scheduling.Scheduler] drives it.

The rule (see ``docs/scheduling.md`` for the diagram), in terms of what each call touches:

* a call reads and writes resources. One that declares none keeps its safety class: a
  ``parallel`` call reads everything, an ``exclusive`` call writes everything;
* two calls **conflict** when they touch a common resource and at least one of them writes it
  ("everything" overlaps every resource; a key overlaps the keys below it);
* a call **starts** when it conflicts with no earlier call that has not yet committed, and fewer
  than ``max_parallel`` calls are running. It holds its resources **through its own commit**;
* a settled call **commits** only after every earlier call has committed.

With no declarations this is exactly the safe/unsafe rule: reads overlap up to the cap and start
in order, and an exclusive call waits for every earlier call to commit, runs alone and holds a
barrier through its commit. With declarations, conflicting calls run one at a time in emitted
order, per resource, and calls on disjoint resources overlap.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import NamedTuple

from toolnexus.tools import Mode, Resources

__all__ = ["EVERYTHING", "MAX_KEY_WORK", "Mode", "SchedulingRule", "Wait"]

EVERYTHING = "*"
"""The resource named in a `Wait` when the call waited for one that touches everything."""


class Wait(NamedTuple):
    """Why a call did not start when it was submitted: the earlier call it conflicted with."""

    call: int
    """The sequence number of the earlier, uncommitted call it had to wait for."""
    resource: str
    """The resource they share (`EVERYTHING` when either touches everything)."""


MAX_KEY_WORK = 20_000
"""The most path components (a key of depth 3 counts 3) one declaration may hold. A call that
declares more is treated as touching everything it could (it writes everything when it writes
any key, else it reads everything): always safe, only less parallel. This bounds the work of
one decision, however many keys a model put in an MCP ``writes_arg`` list."""


class _Footprint:
    """What one call touches: everything (read or written) or a set of keys."""

    __slots__ = ("empty", "keyed", "reads", "reads_all", "writes", "writes_all")

    def __init__(
        self,
        *,
        reads_all: bool = False,
        writes_all: bool = False,
        reads: frozenset[str] = frozenset(),
        writes: frozenset[str] = frozenset(),
    ) -> None:
        self.reads_all = reads_all
        self.writes_all = writes_all
        self.reads = reads
        self.writes = writes
        self.keyed = bool(reads or writes)
        self.empty = not (reads_all or writes_all or self.keyed)


_READS_ALL = _Footprint(reads_all=True)
_WRITES_ALL = _Footprint(writes_all=True)


def _footprint(mode: Mode, resources: Resources | None) -> _Footprint:
    if resources is None:
        return _READS_ALL if mode == "parallel" else _WRITES_ALL
    work = 0
    for keys in (resources.writes, resources.reads):
        for key in keys:
            work += key.count("/") + 1
        if work > MAX_KEY_WORK:
            return _WRITES_ALL if resources.writes else _READS_ALL
    return _Footprint(reads=resources.reads, writes=resources.writes)


def _ancestors(key: str) -> list[str]:
    """The normalised keys strictly above normalised ``key`` (``"a/b/c"``: ``"a"``, ``"a/b"``;
    an absolute key also has ``""``, the normal form of ``"/"``)."""
    found: list[str] = []
    at = key.find("/")
    while at != -1:
        above = key[:at].rstrip("/")
        if not found or found[-1] != above:
            found.append(above)
        at = key.find("/", at + 1)
    return found


class _KeyIndex:
    """The keys of the uncommitted keyed calls, by key and by every key above them.

    Each entry is a queue of sequence numbers in submission order; calls commit in order, so a
    queue only loses its front, and its front is its earliest uncommitted call. Finding the
    earliest call that conflicts with a key takes one look-up per path component of the key
    (near-linear in the keys declared, whatever the other calls declared), where comparing every
    key with every key took the product of the two counts.
    """

    __slots__ = ("_at_read", "_at_write", "_below_read", "_below_write")

    def __init__(self) -> None:
        self._at_read: dict[str, deque[int]] = {}  # calls that read this key
        self._at_write: dict[str, deque[int]] = {}  # calls that write this key
        self._below_read: dict[str, deque[int]] = {}  # calls that read a key below this one
        self._below_write: dict[str, deque[int]] = {}  # calls that write a key below this one

    def _filed(self, footprint: _Footprint) -> Iterator[tuple[dict[str, deque[int]], str]]:
        """Every ``(table, key)`` where ``footprint`` is filed."""
        for keys, at, below in (
            (footprint.reads, self._at_read, self._below_read),
            (footprint.writes, self._at_write, self._below_write),
        ):
            for key in keys:
                normal = key.rstrip("/")
                yield at, normal
                for above in _ancestors(normal):
                    yield below, above

    def add(self, seq: int, footprint: _Footprint) -> None:
        for table, key in self._filed(footprint):
            queue = table.get(key)
            if queue is None:
                table[key] = deque((seq,))
            elif queue[-1] != seq:
                queue.append(seq)

    def remove(self, seq: int, footprint: _Footprint) -> None:
        for table, key in self._filed(footprint):
            queue = table.get(key)
            if queue is not None and queue[0] == seq:
                queue.popleft()
                if not queue:
                    del table[key]

    def clear(self) -> None:
        for table in (self._at_read, self._at_write, self._below_read, self._below_write):
            table.clear()

    def conflict(self, seq: int, footprint: _Footprint) -> Wait | None:
        """The earliest uncommitted call before ``seq`` whose keys conflict with ``footprint``."""
        best: Wait | None = None
        at_read, at_write = self._at_read, self._at_write
        below_read, below_write = self._below_read, self._below_write
        for keys, tables in (
            (footprint.writes, (at_read, at_write)),  # a write conflicts with reads and writes
            (footprint.reads, (at_write,)),  # a read conflicts with writes
        ):
            for key in keys:
                normal = key.rstrip("/")
                names = (normal, *_ancestors(normal))  # the same key, or a key above it
                limit = seq if best is None else best.call
                for table in tables:
                    for name in names:
                        queue = table.get(name)
                        if queue is not None and queue[0] < limit:
                            limit = queue[0]
                            best = Wait(limit, key)
                    # a key below it
                    queue = (below_read if table is at_read else below_write).get(normal)
                    if queue is not None and queue[0] < limit:
                        limit = queue[0]
                        best = Wait(limit, key)
        return best


class SchedulingRule:
    """The state of one scheduler lane. Sequence numbers start at 1, in submission order.

    Args:
        max_parallel: The most calls that may execute at once (a positive int).

    Example::

        rule = SchedulingRule(max_parallel=2)
        rule.submit("parallel")   # -> (1, [1])       call 1 starts
        rule.submit("exclusive")  # -> (2, [])        call 2 waits for call 1 to commit
        rule.settle(1)            # -> ([1], [2])     commit 1, then start 2

        rule = SchedulingRule(max_parallel=4)
        rule.submit("exclusive", Resources(writes=["a.txt"]))  # -> (1, [1])
        rule.submit("exclusive", Resources(writes=["b.txt"]))  # -> (2, [2])   disjoint: overlap
        rule.submit("parallel", Resources(reads=["a.txt"]))    # -> (3, [])    waits for call 1

    Cost: while no uncommitted call declares resources the lane runs the safe/unsafe rule
    itself (starts are FIFO; a submission is decided in constant time, and a settle scans the
    queue only when calls wait in it; each is a few set and deque operations). The first
    declaration switches the lane to the general rule until it is idle again: a decision then
    looks at the pending calls in order until the cap is reached or a call that writes
    everything blocks the rest, and finds a keyed call's conflicts with one look-up per path
    component of its keys (at most `MAX_KEY_WORK` per call).
    """

    __slots__ = (
        "_all_readers",
        "_all_writers",
        "_barrier",
        "_closed",
        "_cursor",
        "_exclusives",
        "_footprints",
        "_general",
        "_index",
        "_keyed",
        "_modes",
        "_next",
        "_pending",
        "_pending_empty",
        "_pending_special",
        "_running",
        "_settled",
        "_touchers",
        "_waits",
        "_writers",
        "max_parallel",
    )

    def __init__(self, max_parallel: int) -> None:
        if isinstance(max_parallel, bool) or not isinstance(max_parallel, int) or max_parallel < 1:
            raise ValueError(f"max_parallel must be a positive int, got {max_parallel!r}")
        self.max_parallel = max_parallel
        self._next = 1  # sequence number of the next submission
        self._cursor = 1  # the next call to commit (head-of-line)
        self._pending: deque[int] = deque()  # submitted, not started, in order
        self._running: set[int] = set()  # started, not settled
        self._settled: set[int] = set()  # settled, waiting for their turn to commit
        # Why a call did not start at once; a bare number is a call that touches everything.
        self._waits: dict[int, Wait | int] = {}
        self._closed = False
        # The safe/unsafe rule, while no uncommitted call declares resources.
        self._general = False
        self._modes: dict[int, Mode] = {}  # mode of every uncommitted call
        self._exclusives: deque[int] = deque()  # uncommitted exclusive calls, in order
        self._barrier: int | None = None  # the started exclusive call, until it commits
        # The general rule. Uncommitted calls by what they touch, each in submission order.
        # Calls commit in order, so each queue only ever loses its front: its earliest call.
        self._footprints: dict[int, _Footprint] = {}  # of every pending call
        self._pending_empty = 0  # pending calls that touch nothing
        self._pending_special = 0  # pending calls that declared resources (keys or none)
        self._all_readers: deque[int] = deque()  # read everything
        self._all_writers: deque[int] = deque()  # write everything
        self._writers: deque[int] = deque()  # write anything (everything included)
        self._touchers: deque[int] = deque()  # touch anything
        self._keyed: deque[tuple[int, _Footprint]] = deque()  # declare keys
        self._index = _KeyIndex()  # the keys of the calls in ``_keyed``

    # -- inputs -------------------------------------------------------------------------------

    def submit(self, mode: Mode, resources: Resources | None = None) -> tuple[int, list[int]]:
        """Queue a call; returns its sequence number and the calls that start now, in order.

        ``resources``, when given, is what the call touches and ``mode`` is not consulted;
        without it a ``"parallel"`` call reads everything and an ``"exclusive"`` one writes
        everything.
        """
        if self._closed:
            raise RuntimeError("the lane is closed; no call can be submitted")
        if mode != "parallel" and mode != "exclusive":
            raise ValueError(f"mode must be 'parallel' or 'exclusive', got {mode!r}")
        seq = self._next
        if resources is None and not self._general:
            # The safe/unsafe rule, decided here without a scan: after every decision the head
            # of a non-empty queue is blocked, and a submission changes nothing that could free
            # it, so a new call starts only when the queue is empty and it may start itself.
            self._next = seq + 1
            self._modes[seq] = mode
            if mode == "parallel":
                if (
                    not self._pending
                    and self._barrier is None
                    and len(self._running) < self.max_parallel
                ):
                    self._running.add(seq)
                    return seq, [seq]
                self._pending.append(seq)
                if self._exclusives:  # held back by the earliest exclusive call, else the cap
                    self._waits[seq] = self._exclusives[0]
                return seq, []
            self._exclusives.append(seq)
            if self._cursor == seq:  # every earlier call has committed: nothing runs or waits
                self._barrier = seq
                self._running.add(seq)
                return seq, [seq]
            self._pending.append(seq)
            self._waits[seq] = self._cursor  # it waits for every earlier call, this one first
            return seq, []
        if resources is not None and not isinstance(resources, Resources):
            raise ValueError(f"resources must be Resources or None, got {resources!r}")
        if not self._general:
            self._generalise()
        self._next = seq + 1
        footprint = _footprint(mode, resources)
        self._track(seq, footprint)
        self._pending.append(seq)
        self._footprints[seq] = footprint
        if resources is not None:
            self._pending_special += 1
            if footprint.empty:
                self._pending_empty += 1
        started = self._start_ready()
        if (not started or started[-1] != seq) and seq not in self._waits:
            wait = self._conflict(seq, footprint)  # the scan may have stopped before it
            if wait is not None:
                self._waits[seq] = wait
        return seq, started

    def settle(self, seq: int) -> tuple[list[int], list[int]]:
        """Record that running call ``seq`` finished.

        Returns:
            The calls that commit now, then the calls that start now, each in order. Carry out
            the commits first: a call freed by a commit must not start before that commit.
        """
        try:
            self._running.remove(seq)
        except KeyError:
            raise ValueError(f"call {seq} is not running, so it cannot settle") from None
        if seq != self._cursor:  # an earlier call is still outstanding: wait for it
            self._settled.add(seq)
            return [], self._start_ready() if self._general else self._start_fifo()
        committed = [seq]
        settled = self._settled
        cursor = seq + 1
        if settled:
            while cursor in settled:
                settled.remove(cursor)
                committed.append(cursor)
                cursor += 1
        self._cursor = cursor
        waits = self._waits
        if not self._general:
            modes = self._modes
            for done in committed:
                del modes[done]
            if waits:
                for done in committed:
                    waits.pop(done, None)
            exclusives = self._exclusives
            if exclusives and exclusives[0] < cursor:
                while exclusives and exclusives[0] < cursor:
                    exclusives.popleft()
                if self._barrier is not None and self._barrier < cursor:
                    self._barrier = None
            return committed, self._start_fifo() if self._pending else []
        for done in committed:
            waits.pop(done, None)
        self._release(cursor)
        if cursor == self._next:  # idle: back to the safe/unsafe rule's own bookkeeping
            self._general = False
            self._footprints.clear()
        return committed, self._start_ready()

    def close(self) -> list[tuple[int, bool]]:
        """Close the lane: every uncommitted call, in submission order, with whether it settled.

        The driver delivers a settled call's own outcome and abandons the others. After
        ``close()`` the rule takes no more input.
        """
        self._closed = True
        remaining = [(seq, seq in self._settled) for seq in range(self._cursor, self._next)]
        for queue in (self._all_readers, self._all_writers, self._writers, self._touchers):
            queue.clear()
        self._keyed.clear()
        self._index.clear()
        self._pending.clear()
        self._footprints.clear()
        self._modes.clear()
        self._exclusives.clear()
        self._barrier = None
        self._pending_empty = 0
        self._pending_special = 0
        self._running.clear()
        self._settled.clear()
        self._waits.clear()
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
        """The started call that writes everything and has not committed yet, if any."""
        if not self._general:
            return self._barrier
        writers = self._all_writers
        if writers and writers[0] not in self._footprints:
            return writers[0]
        return None

    @property
    def writes_everything(self) -> int | None:
        """The earliest uncommitted call (started or not) that writes everything, if any.

        A driver that resolves keys from the world (file paths) uses it: such a call may change
        what a path names (``ln -s``), so keys resolved before it commits may be stale.
        """
        if not self._general:
            return self._exclusives[0] if self._exclusives else None
        return self._all_writers[0] if self._all_writers else None

    @property
    def next_commit(self) -> int:
        """The sequence number of the next call to commit."""
        return self._cursor

    @property
    def idle(self) -> bool:
        """Whether every submitted call has committed."""
        return self._cursor == self._next

    def waited_for(self, seq: int) -> Wait | None:
        """The first conflict that held call ``seq`` back, until it commits (``None``: it never
        waited for another call, only perhaps for the cap)."""
        wait = self._waits.get(seq)
        return Wait(wait, EVERYTHING) if isinstance(wait, int) else wait

    # -- the safe/unsafe rule -----------------------------------------------------------------

    def _start_fifo(self) -> list[int]:
        """No uncommitted call declares resources: only the head of the queue may start; a
        parallel one when the cap allows and no exclusive call holds the barrier, an exclusive
        one when nothing runs and every earlier call has committed."""
        # A call held back here was already held back when it was submitted (by the same
        # exclusive call, or by an earlier call it must follow): ``submit`` recorded the wait.
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

    def _generalise(self) -> None:
        """The first declaration: file every uncommitted call by what it touches."""
        pending = set(self._pending)
        for seq, mode in self._modes.items():
            footprint = _READS_ALL if mode == "parallel" else _WRITES_ALL
            self._track(seq, footprint)
            if seq in pending:
                self._footprints[seq] = footprint
        self._modes.clear()
        self._exclusives.clear()
        self._barrier = None
        self._general = True

    # -- the general rule ---------------------------------------------------------------------

    def _track(self, seq: int, footprint: _Footprint) -> None:
        if footprint.reads_all:
            self._all_readers.append(seq)
        elif footprint.writes_all:
            self._all_writers.append(seq)
            self._writers.append(seq)
        elif footprint.empty:
            return
        else:
            if footprint.writes:
                self._writers.append(seq)
            self._keyed.append((seq, footprint))
            self._index.add(seq, footprint)
        self._touchers.append(seq)

    def _release(self, cursor: int) -> None:
        """Forget the resources of every call before ``cursor`` (all committed)."""
        for queue in (self._touchers, self._all_readers, self._all_writers, self._writers):
            while queue and queue[0] < cursor:
                queue.popleft()
        keyed = self._keyed
        while keyed and keyed[0][0] < cursor:
            seq, footprint = keyed.popleft()
            self._index.remove(seq, footprint)

    def _conflict(self, seq: int, footprint: _Footprint) -> Wait | None:
        """The earliest-found uncommitted call before ``seq`` that ``footprint`` conflicts with."""
        if footprint.reads_all:  # conflicts with anything that writes anything
            writers = self._writers
            return Wait(writers[0], EVERYTHING) if writers and writers[0] < seq else None
        if footprint.writes_all:  # conflicts with anything that touches anything
            first = self._touchers[0]
            return Wait(first, EVERYTHING) if first < seq else None
        if footprint.empty:
            return None
        if footprint.writes and self._all_readers and self._all_readers[0] < seq:
            return Wait(self._all_readers[0], EVERYTHING)
        if self._all_writers and self._all_writers[0] < seq:
            return Wait(self._all_writers[0], EVERYTHING)
        return self._index.conflict(seq, footprint)

    def _start_ready(self) -> list[int]:
        if not self._general:
            return self._start_fifo()
        if self._pending_special:
            return self._start_any()
        return self._start_in_order()

    def _start_in_order(self) -> list[int]:
        """Every pending call declares nothing: a call that waits holds back every later one
        (each conflicts with what the first waits for, or the cap is full), so only the head
        of the queue can start. The safe/unsafe rule's own fast path."""
        started: list[int] = []
        pending, running, footprints = self._pending, self._running, self._footprints
        writers, touchers = self._writers, self._touchers
        while pending and len(running) < self.max_parallel:
            head = pending[0]
            if footprints[head].reads_all:  # waits for any earlier writer
                blocker = writers[0] if writers and writers[0] < head else None
            else:  # writes everything: waits for any earlier call
                blocker = touchers[0] if touchers[0] < head else None
            if blocker is not None:
                self._waits.setdefault(head, blocker)
                break
            pending.popleft()
            del footprints[head]
            running.add(head)
            started.append(head)
        return started

    def _start_any(self) -> list[int]:
        """Some pending call declared resources: any pending call may start, in order of
        submission, when it conflicts with no earlier uncommitted call."""
        started: list[int] = []
        waiting: list[int] = []
        pending, running, footprints, waits = self._pending, self._running, self._footprints, {}
        while pending:
            seq = pending.popleft()
            footprint = footprints[seq]
            if len(running) >= self.max_parallel:
                waiting.append(seq)
                break
            if not footprint.empty:
                writers = self._all_writers
                if writers and writers[0] < seq and self._pending_empty == 0:
                    waits[seq] = Wait(writers[0], EVERYTHING)  # it, and every later call, waits
                    waiting.append(seq)
                    break
                wait = self._conflict(seq, footprint)
                if wait is not None:
                    waits[seq] = wait
                    waiting.append(seq)
                    continue
            del footprints[seq]
            if footprint.keyed or footprint.empty:
                self._pending_special -= 1
            if footprint.empty:
                self._pending_empty -= 1
            running.add(seq)
            started.append(seq)
        pending.extendleft(reversed(waiting))
        for seq, wait in waits.items():
            self._waits.setdefault(seq, wait)
        return started
