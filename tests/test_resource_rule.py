"""The generalised rule: resource keys. Property tests of the pure state machine.

1. Without declarations the rule decides exactly as the safe/unsafe rule did: a differential
   test drives the previous rule (kept verbatim in ``previous_rule.py``) and the new one with the
   same random workloads and compares every decision and observation.
2. With declarations: random workloads with random resource sets (hierarchical keys, empty
   declarations, calls that declare nothing), random settle orders and random closes. After
   every step: no two conflicting calls hold resources at once, per resource conflicting calls
   start in emitted order, commits are in order and happen once, the cap holds, and nothing
   that could start is left waiting (the rule is work-conserving).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from types import FrameType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from previous_rule import SchedulingRule as PreviousRule
from toolnexus import Resources
from toolnexus.scheduling import EVERYTHING, MAX_KEY_WORK, SchedulingRule, Wait
from toolnexus.tools import Mode
from toolnexus.tools._resources import overlaps

# -- 1. the differential test ----------------------------------------------------------------

modes = st.sampled_from(["parallel", "exclusive"])
# an operation: ("submit", mode), ("settle", index into the running calls), ("close",)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("submit"), modes),
        st.tuples(st.just("settle"), st.integers(0, 50)),
        st.tuples(st.just("close"), st.none()),
    ),
    max_size=80,
)


def observed(rule: PreviousRule | SchedulingRule) -> tuple[object, ...]:
    return (rule.running, rule.pending, rule.barrier, rule.next_commit, rule.idle)


@settings(max_examples=400, deadline=None)
@given(cap=st.integers(1, 4), ops=operations)
def test_without_declarations_every_decision_is_the_previous_rules(
    cap: int, ops: list[tuple[str, object]]
) -> None:
    old, new = PreviousRule(cap), SchedulingRule(cap)
    for kind, value in ops:
        if kind == "submit":
            assert new.submit(value) == old.submit(value)  # type: ignore[arg-type]
        elif kind == "settle":
            running = sorted(old.running)
            if not running:
                continue
            seq = running[int(value) % len(running)]  # type: ignore[call-overload]
            assert new.settle(seq) == old.settle(seq)
        else:
            assert new.close() == old.close()
            break
        assert observed(new) == observed(old)


# -- 2. with declarations ---------------------------------------------------------------------

KEYS = ["a", "a/x", "a/y", "a/", "b", "b/z/1", "c", "/", "/r", "/r/s//t"]


@dataclass(frozen=True)
class Declared:
    """One call of a workload: a safety class and maybe a declaration."""

    mode: Mode
    resources: Resources | None


declarations = st.builds(
    Declared,
    modes,
    st.one_of(
        st.none(),
        st.builds(
            Resources,
            reads=st.lists(st.sampled_from(KEYS), max_size=2),
            writes=st.lists(st.sampled_from(KEYS), max_size=2),
        ),
    ),
)


def touches(call: Declared) -> tuple[bool, bool, set[str], set[str]]:
    """(reads everything, writes everything, keys read, keys written): the reference reading."""
    if call.resources is None:
        return call.mode == "parallel", call.mode == "exclusive", set(), set()
    return False, False, set(call.resources.reads), set(call.resources.writes)


def below_or_same(a: str, b: str) -> bool:
    a, b = a.rstrip("/"), b.rstrip("/")  # "a/" is "a"; "/" is above every absolute key
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def conflict(one: Declared, other: Declared) -> bool:
    """The reference definition, written independently of the rule's implementation."""
    r1_all, w1_all, r1, w1 = touches(one)
    r2_all, w2_all, r2, w2 = touches(other)
    touches1 = r1_all or w1_all or bool(r1 or w1)
    touches2 = r2_all or w2_all or bool(r2 or w2)
    if (w1_all and touches2) or (w2_all and touches1):
        return True
    if (r1_all and (w2 or w2_all)) or (r2_all and (w1 or w1_all)):
        return True
    return any(below_or_same(a, b) for a in w1 for b in r2 | w2) or any(
        below_or_same(a, b) for a in r1 for b in w2
    )


