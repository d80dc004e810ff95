"""Hostile input from the model's side of the wire: every one is an error result the model reads,
or a clear error, never an exception out of the loop. Both styles, streaming and not, over real
HTTP on 127.0.0.1 (see ``fake_provider.py``)."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from fake_provider import FakeProvider, Turn, Verbatim
from frontier_endpoint import TOOL_ID, FrontierEndpoint, lookup, start
from frontier_endpoint import Step as FrontierStep
from frontier_endpoint import client_for as frontier_client
from frontier_endpoint import run as frontier_run
from helpers import RAISERS, raising_tools
from raw_endpoint import RawEndpoint, as_json, as_sse
from responses_endpoint import Endpoint as ResponsesEndpoint
from responses_endpoint import Step as ResponsesStep
from test_client import client_for, run, tool_results
from toolnexus import Session, ToolCall, ToolHints, create_client, run_batch, tool
from toolnexus.errors import ConfigurationError, ProviderError
from toolnexus.testing import ScriptedModel
from toolnexus.tools import Tool
from toolnexus.tools.relay import relay_tool

STYLES = ["openai", "anthropic"]
MODES = [False, True]  # streaming


received: list[Any] = []


@tool(hints=ToolHints(read_only=True))
def echo(x: Any = None) -> Any:
    """Return x."""
    received.append(x)
    return x


DEEP = "[" * 5000 + "]" * 5000
HOSTILE_ARGUMENT_TEXT = {
    "nesting of thousands of levels": '{"x": ' + DEEP + "}",
    "a 5000-digit number": '{"x": ' + "9" * 5000 + "}",
    "NaN": '{"x": NaN}',
    "Infinity": '{"x": -Infinity}',
    "nesting past the session log's limit": '{"x": ' + "[" * 300 + "]" * 300 + "}",
    "a lone surrogate": '{"x": "\\ud800"}',
}


@pytest.mark.parametrize("stream", MODES)
@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("case", sorted(HOSTILE_ARGUMENT_TEXT))
async def test_hostile_argument_text_is_an_error_result_and_the_run_goes_on(
    provider: FakeProvider, style: str, stream: bool, case: str
) -> None:
    text = HOSTILE_ARGUMENT_TEXT[case]
    if style == "anthropic" and not stream and case in UNDECODABLE_BODIES:
        pytest.skip("such a whole Anthropic body cannot be decoded: a provider error, see below")
    hostile = Verbatim(text) if style == "anthropic" else text
    provider.script(
        Turn(calls=[("c1", "echo", hostile), ("c2", "echo", {"x": "fine"})]),
        Turn(text="done"),
    )
    received.clear()
    result = await run(client_for(provider, style), "go", tools=[echo], stream=stream)
    assert result.status == "done" and result.text == "done"
    results = dict(tool_results(result, style))
    assert received == ["fine"]  # the hostile call never ran; its sibling did
    assert "invalid arguments for tool 'echo'" in results["c1"]
    assert results["c2"] == "fine"
    assert [r.is_error for r in result.tool_calls] == [True, False]


UNDECODABLE_BODIES = {
    "nesting of thousands of levels": "nested too deeply to decode",
    "a 5000-digit number": "not JSON Python can read",
}


@pytest.mark.parametrize("case", sorted(UNDECODABLE_BODIES))
async def test_an_anthropic_body_python_cannot_decode_is_a_provider_error_naming_why(
    provider: FakeProvider, case: str
) -> None:
    """Non-streaming, the tool input is part of the body the SDK decodes in one go: there is no
    call to fail alone, so the run ends with a clear provider error (streaming fails the call)."""
    provider.script(Turn(calls=[("c1", "echo", Verbatim(HOSTILE_ARGUMENT_TEXT[case]))]))
    with pytest.raises(ProviderError, match=UNDECODABLE_BODIES[case]):
        await run(client_for(provider, "anthropic"), "go", tools=[echo], stream=False)


NOT_OBJECTS = {
    "a list": "[1, 2]",
    "a list of pairs": '[["x", 1]]',
    "a string": '"x"',
    "a number": "7",
    "null": "null",
}


@pytest.mark.parametrize("stream", MODES)
@pytest.mark.parametrize("case", sorted(NOT_OBJECTS))
async def test_anthropic_tool_input_that_is_not_an_object_fails_that_call(
    provider: FakeProvider, stream: bool, case: str
) -> None:
    provider.script(
        Turn(calls=[("c1", "echo", Verbatim(NOT_OBJECTS[case])), ("c2", "echo", {"x": 1})]),
        Turn(text="done"),
    )
    received.clear()
    result = await run(client_for(provider, "anthropic"), "go", tools=[echo], stream=stream)
    results = dict(tool_results(result, "anthropic"))
    assert "arguments must be a JSON object" in results["c1"]
    assert received == [1]  # a list of pairs was not silently made an object
    assert result.status == "done"


class _BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr for you")


def _deep(levels: int) -> Any:
    value: Any = []
    for _ in range(levels):
        value = [value]
    return value


UNRENDERABLE = {
    "an int past the digit limit": lambda: 10**5000,
    "nesting past the stack": lambda: _deep(5000),
    "an object whose repr raises": _BadRepr,
    "a lone surrogate": lambda: "bad \ud800 text",
}


@pytest.mark.parametrize("stream", MODES)
@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("case", sorted(UNRENDERABLE))
async def test_a_result_that_cannot_be_rendered_still_reaches_the_model_as_text(
    provider: FakeProvider, style: str, stream: bool, case: str
) -> None:
    make = UNRENDERABLE[case]

    @tool(hints=ToolHints(read_only=True))
    def produce() -> Any:
        """Produce a hostile value."""
        return make()

    provider.script(Turn(calls=[("c1", "produce", {})]), Turn(text="done"))
    result = await run(client_for(provider, style), "go", tools=[produce], stream=stream)
    assert result.status == "done"
    content = dict(tool_results(result, style))["c1"]
    assert isinstance(content, str) and content
    content.encode("utf-8")  # always sendable
    # and it was sent: the second request carried it
    assert len(provider.requests) == 2


@pytest.mark.parametrize("case", sorted(HOSTILE_ARGUMENT_TEXT))
async def test_run_batch_answers_hostile_argument_text_with_an_error_outcome(case: str) -> None:
    received.clear()
    outcomes = await run_batch(
        [ToolCall("1", "echo", HOSTILE_ARGUMENT_TEXT[case]), ToolCall("2", "echo", {"x": 2})],
        [echo],
    )
    assert outcomes[0].error is not None
    assert "invalid arguments for tool 'echo'" in outcomes[0].error["message"]
    assert outcomes[1].value == 2 and received == [2]


async def test_run_batch_refuses_decoded_arguments_with_non_finite_numbers_or_deep_nesting() -> (
    None
):
    received.clear()
    outcomes = await run_batch(
        [
            ToolCall("1", "echo", {"x": float("nan")}),
            ToolCall("2", "echo", {"x": _deep(100)}),
            ToolCall("3", "echo", {"x": 10**5000}),
        ],
        [echo],
    )
    messages = [o.error["message"] if o.error else None for o in outcomes]
    assert "nan" in str(messages[0]).lower()
    assert "nested deeper than 64 levels" in str(messages[1])
    assert "too large for JSON" in str(messages[2])
    assert received == []


async def test_a_concurrency_predicate_cannot_change_what_the_tool_receives() -> None:
    seen: list[Any] = []

    def meddling(args: dict[str, Any]) -> bool:
        args["path"] = "/etc/passwd"
        args.clear()
        return True

    tampered = Tool(
        "t",
        "",
        {"type": "object", "properties": {"path": {"type": "string"}}},
        execute=lambda args: seen.append(dict(args)) or "ok",
        concurrency_safe=meddling,
    )
    outcomes = await run_batch([ToolCall("1", "t", {"path": "notes.txt"})], [tampered])
    assert outcomes[0].ok
    assert seen == [{"path": "notes.txt"}]


async def test_an_empty_choices_list_is_a_provider_error_naming_the_cause(
    provider: FakeProvider,
) -> None:
    provider.script(Turn(raw='{"id": "x", "object": "chat.completion", "choices": []}'))
    with pytest.raises(ProviderError, match="without any choice"):
        await run(client_for(provider, "openai"), "go", tools=[echo], stream=False)


BAD_ANSWERS = {
    "an int past the digit limit": 10**5000,
    "nesting past the stack": _deep(5000),
    "a lone surrogate": "x\ud800",
}


@pytest.mark.parametrize("case", sorted(BAD_ANSWERS))
async def test_resume_refuses_an_unsendable_answer_and_stays_resumable(
    provider: FakeProvider, case: str
) -> None:
    ask = relay_tool("ask_user", "Ask the user.", {"type": "object", "properties": {}})
    client = client_for(provider, "openai")
    provider.script(Turn(calls=[("c1", "ask_user", {})]), Turn(text="thanks"))
    pending = await client.run("go", tools=[ask])
    assert pending.status == "pending"
    with pytest.raises(ConfigurationError, match="still pending"):
        await client.resume(pending, {"c1": BAD_ANSWERS[case]})
    final = await client.resume(pending, {"c1": "blue"})
    assert final.status == "done" and final.text == "thanks"
    assert dict(tool_results(final, "openai"))["c1"] == "blue"


@pytest.mark.parametrize(
    "value",
    [7 * 10**4999, -(10**5000), float("nan")],
    ids=["a 5000-digit int", "a negative 5001-digit int", "NaN"],
)
def test_an_in_process_model_s_unwritable_arguments_fail_that_call(
    value: Any, tmp_path: Path
) -> None:
    """A `ToolCall` whose decoded arguments JSON cannot write fails as that call's error; the
    run, its usage estimate, its transcript and its session log go on."""
    model = ScriptedModel(
        [[ToolCall("c1", "echo", {"x": value}), ToolCall("c2", "echo", {})], "ok"]
    )
    session = Session()
    result = create_client(model=model, code_mode="native").run_sync(
        "go", tools=[echo], session=session
    )
    assert result.status == "done" and result.text == "ok"
    first, second = result.tool_calls
    assert first.is_error and "send the arguments as plain JSON" in first.output
    assert not second.is_error
    json.dumps(model.requests[-1], allow_nan=False)  # the transcript stays sendable
    assert result.usage.total is not None and result.usage.total > 0
    session.save(tmp_path / "s.jsonl")
    assert Session.load(tmp_path / "s.jsonl").messages() == session.messages()


# -- whatever a tool raises is that call's error: native batches and agent runs -------------------


@pytest.mark.parametrize("name", RAISERS)
async def test_whatever_a_tool_raises_is_that_calls_error_in_a_batch(name: str) -> None:
    calls = [ToolCall("c1", name, {}), ToolCall("c2", "fine", {"x": "after"})]
    outcomes = await asyncio.wait_for(run_batch(calls, raising_tools()), 10)
    assert outcomes[0].error is not None and outcomes[0].error["tool"] == name
    assert outcomes[0].error["message"]
    assert outcomes[1].value == "after"


@pytest.mark.parametrize("name", RAISERS)
async def test_whatever_a_tool_raises_is_that_calls_error_in_a_run(name: str) -> None:
    model = ScriptedModel(
        [[ToolCall("c1", name, {}), ToolCall("c2", "fine", {"x": "after"})], "done"]
    )
    client = create_client(model=model, code_mode="native")
    result = await asyncio.wait_for(client.run("go", tools=raising_tools()), 10)
    assert result.status == "done" and result.text == "done"
    first, second = result.tool_calls
    assert first.name == name and first.is_error and first.output
    assert second.output == "after" and not second.is_error


# -- a tool that never returns cannot hold a run forever ------------------------------------------


def _never_returning() -> list[Tool]:
    stop = threading.Event()

    @tool(hints=ToolHints(read_only=True))
    async def hangs_async() -> str:
        """Never returns."""
        await asyncio.Event().wait()
        return "not reached"

    @tool(hints=ToolHints(read_only=True))
    def hangs_sync() -> str:
        """Blocks its thread (released when the test ends)."""
        stop.wait(30)
        return "not reached"

    return [hangs_async, hangs_sync, echo]


@pytest.mark.parametrize("name", ["hangs_async", "hangs_sync"])
async def test_a_call_that_never_returns_is_answered_at_the_calls_timeout(name: str) -> None:
    model = ScriptedModel(
        [[ToolCall("c1", "echo", {"x": "first"}), ToolCall("c2", name, {})], "done"]
    )
    client = create_client(model=model, code_mode="native", calls_timeout=0.5)
    result = await asyncio.wait_for(client.run("go", tools=_never_returning()), 20)
    assert result.status == "done"
    first, late = result.tool_calls
    assert first.output == "first" and not first.is_error  # what finished keeps its outcome
    assert late.is_error and "within 0.5 s (calls_timeout" in late.output


def test_calls_timeout_has_a_default_and_is_checked() -> None:
    model = ScriptedModel(["done"])
    assert create_client(model=model)._config.calls_timeout == 600.0
    with pytest.raises(ConfigurationError, match="calls_timeout must be a positive number"):
        create_client(model=model, calls_timeout=0)


async def test_a_programs_call_that_never_returns_ends_at_the_budget_and_is_reported() -> None:
    from toolnexus.codemode import run_program
    from toolnexus.codemode.runtimes import MontyRuntime

    runtime = MontyRuntime(timeout=1)
    try:
        out = await asyncio.wait_for(
            run_program("await tools.hangs_async({})", _never_returning(), runtime=runtime), 20
        )
    finally:
        await runtime.aclose()
    assert out["error"]["kind"] == "timeout"
    assert out["calls"] == [{"name": "hangs_async", "arguments": {}, "status": "abandoned"}]


# -- Tool.callers is enforced here, not trusted to the provider's allowed_callers -----------------


def _guarded_tools(ran: list[str]) -> list[Tool]:
    @tool(callers=("hosted",))
    def program_only() -> str:
        """Offered only to hosted programs."""
        ran.append("program_only")
        return "ran"

    @tool
    def model_only() -> str:
        """Offered only to the model."""
        ran.append("model_only")
        return "ran"

    return [program_only, model_only, echo]


HOSTED_CALLER = {"type": "code_execution_20260120", "tool_id": "srvtoolu_forged"}


async def test_a_hosted_call_of_a_tool_not_offered_to_programs_is_refused_and_audited() -> None:
    # A hosted call the provider should never have sent (a forged or lax server's).
    ran: list[str] = []
    model = ScriptedModel(
        [
            [
                ToolCall("c1", "model_only", {}, caller=HOSTED_CALLER),
                ToolCall("c2", "program_only", {}),  # no hosting: offered to the model, runs
            ],
            "done",
        ]
    )
    session = Session()
    result = await create_client(model=model, code_mode="native").run(
        "go", tools=_guarded_tools(ran), session=session
    )
    assert ran == ["program_only"]  # model_only never ran
    refused, fine = result.tool_calls
    said = "may not be called from the hosted program 'srvtoolu_forged'"
    assert refused.is_error and said in refused.output and "model_only" in refused.output
    assert fine.output == "ran"
    audit = [e.data for e in session.events if e.type == "call_refused"]
    assert audit == [
        {
            "id": "c1",
            "name": "model_only",
            "caller": "hosted",
            "program": "srvtoolu_forged",
            "message": refused.output,
        }
    ]


async def test_a_batch_refuses_a_hosted_call_of_a_tool_not_offered_to_programs() -> None:
    ran: list[str] = []
    session = Session()
    calls = [ToolCall("c1", "model_only", {}, caller=HOSTED_CALLER)]
    (outcome,) = await run_batch(calls, _guarded_tools(ran), session=session)
    assert ran == [] and outcome.error is not None
    assert [e.data["name"] for e in session.events if e.type == "call_refused"] == ["model_only"]


@pytest.mark.parametrize("provider", ["anthropic", "responses"])
async def test_each_caller_reaches_only_the_tools_offered_to_it_over_the_wire(
    provider: str,
) -> None:
    from responses_endpoint import Endpoint, hosted_program

    ran: list[str] = []
    server = Endpoint().start()
    server.enforce_callers = False  # a server that does not enforce allowed_callers itself
    try:
        server.script(
            *hosted_program(
                [[("model_only", {}), ("program_only", {})]],
                direct=[("program_only", {}), ("model_only", {})],
            )
        )
        base = server.url + ("/v1" if provider == "responses" else "")
        client = create_client(
            style=provider,
            base_url=base,
            model="m",
            api_key="none",
            hosted_code=True,
            code_mode="native",
        )
        session = Session()
        result = await client.run("go", tools=_guarded_tools(ran), session=session)
    finally:
        server.stop()
    assert result.status == "done" and server.rejections == []
    assert sorted(ran) == ["model_only", "program_only"]  # each once, by its own caller
    refusals = [e.data for e in session.events if e.type == "call_refused"]
    assert sorted((r["name"], r["caller"]) for r in refusals) == [
        ("model_only", "hosted"),
        ("program_only", "direct"),
    ]
    refused = [r for r in result.tool_calls if r.is_error]
    assert len(refused) == 2 and all("it was not run" in r.output for r in refused)


# -- a call that cannot be answered is not run ---------------------------------------------------


@pytest.mark.parametrize("stream", MODES)
@pytest.mark.parametrize("style", ["openai", "anthropic", "responses"])
async def test_a_call_without_an_id_is_not_run_and_the_run_says_so(
    provider: FakeProvider, style: str, stream: bool
) -> None:
    received.clear()
    provider.script(Turn(calls=[("c1", "echo", {"x": "first"}), ("", "echo", {"x": "no id"})]))
    with pytest.raises(ProviderError, match="without a call id") as caught:
        await run(client_for(provider, style), "go", tools=[echo], stream=stream)
    assert received == ["first"]  # the call with no id never ran
    partial = caught.value.partial
    assert partial.tool_calls[0].output == "first"
    assert "was not run" in partial.tool_calls[1].output
    assert len(provider.requests) == 1  # nothing was sent back with an empty id


# -- nothing runs unrecorded: calls started by a stream whose turn is then dropped ----------

writes: list[str] = []


@tool
async def write_note(text: str) -> str:
    """Write a note (a side effect)."""
    writes.append(text)
    return f"wrote {text}"


@tool
async def slow_write(text: str) -> str:
    """Write a note, slowly."""
    await asyncio.sleep(30)
    writes.append(text)
    return "never"


def _frontier_stop(stop: str) -> tuple[str, list[FrontierStep]]:
    """A frontier profile, and a turn that calls ``write_note`` then ends with ``stop``."""
    anthropic = stop in ("refusal", "model_context_window_exceeded", "brand_new_reason")
    profile = "anthropic-thinking" if anthropic else "deepseek"
    return profile, [FrontierStep(calls=[("write_note", {"text": "a"})], stop=stop)]


DROPPING_STOPS = {
    # stop reason: the run's status, or None for a ProviderError
    "refusal": "refused",
    "model_context_window_exceeded": "incomplete",
    "brand_new_reason": None,
    "content_filter": "refused",  # Chat Completions
    "error": None,  # OpenRouter's finish reason on Chat Completions
}


async def _outcome(client: Any, **kwargs: Any) -> tuple[Any, ProviderError | None]:
    """The streamed run's result, or the ProviderError's partial run."""
    try:
        return await frontier_run(client, "Note it.", stream=True, **kwargs), None
    except ProviderError as exc:
        error, partial = exc, exc.partial
    assert partial is not None
    return partial, error


def _outside(session: Session) -> list[dict[str, Any]]:
    return [e.data for e in session.events if e.type == "call_outside_transcript"]


@pytest.mark.parametrize("stop", sorted(DROPPING_STOPS))
async def test_a_call_started_by_a_stream_whose_turn_is_dropped_is_recorded(
    endpoints: list[FrontierEndpoint], stop: str, tmp_path: Path
) -> None:
    """The call starts as its block closes; the turn then ends refused, past the context
    window or with a stop reason toolnexus does not know: the write happened, so the result,
    the error's partial run and the session all say so."""
    profile, steps = _frontier_stop(stop)
    server = start(endpoints, profile)
    server.script(*steps)
    writes.clear()
    session = Session()
    result, error = await _outcome(frontier_client(server), tools=[write_note], session=session)
    assert writes == ["a"]  # it ran
    assert (error is None) == (DROPPING_STOPS[stop] is not None)
    assert result.status == (DROPPING_STOPS[stop] or "error")
    [record] = result.tool_calls
    assert (record.name, record.arguments, record.output) == (
        "write_note",
        {"text": "a"},
        "wrote a",
    )
    assert not record.is_error
    [logged] = _outside(session)
    assert logged["name"] == "write_note" and logged["content"] == "wrote a"
    assert logged["tool_call_id"] == record.id and logged["turn"] == 1 and logged["why"]
    # the turn is not in the transcript, and neither is a result without its call
    assert not any(m.get("role") == "tool" for m in session.messages())
    session.save(tmp_path / "s.jsonl")
    assert _outside(Session.load(tmp_path / "s.jsonl")) == [logged]


