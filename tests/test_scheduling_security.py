"""Hostile values at the core: results and arguments that are live objects, hostile ``__eq__``,
``__repr__`` and ``Mapping``s, and the order of reads and writes in ``run_batch``, the lane and
the client loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from toolnexus import Outcome, Scheduler, Session, Tool, ToolCall, ToolHints, ToolResult, run_batch

# -- adversary pass, round 5 (written from the docs and the public API) --

S: dict[str, Any] = {"type": "object", "properties": {}}
ANY: dict[str, Any] = {"type": "object"}


def _reader(state: Any, name: str = "get") -> Tool:
    return Tool(name, "Read.", S, hints=ToolHints(read_only=True), execute=lambda a: state)


async def test_a_result_mutated_after_run_batch_returns_is_unchanged() -> None:
    """scheduling.md: "what the model, the program, the run's records and the session log read
    of the call is its result as it was when the call finished, however late they read it"."""
    live = {"items": ["a"]}
    (outcome,) = await run_batch([ToolCall("1", "get", {})], [_reader(live)])
    live["items"].append("b")
    live["new"] = 1
    assert outcome.value == {"items": ["a"]}
    assert "b" not in outcome.text


async def test_a_change_scheduled_by_the_tool_itself_after_it_returns_is_not_seen() -> None:
    """scheduling.md: "A result is snapshotted once, when the call finishes". A tool that
    schedules a change of the object it returns (``loop.call_soon``) finished before that change
    runs: its result is the object as it was at return."""
    live = ["before"]

    async def execute(args: dict[str, Any]) -> Any:
        asyncio.get_running_loop().call_soon(live.append, "after")
        return live

    tool = Tool("get", "Read.", S, hints=ToolHints(read_only=True), execute=execute)
    (outcome,) = await run_batch([ToolCall("1", "get", {})], [tool])
    await asyncio.sleep(0)
    assert live == ["before", "after"]
    assert outcome.value == ["before"]


async def test_a_tool_result_holding_a_live_list_is_snapshotted_too() -> None:
    """tools.md: execute "returns any JSON-shaped value, or a ``ToolResult``"; scheduling.md:
    the result is snapshotted when the call finishes, so a later write's change is not seen."""
    watchlist = ["NVDA"]
    get = Tool(
        "get",
        "Read.",
        S,
        hints=ToolHints(read_only=True),
        execute=lambda a: ToolResult({"watchlist": watchlist}),
    )
    add = Tool("add", "Write.", S, execute=lambda a: watchlist.append("QUAS"))
    read, _ = await run_batch([ToolCall("1", "get", {}), ToolCall("2", "add", {})], [get, add])
    assert watchlist == ["NVDA", "QUAS"]
    assert "QUAS" not in read.text


def test_an_outcome_made_from_a_live_value_is_a_snapshot() -> None:
    """scheduling.md: "``Outcome(value=...)`` takes it as it is made"."""
    live: dict[str, Any] = {"n": [1]}
    outcome = Outcome(value=live)
    live["n"].append(2)
    assert outcome.value == {"n": [1]}


async def test_a_result_whose_repr_raises_never_makes_run_batch_raise() -> None:
    """scheduling.md: what JSON cannot hold becomes its ``repr()``; security.md: a tool's result
    ... "the model always gets text". A ``repr`` that raises must not escape ``run_batch``."""

    class Hostile:
        def __repr__(self) -> str:
            raise RuntimeError("no repr for you")

        def __eq__(self, other: object) -> bool:
            raise RuntimeError("no eq either")

        __hash__ = object.__hash__

    tool = _reader({"x": Hostile()})
    after = _reader("fine", "after")
    outcomes = await run_batch(
        [ToolCall("1", "get", {}), ToolCall("2", "after", {})], [tool, after]
    )
    assert isinstance(outcomes[0].text, str)
    assert outcomes[1].value == "fine"


async def test_a_cyclic_result_is_text_not_a_hang_or_a_crash() -> None:
    """security.md: "a tool's result | the model always gets text: JSON when possible, else a
    rendering of it"."""
    cyclic: list[Any] = [1]
    cyclic.append(cyclic)
    (outcome,) = await asyncio.wait_for(
        run_batch([ToolCall("1", "get", {})], [_reader(cyclic)]), 30
    )
    assert isinstance(outcome.text, str) and outcome.text


async def test_a_result_past_the_int_digit_limit_is_text_not_a_crash() -> None:
    """security.md: the model always gets text; scheduling.md: "what JSON cannot hold becomes
    its repr()" (and ``repr`` of a 5,000-digit int raises ``ValueError`` in Python 3.11)."""
    (outcome,) = await run_batch([ToolCall("1", "get", {})], [_reader({"n": 10**5000})])
    assert isinstance(outcome.text, str) and outcome.text


class Flaky(Mapping[str, Any]):
    """A mapping that answers differently every time it is read."""

    def __init__(self) -> None:
        self.reads = 0

    def __getitem__(self, key: str) -> Any:
        self.reads += 1
        return self.reads

    def __iter__(self) -> Iterator[str]:
        return iter(["n"])

    def __len__(self) -> int:
        return 1


