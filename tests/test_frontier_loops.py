"""A 3-turn tool loop against each frontier endpoint's rules, in every mode: native tool calls,
Code Mode, structured output, tool tiers; streaming and not (see ``frontier_endpoint.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from frontier_endpoint import (
    PROFILES,
    FrontierEndpoint,
    Step,
    assert_carried_on,
    client_for,
    humidity,
    lookup,
    replayed,
    run,
    unmarked,
)
from toolnexus.codemode import PermissionPolicy


class Forecast(BaseModel):
    city: str
    sunny: bool


ENDPOINTS = [(p, None) for p in PROFILES] + [("openrouter-reasoning", "google/gemini-3.5-pro")]


@pytest.fixture(params=ENDPOINTS, ids=lambda e: e[1] or e[0])
def server(request: pytest.FixtureRequest) -> Iterator[FrontierEndpoint]:
    profile, model = request.param
    endpoint = FrontierEndpoint(profile, model=model).start()
    yield endpoint
    endpoint.stop()


@pytest.mark.parametrize("stream", [False, True])
async def test_a_native_tool_loop_completes(server: FrontierEndpoint, stream: bool) -> None:
    server.script(
        Step(calls=[("lookup", {"city": "Oslo"})]),
        Step(
            text="Now the others.",
            calls=[("lookup", {"city": "Rome"}), ("humidity", {"city": "Rome"})],
        ),
        Step(text="Oslo and Rome are sunny; Rome at 40%."),
    )
    result = await run(client_for(server), "Weather?", stream=stream, tools=[lookup, humidity])
    assert result.status == "done" and result.turns == 3
    assert result.text == "Oslo and Rome are sunny; Rome at 40%."
    assert [r.output for r in result.tool_calls] == ["Oslo: sunny", "Rome: sunny", "Rome: 40%"]
    assert_carried_on(server, result, 3)


@pytest.mark.parametrize("stream", [False, True])
async def test_a_code_mode_loop_completes(server: FrontierEndpoint, stream: bool) -> None:
    first = "r = await tools.lookup({'city': 'Oslo'})\nr"
    second = (
        "import asyncio\n"
        "both = await asyncio.gather(tools.lookup({'city': 'Rome'}), "
        "tools.humidity({'city': 'Rome'}))\nboth"
    )
    server.script(
        Step(calls=[("run_code", {"code": first, "description": "Oslo."})]),
        Step(calls=[("run_code", {"code": second, "description": "Rome."})]),
        Step(text="Both sunny."),
    )
    client = client_for(server, code_mode="code")
    result = await run(client, "Weather?", stream=stream, tools=[lookup, humidity])
    assert result.status == "done" and result.turns == 3 and result.text == "Both sunny."
    outputs = [r.output for r in result.tool_calls]
    assert len(outputs) == 2 and not any(r.is_error for r in result.tool_calls)
    assert "Oslo: sunny" in outputs[0]
    assert "Rome: sunny" in outputs[1] and "Rome: 40%" in outputs[1]
    sent = server.requests[0]["tools"]
    names = [t["name"] if server.style == "anthropic" else t["function"]["name"] for t in sent]
    assert names == ["run_code"]
    assert_carried_on(server, result, 3)


@pytest.mark.parametrize("stream", [False, True])
async def test_structured_output_completes(server: FrontierEndpoint, stream: bool) -> None:
    server.script(
        Step(calls=[("lookup", {"city": "Oslo"})]),
        Step(calls=[("lookup", {"city": "Rome"})]),
        Step(calls=[("final_result", {"city": "Rome", "sunny": True})]),
    )
    result = await run(
        client_for(server), "Weather?", stream=stream, tools=[lookup], output_type=Forecast
    )
    assert result.output == Forecast(city="Rome", sunny=True)
    assert result.turns == 3
    for body in server.requests:  # asked for, never forced (thinking refuses a forced tool)
        assert body.get("tool_choice") in (None, "auto", {"type": "auto"})
    assert_carried_on(server, result, 3)


@pytest.mark.parametrize("stream", [False, True])
async def test_tool_tiers_keep_the_tools_the_same_bytes(
    server: FrontierEndpoint, stream: bool
) -> None:
    server.script(
        Step(calls=[("tool_search", {"query": "weather"})]),
        Step(calls=[("call_tool", {"name": "lookup", "arguments": {"city": "Oslo"}})]),
        Step(text="Oslo is sunny."),
    )
    client = client_for(server, tool_tiers=True)
    result = await run(client, "Weather?", stream=stream, tools=[lookup, humidity])
    assert result.status == "done" and result.tool_calls[1].output == "Oslo: sunny"
    assert '"lookup"' in result.tool_calls[0].output
    assert_carried_on(server, result, 3)


async def test_code_mode_approvals_keep_the_sdk_the_same_bytes(server: FrontierEndpoint) -> None:
    asked: list[str] = []

    def approve(name: str, args: dict[str, Any]) -> bool:
        asked.append(name)
        return True

    program = (
        "a = await tools.lookup({'city': 'Oslo'})\n"
        "b = await tools.humidity({'city': 'Oslo'})\n"
        "[a, b]"
    )
    server.script(
        Step(calls=[("run_code", {"code": program, "description": "Oslo."})]),
        Step(calls=[("run_code", {"code": program, "description": "Again."})]),
        Step(text="Sunny, 40%."),
    )
    client = client_for(
        server,
        code_mode="code",
        permissions=PermissionPolicy(approval_required=["humidity"]),
        approval_handler=approve,
    )
    result = await client.run("Weather?", tools=[lookup, humidity])
    assert result.status == "done" and asked == ["humidity", "humidity"]
    assert all("Oslo: 40%" in r.output for r in result.tool_calls)
    assert_carried_on(server, result, 3)


async def test_every_request_carries_each_earlier_turn_as_sent(server: FrontierEndpoint) -> None:
    server.script(
        Step(calls=[("lookup", {"city": "Oslo"})], thinking=""),  # omitted display: empty text
        Step(calls=[("lookup", {"city": "Rome"})]),
        Step(text="Sunny."),
    )
    result = await run(client_for(server), "Weather?", stream=False, tools=[lookup])
    assert result.status == "done"
    for n, body in enumerate(server.requests):
        sent = [m for m in body["messages"] if m.get("role") == "assistant"]
        expected = [replayed(t, server.style) for t in server.issued[:n]]
        assert [unmarked(m) for m in sent] == expected  # a cache breakpoint is not content
