"""OpenTelemetry spans: names, attributes, status and nesting, read from an in-memory exporter.

The OpenTelemetry SDK is configured once for the test session (a tracer provider can be set
only once per process); each test starts from an empty exporter.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from fake_provider import USAGE_IN, USAGE_OUT, FakeProvider, Turn
from toolnexus import Resources, ToolCall, ToolHints, create_client, run_batch, tool
from toolnexus.agents import AgentRuntime, agent
from toolnexus.codemode import run_program
from toolnexus.codemode.runtimes import MontyRuntime
from toolnexus.errors import ProviderError


def named(exporter: InMemorySpanExporter, prefix: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith(prefix)]


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


@tool(hints=ToolHints(read_only=True))
async def lookup(key: str) -> str:
    """Look a key up; traces its own work, as an instrumented client library would."""
    with trace.get_tracer("a-library").start_as_current_span(f"fetch {key}"):
        await asyncio.sleep(0)
    if key == "missing":
        raise KeyError(f"no entry {key!r}")
    return key.upper()


async def test_each_tool_call_is_a_span_under_the_callers_span(
    spans: InMemorySpanExporter,
) -> None:
    calls = [ToolCall(f"c{i}", "lookup", {"key": k}) for i, k in enumerate(["a", "missing"])]
    with trace.get_tracer("test").start_as_current_span("request") as request:
        outcomes = await run_batch(calls, [lookup])
    assert [o.ok for o in outcomes] == [True, False]
    tool_spans = sorted(
        named(spans, "execute_tool"), key=lambda s: s.attributes["toolnexus.call.seq"]
    )  # type: ignore[index]
    assert [s.name for s in tool_spans] == ["execute_tool lookup", "execute_tool lookup"]
    for span in tool_spans:
        assert parent_of(span) == request.get_span_context().span_id
        assert span.attributes is not None
        assert span.attributes["gen_ai.operation.name"] == "execute_tool"
        assert span.attributes["gen_ai.tool.name"] == "lookup"
        assert span.attributes["toolnexus.call.mode"] == "parallel"
    ok, failed = tool_spans
    assert ok.status.status_code is StatusCode.UNSET
    assert failed.status.status_code is StatusCode.ERROR
    assert "no entry 'missing'" in (failed.status.description or "")
    # What a tool traces itself nests under its call's span.
    fetches = {s.name: s for s in named(spans, "fetch")}
    assert parent_of(fetches["fetch a"]) == span_id(ok)
    assert parent_of(fetches["fetch missing"]) == span_id(failed)


async def test_a_code_run_is_a_span_holding_its_sub_calls(
    spans: InMemorySpanExporter, monty_runtime: MontyRuntime
) -> None:
    program = "import asyncio\nawait asyncio.gather(tools.lookup({'key': 'x'}), tools.lookup({'key': 'y'}))"
    out = await run_program(program, [lookup], runtime=monty_runtime, call_id="call_7")
    assert out["result"] == ["X", "Y"]
    (run,) = named(spans, "code_run")
    assert run.name == "code_run python"
    assert run.attributes is not None and run.attributes["gen_ai.tool.call.id"] == "call_7"
    subs = named(spans, "execute_tool")
    assert len(subs) == 2
    assert {parent_of(s) for s in subs} == {span_id(run)}
    assert {s.attributes["toolnexus.lane.call_id"] for s in subs if s.attributes} == {"call_7"}

    failing = await run_program(
        "await tools.lookup({'key': 'missing'})", [lookup], runtime=monty_runtime
    )
    assert failing["error"]["kind"] == "exception"
    failed_run = named(spans, "code_run")[-1]
    assert failed_run.status.status_code is StatusCode.ERROR
    assert failed_run.attributes is not None and failed_run.attributes["error.type"] == "exception"


async def test_model_requests_are_client_spans_with_usage(
    spans: InMemorySpanExporter, provider: FakeProvider
) -> None:
    provider.script(Turn(calls=[("call_1", "lookup", {"key": "k"})]), Turn(text="K it is."))
    client = create_client(
        base_url=provider.url + "/v1", model="test-model", api_key="k", code_mode="native"
    )
    result = await client.run("look up k", tools=[lookup])
    assert result.text == "K it is."
    chats = named(spans, "chat")
    assert [s.name for s in chats] == ["chat test-model", "chat test-model"]
    for chat in chats:
        assert chat.kind is SpanKind.CLIENT
        assert chat.attributes is not None
        assert chat.attributes["gen_ai.provider.name"] == "openai"
        assert chat.attributes["gen_ai.request.model"] == "test-model"
        assert chat.attributes["server.address"] == "127.0.0.1"
        assert chat.attributes["gen_ai.usage.input_tokens"] == USAGE_IN
        assert chat.attributes["gen_ai.usage.output_tokens"] == USAGE_OUT
    (call,) = named(spans, "execute_tool")
    assert call.attributes is not None and call.attributes["gen_ai.tool.call.id"] == "call_1"

    provider.script(Turn(status=500))
    failing = create_client(base_url=provider.url + "/v1", model="m", api_key="k", retries=0)
    with pytest.raises(ProviderError):
        await failing.run("hi")
    failed = named(spans, "chat m")
    assert len(failed) == 1 and failed[0].status.status_code is StatusCode.ERROR


async def test_a_sub_agent_turn_nests_under_the_task_call_that_started_it(
    spans: InMemorySpanExporter, provider: FakeProvider
) -> None:
    def route(body: dict[str, Any]) -> Turn:
        messages = body["messages"]
        if messages[0]["content"] == "You research.":
            return Turn(text="found it")
        if messages[-1]["role"] == "tool":
            return Turn(text="done")
        return Turn(calls=[("t1", "task", {"agent": "researcher", "prompt": "find it"})])

    provider.router = route
    client = create_client(
        base_url=provider.url + "/v1", model="m", api_key="k", code_mode="native"
    )
    team = [
        agent("coordinator", instructions="You coordinate.", team=["researcher"]),
        agent("researcher", instructions="You research."),
    ]
    runtime = AgentRuntime(team, client=client)
    coordinator = runtime.spawn(runtime.root, "coordinator")
    runtime.wake(coordinator, "go")
    assert (await runtime.wait(coordinator)).text == "done"
    turns = {s.name: s for s in named(spans, "invoke_agent")}
    assert set(turns) == {"invoke_agent coordinator", "invoke_agent researcher"}
    (task_call,) = named(spans, "execute_tool task")
    assert parent_of(task_call) == span_id(turns["invoke_agent coordinator"])
    assert parent_of(turns["invoke_agent researcher"]) == span_id(task_call)
    researcher = turns["invoke_agent researcher"]
    assert researcher.attributes is not None
    assert researcher.attributes["gen_ai.agent.id"] == "root/coordinator.1/researcher.2"
    research_chats = [s for s in named(spans, "chat") if parent_of(s) == span_id(researcher)]
    assert len(research_chats) == 1


async def test_a_tool_span_carries_declared_resources_and_what_the_call_waited_for(
    spans: InMemorySpanExporter,
) -> None:
    @tool(resources=lambda args: Resources(writes=[args["key"]]))
    async def put(key: str) -> str:
        """Store a key."""
        await asyncio.sleep(0)
        return key

    calls = [ToolCall("p1", "put", {"key": "k"}), ToolCall("p2", "put", {"key": "k"})]
    await run_batch(calls, [put])
    first, second = sorted(named(spans, "execute_tool put"), key=lambda s: s.start_time or 0)
    assert first.attributes is not None and second.attributes is not None
    assert first.attributes["toolnexus.call.writes"] == ("k",)
    assert "toolnexus.call.waited_for.seq" not in first.attributes
    assert second.attributes["toolnexus.call.waited_for.seq"] == 1
    assert second.attributes["toolnexus.call.waited_for.resource"] == "k"


@pytest.mark.temporal
async def test_a_durable_tool_call_has_the_same_span_as_in_process(
    spans: InMemorySpanExporter, temporal_address: str
) -> None:
    from temporalio.client import Client

    from toolnexus.temporal import run_batch as durable_batch
    from toolnexus.temporal import worker

    temporal = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4()}"
    calls = [ToolCall("t1", "lookup", {"key": "a"}), ToolCall("t2", "lookup", {"key": "missing"})]
    async with worker(temporal, task_queue=queue, tools=[lookup]):
        await durable_batch(temporal, calls, task_queue=queue)
    durable = sorted(named(spans, "execute_tool lookup"), key=lambda s: s.start_time or 0)
    spans.clear()
    await run_batch(calls, [lookup])
    local = sorted(named(spans, "execute_tool lookup"), key=lambda s: s.start_time or 0)
    for here, there in zip(local, durable, strict=True):
        assert there.attributes is not None and here.attributes is not None
        assert there.attributes["gen_ai.tool.call.id"] == here.attributes["gen_ai.tool.call.id"]
        assert there.attributes["gen_ai.tool.name"] == "lookup"
        assert there.status.status_code == here.status.status_code


async def test_without_a_tracer_provider_a_code_run_starts_no_span(
    monkeypatch: pytest.MonkeyPatch, spans: InMemorySpanExporter
) -> None:
    """With no provider set and no recording span current, ``code_run_span`` hands back the
    current span without asking the no-op tracer for one (it would only make the same span
    current again); with a provider it starts its span as before."""
    from toolnexus import _tracing

    started: list[str] = []
    start = _tracing._tracer.start_as_current_span

    def counted(name: str, *args: Any, **kwargs: Any) -> Any:
        started.append(name)
        return start(name, *args, **kwargs)

    monkeypatch.setattr(_tracing._tracer, "start_as_current_span", counted)
    monkeypatch.setattr(trace, "get_tracer_provider", trace.ProxyTracerProvider)
    runtime = MontyRuntime(type_check=False)
    try:
        out = await run_program("1", [], runtime=runtime)
    finally:
        await runtime.aclose()
    assert out == {"result": 1, "logs": []}, out
    assert started == []
    monkeypatch.undo()
    monkeypatch.setattr(_tracing._tracer, "start_as_current_span", counted)
    with _tracing.code_run_span("python", None):
        pass
    assert started == ["code_run python"]
    assert [s.name for s in named(spans, "code_run")] == ["code_run python"]