async def test_a_result_mapping_that_changes_on_every_read_is_read_once() -> None:
    """Outcome docs: "value is a snapshot, taken as the outcome is made": the value, its text
    and its equality all see the one snapshot."""
    (outcome,) = await run_batch([ToolCall("1", "get", {})], [_reader(Flaky())])
    first = outcome.value
    assert outcome.value == first
    assert outcome.text == outcome.text
    assert str(first["n"]) in outcome.text


@pytest.mark.xfail(
    strict=True,
    reason="the audited copy of the arguments is read from the caller's Mapping a second time, "
    "not copied from the dispatched snapshot: a Mapping that changes between reads audits "
    "arguments the tool never got (docs: 'snapshotted twice'; the audit is meant to be the call)",
)
async def test_arguments_a_mapping_that_changes_on_every_read_are_one_snapshot() -> None:
    """scheduling.md: "Arguments are snapshotted twice, as JSON-shaped copies: one is
    dispatched, one is audited" -- the tool and the audit see the same values."""
    seen: list[Any] = []
    tool = Tool("t", "T.", ANY, execute=lambda a: seen.append(dict(a)) or "ok")
    session = Session()
    async with Scheduler(max_parallel=2, call_id="c", session=session) as lane:
        outcome = await lane.wait(lane.submit(tool, Flaky()))
    assert outcome.ok, outcome
    audited = [e.data["arguments"] for e in session.events if e.type == "tool_call"]
    assert audited == seen


async def test_a_lock_in_the_arguments_reaches_the_tool_only_as_its_repr() -> None:
    """scheduling.md: "a live object (socket, function, lock) reaches neither, only its
    repr()"."""
    got: list[Any] = []
    tool = Tool("t", "T.", ANY, execute=lambda a: got.append(a["x"]) or "ok")
    lock = threading.Lock()
    (outcome,) = await run_batch([ToolCall("1", "t", {"x": lock})], [tool])
    assert outcome.ok, outcome
    assert got and not isinstance(got[0], type(lock)) and isinstance(got[0], str)


async def test_a_resources_function_that_mutates_its_arguments_changes_nothing() -> None:
    """scheduling.md: the resources fn "gets a copy of the arguments, so it cannot change what
    the tool receives"."""
    from toolnexus import Resources

    got: list[Any] = []

    def declare(args: dict[str, Any]) -> Resources:
        args["path"] = "/etc/passwd"
        args["extra"] = True
        return Resources(writes=["a"])

    tool = Tool("t", "T.", ANY, resources=declare, execute=lambda a: got.append(dict(a)) or "ok")
    (outcome,) = await run_batch([ToolCall("1", "t", {"path": "a.md"})], [tool])
    assert outcome.ok and got == [{"path": "a.md"}]


async def test_an_exception_whose_str_raises_is_still_a_failed_call() -> None:
    """scheduling.md: "Failure is data ... A raised exception contributes its str() only ...
    an empty one becomes 'tool call failed'"; ``run_batch`` never raises."""

    class Nasty(Exception):
        def __str__(self) -> str:
            raise RuntimeError("str() refused")

    def execute(args: dict[str, Any]) -> Any:
        raise Nasty()

    tool = Tool("t", "T.", S, execute=execute)
    (outcome,) = await run_batch([ToolCall("1", "t", {})], [tool])
    assert outcome.error is not None and set(outcome.error) == {"tool", "message"}
    assert isinstance(outcome.error["message"], str) and outcome.error["message"]


async def test_a_huge_exception_message_is_clamped_as_documented() -> None:
    """scheduling.md: "clamped to 2,000 characters plus '… (truncated)'"."""

    def execute(args: dict[str, Any]) -> Any:
        raise ValueError("x" * 1_000_000)

    (outcome,) = await run_batch([ToolCall("1", "t", {})], [Tool("t", "T.", S, execute=execute)])
    assert outcome.error is not None
    message = outcome.error["message"]
    assert len(message) <= 2_000 + len("… (truncated)") and message.endswith("(truncated)")


async def test_the_lanes_own_dispatch_snapshots_a_read_before_a_later_write() -> None:
    """scheduling.md: ``lane.dispatch_fun()`` runs a call that may start at once in the task that
    awaits it; "A result is snapshotted once, when the call finishes, before any later call may
    start" holds on that path too."""
    watchlist = ["NVDA"]
    get = _reader({"watchlist": watchlist})
    add = Tool("add", "Write.", S, execute=lambda a: watchlist.append("QUAS"))
    async with Scheduler(max_parallel=4, call_id="c") as lane:
        dispatch = lane.dispatch_fun()
        read = asyncio.create_task(dispatch(get, {}, None))
        write = asyncio.create_task(dispatch(add, {}, None))
        got, _ = await asyncio.gather(read, write)
    value = got.value if isinstance(got, Outcome) else got
    assert value == {"watchlist": ["NVDA"]}


