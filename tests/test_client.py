"""The agent client against a real HTTP endpoint on 127.0.0.1 (the official SDKs on the wire)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

import pytest

from fake_provider import USAGE_IN, USAGE_OUT, FakeProvider, Turn
from helpers import Probe
from toolnexus import Session, ToolHints, tool
from toolnexus.client import RunResult, create_client
from toolnexus.codemode import PermissionPolicy
from toolnexus.errors import ConfigurationError, ProviderError
from toolnexus.scheduling import Outcome, ToolCall
from toolnexus.testing import ScriptedModel
from toolnexus.tools import ToolHooks

STYLES = ["openai", "anthropic", "responses"]


def client_for(provider: FakeProvider, style: str, **options: Any) -> Any:
    base = provider.url + "/v1" if style in ("openai", "responses") else provider.url
    options.setdefault("code_mode", "native")
    return create_client(base_url=base, model="test-model", style=style, api_key="k", **options)


async def run(client: Any, prompt: str, *, stream: bool, **kwargs: Any) -> RunResult:
    if not stream:
        result: RunResult = await client.run(prompt, **kwargs)
        return result
    async for event in client.stream(prompt, **kwargs):
        if event.type == "done":
            done: RunResult = event.result
    return done


def tool_results(result: RunResult, style: str) -> list[tuple[str, str]]:
    """(call id, content) of every tool result in the transcript, in order."""
    out = []
    for message in result.messages:
        if style == "openai" and message.get("role") == "tool":
            out.append((message["tool_call_id"], message["content"]))
        if (
            style == "anthropic"
            and message.get("role") == "user"
            and isinstance(message["content"], list)
        ):
            out += [(b["tool_use_id"], b["content"]) for b in message["content"]]
        if style == "responses" and message.get("type") == "function_call_output":
            out.append((message["call_id"], message["output"]))
    return out


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("stream", [False, True])
async def test_a_mixed_batch_runs_by_the_rule(
    provider: FakeProvider, probe: Probe, style: str, stream: bool
) -> None:
    read, write = probe.tool("read"), probe.tool("write", read_only=False)
    ids = ["a", "b", "c", "d", "e"]
    names = ["read", "read", "write", "read", "read"]
    provider.script(
        Turn(
            text="working",
            calls=[
                (f"call_{i}", n, {"id": i, "steps": 3}) for i, n in zip(ids, names, strict=True)
            ],
        ),
        Turn(text="all done"),
    )
    result = await run(
        client_for(provider, style, max_parallel=4),
        "go",
        stream=stream,
        tools=[read, write],
    )
    assert result.status == "done" and result.text == "all done" and result.turns == 2
    assert probe.starts() == ids
    assert probe.overlaps == []  # the write ran alone
    assert [r.id for r in result.tool_calls] == [f"call_{i}" for i in ids]
    assert tool_results(result, style) == [(f"call_{i}", i) for i in ids]
    assert (result.usage.input_tokens, result.usage.output_tokens) == (2 * USAGE_IN, 2 * USAGE_OUT)
    if not stream:  # all five are known at once: the first two reads overlap
        assert probe.peak == 2
    sent = provider.requests[1].get("messages") or provider.requests[1]["input"]
    assert sent[-1].get("role", sent[-1].get("type")) in ("tool", "user", "function_call_output")


@pytest.mark.parametrize("style", STYLES)
async def test_streaming_starts_a_safe_call_before_the_response_finished(
    provider: FakeProvider, style: str
) -> None:
    started = threading.Event()

    @tool(hints=ToolHints(read_only=True))
    def lookup(key: str) -> str:
        """Look something up."""
        started.set()  # the server holds the rest of the response until this happens
        return key.upper()

    provider.script(
        Turn(
            calls=[("c1", "lookup", {"key": "a"}), ("c2", "lookup", {"key": "b"})],
            hold_after_first_call=started,
        ),
        Turn(text="ok"),
    )
    result = await run(client_for(provider, style), "go", stream=True, tools=[lookup])
    assert provider.holds == [True]  # the call had started while the response was still open
    assert [r.output for r in result.tool_calls] == ["A", "B"]


@pytest.mark.parametrize("style", STYLES)
async def test_code_mode_end_to_end(provider: FakeProvider, probe: Probe, style: str) -> None:
    read = probe.tool("read")
    program = (
        "import asyncio\n"
        "r = await asyncio.gather(*[tools.read({'id': f'r{i}'}) for i in range(4)])\n"
        "print(len(r))\nr"
    )
    provider.script(
        Turn(calls=[("call_9", "run_code", {"code": program, "description": "Read four things."})]),
        Turn(text="read them"),
    )
    result = await run(
        client_for(provider, style, code_mode="code"), "go", stream=False, tools=[read]
    )
    sent_tools = provider.requests[0]["tools"]
    names = [t["function"]["name"] if style == "openai" else t["name"] for t in sent_tools]
    assert names == ["run_code"]
    assert result.tool_calls[0].name == "run_code" and not result.tool_calls[0].is_error
    assert '"result": ["r0", "r1", "r2", "r3"]' in result.tool_calls[0].output
    assert probe.starts() == ["r0", "r1", "r2", "r3"]
    audit = [e.data["id"] for e in result.session.events if e.type == "tool_call"]
    assert audit == [f"call_9:code:{i}" for i in range(1, 5)]
    roles = [m.get("role") for m in result.session.messages()]
    assert roles == ["user", "assistant", "tool", "assistant"]  # sub-calls add no messages


@pytest.mark.parametrize("style", STYLES)
async def test_direct_calls_collapse_under_code_mode(
    provider: FakeProvider, probe: Probe, style: str
) -> None:
    hooked: list[str] = []

    def before(name: str, args: Any, ctx: Any) -> None:
        hooked.append(name)

    provider.script(Turn(calls=[("c1", "read", {"id": "x"})]), Turn(text="ok"))
    client = client_for(provider, style, code_mode="code", hooks=ToolHooks(before=[before]))
    result = await client.run("go", tools=[probe.tool("read")])
    record = result.tool_calls[0]
    assert (
        record.is_error and "Call 'run_code'" in record.output and 'tools["read"]' in record.output
    )
    assert probe.log == [] and hooked == []


async def test_max_turns_stops_an_endless_run(provider: FakeProvider, probe: Probe) -> None:
    provider.script(*[Turn(calls=[(f"c{i}", "read", {"id": str(i)})]) for i in range(5)])
    result = await client_for(provider, "openai", max_turns=2).run("go", tools=[probe.tool("read")])
    assert result.status == "incomplete" and result.turns == 2
    assert len(provider.requests) == 2


async def test_invalid_argument_json_is_an_error_result_and_the_loop_goes_on(
    provider: FakeProvider, probe: Probe
) -> None:
    provider.script(
        Turn(calls=[("c1", "read", '{"id": "x",'), ("c2", "read", {"id": "y"})]), Turn(text="ok")
    )
    result = await client_for(provider, "openai").run("go", tools=[probe.tool("read")])
    assert result.status == "done"
    assert result.tool_calls[0].is_error and "not valid JSON" in result.tool_calls[0].output
    assert result.tool_calls[0].arguments == '{"id": "x",'
    assert (result.tool_calls[1].output, result.tool_calls[1].is_error) == ("y", False)
    assert probe.starts() == ["y"]


@pytest.mark.parametrize("style", STYLES)
async def test_401_names_the_key_variables(provider: FakeProvider, style: str) -> None:
    provider.script(Turn(status=401))
    with pytest.raises(ProviderError, match="API key was refused") as info:
        await client_for(provider, style, retries=0).run("hi")
    assert info.value.status == 401
    assert ("ANTHROPIC_API_KEY" if style == "anthropic" else "OPENAI_API_KEY") in str(info.value)


@pytest.mark.parametrize("style", STYLES)
async def test_429_is_retried_by_the_sdk(provider: FakeProvider, style: str) -> None:
    provider.script(Turn(status=429), Turn(text="hello"))
    result = await client_for(provider, style, retries=2).run("hi")
    assert result.text == "hello" and len(provider.requests) == 2


@pytest.mark.parametrize("style", STYLES)
async def test_500_after_retries_is_a_provider_error(provider: FakeProvider, style: str) -> None:
    provider.script(Turn(status=500))
    with pytest.raises(ProviderError) as info:
        await client_for(provider, style, retries=0).run("hi")
    assert info.value.status == 500 and "scripted 500" in str(info.value)


@pytest.mark.parametrize("style", STYLES)
async def test_a_malformed_body_is_a_provider_error(provider: FakeProvider, style: str) -> None:
    provider.script(Turn(raw="this is not json"))
    with pytest.raises(ProviderError, match="not JSON"):
        await client_for(provider, style, retries=0).run("hi")


@pytest.mark.parametrize("style", STYLES)
async def test_connection_refused_names_the_url(style: str) -> None:
    closed = FakeProvider().start()
    url = closed.url
    closed.stop()
    base = url + "/v1" if style == "openai" else url
    client = create_client(base_url=base, model="m", style=style, api_key="k", retries=0)
    with pytest.raises(ProviderError, match="could not reach the model at") as info:
        await client.run("hi")
    assert info.value.status is None and url in str(info.value)


async def test_cancelling_a_run_leaves_a_balanced_transcript(
    provider: FakeProvider, probe: Probe
) -> None:
    provider.script(
        Turn(calls=[("c1", "read", {"id": "a"}), ("c2", "read", {"id": "b", "gate": "never"})])
    )
    session = Session()
    task = asyncio.ensure_future(
        client_for(provider, "openai").run("go", tools=[probe.tool("read")], session=session)
    )
    for _ in range(1000):  # until the gated call is running (the probe has no event for it)
        if "b" in probe.active:
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert probe.active == set()  # the in-flight tool was cancelled
    results = [e.data for e in session.events if e.type == "tool_result"]
    assert [(r["tool_call_id"], r["is_error"]) for r in results] == [("c1", False), ("c2", True)]
    assert "cancelled" in results[1]["content"]


async def test_a_run_cancelled_as_its_tools_start_still_records_them(probe: Probe) -> None:
    """The race: the response has arrived and its calls run, but the loop has not taken the
    reply yet. The calls already ran, so the transcript must hold them with their results."""
    provider = FakeProvider().start()
    try:
        provider.script(
            Turn(calls=[("c1", "cancel_run", {}), ("c2", "read", {"id": "b", "gate": "never"})])
        )
        session = Session()
        run_task: asyncio.Task[Any] | None = None

        @tool(hints=ToolHints(read_only=True))
        async def cancel_run() -> str:
            """Cancel the run that called this tool."""
            assert run_task is not None
            run_task.cancel()
            return "cancelled the run"

        client = client_for(provider, "openai")
        tools = [cancel_run, probe.tool("read")]
        run_task = asyncio.ensure_future(client.run("go", tools=tools, session=session))
        with pytest.raises(asyncio.CancelledError):
            await run_task
        results = [e.data for e in session.events if e.type == "tool_result"]
        assert [(r["tool_call_id"], r["is_error"]) for r in results] == [
            ("c1", False),
            ("c2", True),
        ]
        assert results[0]["content"] == "cancelled the run"
        assert "cancelled" in results[1]["content"]
        assert probe.active == set()
    finally:
        provider.stop()


async def test_hooks_and_approval_guard_direct_calls(provider: FakeProvider) -> None:
    @tool(requires_approval=True)
    def deploy(env: str) -> str:
        """Deploy."""
        return f"deployed {env}"

    def before(name: str, args: dict[str, Any], ctx: Any) -> Any:
        if args.get("env") == "cached":
            return Outcome(value="from cache")
        return {**args, "env": args["env"].upper()}

    provider.script(
        Turn(calls=[("c1", "deploy", {"env": "staging"}), ("c2", "deploy", {"env": "cached"})]),
        Turn(text="ok"),
    )
    approvals: list[tuple[str, dict[str, Any]]] = []

    def approve(name: str, args: dict[str, Any]) -> bool:
        approvals.append((name, args))
        return True

    client = client_for(
        provider, "anthropic", hooks=ToolHooks(before=[before]), approval_handler=approve
    )
    result = await client.run("go", tools=[deploy])
    assert [r.output for r in result.tool_calls] == ["deployed STAGING", "from cache"]
    assert approvals == [("deploy", {"env": "staging"}), ("deploy", {"env": "cached"})]
    provider.script(Turn(calls=[("c3", "deploy", {"env": "prod"})]), Turn(text="ok"))
    refused = await client_for(provider, "anthropic").run("go", tools=[deploy])
    assert refused.tool_calls[0].is_error and "needs approval" in refused.tool_calls[0].output


async def test_denied_tools_are_not_offered(provider: FakeProvider, probe: Probe) -> None:
    provider.script(Turn(calls=[("c1", "write", {"id": "w"})]), Turn(text="ok"))
    client = client_for(provider, "openai", permissions=PermissionPolicy(deny=["write"]))
    result = await client.run(
        "go", tools=[probe.tool("read"), probe.tool("write", read_only=False)]
    )
    assert [t["function"]["name"] for t in provider.requests[0]["tools"]] == ["read"]
    assert result.tool_calls[0].is_error and "unknown tool 'write'" in result.tool_calls[0].output
    assert probe.log == []


async def test_request_params_system_prompt_and_history_reach_the_wire(
    provider: FakeProvider,
) -> None:
    provider.script(Turn(text="a"), Turn(text="b"))
    client = client_for(
        provider, "openai", system_prompt="be brief", request_params={"temperature": 0.1}
    )
    first = await client.run("one")
    await client.run("two", history=first.messages)
    body = provider.requests[1]
    assert body["temperature"] == 0.1
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "user"]
    anthropic = client_for(provider, "anthropic", system_prompt="be brief")
    provider.script(Turn(text="c"))
    await anthropic.run("three")
    # the system prompt goes as one text block carrying a prompt-cache breakpoint
    assert provider.requests[2]["system"] == [
        {"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}
    ]
    assert provider.requests[2]["max_tokens"] == 4096


def test_the_documented_openrouter_call_works_verbatim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-test")
    from toolnexus import create_client as top_level

    client = top_level(
        base_url="https://openrouter.ai/api/v1",
        style="openai",
        model="openai/gpt-4o-mini",
        max_parallel=4,
    )
    assert client.model == "openai/gpt-4o-mini" and client.style_name == "openai"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"style": "gemini"}, "style must be one of"),
        ({"max_turns": 0}, "max_turns must be a positive integer"),
        ({"code_mode": "sometimes"}, "code mode must be one of"),
        ({"timeout": -1}, "timeout must be a positive number"),
        ({"model": ""}, "model must be a non-empty string"),
        ({"base_url": "localhost:8000/v1"}, "base_url must be an http"),
        ({"base_url": "ftp://example.com"}, "base_url must be an http"),
    ],
)
def test_bad_options_are_named(options: dict[str, Any], message: str) -> None:
    base = {"base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key": "k"}
    with pytest.raises(ConfigurationError, match=message):
        create_client(**{**base, **options})


async def test_bad_run_arguments_are_named() -> None:
    client = create_client(base_url="http://127.0.0.1:9/v1", model="m", api_key="k")

    def plain(x: int) -> int:
        return x

    with pytest.raises(ConfigurationError, match="decorate functions with @tool"):
        await client.run("go", tools=[plain])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="prompt must be a non-empty string"):
        await client.run("")


def test_a_missing_key_names_the_variables_tried(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("OPENROUTER_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(variable, raising=False)
    with pytest.raises(ConfigurationError, match="OPENROUTER_API_KEY, ANTHROPIC_API_KEY"):
        create_client(base_url="http://127.0.0.1:9", model="m", style="anthropic")


async def test_a_failing_call_never_cancels_its_siblings(
    provider: FakeProvider, probe: Probe
) -> None:
    provider.script(
        Turn(
            calls=[
                ("c1", "read", {"id": "a", "fail": "broken"}),
                ("c2", "read", {"id": "b", "steps": 5}),
            ]
        ),
        Turn(text="ok"),
    )
    result = await client_for(provider, "openai").run("go", tools=[probe.tool("read")])
    assert [(r.output, r.is_error) for r in result.tool_calls] == [("broken", True), ("b", False)]


async def test_code_mode_sub_calls_get_the_clients_hooks_and_policy(
    provider: FakeProvider, probe: Probe
) -> None:
    seen: list[str] = []

    def before(name: str, args: Any, ctx: Any) -> None:
        seen.append(name)

    program = "r = await tools.read({'id': 'x'})\ntry:\n    await tools['write']({'id': 'y'})\nexcept ToolError as e:\n    r = r + ' / ' + str(e)\nr"
    provider.script(
        Turn(calls=[("c1", "run_code", {"code": program, "description": "Try both."})]),
        Turn(text="ok"),
    )
    client = client_for(
        provider,
        "openai",
        code_mode="code",
        hooks=ToolHooks(before=[before]),
        permissions=PermissionPolicy(deny=["write"]),
    )
    result = await client.run(
        "go", tools=[probe.tool("read"), probe.tool("write", read_only=False)]
    )
    assert "x / tool 'write' is denied by the permission policy" in result.tool_calls[0].output
    assert seen == ["run_code", "read"]


@pytest.mark.parametrize("style", STYLES)
async def test_stream_events_come_in_a_useful_order(
    provider: FakeProvider, probe: Probe, style: str
) -> None:
    provider.script(
        Turn(
            text="checking both", calls=[("c1", "read", {"id": "a"}), ("c2", "read", {"id": "b"})]
        ),
        Turn(text="fine"),
    )
    events = [e async for e in client_for(provider, style).stream("go", tools=[probe.tool("read")])]
    kinds = [e.type for e in events]
    first_turn = kinds[: kinds.index("tool_result") + 2]
    assert set(first_turn[: first_turn.index("tool_call")]) == {"text"}
    assert first_turn[first_turn.index("tool_call") :] == [
        "tool_call",
        "tool_call",
        "usage",
        "tool_result",
        "tool_result",
    ]
    assert [e.record.id for e in events if e.type == "tool_result"] == ["c1", "c2"]
    assert "".join(e.text for e in events if e.type == "text") == "checking bothfine"
    assert kinds[-2:] == ["usage", "done"] and events[-1].result.text == "fine"


async def test_tool_tiers_in_native_mode(provider: FakeProvider, probe: Probe) -> None:
    provider.script(
        Turn(calls=[("c1", "tool_search", {"query": "read"})]),
        Turn(calls=[("c2", "call_tool", {"name": "read", "arguments": {"id": "x"}})]),
        Turn(text="ok"),
    )
    client = client_for(provider, "openai", code_mode="native", tool_tiers=True)
    result = await client.run(
        "go", tools=[probe.tool("read"), probe.tool("write", read_only=False)]
    )
    sent = [t["function"]["name"] for t in provider.requests[0]["tools"]]
    assert sent == ["tool_search", "call_tool"]
    assert '"name": "read"' in result.tool_calls[0].output
    assert result.tool_calls[1].output == "x" and probe.starts() == ["x"]


async def test_relay_calls_are_answered_by_the_handler(
    provider: FakeProvider, probe: Probe
) -> None:
    from toolnexus.tools.relay import relay_tool

    pick = relay_tool(
        "pick_color",
        "Ask the user for a color.",
        {"type": "object", "properties": {"hint": {"type": "string"}}},
    )
    asked: list[Any] = []

    async def handler(call: Any) -> str:
        asked.append((call.name, call.arguments))
        return "teal"

    provider.script(
        Turn(calls=[("c1", "pick_color", {"hint": "calm"}), ("c2", "read", {"id": "r"})]),
        Turn(text="ok"),
    )
    result = await client_for(provider, "openai", relay_handler=handler).run(
        "go", tools=[pick, probe.tool("read")]
    )
    assert [(r.name, r.output) for r in result.tool_calls] == [
        ("pick_color", "teal"),
        ("read", "r"),
    ]
    assert asked == [("pick_color", {"hint": "calm"})]
    assert concurrency_mode_of(pick) == "parallel"


def concurrency_mode_of(t: Any) -> str:
    from toolnexus.scheduling import concurrency_mode

    return concurrency_mode(t, {})


@pytest.mark.parametrize("style", STYLES)
async def test_without_a_handler_the_run_is_pending_and_resumes(
    provider: FakeProvider, probe: Probe, style: str
) -> None:
    from toolnexus.tools.relay import relay_tool

    pick = relay_tool("pick_color", "Ask the user for a color.")
    provider.script(
        Turn(
            calls=[
                ("c1", "read", {"id": "before"}),
                ("c2", "pick_color", {}),
                ("c3", "read", {"id": "after"}),
            ]
        ),
        Turn(text="you picked teal"),
    )
    client = client_for(provider, style)
    pending = await client.run("go", tools=[pick, probe.tool("read")])
    assert pending.status == "pending" and [c.id for c in pending.pending] == ["c2"]
    assert [r.id for r in pending.tool_calls] == ["c1", "c3"]  # the others ran
    assert len(provider.requests) == 1
    with pytest.raises(ConfigurationError, match="answers are missing"):
        await client.resume(pending, {})
    done = await client.resume(pending, {"c2": "teal"})
    assert done.status == "done" and done.text == "you picked teal" and done.turns == 2
    assert [(r.id, r.output) for r in done.tool_calls] == [
        ("c1", "before"),
        ("c2", "teal"),
        ("c3", "after"),
    ]
    assert tool_results(done, style) == [("c1", "before"), ("c2", "teal"), ("c3", "after")]
    with pytest.raises(ConfigurationError, match="only a run with status 'pending'"):
        await client.resume(done, {})


async def test_a_resumed_turn_that_ends_the_run_makes_no_further_request() -> None:
    """The answers complete the waiting turn, and the turn rule decides on it as on any turn:
    a tool past its retries, or the output handed over, ends the run there (before, one more
    model request was made, and its calls ran, before the run stopped)."""
    import dataclasses

    from pydantic import BaseModel

    from toolnexus import ModelRetry
    from toolnexus.testing import FunctionModel
    from toolnexus.tools.relay import relay_tool

    class City(BaseModel):
        name: str

    @tool
    def _flaky(n: int) -> str:
        """Asks the model to try again, always."""
        raise ModelRetry("try again")

    flaky = dataclasses.replace(_flaky, name="flaky", retries=0)
    pick = relay_tool("pick_color", "Ask the user for a color.")
    asked: list[int] = []

    def model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        asked.append(len(messages))
        if len(asked) == 1:
            return [ToolCall("c1", "pick_color", {}), ToolCall("c2", "flaky", {"n": 1})]
        return [ToolCall(f"later{len(asked)}", "flaky", {"n": 2})]

    client = create_client(model=FunctionModel(model), code_mode="native")
    pending = await client.run("go", tools=[pick, flaky])
    assert pending.status == "pending"
    stopped = await client.resume(pending, {"c1": "teal"})
    assert stopped.status == "incomplete"
    assert (
        stopped.stopped_by
        == "tool 'flaky' needed another try more often than its retries (0) allow"
    )
    assert [r.id for r in stopped.tool_calls] == ["c1", "c2"] and len(asked) == 1

    asked.clear()

    def hands_over(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        asked.append(len(messages))
        if len(asked) == 1:
            return [
                ToolCall("c1", "pick_color", {}),
                ToolCall("f1", "final_result", {"name": "Oslo"}),
            ]
        return "asked again"

    client = create_client(model=FunctionModel(hands_over), code_mode="native")
    pending = await client.run("go", tools=[pick], output_type=City)
    done = await client.resume(pending, {"c1": "teal"})
    assert done.status == "done" and done.output == City(name="Oslo")
    assert len(asked) == 1 and done.turns == 1


async def test_a_cancelled_run_keeps_the_result_of_a_call_that_finished_behind_a_slow_one() -> None:
    """Results commit in emitted order, so a call that finished behind a slow one had no
    committed outcome yet when the run was cancelled; it still gets its real result."""
    release = asyncio.Event()

    @tool(hints=ToolHints(read_only=True))
    async def slow() -> str:
        """Slow."""
        await release.wait()
        return "S"

    @tool(hints=ToolHints(read_only=True))
    async def quick() -> str:
        """Quick."""
        return "Q"

    model = ScriptedModel([[ToolCall("s", "slow", {}), ToolCall("q", "quick", {})], "done"])
    session = Session()
    client = create_client(model=model, code_mode="native")
    running = asyncio.ensure_future(client.run("go", tools=[slow, quick], session=session))
    for _ in range(50):  # until quick has finished (slow never does)
        await asyncio.sleep(0)
    running.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await running
    release.set()
    results = {e.data["tool_call_id"]: e.data for e in session.events if e.type == "tool_result"}
    assert results["q"]["content"] == "Q" and not results["q"]["is_error"]
    assert "cancelled" in results["s"]["content"] and results["s"]["is_error"]