@pytest.mark.parametrize("stop", ["refusal", "brand_new_reason"])
async def test_a_call_still_running_when_its_turn_is_dropped_is_stopped_and_recorded(
    endpoints: list[FrontierEndpoint], stop: str
) -> None:
    server = start(endpoints, "anthropic-thinking")
    server.script(FrontierStep(calls=[("slow_write", {"text": "b"})], stop=stop))
    writes.clear()
    session = Session()
    result, _ = await _outcome(frontier_client(server), tools=[slow_write], session=session)
    [record] = result.tool_calls
    assert record.is_error and "its turn was dropped before the call finished" in record.output
    assert stop in record.output
    assert writes == []  # stopped, not left running
    assert [d["is_error"] for d in _outside(session)] == [True]


RESPONSES_DROPS = {
    "refusal": ResponsesStep(calls=[("write_note", {"text": "c"})], refusal="I can't."),
    "incomplete (content_filter)": ResponsesStep(
        calls=[("write_note", {"text": "c"})], incomplete="content_filter"
    ),
    "failed": ResponsesStep(calls=[("write_note", {"text": "c"})], failed="the model crashed"),
}


@pytest.mark.parametrize("case", sorted(RESPONSES_DROPS))
async def test_a_responses_call_started_before_its_turn_is_dropped_is_recorded(
    case: str,
) -> None:
    server = ResponsesEndpoint().start()
    try:
        server.script(RESPONSES_DROPS[case])
        client = create_client(
            style="responses",
            base_url=server.url + "/v1",
            model="gpt-test",
            api_key="none",
            code_mode="native",
            retries=0,
        )
        writes.clear()
        session = Session()
        result, error = await _outcome(client, tools=[write_note], session=session)
    finally:
        server.stop()
    assert writes == ["c"]
    assert (error is not None) == (case == "failed")
    assert [r.output for r in result.tool_calls] == ["wrote c"]
    assert [d["content"] for d in _outside(session)] == ["wrote c"]


