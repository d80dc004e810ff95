"""The pure scheduling rule: examples, an exhaustive model check, and misuse."""

from __future__ import annotations

import copy
import itertools

import pytest

from toolnexus.scheduling import Mode, SchedulingRule


def test_example_from_docstring() -> None:
    rule = SchedulingRule(max_parallel=2)
    assert rule.submit("parallel") == (1, [1])
    assert rule.submit("exclusive") == (2, [])
    assert rule.settle(1) == ([1], [2])
    assert rule.barrier == 2
    assert rule.submit("parallel") == (3, [])  # barrier held by 2 until it commits
    assert rule.settle(2) == ([2], [3])
    assert rule.barrier is None


def test_parallel_calls_fill_the_pool_up_to_the_cap() -> None:
    rule = SchedulingRule(max_parallel=3)
    started = [rule.submit("parallel")[1] for _ in range(5)]
    assert started == [[1], [2], [3], [], []]
    assert rule.running == frozenset({1, 2, 3})
    assert rule.pending == (4, 5)
    # call 3 finishes first: it cannot commit before 1 and 2, but its slot frees up
    assert rule.settle(3) == ([], [4])
    assert rule.settle(1) == ([1], [5])
    assert rule.settle(2) == ([2, 3], [])
    assert rule.settle(5) == ([], [])
    assert rule.settle(4) == ([4, 5], [])
    assert rule.idle


def test_exclusive_waits_for_every_earlier_commit_not_just_for_an_empty_pool() -> None:
    rule = SchedulingRule(max_parallel=4)
    rule.submit("parallel")
    rule.submit("parallel")
    assert rule.submit("exclusive") == (3, [])
    assert rule.settle(2) == ([], [])  # 2 settled but cannot commit before 1: 3 keeps waiting
    assert rule.settle(1) == ([1, 2], [3])


def test_head_of_line_blocking_keeps_starts_fifo() -> None:
    rule = SchedulingRule(max_parallel=4)
    rule.submit("parallel")
    rule.submit("exclusive")
    # a parallel call behind a waiting exclusive one does not overtake it
    assert rule.submit("parallel") == (3, [])
    assert rule.pending == (2, 3)


def test_close_reports_uncommitted_calls_in_order_with_their_state() -> None:
    rule = SchedulingRule(max_parallel=2)
    for _ in range(4):
        rule.submit("parallel")
    rule.settle(2)
    assert rule.close() == [(1, False), (2, True), (3, False), (4, False)]
    assert rule.idle
    with pytest.raises(RuntimeError, match="closed"):
        rule.submit("parallel")


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "2", None])
def test_max_parallel_must_be_a_positive_int(bad: object) -> None:
    with pytest.raises(ValueError, match="max_parallel must be a positive int"):
        SchedulingRule(bad)  # type: ignore[arg-type]


def test_misuse_is_refused() -> None:
    rule = SchedulingRule(max_parallel=1)
    with pytest.raises(ValueError, match="mode must be"):
        rule.submit("sometimes")  # type: ignore[arg-type]
    rule.submit("parallel")
    rule.submit("parallel")
    with pytest.raises(ValueError, match="call 2 is not running"):
        rule.settle(2)
    rule.settle(1)
    with pytest.raises(ValueError, match="call 1 is not running"):
        rule.settle(1)


class _Checker:
    """Replays every interleaving of submissions and completions and checks each step."""

    def __init__(self, modes: list[Mode], cap: int) -> None:
        self.modes = modes
        self.cap = cap
        self.finals = 0

    def run(self) -> None:
        self._explore(SchedulingRule(self.cap), 0, set(), [], [], set())

    def _explore(
        self,
        rule: SchedulingRule,
        submitted: int,
        running: set[int],
        started: list[int],
        committed: list[int],
        settled: set[int],
    ) -> None:
        moves = []
        if submitted < len(self.modes):
            moves.append(("submit", submitted + 1))
        moves += [("settle", seq) for seq in sorted(running)]
        if not moves:
            # liveness: once everything was submitted and finished, everything has committed
            assert committed == list(range(1, len(self.modes) + 1))
            assert rule.idle and not rule.pending and not rule.running
            self.finals += 1
            return
        for kind, seq in moves:
            r = copy.deepcopy(rule)
            run, sta, com, sett = set(running), list(started), list(committed), set(settled)
            if kind == "submit":
                got, new = r.submit(self.modes[seq - 1])
                assert got == seq
                done: list[int] = []
            else:
                done, new = r.settle(seq)
                run.discard(seq)
                sett.add(seq)
            self._check(r, done, new, run, sta, com, sett)
            self._explore(r, seq if kind == "submit" else submitted, run, sta, com, sett)

    def _check(
        self,
        rule: SchedulingRule,
        done: list[int],
        new: list[int],
        running: set[int],
        started: list[int],
        committed: list[int],
        settled: set[int],
    ) -> None:
        modes = self.modes
        for seq in done:  # commits: settled calls only, strictly in submission order
            assert seq in settled
            assert seq == (committed[-1] + 1 if committed else 1)
            committed.append(seq)
        for seq in new:
            # FIFO starts
            assert seq == (started[-1] + 1 if started else 1)
            # the barrier holds through commit: nothing starts while an exclusive is uncommitted
            holding = [s for s in started if modes[s - 1] == "exclusive" and s not in committed]
            assert not holding, f"call {seq} started inside the window of {holding}"
            if modes[seq - 1] == "exclusive":
                assert not running, "an exclusive call started with calls in flight"
                assert committed == list(range(1, seq)), "exclusive started before earlier commits"
            started.append(seq)
            running.add(seq)
        assert running == set(rule.running)
        assert len(running) <= self.cap
        exclusive_running = [s for s in running if modes[s - 1] == "exclusive"]
        if exclusive_running:
            assert running == set(exclusive_running), "an exclusive call had company"
        # work-conserving: if the head is still pending, the rule had a reason to hold it
        if rule.pending:
            head = rule.pending[0]
            if modes[head - 1] == "parallel":
                assert len(running) >= self.cap or rule.barrier is not None
            else:
                assert running or rule.next_commit != head or rule.barrier is not None


@pytest.mark.parametrize("cap", [1, 2, 3])
@pytest.mark.parametrize("length", [1, 2, 3, 4])
def test_every_interleaving_of_every_mode_sequence(cap: int, length: int) -> None:
    """Exhaustive: all mode sequences, all orders of submissions and completions."""
    for modes in itertools.product(["parallel", "exclusive"], repeat=length):
        checker = _Checker(list(modes), cap)
        checker.run()
        assert checker.finals > 0


def test_every_interleaving_of_a_longer_mixed_sequence() -> None:
    checker = _Checker(["parallel", "parallel", "exclusive", "parallel", "parallel"], 2)
    checker.run()
    assert checker.finals > 100
