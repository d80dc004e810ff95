"""``style="responses"``: the OpenAI Responses API through the official SDK, against a scripted
endpoint on 127.0.0.1 that plays the API's replay rules (``responses_endpoint.Endpoint``).

Every run here is checked by the endpoint: a reasoning item dropped, altered, sent without its
encrypted content or without the item that followed it, a call without its output, an output
without its call, each gets the API's own error. A run that reaches ``done`` with
``endpoint.rejections == []`` kept the conversation the way the API requires.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel

from helpers import Probe
from responses_endpoint import NOT_PERSISTED, Endpoint, Step
from test_cli import subprocess_toolnexus
from toolnexus import RunContext, Session, ToolHints, tool
from toolnexus.agents import AgentRuntime, agent
from toolnexus.client import RunResult, create_client
from toolnexus.errors import ConfigurationError, ProviderError
from toolnexus.tools.relay import relay_tool

ENCRYPTED = "reasoning.encrypted_content"


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    """The scripted Responses API endpoint on 127.0.0.1."""
    server = Endpoint().start()
    yield server
    server.stop()


def client_for(endpoint: Endpoint, **options: Any) -> Any:
    options.setdefault("code_mode", "native")
    return create_client(
        style="responses",
        base_url=endpoint.url + "/v1",
        model="gpt-test",
        api_key="none",
        **options,
    )


async def run(client: Any, prompt: str, *, stream: bool, **kwargs: Any) -> RunResult:
    if not stream:
        result: RunResult = await client.run(prompt, **kwargs)
        return result
    async for event in client.stream(prompt, **kwargs):
        if event.type == "done":
            done: RunResult = event.result
    return done


def outputs(body: dict[str, Any]) -> list[str]:
    """The call ids of a request's ``function_call_output`` items, in order."""
    return [i["call_id"] for i in body["input"] if i.get("type") == "function_call_output"]


def lane_tools(probe: Probe) -> list[Any]:
    return [probe.tool("read"), probe.tool("write", read_only=False)]


THREE_TURNS = [
    Step(
        reasoning=True,
        summary=[],
        calls=[
            ("read", {"id": "r1", "steps": 3}),
            ("read", {"id": "r2", "steps": 3}),
            ("read", {"id": "r3", "steps": 3}),
            ("write", {"id": "w1"}),
            ("read", {"id": "r4"}),
        ],
    ),
    Step(
        reasoning=True,
        summary=["One more read."],
        text="Reading one more.",
        calls=[("read", {"id": "r5"})],
    ),
    Step(reasoning=True, summary=["All read."], text="all done", cached_tokens=6),
]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_parallel_tool_loop_replays_every_output_item_verbatim_and_in_order(
    endpoint: Endpoint, probe: Probe, stream: bool
) -> None:
    endpoint.script(*copy.deepcopy(THREE_TURNS))
    client = client_for(endpoint, max_parallel=2)
    result = await run(client, "go", stream=stream, tools=lane_tools(probe))
    assert endpoint.rejections == []
    assert (result.status, result.text, result.turns) == ("done", "all done", 3)
    assert probe.starts() == ["r1", "r2", "r3", "w1", "r4", "r5"]
    assert probe.overlaps == []  # the write ran alone, after the reads before it
    if not stream:  # all five known at once: the cap is reached
        assert probe.peak == 2
    assert endpoint.result_orders == endpoint.emitted  # results in emitted order
    for number, body in enumerate(endpoint.requests):
        assert body["store"] is False and ENCRYPTED in body["include"]
        assert "previous_response_id" not in body
        if number == 0:
            continue
        before = endpoint.requests[number - 1]["input"]
        reply = endpoint.replies[number - 1]["output"]
        # everything sent before, then every output item exactly as it came, then the results
        assert body["input"][: len(before)] == before
        assert body["input"][len(before) : len(before) + len(reply)] == reply
        assert outputs({"input": body["input"][len(before) :]}) == endpoint.emitted[number - 1]
    reasoning = [i for i in endpoint.requests[2]["input"] if i.get("type") == "reasoning"]
    assert [r["summary"] for r in reasoning] == [
        [],
        [{"type": "summary_text", "text": "One more read."}],
    ]