@pytest.mark.parametrize("style", STYLES)
async def test_calls_started_by_a_stream_that_is_then_cut_off_are_recorded(
    provider: FakeProvider, style: str
) -> None:
    """The stream stops without a stop reason after its first calls started: a ProviderError
    whose partial run holds every call that started."""
    provider.script(
        Turn(
            calls=[("c1", "write_note", {"text": "d"}), ("c2", "write_note", {"text": "e"})],
            cut=True,
        )
    )
    writes.clear()
    session = Session()
    with pytest.raises(ProviderError, match="cut off") as caught:
        await run(
            client_for(provider, style), "go", tools=[write_note], stream=True, session=session
        )
    partial = caught.value.partial
    assert partial is not None and partial.status == "error"
    started = [r.arguments["text"] for r in partial.tool_calls]
    assert started and started == writes  # every call that ran, and only those
    assert [d["arguments"]["text"] for d in _outside(session)] == started


# -- Responses streams: what streamed whole is kept; events of the wrong shape are errors -------


def _response(output: list[Any], status: str = "completed") -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 0,
        "model": "m",
        "status": status,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }


STREAMED_ITEMS = [
    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "c2VjcmV0"},
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "write_note",
        "arguments": '{"text": "f"}',
        "status": "completed",
    },
    {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Noting it.", "annotations": []}],
    },
]


