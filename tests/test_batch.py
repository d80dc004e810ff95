"""run_batch: the calls of one model response, by the scheduling rule."""

from __future__ import annotations

from typing import Any

import pytest

from helpers import Probe
from toolnexus import ConfigurationError, Tool, ToolCall, Toolkit, run_batch, tool
from toolnexus.scheduling import Outcome
from toolnexus.session import Session


def _calls(*plan: tuple[str, dict[str, Any]]) -> list[ToolCall]:
    return [ToolCall(f"call_{i}", name, args) for i, (name, args) in enumerate(plan)]


async def test_read_read_write_read_read(probe: Probe) -> None:
    tools = [probe.tool("read"), probe.tool("write", read_only=False)]
    calls = _calls(
        ("read", {"id": "r1", "steps": 3}),
        ("read", {"id": "r2", "steps": 3}),
        ("write", {"id": "w", "steps": 3}),
        ("read", {"id": "r3", "steps": 3}),
        ("read", {"id": "r4", "steps": 3}),
    )
    outcomes = await run_batch(calls, tools)
    assert [o.value for o in outcomes] == ["r1", "r2", "w", "r3", "r4"]
    # the two reads together, then the write alone, then the last two reads together
    assert probe.log == [
        ("start", "r1"), ("start", "r2"), ("end", "r1"), ("end", "r2"),
        ("start", "w"), ("end", "w"),
        ("start", "r3"), ("start", "r4"), ("end", "r3"), ("end", "r4"),
    ]  # fmt: skip
    assert probe.overlaps == []