class Model:
    """Drives a rule with one workload and checks every decision against the reference."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.rule = SchedulingRule(cap)
        self.calls: dict[int, Declared] = {}
        self.started: list[int] = []
        self.running: set[int] = set()
        self.settled: set[int] = set()
        self.committed: list[int] = []

    def holding(self) -> list[int]:
        """Started and not committed: the calls that hold their resources."""
        return [s for s in self.started if s not in self.committed]

    def submit(self, call: Declared) -> None:
        seq, started = self.rule.submit(call.mode, call.resources)
        assert seq == len(self.calls) + 1
        self.calls[seq] = call
        self.start(started)

    def settle(self, pick: int) -> None:
        if not self.running:
            return
        seq = sorted(self.running)[pick % len(self.running)]
        committed, started = self.rule.settle(seq)
        self.running.discard(seq)
        self.settled.add(seq)
        for done in committed:
            assert done in self.settled, "a call committed before it settled"
            assert done == len(self.committed) + 1, "commits out of emitted order"
            self.committed.append(done)
        self.start(started)

    def start(self, started: list[int]) -> None:
        assert started == sorted(started), "starts of one decision are in emitted order"
        for seq in started:
            assert seq not in self.started, "a call started twice"
            for earlier in range(1, seq):
                if earlier not in self.committed and conflict(self.calls[earlier], self.calls[seq]):
                    pytest.fail(f"call {seq} started while conflicting call {earlier} held on")
            for other in self.holding():
                assert not conflict(self.calls[other], self.calls[seq]) or other < seq
            self.started.append(seq)
            self.running.add(seq)
        assert len(self.running) <= self.cap, "the cap was exceeded"
        assert self.running == set(self.rule.running)

    def check_work_conserving(self) -> None:
        """Nothing that may start is left waiting, and a wait names a real conflict."""
        pending = [s for s in self.calls if s not in self.started]
        assert tuple(pending) == self.rule.pending
        for seq in pending:
            blockers = [
                e
                for e in range(1, seq)
                if e not in self.committed and conflict(self.calls[e], self.calls[seq])
            ]
            if len(self.running) < self.cap:
                assert blockers, f"call {seq} could start but waits"
            wait = self.rule.waited_for(seq)
            if blockers:  # it conflicted since it was submitted: the rule names a conflict
                assert isinstance(wait, Wait)
                assert conflict(self.calls[wait.call], self.calls[seq])
                assert wait.call < seq


@settings(max_examples=500, deadline=None)
@given(
    cap=st.integers(1, 4),
    calls=st.lists(declarations, min_size=1, max_size=14),
    picks=st.lists(st.integers(0, 20), min_size=40, max_size=40),
    interleave=st.lists(st.booleans(), min_size=40, max_size=40),
    close_at=st.one_of(st.none(), st.integers(0, 30)),
)
def test_with_declarations_conflicts_never_overlap_and_order_holds(
    cap: int,
    calls: list[Declared],
    picks: list[int],
    interleave: list[bool],
    close_at: int | None,
) -> None:
    model = Model(cap)
    queue = list(calls)
    step = 0
    while queue or model.running:
        if close_at is not None and step == close_at:
            remaining = model.rule.close()
            expected = [s for s in model.calls if s not in model.committed]
            assert [s for s, _ in remaining] == expected  # every unanswered call, once, in order
            assert all(settled == (s in model.settled) for s, settled in remaining)
            with pytest.raises(RuntimeError):
                model.rule.submit("parallel")
            return
        if queue and (not model.running or interleave[step % len(interleave)]):
            model.submit(queue.pop(0))
        else:
            model.settle(picks[step % len(picks)])
        model.check_work_conserving()
        step += 1
    assert model.committed == list(range(1, len(calls) + 1))  # every call answered exactly once
    assert model.rule.idle and not model.rule.pending


# -- examples that read as documentation ------------------------------------------------------


def test_writes_to_different_files_overlap_and_to_the_same_file_wait_in_order() -> None:
    rule = SchedulingRule(max_parallel=10)
    assert rule.submit("exclusive", Resources(writes=["/r/a.py"])) == (1, [1])
    assert rule.submit("exclusive", Resources(writes=["/r/b.py"])) == (2, [2])
    assert rule.submit("exclusive", Resources(writes=["/r/a.py"])) == (3, [])
    assert rule.submit("parallel", Resources(reads=["/r/b.py"])) == (4, [])
    assert rule.submit("parallel", Resources(reads=["/r/c.py"])) == (5, [5])
    assert rule.waited_for(3) == Wait(1, "/r/a.py")
    assert rule.waited_for(4) == Wait(2, "/r/b.py")
    assert rule.settle(2) == ([], [])  # settled is not committed: b.py is still held
    assert rule.waited_for(4) == Wait(2, "/r/b.py")
    assert rule.settle(1) == ([1, 2], [3, 4])
    assert rule.waited_for(3) == Wait(1, "/r/a.py")


def test_a_folder_key_covers_the_files_below_it() -> None:
    rule = SchedulingRule(max_parallel=10)
    rule.submit("parallel", Resources(reads=["/r/src"]))  # a search of /r/src
    assert rule.submit("exclusive", Resources(writes=["/r/src/app.py"])) == (2, [])
    assert rule.submit("exclusive", Resources(writes=["/r/srcfile"])) == (3, [3])  # not below
    assert rule.waited_for(2) == Wait(1, "/r/src/app.py")


def test_an_undeclared_call_reads_or_writes_everything() -> None:
    rule = SchedulingRule(max_parallel=10)
    rule.submit("exclusive", Resources(writes=["/r/a.py"]))
    assert rule.submit("parallel") == (2, [])  # a safe call reads everything, a.py too
    assert rule.waited_for(2) == Wait(1, EVERYTHING)
    assert rule.submit("exclusive") == (3, [])  # an unsafe one writes everything
    assert rule.submit("parallel", Resources()) == (4, [4])  # touches nothing: never waits
    assert rule.barrier is None
    assert rule.settle(1) == ([1], [2])
    assert rule.settle(2) == ([2], [3])
    assert rule.barrier == 3


def test_resources_must_be_lists_of_non_empty_strings() -> None:
    with pytest.raises(TypeError, match="list of keys"):
        Resources(writes="/r/a.py")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="non-empty strings"):
        Resources(reads=[""])
    with pytest.raises(TypeError, match="non-empty strings"):
        Resources(reads=[3])  # type: ignore[list-item]
    both = Resources(reads=["x", "y"], writes=["x"])
    assert both.reads == {"y"} and both.writes == {"x"}  # read and written counts as written
    with pytest.raises(ValueError, match="Resources or None"):
        SchedulingRule(2).submit("parallel", ["x"])  # type: ignore[arg-type]


# -- the cost of a decision -------------------------------------------------------------------


def c_calls_to_admit(calls: int, keys: int) -> int:
    """C-level calls (dict look-ups, string and deque operations) the rule makes to admit
    ``calls`` calls writing ``keys`` keys each, disjoint from each other's, the last one
    conflicting with the first on one key: a repeatable count of the work, where a timing on a
    shared machine is not."""
    declared = [
        Resources(writes=[f"/repo/c{c}/dir{k % 7}/file{k}.py" for k in range(keys)])
        for c in range(calls)
    ]
    last = Resources(writes=[*sorted(declared[-1].writes)[1:], "/repo/c0/dir0/file0.py"])
    declared[-1] = last
    rule = SchedulingRule(max_parallel=calls)
    count = 0

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal count
        if event == "c_call":
            count += 1

    sys.setprofile(profile)
    try:
        decisions = [rule.submit("exclusive", resources) for resources in declared]
    finally:
        sys.setprofile(None)
    assert decisions == [(seq, [seq]) for seq in range(1, calls)] + [(calls, [])]
    assert rule.waited_for(calls) == Wait(1, "/repo/c0/dir0/file0.py")
    return count


def test_the_conflict_check_is_near_linear_in_the_keys_declared() -> None:
    # Comparing every key with every key made four calls of 2,000 keys take seconds and stall
    # the loop: the work grew with the product of the key counts. Doubling the keys must about
    # double the work, not quadruple it.
    small, large = c_calls_to_admit(4, 150), c_calls_to_admit(4, 300)
    assert large < 2.4 * small, (small, large)
    assert c_calls_to_admit(4, 2_000) < 100 * 4 * 2_000  # some dozens of operations per key


def test_a_declaration_past_the_work_bound_touches_everything() -> None:
    # A model controls how many keys an MCP writes_arg list holds: past the bound the call is
    # treated as writing everything (safe, only less parallel), so one decision stays bounded.
    depth = 4
    many = [f"k/{i}/x/y" for i in range(MAX_KEY_WORK // depth + 1)]
    rule = SchedulingRule(max_parallel=10)
    assert rule.submit("parallel", Resources(writes=many)) == (1, [1])
    assert rule.submit("parallel", Resources(reads=["elsewhere"])) == (2, [])
    assert rule.waited_for(2) == Wait(1, EVERYTHING)
    rule = SchedulingRule(max_parallel=10)
    assert rule.submit("parallel", Resources(reads=many)) == (1, [1])  # reads everything
    assert rule.submit("parallel", Resources(reads=["elsewhere"])) == (2, [2])
    assert rule.submit("parallel", Resources(writes=["elsewhere"])) == (3, [])
    assert rule.waited_for(3) == Wait(1, EVERYTHING)
    within = many[: MAX_KEY_WORK // depth]
    rule = SchedulingRule(max_parallel=10)
    assert rule.submit("parallel", Resources(writes=within)) == (1, [1])
    assert rule.submit("parallel", Resources(writes=["elsewhere"])) == (2, [2])


def test_trailing_slashes_and_the_root_key() -> None:
    # A folder key padded with slashes longer than a file key below it used to cover nothing.
    rule = SchedulingRule(max_parallel=10)
    assert rule.submit("parallel", Resources(writes=["/r/src////////"])) == (1, [1])
    assert rule.submit("parallel", Resources(reads=["/r/src/a"])) == (2, [])
    assert rule.waited_for(2) == Wait(1, "/r/src/a")
    assert overlaps("/r/src////////", "/r/src/a") and overlaps("/r/src/a", "/r/src//")
    assert rule.submit("parallel", Resources(reads=["/"])) == (3, [])  # "/" covers /r/src
    assert rule.submit("parallel", Resources(reads=["r/src"])) == (4, [4])  # relative: apart