def _responses_stream(items: list[dict[str, Any]], final: Any) -> tuple[str, str]:
    """A Responses event stream: each item added and done (a call's arguments done between),
    then ``final`` as the ``response.completed`` event's response."""
    events: list[Any] = [{"type": "response.created", "response": _response([], "in_progress")}]
    for index, item in enumerate(items):
        added = {**item, "arguments": ""} if item["type"] == "function_call" else item
        events.append({"type": "response.output_item.added", "output_index": index, "item": added})
        if item["type"] == "function_call":
            events.append(
                {
                    "type": "response.function_call_arguments.done",
                    "output_index": index,
                    "item_id": item["id"],
                    "arguments": item["arguments"],
                }
            )
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({"type": "response.completed", "response": final})
    return as_sse(*events)


def _said(text: str) -> dict[str, Any]:
    part = {"type": "output_text", "text": text, "annotations": []}
    return {"type": "message", "id": "msg_2", "role": "assistant", "content": [part]}


@pytest.mark.parametrize("output", ["empty", "missing some"])
async def test_responses_items_that_streamed_whole_stay_when_the_final_output_is_empty(
    raw: RawEndpoint, output: str
) -> None:
    final_output = [] if output == "empty" else STREAMED_ITEMS[:1]
    raw.answer(
        _responses_stream(STREAMED_ITEMS, _response(final_output)),
        _responses_stream([_said("Noted.")], _response([_said("Noted.")])),
    )
    writes.clear()
    result = await run(raw.client("responses"), "Note f.", tools=[write_note], stream=True)
    assert result.status == "done" and result.text == "Noted." and writes == ["f"]
    second = raw.requests[1]["input"]
    kinds = [(i.get("type"), i.get("id") or i.get("call_id")) for i in second]
    assert kinds[1:] == [
        ("reasoning", "rs_1"),
        ("function_call", "fc_1"),
        ("message", "msg_1"),
        ("function_call_output", "call_1"),  # answered, and its call is there to be answered
    ]
    assert second[1:4] == STREAMED_ITEMS