async def test_store_true_threads_previous_response_id_and_sends_only_the_new_items(
    endpoint: Endpoint, probe: Probe
) -> None:
    endpoint.script(*copy.deepcopy(THREE_TURNS))
    result = await client_for(endpoint, store=True, max_parallel=2).run(
        "go", tools=lane_tools(probe)
    )
    assert endpoint.rejections == []
    assert (result.status, result.text) == ("done", "all done")
    first, *later = endpoint.requests
    assert first["store"] is True and "previous_response_id" not in first
    for number, body in enumerate(later):
        assert body["store"] is True
        assert body["previous_response_id"] == endpoint.replies[number]["id"]
        assert [i["type"] for i in body["input"]] == ["function_call_output"] * len(
            endpoint.emitted[number]
        )
        assert outputs(body) == endpoint.emitted[number]


async def test_a_stream_starts_a_call_before_the_response_is_complete_and_keeps_the_whole_item(
    endpoint: Endpoint,
) -> None:
    started = threading.Event()

    @tool(hints=ToolHints(read_only=True))
    def lookup(key: str) -> str:
        """Look something up."""
        started.set()  # the endpoint holds the rest of the response until this happens
        return key.upper()

    endpoint.script(
        Step(
            reasoning=True,
            summary=["Two lookups."],
            calls=[("lookup", {"key": "a"}), ("lookup", {"key": "b"})],
            hold=started,
        ),
        Step(text="A and B"),
    )
    result = await run(client_for(endpoint), "go", stream=True, tools=[lookup])
    assert endpoint.holds == [True]  # the call had started while the response was still open
    assert endpoint.rejections == []
    assert result.text == "A and B" and [r.output for r in result.tool_calls] == ["A", "B"]
    # the reasoning item went back as output_item.done had it, not the incomplete added copy
    (sent,) = [i for i in endpoint.requests[1]["input"] if i.get("type") == "reasoning"]
    (issued,) = [i for i in endpoint.replies[0]["output"] if i["type"] == "reasoning"]
    assert sent == issued


BROKEN = {
    "encrypted content dropped": (404, NOT_PERSISTED.format("{rs}")),
    "reasoning item dropped": (
        400,
        "Item '{fc}' of type 'function_call' was provided without its required 'reasoning' "
        "item: '{rs}'.",
    ),
    "following item dropped": (
        400,
        "Item '{rs}' of type 'reasoning' was provided without its required following item.",
    ),
    "an output dropped": (400, "No tool output found for function call {call2}."),
    "an output for no call": (
        400,
        "No tool call found for function call output with call_id call_unknown.",
    ),
    "summary dropped": (400, "Missing required parameter: 'input[1].summary'."),
    "encrypted content altered": (
        400,
        "The encrypted content for item {rs} could not be verified.",
    ),
}


def _break(body: dict[str, Any], how: str) -> dict[str, Any]:
    broken = copy.deepcopy(body)
    items = broken["input"]
    rs = next(i for i in items if i.get("type") == "reasoning")
    fc = next(i for i in items if i.get("type") == "function_call")
    if how == "encrypted content dropped":
        del rs["encrypted_content"]
    elif how == "reasoning item dropped":
        items.remove(rs)
    elif how == "following item dropped":
        items.remove(fc)
    elif how == "an output dropped":
        items.pop()
    elif how == "an output for no call":
        items.append({"type": "function_call_output", "call_id": "call_unknown", "output": "x"})
    elif how == "summary dropped":
        del rs["summary"]
    else:
        rs["encrypted_content"] = "A" + rs["encrypted_content"][1:]
    return broken


@pytest.mark.parametrize("how", list(BROKEN))
async def test_the_endpoint_answers_each_broken_replay_with_the_apis_error_and_the_client_never_breaks_one(
    endpoint: Endpoint, how: str
) -> None:
    endpoint.script(
        Step(reasoning=True, calls=[("lookup", {"key": "a"}), ("lookup", {"key": "b"})]),
        Step(reasoning=True, text="A and B"),
    )

    @tool(hints=ToolHints(read_only=True))
    def lookup(key: str) -> str:
        """Look something up."""
        return key.upper()

    result = await client_for(endpoint).run("go", tools=[lookup])
    assert result.status == "done" and endpoint.rejections == []
    body = endpoint.requests[1]
    rs = next(i["id"] for i in body["input"] if i.get("type") == "reasoning")
    fc = next(i["id"] for i in body["input"] if i.get("type") == "function_call")
    call2 = endpoint.emitted[0][1]
    status, message = BROKEN[how]
    endpoint.script(Step(text="unreachable"))
    async with httpx.AsyncClient() as raw:
        answer = await raw.post(endpoint.url + "/v1/responses", json=_break(body, how))
    assert answer.status_code == status
    error = answer.json()["error"]
    assert error["message"] == message.format(rs=rs, fc=fc, call2=call2)
    assert error["type"] == "invalid_request_error"
    assert error["param"] == ("input[1].summary" if how == "summary dropped" else "input")
    assert endpoint.steps[0].text == "unreachable"  # a refused request consumed nothing