async def test_a_tool_that_mutates_its_arguments_does_not_change_the_session_log() -> None:
    """scheduling.md: "A tool that mutates its arguments cannot change the audit record"; on
    the client loop the record is the session log's ``assistant_message`` and tool events."""
    from toolnexus import create_client
    from toolnexus.testing import ScriptedModel

    def execute(args: dict[str, Any]) -> Any:
        args["path"] = "/etc/shadow"
        args["items"].append("injected")
        return "ok"

    tool = Tool("t", "T.", ANY, execute=execute)
    model = ScriptedModel([[ToolCall("c1", "t", {"path": "a", "items": ["x"]})], "done"])
    session = Session()
    result = await create_client(model=model, code_mode="native").run(
        "go", tools=[tool], session=session
    )
    assert result.status == "done"
    dumped = repr([e.data for e in session.events])
    assert "/etc/shadow" not in dumped and "injected" not in dumped


@pytest.mark.parametrize("runs", [20])
async def test_client_run_gives_a_read_its_value_before_a_later_write(runs: int) -> None:
    """scheduling.md's watchlist example, through ``client.run`` with the model emitting
    ``[get, add]`` in one response: the read's result is the one-by-one result, every run."""
    from toolnexus import create_client
    from toolnexus.testing import ScriptedModel

    seen = []
    for _ in range(runs):
        watchlist = ["NVDA"]
        get = _reader({"watchlist": watchlist}, "get_watchlist")
        add = Tool("add", "Write.", S, execute=lambda a, w=watchlist: w.append("QUAS"))
        calls = [ToolCall("c1", "get_watchlist", {}), ToolCall("c2", "add", {})]
        model = ScriptedModel([calls, "done"])
        result = await create_client(model=model, code_mode="native").run("go", tools=[get, add])
        seen.append(result.tool_calls[0].output)
    assert all("QUAS" not in str(s) for s in seen), seen


class Endless(Mapping[str, Any]):
    """A mapping whose keys do not end for 8 s (then they do, so a test that fails still ends),
    one key a millisecond, so memory stays small."""

    def __getitem__(self, key: str) -> Any:
        return 0

    def __iter__(self) -> Iterator[str]:
        import time

        deadline = time.monotonic() + 8
        n = 0
        while time.monotonic() < deadline:
            time.sleep(0.001)
            n += 1
            yield f"k{n}"

    def __len__(self) -> int:
        return 1


async def test_an_endless_iterator_result_is_rendered_not_walked() -> None:
    """security.md: "a tool's result | the model always gets text: JSON when possible, else a
    rendering of it"; scheduling.md: what JSON cannot hold becomes its repr()."""
    import itertools

    (outcome,) = await asyncio.wait_for(
        run_batch([ToolCall("1", "get", {})], [_reader(itertools.count())]), 20
    )
    assert isinstance(outcome.text, str)


@pytest.mark.xfail(
    strict=True,
    reason="a sync tool's result is snapshotted outside its worker thread and its timeout: a "
    "result whose walk does not end (a Mapping of endless keys) holds the call past the tool's "
    "own timeout (and blocks the event loop meanwhile)",
)
async def test_a_tools_timeout_bounds_the_walk_of_its_result_too() -> None:
    """tools.md: "@tool(timeout=30) ... bounds each call: one that takes longer fails ... and its
    place in the scheduler lane is freed, so a hung tool cannot hold a turn"; scheduling.md: the
    result is snapshotted "when the call finishes". A sync tool returning a Mapping whose keys
    do not end: at its 1 s timeout the call is answered (failed, or as text)."""
    import time

    tool = Tool("get", "Read.", S, hints=ToolHints(read_only=True), timeout=1,
                execute=lambda a: Endless())  # fmt: skip
    started = time.monotonic()
    (outcome,) = await run_batch([ToolCall("1", "get", {})], [tool])
    assert time.monotonic() - started < 5  # the 1 s timeout, not the 8 s walk
    assert isinstance(outcome.text, str)


async def test_a_str_subclass_with_a_hostile_eq_becomes_plain_data() -> None:
    """scheduling.md: "The snapshot is JSON-shaped": a ``str`` subclass whose ``__eq__`` and
    ``__hash__`` raise is a plain string in the snapshot, so comparing outcomes never runs it."""

    class Evil(str):
        def __eq__(self, other: object) -> bool:
            raise RuntimeError("eq ran")

        def __hash__(self) -> int:
            raise RuntimeError("hash ran")

    (outcome,) = await run_batch([ToolCall("1", "get", {})], [_reader({"k": Evil("v")})])
    assert type(outcome.value["k"]) is str
    assert outcome == Outcome(value={"k": "v"})


async def test_a_result_nested_past_any_limit_is_still_text() -> None:
    """security.md: the model always gets text, whatever a tool returns."""
    deep: Any = "leaf"
    for _ in range(5_000):
        deep = [deep]
    (outcome,) = await run_batch([ToolCall("1", "get", {})], [_reader(deep)])
    assert isinstance(outcome.text, str) and outcome.text