BAD_RESPONSES_EVENTS = {
    "output_item.done with a null item": {
        "type": "response.output_item.done",
        "output_index": 0,
        "item": None,
    },
    "output_item.done without its item": {"type": "response.output_item.done", "output_index": 0},
    "output_item.added with a null item": {
        "type": "response.output_item.added",
        "output_index": 0,
        "item": None,
    },
    "output_item.done with an item that is a list": {
        "type": "response.output_item.done",
        "output_index": 0,
        "item": [1],
    },
    "output_item.done without its position": {
        "type": "response.output_item.done",
        "item": STREAMED_ITEMS[2],
    },
    "an event that is a list": "[1, 2]",
    "an event that is null": "null",
    "an event without a type": "{}",
    "response.completed without its response": {"type": "response.completed"},
    "response.completed whose output is a string": {
        "type": "response.completed",
        "response": {**_response([]), "output": "x"},
    },
    "response.completed whose output holds null": {
        "type": "response.completed",
        "response": _response([None]),  # type: ignore[list-item]
    },
    "response.completed without output, after nothing": {
        "type": "response.completed",
        "response": {k: v for k, v in _response([]).items() if k != "output"},
    },
}


@pytest.mark.parametrize("case", sorted(BAD_RESPONSES_EVENTS))
async def test_a_responses_event_of_the_wrong_shape_is_a_provider_error(
    raw: RawEndpoint, case: str
) -> None:
    created = {"type": "response.created", "response": _response([], "in_progress")}
    raw.answer(as_sse(created, BAD_RESPONSES_EVENTS[case]))
    with pytest.raises(ProviderError) as caught:
        await run(raw.client("responses"), "go", tools=[echo], stream=True)
    assert raw.url("responses") in caught.value.message
    assert "cannot read" in caught.value.message


# -- a 200 answer of the wrong shape is a ProviderError naming the endpoint -------------------

SSE_BODIES = {
    "anthropic": as_sse({"type": "message_start", "message": {"id": "m", "content": []}}),
    "openai": as_sse({"choices": [{"index": 0, "delta": {"content": "hi"}}]}, "[DONE]"),
    "responses": as_sse({"type": "response.created", "response": _response([], "in_progress")}),
}
WRONG_BODIES: dict[str, Any] = {
    "a list": [1, 2],
    "a string": "hello",
    "null": None,
    "an empty object": {},
    "an Anthropic error object": {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded now"},
    },
    "an OpenAI error object": {"error": {"message": "Overloaded now", "type": "server_error"}},
    "an event stream": "SSE",
}
WHOLE_STYLES = ["anthropic", "openai", "responses"]


@pytest.mark.parametrize("style", WHOLE_STYLES)
@pytest.mark.parametrize("case", sorted(WRONG_BODIES))
async def test_a_whole_answer_of_the_wrong_shape_is_a_provider_error_naming_the_endpoint(
    raw: RawEndpoint, style: str, case: str
) -> None:
    body = WRONG_BODIES[case]
    raw.answer(SSE_BODIES[style] if body == "SSE" else as_json(json.dumps(body)))
    with pytest.raises(ProviderError) as caught:
        await run(raw.client(style), "go", tools=[echo], stream=False)
    message = caught.value.message
    assert raw.url(style) in message
    if "error object" in case:
        assert "answered 200 with an error: Overloaded now" in message
    elif case == "an event stream":
        assert "event stream (SSE)" in message
    elif case != "an empty object" or style != "openai":  # {} is Chat's "without any choice"
        assert "cannot read" in message


WRONG_PARTS = {
    "anthropic": {
        "a block that is a number": {"content": [1]},
        "a block that is null": {"content": [None]},
        "a block without a type": {"content": [{}]},
        "content that is a string": {"content": "hi"},
        "a tool_use without its id": {"content": [{"type": "tool_use", "name": "echo"}]},
    },
    "openai": {
        "a choice that is a number": {"choices": [1]},
        "a choice without a message": {"choices": [{"index": 0, "finish_reason": "stop"}]},
        "a message that is a string": {"choices": [{"index": 0, "message": "hi"}]},
        "choices that are a string": {"choices": "x"},
        "tool_calls that are a string": {
            "choices": [{"index": 0, "message": {"role": "assistant", "tool_calls": "x"}}]
        },
    },
    "responses": {
        "an item that is a number": {"output": [1]},
        "an item that is null": {"output": [None]},
        "an item without a type": {"output": [{}]},
        "output that is a string": {"output": "x"},
    },
}
WHOLE_FRAMES = {
    "anthropic": {
        "id": "m",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    },
    "openai": {"id": "c", "object": "chat.completion", "created": 0, "model": "m"},
    "responses": _response([]),
}


@pytest.mark.parametrize(
    ("style", "case"), [(style, case) for style in WRONG_PARTS for case in WRONG_PARTS[style]]
)
async def test_a_whole_answer_with_a_part_of_the_wrong_shape_is_a_provider_error(
    raw: RawEndpoint, style: str, case: str
) -> None:
    raw.answer(as_json({**WHOLE_FRAMES[style], **WRONG_PARTS[style][case]}))
    with pytest.raises(ProviderError, match="cannot read") as caught:
        await run(raw.client(style), "go", tools=[echo], stream=False)
    assert raw.url(style) in caught.value.message


def _anthropic_start() -> dict[str, Any]:
    return {
        "type": "message_start",
        "message": {
            "id": "m",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": [],
            "usage": {"input_tokens": 1, "output_tokens": 1},
        },
    }


def _chunk(delta: Any, **fields: Any) -> dict[str, Any]:
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, **fields}],
    }


WRONG_EVENTS: dict[str, dict[str, list[Any]]] = {
    "anthropic": {
        "an event that is a list": [_anthropic_start(), ("content_block_delta", "[1]")],
        "an event that is null": [_anthropic_start(), ("message_delta", "null")],
        "message_start without its message": [{"type": "message_start"}],
        "content_block_start without its block": [
            _anthropic_start(),
            {"type": "content_block_start", "index": 0},
        ],
        "content_block_start without its index": [
            _anthropic_start(),
            {"type": "content_block_start", "content_block": {"type": "text", "text": ""}},
        ],
        "a delta that is null": [
            _anthropic_start(),
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
            {"type": "content_block_delta", "index": 0, "delta": None},
        ],
        "a text_delta without its text": [
            _anthropic_start(),
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta"}},
        ],
        "a tool_use block without its id": [
            _anthropic_start(),
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "tool_use", "name": "echo", "input": {}},
            },
        ],
        "message_delta without its delta": [_anthropic_start(), {"type": "message_delta"}],
    },
    "openai": {
        "a chunk that is a list": ["[1]"],
        "a chunk that is null": ["null"],
        "choices that are a string": [{"choices": "x"}],
        "a choice that is a number": [{"choices": [1]}],
        "a delta that is a string": [_chunk("x", finish_reason="stop")],
        "tool_calls that are not objects": [_chunk({"tool_calls": [1]}, finish_reason="stop")],
    },
}