async def test_with_previous_response_id_a_missing_output_or_a_duplicate_item_is_refused(
    endpoint: Endpoint,
) -> None:
    endpoint.script(
        Step(reasoning=True, calls=[("lookup", {"key": "a"}), ("lookup", {"key": "b"})]),
        Step(text="A and B"),
    )

    @tool(hints=ToolHints(read_only=True))
    def lookup(key: str) -> str:
        """Look something up."""
        return key.upper()

    result = await client_for(endpoint, store=True).run("go", tools=[lookup])
    assert result.text == "A and B" and endpoint.rejections == []
    first = endpoint.replies[0]
    good = endpoint.requests[1]
    missing = {**good, "input": good["input"][:1]}
    raw = httpx.AsyncClient()
    answer = await raw.post(endpoint.url + "/v1/responses", json=missing)
    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == (
        f"No tool output found for function call {endpoint.emitted[0][1]}."
    )
    duplicate = {**good, "input": [first["output"][0], *good["input"]]}
    answer = await raw.post(endpoint.url + "/v1/responses", json=duplicate)
    await raw.aclose()
    assert answer.json()["error"]["message"] == (
        f"Duplicate item found with id {first['output'][0]['id']}. Remove duplicate items from "
        "your input and try again."
    )


async def test_code_mode_runs_a_program_and_its_reasoning_goes_back(
    endpoint: Endpoint, probe: Probe
) -> None:
    program = (
        "import asyncio\n"
        "r = await asyncio.gather(*[tools.read({'id': f'r{i}'}) for i in range(4)])\n"
        "print(len(r))\nr"
    )
    endpoint.script(
        Step(
            reasoning=True,
            summary=["I will write a program."],
            calls=[("run_code", {"code": program, "description": "Read four things."})],
        ),
        Step(reasoning=True, text="read them"),
    )
    result = await client_for(endpoint, code_mode="code").run("go", tools=[probe.tool("read")])
    assert endpoint.rejections == []
    assert [t["name"] for t in endpoint.requests[0]["tools"]] == ["run_code"]
    assert result.text == "read them" and not result.tool_calls[0].is_error
    assert '"result": ["r0", "r1", "r2", "r3"]' in result.tool_calls[0].output
    assert probe.starts() == ["r0", "r1", "r2", "r3"]
    (output,) = [
        i for i in endpoint.requests[1]["input"] if i.get("type") == "function_call_output"
    ]
    assert output["output"] == result.tool_calls[0].output


class City(BaseModel):
    name: str
    population: int


async def test_structured_output_through_the_final_result_tool(endpoint: Endpoint) -> None:
    endpoint.script(
        Step(reasoning=True, calls=[("final_result", {"name": "Oslo", "population": "lots"})]),
        Step(reasoning=True, calls=[("final_result", {"name": "Oslo", "population": 709037})]),
    )
    result = await client_for(endpoint).run("Which city?", output_type=City)
    assert endpoint.rejections == []
    assert result.status == "done" and result.output == City(name="Oslo", population=709037)
    assert "final_result" in [t.get("name") for t in endpoint.requests[0]["tools"]]
    (retry,) = [i for i in endpoint.requests[1]["input"] if i.get("type") == "function_call_output"]
    assert retry["output"].startswith("Error: ") and "population" in retry["output"]


class Bank:
    def __init__(self, balances: dict[str, int]) -> None:
        self.balances = balances


@tool(hints=ToolHints(read_only=True))
def balance(account: str, ctx: RunContext[Bank]) -> int:
    """The balance of an account."""
    return ctx.deps.balances[account]


async def test_tools_see_the_runs_deps(endpoint: Endpoint) -> None:
    endpoint.script(
        Step(reasoning=True, calls=[("balance", {"account": "a"}), ("balance", {"account": "b"})]),
        Step(text="a has 3, b has 5"),
    )
    result = await client_for(endpoint).run(
        "balances?", tools=[balance], deps=Bank({"a": 3, "b": 5})
    )
    assert endpoint.rejections == [] and result.status == "done"
    sent = [i["output"] for i in endpoint.requests[1]["input"] if "output" in i]
    assert sent == ["3", "5"]