async def test_the_cap_bounds_overlap(probe: Probe, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _calls(*[("read", {"id": str(i), "steps": 2}) for i in range(30)])
    await run_batch(calls, [probe.tool("read")])
    assert probe.peak == 10  # the default

    probe.peak = 0
    await run_batch(calls, [probe.tool("read")], max_parallel=4)
    assert probe.peak == 4

    monkeypatch.setenv("TOOLNEXUS_MAX_TOOL_CONCURRENCY", "3")
    probe.peak = 0
    await run_batch(calls, [probe.tool("read")])
    assert probe.peak == 3

    probe.peak = 0
    await run_batch(calls, [probe.tool("read")], max_parallel=0)  # falls back to the env
    assert probe.peak == 3


async def test_the_old_name_of_the_cap_still_works_with_a_deprecation_warning(
    probe: Probe,
) -> None:
    calls = _calls(*[("read", {"id": str(i), "steps": 2}) for i in range(12)])
    with pytest.warns(DeprecationWarning, match="max_parallel"):
        await run_batch(calls, [probe.tool("read")], max_concurrency=2)
    assert probe.peak == 2
    with pytest.raises(ConfigurationError, match="both max_parallel and max_concurrency"):
        await run_batch(calls, [probe.tool("read")], max_parallel=2, max_concurrency=2)


async def test_unknown_tools_and_invalid_arguments_run_nothing() -> None:
    ran: list[str] = []

    @tool
    async def count(n: int, label: str = "x") -> str:
        """Count."""
        ran.append(label)
        return label * n

    outcomes = await run_batch(
        [
            ToolCall("1", "count", {"n": 2}),
            ToolCall("2", "missing", {}),
            ToolCall("3", "count", {"n": "lots"}),
            ToolCall("4", "count", '{"n": 1, "label": "y"}'),
            ToolCall("5", "count", "{not json"),
            ToolCall("6", "count", "[1, 2]"),
            ToolCall("7", "count", {}),
        ],
        Toolkit([count]),
    )
    assert outcomes[0] == Outcome(value="xx")
    assert outcomes[1].error == {
        "tool": "missing",
        "message": "unknown tool 'missing'; available tools: count",
    }
    assert outcomes[2].error == {
        "tool": "count",
        "message": "invalid arguments for tool 'count': n: Input should be a valid integer, "
        "unable to parse string as an integer",
    }
    assert outcomes[3] == Outcome(value="y")
    assert outcomes[4].error is not None
    assert "the text is not valid JSON" in outcomes[4].error["message"]
    assert outcomes[5].error is not None
    assert outcomes[5].error["message"].endswith("arguments must be a JSON object, got an array")
    assert outcomes[6].error == {
        "tool": "count",
        "message": "invalid arguments for tool 'count': n: Field required",
    }
    assert ran == ["x", "y"]


async def test_a_failing_call_never_cancels_its_siblings(probe: Probe) -> None:
    calls = _calls(
        ("read", {"id": "a", "steps": 3}),
        ("read", {"id": "b", "fail": "disk on fire"}),
        ("read", {"id": "c", "steps": 3}),
        ("write", {"id": "d", "fail": "nope"}),
        ("write", {"id": "e"}),
    )
    outcomes = await run_batch(calls, [probe.tool("read"), probe.tool("write", read_only=False)])
    assert outcomes == [
        Outcome(value="a"),
        Outcome(error={"tool": "read", "message": "disk on fire"}),
        Outcome(value="c"),
        Outcome(error={"tool": "write", "message": "nope"}),
        Outcome(value="e"),
    ]


async def test_empty_arguments_and_run_ctx_reach_the_tool() -> None:
    seen: list[Any] = []

    async def execute(args: dict[str, Any], ctx: Any) -> str:
        seen.append((args, ctx))
        return "ok"

    ping = Tool("ping", execute=execute)
    outcomes = await run_batch([ToolCall("1", "ping", "")], [ping], run_ctx={"user": "ada"})
    assert outcomes == [Outcome(value="ok")]
    assert seen == [({}, {"user": "ada"})]
    assert await run_batch([], [ping]) == []


async def test_tool_results_are_recorded_in_emitted_order(probe: Probe) -> None:
    session = Session()
    calls = [
        ToolCall("c1", "read", {"id": "slow", "steps": 5}),
        ToolCall("c2", "read", {"id": "fast"}),
        ToolCall("c3", "nope", {}),
        ToolCall("c4", "read", {"id": "obj", "fail": "bad"}),
    ]
    await run_batch(calls, [probe.tool("read")], session=session)
    assert [e.type for e in session.events if e.type != "call_timing"] == ["tool_result"] * 4
    assert session.messages() == [
        {"role": "tool", "tool_call_id": "c1", "name": "read", "content": "slow", "is_error": False},
        {"role": "tool", "tool_call_id": "c2", "name": "read", "content": "fast", "is_error": False},
        {"role": "tool", "tool_call_id": "c3", "name": "nope",
         "content": "unknown tool 'nope'; available tools: read", "is_error": True},
        {"role": "tool", "tool_call_id": "c4", "name": "read", "content": "bad", "is_error": True},
    ]  # fmt: skip


async def test_non_string_values_are_rendered_as_json_in_the_transcript() -> None:
    async def execute(args: dict[str, Any]) -> dict[str, Any]:
        return {"temp": 21.5, "city": "Zürich"}

    session = Session()
    await run_batch([ToolCall("1", "w", {})], [Tool("w", execute=execute)], session=session)
    assert session.messages()[0]["content"] == '{"temp": 21.5, "city": "Zürich"}'


async def test_calls_must_be_tool_calls() -> None:
    with pytest.raises(ConfigurationError, match="run_batch takes ToolCall objects"):
        await run_batch([{"name": "x"}], [])  # type: ignore[list-item]


async def test_a_call_that_cannot_run_takes_no_turn_in_the_lane(probe: Probe) -> None:
    """An invalid call to an unsafe tool is answered up front: it does not act as a barrier."""
    tools = [probe.tool("read"), probe.tool("write", read_only=False)]
    calls = [
        ToolCall("1", "read", {"id": "r1", "steps": 3}),
        ToolCall("2", "write", '{"id": '),  # broken JSON
        ToolCall("3", "read", {"id": "r2", "steps": 3}),
    ]
    outcomes = await run_batch(calls, tools)
    assert [o.ok for o in outcomes] == [True, False, True]
    assert probe.peak == 2  # r1 and r2 overlapped: the broken write never held the barrier
    assert probe.starts() == ["r1", "r2"]