@pytest.mark.parametrize(
    ("style", "case"), [(style, case) for style in WRONG_EVENTS for case in WRONG_EVENTS[style]]
)
async def test_a_stream_event_of_the_wrong_shape_is_a_provider_error(
    raw: RawEndpoint, style: str, case: str
) -> None:
    raw.answer(as_sse(*WRONG_EVENTS[style][case]))
    with pytest.raises(ProviderError, match="cannot read") as caught:
        await run(raw.client(style), "go", tools=[echo], stream=True)
    assert raw.url(style) in caught.value.message


async def test_a_streamed_call_of_a_refused_turn_gets_its_result_event(
    endpoints: list[FrontierEndpoint],
) -> None:
    """Watching the stream, the call announced before the refusal is followed by its result."""
    server = start(endpoints, "anthropic-thinking")
    server.script(FrontierStep(calls=[("write_note", {"text": "g"})], stop="refusal"))
    writes.clear()
    kinds = [
        (event.type, getattr(event, "call", None) or getattr(event, "record", None))
        async for event in frontier_client(server).stream("Note it.", tools=[write_note])
    ]
    types = [kind for kind, _ in kinds]
    assert types.index("tool_call") < types.index("tool_result") < types.index("done")
    [(_, record)] = [k for k in kinds if k[0] == "tool_result"]
    assert record.output == "wrote g" and writes == ["g"]


# -- what goes out on the wire is what the APIs accept ------------------------------------------
# (the frontier endpoints refuse what the real APIs refuse, with their error texts)


def _roles_alternate(messages: list[dict[str, Any]]) -> bool:
    roles = [m["role"] for m in messages]
    return all(a != b for a, b in itertools.pairwise(roles))


def _no_empty_text(messages: list[dict[str, Any]]) -> bool:
    return not any(
        isinstance(m["content"], list)
        and any(b.get("type") == "text" and not b.get("text") for b in m["content"])
        for m in messages
    )


@pytest.mark.parametrize("stream", MODES)
@pytest.mark.parametrize("carry", ["history", "session", "resume"])
async def test_an_empty_anthropic_turn_is_never_sent_back_as_an_empty_text_block(
    endpoints: list[FrontierEndpoint], tmp_path: Path, stream: bool, carry: str
) -> None:
    """Claude's documented empty ``end_turn`` after tool results, carried on by ``history=``
    (what ``toolnexus chat`` does), by a saved session and after a resumed run: the API refuses
    ``[{"type": "text", "text": ""}]`` ("text content blocks must be non-empty")."""
    server = start(endpoints, "anthropic-cache")  # thinking off: an empty turn is empty
    ask = relay_tool("ask_city", "Ask the user for a city.", {"type": "object", "properties": {}})
    first_call = ("ask_city", {}) if carry == "resume" else ("lookup", {"city": "Oslo"})
    server.script(FrontierStep(calls=[first_call]), FrontierStep(), FrontierStep(text="Sunny."))
    client = frontier_client(server, request_params={})
    session = Session()
    first = await frontier_run(
        client, "Weather?", stream=stream, tools=[lookup, ask], session=session
    )
    if carry == "resume":
        assert first.status == "pending"
        first = await client.resume(first, {first.pending[0].id: "Oslo"})
    assert first.status == "done" and first.text == ""
    if carry == "session":
        session.save(tmp_path / "s.jsonl")
        again = await frontier_run(
            client,
            "And?",
            stream=stream,
            tools=[lookup],
            session=Session.load(tmp_path / "s.jsonl"),
        )
    else:
        again = await frontier_run(
            client, "And?", stream=stream, tools=[lookup], history=first.messages
        )
    assert server.rejected == [] and again.text == "Sunny."
    sent = server.requests[-1]["messages"]
    assert _roles_alternate(sent) and _no_empty_text(sent)
    assert sent[-1]["role"] == "user" and sent[-1]["content"][0]["type"] == "tool_result"
    assert sent[-1]["content"][-1]["text"] == "And?"  # the results and the prompt: one turn


@pytest.mark.parametrize("stream", MODES)
async def test_an_empty_anthropic_pause_turn_is_continued_without_an_empty_text_block(
    endpoints: list[FrontierEndpoint], stream: bool
) -> None:
    server = start(endpoints, "anthropic-cache")
    server.script(FrontierStep(stop="pause_turn"), FrontierStep(text="Sunny."))
    result = await frontier_run(
        frontier_client(server, request_params={}), "Weather?", stream=stream
    )
    assert server.rejected == [] and result.status == "done" and result.text == "Sunny."
    continued = server.requests[1]["messages"]
    assert continued[-1] == {"role": "assistant", "content": []}  # sent back as it came


KIMI_HISTORY = [
    {"role": "user", "content": "Weather in Oslo and Bergen?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": "lookup", "arguments": json.dumps({"city": city})},
            }
            for call_id, city in (("functions.lookup:0", "Oslo"), ("functions.lookup.0", "Bergen"))
        ],
    },
    {"role": "tool", "tool_call_id": "functions.lookup:0", "content": "Oslo: sunny"},
    {"role": "tool", "tool_call_id": "functions.lookup.0", "content": "Bergen: rain"},
    {"role": "assistant", "content": "Oslo is sunny, Bergen rainy."},
]