async def test_a_rate_limit_is_retried_and_a_failing_endpoint_falls_back(
    endpoint: Endpoint,
) -> None:
    endpoint.script(Step(status=429), Step(reasoning=True, text="hello"))
    result = await client_for(endpoint, retries=1).run("hi")
    assert result.text == "hello" and endpoint.failures == [429] and len(endpoint.requests) == 2

    backup = Endpoint().start()
    try:
        backup.script(
            Step(reasoning=True, calls=[("balance", {"account": "a"})]),
            Step(reasoning=True, text="from the backup"),
        )
        endpoint.script(*[Step(status=503) for _ in range(4)])
        second = create_client(
            style="responses", base_url=backup.url + "/v1", model="backup-model", api_key="none"
        )
        client = client_for(endpoint, retries=0, fallback=[second])
        result = await client.run("go", tools=[balance], deps=Bank({"a": 1}))
        assert result.text == "from the backup"
        assert result.models == ["backup-model", "backup-model"]
        assert backup.rejections == [] and endpoint.failures == [429, 503, 503]
    finally:
        backup.stop()


@pytest.mark.parametrize("store", [False, True])
async def test_a_relay_call_makes_the_run_pending_and_resume_carries_it_on(
    endpoint: Endpoint, probe: Probe, store: bool
) -> None:
    pick = relay_tool("pick_color", "Ask the user for a color.")
    endpoint.script(
        Step(
            reasoning=True,
            summary=["Ask the user."],
            calls=[("read", {"id": "before"}), ("pick_color", {}), ("read", {"id": "after"})],
        ),
        Step(reasoning=True, text="you picked teal"),
    )
    client = client_for(endpoint, store=store)
    pending = await client.run("go", tools=[pick, probe.tool("read")])
    assert pending.status == "pending" and len(endpoint.requests) == 1
    (call,) = pending.pending
    done = await client.resume(pending, {call.id: "teal"})
    assert endpoint.rejections == []
    assert done.status == "done" and done.text == "you picked teal"
    assert endpoint.result_orders == endpoint.emitted
    answers = {i["call_id"]: i["output"] for i in endpoint.requests[1]["input"] if "output" in i}
    assert answers == dict(zip(endpoint.emitted[0], ["before", "teal", "after"], strict=True))
    if store:
        assert endpoint.requests[1]["previous_response_id"] == endpoint.replies[0]["id"]


async def test_a_sub_agent_runs_its_own_responses_conversation(endpoint: Endpoint) -> None:
    endpoint.script(
        Step(reasoning=True, calls=[("task", {"agent": "researcher", "prompt": "find it"})]),
        Step(reasoning=True, summary=["Found."], text="found it"),
        Step(reasoning=True, text="done"),
    )
    team = [
        agent("coordinator", instructions="You coordinate.", team=["researcher"]),
        agent("researcher", instructions="You research."),
    ]
    runtime = AgentRuntime(team, client=client_for(endpoint))
    coordinator = runtime.spawn(runtime.root, "coordinator")
    runtime.wake(coordinator, "go")
    assert (await runtime.wait(coordinator)).text == "done"
    assert endpoint.rejections == []
    research = endpoint.requests[1]
    assert "You research." in json.dumps(research) and "find it" in json.dumps(research["input"])
    (answer,) = [
        i for i in endpoint.requests[2]["input"] if i.get("type") == "function_call_output"
    ]
    assert "found it" in answer["output"]


@pytest.mark.parametrize("stream", [False, True])
async def test_usage_adds_up_each_responses_figures_cached_tokens_included(
    endpoint: Endpoint, probe: Probe, stream: bool
) -> None:
    steps = copy.deepcopy(THREE_TURNS)
    steps[1].cached_tokens = 4
    endpoint.script(*steps)
    result = await run(client_for(endpoint), "go", stream=stream, tools=lane_tools(probe))
    assert result.status == "done"
    assert result.usage.input_tokens == sum(u["input"] for u in endpoint.usages)
    assert result.usage.output_tokens == sum(u["output"] for u in endpoint.usages)
    assert result.usage.cache_read_tokens == sum(u["cached"] for u in endpoint.usages) > 0


