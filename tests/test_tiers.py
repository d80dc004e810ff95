"""Tool tiers: tool_search and call_tool in front of a large tool set."""

from __future__ import annotations

from typing import Any

import pytest

from helpers import Probe
from toolnexus import Tool
from toolnexus.codemode import RunContext
from toolnexus.errors import ConfigurationError
from toolnexus.scheduling import ToolCall, concurrency_mode, run_batch
from toolnexus.tools import ToolHooks
from toolnexus.tools.tiers import tool_tiers


def many(n: int) -> list[Tool]:
    return [
        Tool(f"tool_{i}", f"does thing number {i}", {"type": "object"}, execute=lambda a, i=i: i)
        for i in range(n)
    ]


def test_tiers_turn_on_above_the_threshold_or_when_asked() -> None:
    assert len(tool_tiers(many(40))) == 40
    assert [t.name for t in tool_tiers(many(41))] == ["tool_search", "call_tool"]
    assert [t.name for t in tool_tiers(many(3), enabled=True)] == ["tool_search", "call_tool"]
    assert len(tool_tiers(many(100), enabled=False)) == 100
    assert len(tool_tiers(many(6), threshold=5)) == 2
    with pytest.raises(ConfigurationError, match="threshold must be a positive integer"):
        tool_tiers(many(1), threshold=0)


async def test_tool_search_ranks_by_name_parameters_and_description() -> None:
    weather = Tool(
        "get_weather",
        "Current conditions.",
        {"type": "object", "properties": {"city": {"type": "string"}}},
        execute=lambda a: "sunny",
    )
    news = Tool(
        "news", "Headlines about the weather and more.", {"type": "object"}, execute=lambda a: []
    )
    city = Tool("city_info", "Facts.", {"type": "object"}, execute=lambda a: {})
    search, _ = tool_tiers([news, city, weather], enabled=True)
    found = await search.invoke({"query": "weather in a city"})
    assert [f["name"] for f in found] == ["get_weather", "city_info", "news"]
    assert found[0]["input_schema"]["properties"]["city"] == {"type": "string"}
    assert await search.invoke({"query": "nothing matches", "limit": 1}) == []


async def test_call_tool_takes_the_class_of_the_tool_it_calls(probe: Probe) -> None:
    read, write = probe.tool("read"), probe.tool("write", read_only=False)
    _, call = tool_tiers([read, write], enabled=True)
    assert concurrency_mode(call, {"name": "read", "arguments": {}}) == "parallel"
    assert concurrency_mode(call, {"name": "write", "arguments": {}}) == "exclusive"
    assert concurrency_mode(call, {"name": "nope", "arguments": {}}) == "exclusive"
    calls = [
        ToolCall(f"c{i}", "call_tool", {"name": n, "arguments": {"id": f"{n}{i}", "steps": 3}})
        for i, n in enumerate(["read", "read", "write", "read"])
    ]
    outcomes = await run_batch(calls, tool_tiers([read, write], enabled=True))
    assert [o.value for o in outcomes] == ["read0", "read1", "write2", "read3"]
    assert probe.peak == 2 and probe.overlaps == []


async def test_call_tool_refuses_unknown_tools_and_keeps_approval_and_hooks() -> None:
    ran: list[str] = []

    def deploy(args: dict[str, Any]) -> str:
        ran.append(args["env"])
        return f"deployed {args['env']}"

    target = Tool("deploy", "Deploy.", {"type": "object"}, execute=deploy, requires_approval=True)
    tiers = tool_tiers([target], enabled=True)

    def call(n: int, name: str, env: str) -> ToolCall:
        return ToolCall(f"c{n}", "call_tool", {"name": name, "arguments": {"env": env}})

    refused, unknown = await run_batch(
        [call(1, "deploy", "a"), call(2, "rm_rf", "b")], tiers, run_ctx=RunContext()
    )
    assert refused.error is not None and "needs approval" in refused.error["message"]
    assert unknown.error is not None and "unknown tool 'rm_rf'" in unknown.error["message"]
    assert "tool_search" in unknown.error["message"]

    def upper(name: str, args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        return {"env": args["env"].upper()}

    ctx = RunContext(
        approval_handler=lambda name, args: name == "deploy", hooks=ToolHooks(before=[upper])
    )
    (approved,) = await run_batch([call(3, "deploy", "prod")], tiers, run_ctx=ctx)
    assert approved.value == "deployed PROD" and ran == ["PROD"]


async def test_call_tool_without_a_run_context_runs_no_tool_that_needs_approval() -> None:
    """A bare run_batch (no run context to ask) still refuses a tool that needs approval and
    runs the others."""
    ran: list[str] = []
    risky = Tool(
        "deploy", "", {"type": "object"}, execute=lambda a: ran.append("deploy"),
        requires_approval=True,
    )  # fmt: skip
    plain = Tool("ping", "", {"type": "object"}, execute=lambda a: "pong")
    refused, answered = await run_batch(
        [
            ToolCall("c1", "call_tool", {"name": "deploy", "arguments": {}}),
            ToolCall("c2", "call_tool", {"name": "ping", "arguments": {}}),
        ],
        tool_tiers([risky, plain], enabled=True),
    )
    assert refused.error is not None and "needs approval" in refused.error["message"]
    assert answered.value == "pong" and ran == []