@pytest.mark.parametrize("carry", ["history", "session"])
async def test_tool_call_ids_from_another_style_are_mapped_one_to_one_for_anthropic(
    endpoints: list[FrontierEndpoint], carry: str
) -> None:
    server = start(endpoints, "anthropic-cache")
    server.script(FrontierStep(text="Still sunny."))
    client = frontier_client(server, request_params={})
    if carry == "history":
        result = await client.run("And now?", history=KIMI_HISTORY)
    else:  # a session another style's client recorded, carried on by an Anthropic client
        kimi = ScriptedModel(
            [[ToolCall("functions.lookup:0", "lookup", {"city": "Oslo"})], "Sunny."]
        )
        session = Session()
        await create_client(model=kimi, code_mode="native").run(
            "Weather?", tools=[lookup], session=session
        )
        result = await client.run("And now?", session=session)
    assert server.rejected == [] and result.text == "Still sunny."
    sent = server.requests[-1]["messages"]
    uses = [
        b["id"]
        for m in sent
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_use"
    ]
    answers = [
        b["tool_use_id"]
        for m in sent
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_result"
    ]
    assert uses == answers and len(set(uses)) == len(uses)
    assert all(TOOL_ID.match(i) for i in uses)
    kept = [
        b["id"]
        for m in result.messages
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if b.get("type") == "tool_use"
    ]
    # "functions.lookup:0" and "functions.lookup.0" stay two ids; the transcript keeps them
    # as they were, only the request maps them
    originals = ["functions.lookup:0", "functions.lookup.0"]
    assert kept == (originals if carry == "history" else originals[:1])
    assert len(uses) == len(kept)


async def test_cache_breakpoints_inside_tool_results_count_toward_the_four(
    endpoints: list[FrontierEndpoint],
) -> None:
    server = start(endpoints, "anthropic-cache")
    server.script(FrontierStep(text="ok"))
    mark = {"type": "ephemeral"}
    history = [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [
                        {"type": "text", "text": part, "cache_control": mark} for part in "abc"
                    ],
                }
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Sunny."}]},
    ]
    result = await frontier_client(server, request_params={}).run(
        "And?", tools=[lookup], history=history
    )
    assert server.rejected == [] and result.text == "ok"
    assert repr(server.requests[-1]).count("cache_control") == 4


@pytest.mark.parametrize("style", ["anthropic", "openai", "responses"])
async def test_a_history_system_message_given_as_text_blocks_is_sent_as_its_text(
    endpoints: list[FrontierEndpoint], provider: FakeProvider, style: str
) -> None:
    history = [
        {"role": "system", "content": [{"type": "text", "text": "Answer in French."}]},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Bonjour."},
    ]
    if style == "anthropic":
        server = start(endpoints, "anthropic-cache")
        server.script(FrontierStep(text="Oui."))
        await frontier_client(server, request_params={}, system_prompt=None).run(
            "And?", history=history
        )
        system = server.requests[-1]["system"]
        assert [block["text"] for block in system] == ["Answer in French."]
        return
    if style == "responses":  # the Responses endpoint refuses a "text" part ("Invalid value")
        responses = ResponsesEndpoint().start()
        try:
            responses.script(ResponsesStep(text="Oui."))
            await client_for(responses, style).run("And?", history=history)
        finally:
            responses.stop()
        assert responses.rejections == []
        first = responses.requests[-1]["input"][0]
    else:
        provider.script(Turn(text="Oui."))
        await client_for(provider, style).run("And?", history=history)
        first = provider.requests[-1]["messages"][0]
    assert first == {"role": "system", "content": "Answer in French."}


@pytest.mark.parametrize(
    ("style", "key", "value"),
    [
        ("responses", "include", "message.output_text.logprobs"),
        ("anthropic", "stop_sequences", "\n\nObservation:"),
        ("openai", "modalities", "text"),
    ],
)
async def test_a_string_given_for_a_list_field_is_sent_as_one_item(
    provider: FakeProvider, style: str, key: str, value: str
) -> None:
    server: FakeProvider | ResponsesEndpoint = provider
    if style == "responses":  # the Responses endpoint refuses 'm', 'e', ... ("Invalid value")
        server = ResponsesEndpoint().start()
        server.script(ResponsesStep(text="ok"))
    else:
        provider.script(Turn(text="ok"))
    try:
        result = await client_for(server, style, request_params={key: value}).run("hi")
    finally:
        if isinstance(server, ResponsesEndpoint):
            server.stop()
    assert result.text == "ok"
    sent = server.requests[-1][key]
    assert sent[0] == value and all(len(item) > 1 for item in sent)


async def test_a_replayed_chat_audio_object_is_only_its_id(provider: FakeProvider) -> None:
    audio = {"id": "audio_1", "data": "UklGRg==", "expires_at": 1, "transcript": "Hello."}
    message = {
        "role": "assistant",
        "content": None,
        "audio": audio,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "echo", "arguments": "{}"}}
        ],
    }
    reply = {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "test-model",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
    }
    provider.script(Turn(raw=json.dumps(reply)), Turn(text="done"), Turn(text="again"))
    client = client_for(provider, "openai")
    result = await client.run("speak", tools=[echo])
    replayed_audio = [m["audio"] for m in provider.requests[1]["messages"] if "audio" in m]
    assert replayed_audio == [{"id": "audio_1"}]
    history = [dict(m, audio=audio) if "audio" in m else m for m in result.messages]
    await client.run("more", tools=[echo], history=history)  # a history holding all of it
    replayed_audio = [m["audio"] for m in provider.requests[2]["messages"] if "audio" in m]
    assert replayed_audio == [{"id": "audio_1"}]