async def test_each_model_request_is_a_span_with_its_usage(
    endpoint: Endpoint, probe: Probe, spans: InMemorySpanExporter
) -> None:
    steps = copy.deepcopy(THREE_TURNS)
    steps[0].cached_tokens = 5
    endpoint.script(*steps)
    await client_for(endpoint).run("go", tools=lane_tools(probe))
    chats: list[ReadableSpan] = [s for s in spans.get_finished_spans() if s.name == "chat gpt-test"]
    assert len(chats) == 3
    for chat, usage in zip(chats, endpoint.usages, strict=True):
        assert chat.attributes is not None
        assert chat.attributes["gen_ai.usage.input_tokens"] == usage["input"]
        assert chat.attributes["gen_ai.usage.output_tokens"] == usage["output"]
        assert chat.attributes["gen_ai.usage.cache_read.input_tokens"] == usage["cached"]
    tool_spans = [s for s in spans.get_finished_spans() if s.name.startswith("execute_tool")]
    ids = {s.attributes["gen_ai.tool.call.id"] for s in tool_spans if s.attributes}
    assert ids == {call for step in endpoint.emitted for call in step}


def test_toolnexus_chat_speaks_the_responses_api(endpoint: Endpoint) -> None:
    endpoint.script(
        Step(reasoning=True, summary=[], text="First answer."),
        Step(reasoning=True, summary=["Again."], text="Second answer."),
    )
    done = subprocess_toolnexus(
        "chat",
        "--style",
        "responses",
        "--base-url",
        endpoint.url + "/v1",
        "--model",
        "gpt-test",
        "--code-mode",
        "native",
        "--no-builtins",
        stdin="first question\nsecond question\n",
        env={"OPENAI_API_KEY": "k"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "First answer." in done.stdout and "Second answer." in done.stdout
    assert endpoint.rejections == [] and len(endpoint.requests) == 2
    second = endpoint.requests[1]["input"]
    assert endpoint.replies[0]["output"][0] in second  # the reasoning item, whole
    assert second[-1] == {"role": "user", "content": "second question"}


async def test_a_saved_session_carries_the_reasoning_on_after_a_load(
    endpoint: Endpoint, tmp_path: Path
) -> None:
    endpoint.script(
        Step(reasoning=True, calls=[("balance", {"account": "a"})]),
        Step(reasoning=True, summary=["Answer."], text="a has 3"),
        Step(reasoning=True, text="b has 5"),
    )
    first = Session()
    await client_for(endpoint).run("a?", tools=[balance], session=first, deps=Bank({"a": 3}))
    first.save(tmp_path / "chat.jsonl")
    loaded = Session.load(tmp_path / "chat.jsonl")
    result = await client_for(endpoint).run(
        "b?", tools=[balance], session=loaded, deps=Bank({"b": 5})
    )
    assert endpoint.rejections == []
    assert result.text == "b has 5"
    sent = endpoint.requests[2]["input"]
    for reply in endpoint.replies[:2]:
        for item in reply["output"]:
            assert item in sent  # every item of the earlier run, as it came
    assert sent[-1] == {"role": "user", "content": "b?"}


REFUSALS = {
    "content filter": Step(incomplete="content_filter", text="Partial"),
    "refusal part": Step(refusal="I can't help with that."),
}


@pytest.mark.parametrize("how", list(REFUSALS))
async def test_a_refusal_ends_the_run_refused_and_is_not_sent_again(
    endpoint: Endpoint, how: str
) -> None:
    endpoint.script(copy.deepcopy(REFUSALS[how]), Step(text="fine"))
    client = client_for(endpoint)
    result = await client.run("something bad")
    assert result.status == "refused" and len(endpoint.requests) == 1
    assert result.stopped_by is not None
    assert ("content_filter" if how == "content filter" else "refus") in result.stopped_by
    again = await client.run("something else", history=result.messages)
    assert again.text == "fine"
    refused_ids = {item["id"] for item in endpoint.replies[0]["output"]}
    assert not refused_ids & {i.get("id") for i in endpoint.requests[1]["input"]}


async def test_a_failed_response_is_a_provider_error_naming_the_reason(
    endpoint: Endpoint,
) -> None:
    for stream in (False, True):
        endpoint.script(Step(failed="the model crashed"))
        with pytest.raises(ProviderError, match="the model crashed"):
            await run(client_for(endpoint, retries=0), "hi", stream=stream)


def test_store_and_previous_response_id_are_the_clients_own(endpoint: Endpoint) -> None:
    for field in ("store", "previous_response_id", "input"):
        with pytest.raises(ConfigurationError, match=field):
            create_client(style="responses", base_url=endpoint.url + "/v1", model="m",
                          api_key="none", request_params={field: True})  # fmt: skip
