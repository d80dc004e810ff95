"""The in-process models of ``toolnexus.testing``: the whole loop with no HTTP."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

from helpers import Probe
from toolnexus import Session, ToolCall, ToolHints, create_client, tool
from toolnexus.client import Usage
from toolnexus.errors import ConfigurationError, ProviderError
from toolnexus.testing import FunctionModel, ModelReply, ScriptedModel


@tool(hints=ToolHints(read_only=True))
def lookup(city: str) -> str:
    """Weather for a city."""
    return f"{city}: sunny"


async def test_a_scripted_model_drives_tool_calls_and_sees_their_results() -> None:
    model = ScriptedModel(
        [
            [
                ToolCall("c1", "lookup", {"city": "Oslo"}),
                ToolCall("c2", "lookup", {"city": "Rome"}),
            ],
            "Both sunny.",
        ]
    )
    result = await create_client(model=model, code_mode="native").run("weather?", tools=[lookup])
    assert result.status == "done" and result.text == "Both sunny." and result.turns == 2
    assert [r.output for r in result.tool_calls] == ["Oslo: sunny", "Rome: sunny"]
    shown = model.requests[1]
    assert [m["role"] for m in shown[-3:]] == ["assistant", "tool", "tool"]
    assert [m["content"] for m in shown[-2:]] == ["Oslo: sunny", "Rome: sunny"]
    assert result.usage.total is not None and result.usage.total > 0


async def test_a_function_model_sees_messages_and_tools_and_may_be_async(probe: Probe) -> None:
    reads = [probe.tool(f"read_{i}") for i in range(3)]

    async def model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "user":
            calls = [ToolCall(f"c{i}", t["name"], {"steps": 3}) for i, t in enumerate(tools)]
            return ModelReply(calls=calls, usage=Usage(5, 2))
        return ModelReply(text="read all", usage=Usage(7, 3))

    client = create_client(model=FunctionModel(model), code_mode="native")
    result = await client.run("read", tools=reads)
    assert result.text == "read all" and probe.peak == 3  # the scheduling rule applies
    assert (result.usage.input_tokens, result.usage.output_tokens) == (12, 5)


async def test_streaming_events_come_from_an_in_process_model() -> None:
    client = create_client(
        model=ScriptedModel([[ToolCall("c1", "lookup", {"city": "Oslo"})], "x" * 40]),
        code_mode="native",
    )
    kinds = [event.type async for event in client.stream("go", tools=[lookup])]
    assert kinds[:2] == ["tool_call", "usage"]
    assert kinds.count("text") == 3 and kinds[-1] == "done"


async def test_code_mode_runs_against_an_in_process_model() -> None:
    program = "r = await tools.lookup({'city': 'Oslo'})\nr"
    model = ScriptedModel(
        [[ToolCall("c1", "run_code", {"code": program, "description": "look up Oslo"})], "done"]
    )
    result = await create_client(model=model, code_mode="code").run("go", tools=[lookup])
    assert result.text == "done"
    assert '"result": "Oslo: sunny"' in result.tool_calls[0].output


def test_misuse_is_explained() -> None:
    with pytest.raises(ConfigurationError, match="needs no endpoint"):
        create_client(model=ScriptedModel(["x"]), base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ConfigurationError, match="takes a function"):
        FunctionModel("not callable")  # type: ignore[arg-type]
    client = create_client(model=ScriptedModel(["only one"]), code_mode="native")
    assert client.run_sync("a").text == "only one"
    with pytest.raises(ConfigurationError, match="has 1 replies and was asked for turn 2"):
        client.run_sync("b")
    bad = create_client(model=FunctionModel(lambda m, t: 42), code_mode="native")
    with pytest.raises(ConfigurationError, match="return a string, a list of ToolCall"):
        asyncio.run(bad.run("c"))


def test_the_library_and_its_test_models_need_no_provider_sdk() -> None:
    """The main install has neither official SDK (they are extras): importing toolnexus and
    running an agent on an in-process model must still work."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import sys
        sys.modules["openai"] = None  # as if not installed: importing it raises ImportError
        sys.modules["anthropic"] = None
        from toolnexus import create_client
        from toolnexus.testing import ScriptedModel
        print(create_client(model=ScriptedModel(["hi"]), code_mode="native").run_sync("x").text)
        try:
            create_client(base_url="http://127.0.0.1:9/v1", model="m", api_key="k")
        except Exception as error:
            print(type(error).__name__, "install toolnexus[openai]" in str(error))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["hi", "MissingExtraError True"]  # a ConfigurationError


def test_every_call_gets_its_own_arguments_across_many_turns() -> None:
    """Each call's arguments are decoded once per run; a call of a later turn must never be
    handed those of an earlier one (whose object may be gone, its id reused)."""
    received: list[str] = []

    @tool(hints=ToolHints(read_only=True))
    def visit(city: str) -> str:
        """Visit a city."""
        received.append(city)
        return city

    def model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        done = sum(m["role"] == "tool" for m in messages)
        if done == 0:  # a wide first turn, then one call a turn (new objects every time)
            return [ToolCall(f"r{i}", "visit", f'{{"city": "wide {i}"}}') for i in range(20)]
        if done < 30:
            return [ToolCall(f"c{done}", "visit", f'{{"city": "city {done}"}}')]
        return "done"

    expected = [f"wide {i}" for i in range(20)] + [f"city {i}" for i in range(20, 30)]
    for _ in range(5):
        received.clear()
        client = create_client(model=FunctionModel(model), code_mode="native", max_turns=50)
        result = client.run_sync("tour", tools=[visit])
        assert received == expected
        assert [r.arguments["city"] for r in result.tool_calls] == expected


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_a_function_model_is_held_to_turn_timeout(kind: str) -> None:
    release = asyncio.Event()
    blocked = threading.Event()

    async def stuck_async(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        await release.wait()
        return "never"

    def stuck_sync(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        blocked.wait(30)  # a blocking model (set free when the test ends)
        return "never"

    model = FunctionModel(stuck_async if kind == "async" else stuck_sync)
    client = create_client(model=model, turn_timeout=0.5, retries=0)
    try:
        with pytest.raises(ProviderError, match=r"within 0\.5 s \(turn_timeout\)"):
            await client.run("hi")
    finally:
        release.set()
        blocked.set()


def test_the_function_gets_copies_of_the_messages() -> None:
    """Editing what the function is shown changes neither the transcript nor what the next turn
    is shown (a server only ever gets a copy)."""

    def meddling(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        messages.append({"role": "user", "content": "INJECTED"})
        messages[0]["content"] = "rewritten"
        tools.clear()
        if len(model.requests) == 1:
            return [ToolCall("c1", "lookup", {"city": "Oslo"})]
        return "done"

    model = FunctionModel(meddling)
    session = Session()
    result = create_client(model=model, code_mode="native").run_sync(
        "weather?", tools=[lookup], session=session
    )
    assert result.status == "done"
    assert "INJECTED" not in json.dumps(model.requests)
    assert model.requests[1][0] == {"role": "user", "content": "weather?"}
    assert "INJECTED" not in json.dumps(session.messages())
    assert "INJECTED" not in json.dumps(result.messages)
    assert [m["role"] for m in model.requests[1]] == ["user", "assistant", "tool"]