async def test_anthropic_citations_are_replayed_without_response_only_fields(
    provider: FakeProvider,
) -> None:
    citation = {
        "type": "char_location",
        "cited_text": "sunny",
        "document_index": 0,
        "document_title": "Forecast",
        "start_char_index": 0,
        "end_char_index": 5,
        "file_id": "file_1",
    }
    reply = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "test-model",
        "content": [
            {"type": "text", "text": "It is sunny.", "citations": [citation]},
            {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {}},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    provider.script(Turn(raw=json.dumps(reply)), Turn(text="done"))
    await client_for(provider, "anthropic").run("weather?", tools=[echo])
    (sent,) = [
        b["citations"]
        for m in provider.requests[1]["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("citations")
    ]
    assert sent == [{k: v for k, v in citation.items() if k != "file_id"}]


# -- a fallback endpoint is sent only its own opaque state ---------------------------------------


def _thinking_blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        block
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") in ("thinking", "redacted_thinking")
    ]


@pytest.mark.parametrize("stream", MODES)
async def test_an_anthropic_fallback_is_never_sent_another_endpoint_s_signatures(
    endpoints: list[FrontierEndpoint], tmp_path: Path, stream: bool
) -> None:
    """The primary's signed thinking never reaches the fallback (another endpoint: another
    key), and the fallback's turn, saved in the session, never reaches the primary."""
    primary = start(endpoints, "anthropic-thinking")
    backup = start(endpoints, "anthropic-thinking")
    primary.script(
        FrontierStep(calls=[("lookup", {"city": "Oslo"})]),
        FrontierStep(text="Oslo is sunny."),
        FrontierStep(status=503),
        FrontierStep(text="Pisa is sunny."),
    )
    backup.script(FrontierStep(text="Rome is sunny."))
    client = frontier_client(primary, fallback=[frontier_client(backup)])
    session = Session()
    first = await frontier_run(client, "Oslo?", stream=stream, tools=[lookup], session=session)
    assert first.text == "Oslo is sunny."
    session.save(tmp_path / "s.jsonl")
    second = await frontier_run(
        client, "Rome?", stream=stream, tools=[lookup], session=Session.load(tmp_path / "s.jsonl")
    )
    assert second.text == "Rome is sunny." and second.models == [backup.model]
    assert backup.rejected == [] and _thinking_blocks(backup.requests[-1]) == []
    sent = repr(backup.requests[-1]["messages"])
    assert "Oslo: sunny" in sent and "Oslo is sunny." in sent  # the neutral transcript
    second.session.save(tmp_path / "s2.jsonl")
    third = await frontier_run(
        client, "Pisa?", stream=stream, tools=[lookup], session=Session.load(tmp_path / "s2.jsonl")
    )
    assert third.text == "Pisa is sunny." and primary.rejected == []
    assert primary.failures == [503]
    # the primary's own thinking came back (and checked out); the fallback's turn as its text
    own = [b for turn in primary.issued[:2] for b in turn if "thinking" in b["type"]]
    assert own and _thinking_blocks(primary.requests[-1]) == own
    assert "Rome is sunny." in repr(primary.requests[-1]["messages"])


@pytest.mark.parametrize("profile", ["gemini-openai", "openrouter-reasoning"])
async def test_a_chat_fallback_is_never_sent_another_endpoint_s_signed_reasoning(
    endpoints: list[FrontierEndpoint], profile: str
) -> None:
    primary = start(endpoints, profile)
    backup = start(endpoints, "vllm")  # accepts anything, and records what it got
    primary.script(FrontierStep(calls=[("lookup", {"city": "Oslo"})]), FrontierStep(status=503))
    backup.script(FrontierStep(text="Oslo is sunny."))
    client = frontier_client(primary, fallback=[frontier_client(backup)])
    result = await client.run("Oslo?", tools=[lookup])
    assert result.text == "Oslo is sunny." and result.models == [primary.model, backup.model]
    (turn,) = [m for m in backup.requests[-1]["messages"] if m["role"] == "assistant"]
    assert "reasoning_details" not in turn and "extra_content" not in repr(turn)
    issued = primary.issued[0]["tool_calls"][0]
    (call,) = turn["tool_calls"]
    assert call["id"] == issued["id"] and call["function"]["name"] == "lookup"
    assert json.loads(call["function"]["arguments"]) == {"city": "Oslo"}


async def test_a_chat_fallback_keeps_plain_text_reasoning(
    endpoints: list[FrontierEndpoint],
) -> None:
    """DeepSeek refuses a tool-call turn sent back without its ``reasoning_content``: plain
    text, no endpoint's secret, so a fallback gets it."""
    primary = start(endpoints, "deepseek")
    backup = start(endpoints, "deepseek")
    primary.script(FrontierStep(calls=[("lookup", {"city": "Oslo"})]), FrontierStep(status=503))
    backup.script(FrontierStep(text="Oslo is sunny."))
    client = frontier_client(primary, fallback=[frontier_client(backup)])
    result = await client.run("Oslo?", tools=[lookup])
    assert result.text == "Oslo is sunny." and backup.rejected == []


@pytest.mark.parametrize("store", [False, True])
async def test_a_responses_fallback_starts_from_the_full_neutral_transcript(store: bool) -> None:
    """Stateless, the primary's encrypted reasoning never reaches the fallback; with
    ``store=True``, neither does its ``previous_response_id``: the fallback is sent the whole
    conversation. Back at the primary, its own items (and its response id) carry on."""
    primary, backup = ResponsesEndpoint().start(), ResponsesEndpoint().start()
    try:
        primary.script(
            ResponsesStep(reasoning=True, calls=[("lookup", {"city": "Oslo"})]),
            ResponsesStep(status=503),
            ResponsesStep(reasoning=True, text="Both sunny."),
        )
        backup.script(ResponsesStep(reasoning=True, calls=[("lookup", {"city": "Rome"})]))

        def make(server: ResponsesEndpoint, **options: Any) -> Any:
            return create_client(
                style="responses",
                base_url=server.url + "/v1",
                model="gpt-test",
                api_key="none",
                retries=0,
                store=store,
                code_mode="native",
                **options,
            )

        client = make(primary, fallback=[make(backup)])
        result = await client.run("Oslo and Rome?", tools=[lookup])
        assert primary.rejections == [] and backup.rejections == []
        assert result.text == "Both sunny." and result.models == ["gpt-test"] * 3
        asked = backup.requests[-1]
        assert "previous_response_id" not in asked
        assert not any(item.get("type") == "reasoning" for item in asked["input"])
        assert [i["type"] for i in asked["input"] if "type" in i] == [
            "function_call",
            "function_call_output",
        ]
        last = primary.requests[-1]
        if store:
            assert last["previous_response_id"] == primary.replies[0]["id"]
    finally:
        primary.stop()
        backup.stop()


@tool(hints=ToolHints(read_only=True), callers=("direct", "hosted"))
def forecast(city: str) -> str:
    """The forecast for a city."""
    return f"{city}: sunny"


async def test_an_anthropic_container_is_named_only_to_the_endpoint_that_opened_it() -> None:
    """A hosted program's ``container`` (and its ``server_tool_use`` block) is the primary's:
    a fallback is sent neither, only the program's calls as plain tool calls, answered."""
    primary, backup = ResponsesEndpoint().start(), ResponsesEndpoint().start()
    try:
        primary.script(
            ResponsesStep(hosted=[("forecast", {"city": "Oslo"})]), ResponsesStep(status=503)
        )
        backup.script(ResponsesStep(text="Oslo is sunny."))

        def make(server: ResponsesEndpoint, **options: Any) -> Any:
            return create_client(
                style="anthropic",
                base_url=server.url,
                model="m",
                api_key="none",
                retries=0,
                hosted_code=True,
                code_mode="native",
                **options,
            )

        result = await make(primary, fallback=[make(backup)]).run("Oslo?", tools=[forecast])
        assert result.text == "Oslo is sunny." and primary.rejections == []
        assert primary.requests[1]["container"] == primary.issued_containers[0]
        asked = backup.requests[-1]
        assert "container" not in asked and "srvtoolu_" not in repr(asked["messages"])
        (use,) = [b for b in asked["messages"][1]["content"] if b["type"] == "tool_use"]
        assert "caller" not in use and use["input"] == {"city": "Oslo"}
    finally:
        primary.stop()
        backup.stop()
