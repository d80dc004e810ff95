"""Work done once per call, not once per consumer: argument validation and the result's text.

Each test counts a side effect that runs every time the work is done (a pydantic validator, a
value's ``repr``), so it fails if a later change repeats the work again.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest
from pydantic import BaseModel, field_validator

from toolnexus import (
    Outcome,
    Tool,
    ToolCall,
    ToolHints,
    create_client,
    run_batch,
    tool,
)
from toolnexus.client import _models
from toolnexus.errors import ToolArgumentsError
from toolnexus.testing import FunctionModel, ModelReply
from toolnexus.tools import ToolHooks

VALIDATIONS: list[str] = []


class Point(BaseModel):
    x: int

    @field_validator("x")
    @classmethod
    def count(cls, value: int) -> int:
        VALIDATIONS.append("x")
        return value


@tool(hints=ToolHints(read_only=True))
def plot(point: Point) -> int:
    """Plot a point."""
    return point.x


def one_call_then_done(name: str, arguments: str) -> FunctionModel:
    def model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        return [ToolCall("c1", name, arguments)] if messages[-1]["role"] == "user" else "done"

    return FunctionModel(model)


async def test_a_tool_function_is_not_validated_again_inside_execute() -> None:
    VALIDATIONS.clear()
    assert await plot.invoke({"point": {"x": "3"}}) == 3  # coerced by the one validation
    assert VALIDATIONS == ["x"]


async def test_a_native_call_is_validated_before_the_lane_and_once_when_it_runs() -> None:
    """Twice, on purpose: before it takes a place in the lane (a call that cannot run is
    answered at once) and when it runs (the function takes the model the arguments parse
    into; a plain JSON Schema is not checked again, see below)."""
    VALIDATIONS.clear()
    outcomes = await run_batch([ToolCall("c1", "plot", '{"point": {"x": 4}}')], [plot])
    assert outcomes[0].value == 4
    assert VALIDATIONS == ["x", "x"]

    VALIDATIONS.clear()
    client = create_client(
        model=one_call_then_done("plot", '{"point": {"x": 5}}'), code_mode="native"
    )
    result = await client.run("go", tools=[plot])
    assert result.tool_calls[0].output == "5"
    assert VALIDATIONS == ["x", "x"]


class Rendered:
    """A value whose JSON form is its repr; counts how often it is rendered."""

    count = 0

    def __repr__(self) -> str:
        Rendered.count += 1
        return "rendered"


@tool(hints=ToolHints(read_only=True))
def fetch() -> dict[str, Any]:
    """Return a value JSON cannot hold as is."""
    return {"value": Rendered()}


async def test_a_result_is_rendered_as_text_once_for_the_log_the_records_and_the_model() -> None:
    Rendered.count = 0
    client = create_client(model=one_call_then_done("fetch", "{}"), code_mode="native")
    result = await client.run("go", tools=[fetch])
    record = result.tool_calls[0]
    tool_message = next(m for m in result.messages if m.get("role") == "tool")
    logged = next(e for e in result.session.events if e.type == "tool_result")
    assert record.output == tool_message["content"] == logged.data["content"]
    assert "rendered" in record.output
    assert Rendered.count == 1


def test_outcome_text_is_the_error_message_or_the_value_as_text() -> None:
    assert Outcome.failure("t", "no such file").text == "no such file"
    assert Outcome(value="plain").text == "plain"
    assert Outcome(value={"a": [1, "é"]}).text == '{"a": [1, "é"]}'
    assert Outcome(value="\ud800").text == "\ufffd"  # always encodable
    assert Outcome(value=1) == Outcome(value=1)  # the cached text takes no part in equality


async def test_a_tool_whose_execute_is_replaced_runs_the_replacement() -> None:
    """The once-validated path belongs to the function ``@tool`` built, not to the tool: a copy
    with another ``execute`` (a wrapper that watches calls, say) runs that ``execute``."""
    seen: list[dict[str, Any]] = []

    async def watched(args: dict[str, Any], ctx: Any) -> Any:
        seen.append(args)
        return await plot.invoke(args, ctx)

    wrapped = dataclasses.replace(plot, execute=watched)
    assert await wrapped.invoke({"point": {"x": 7}}) == 7
    assert seen == [{"point": {"x": 7}}]


async def test_run_batch_checks_a_json_schema_once_per_call() -> None:
    # run_batch checks each call before it takes a place in the lane, and nothing can change
    # the arguments after that (no hooks in a batch): the schema was checked a second time
    # when the call ran, most of a batch's cost for a tool with a plain JSON Schema.
    async def echo(args: dict[str, Any]) -> int:
        return int(args["n"])

    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    echo_tool = Tool("echo", "Echo n.", schema, execute=echo, hints=ToolHints(read_only=True))
    checked: list[Any] = []
    check = echo_tool._validator

    def counting(args: Any) -> Any:
        checked.append(args)
        return check(args)

    object.__setattr__(echo_tool, "_validator", counting)
    calls = [ToolCall(f"c{i}", "echo", f'{{"n": {i}}}') for i in range(3)]
    outcomes = await run_batch([*calls, ToolCall("bad", "echo", '{"n": "x"}')], [echo_tool])
    assert [o.value for o in outcomes[:3]] == [0, 1, 2]
    assert outcomes[3].error is not None and "n" in outcomes[3].error["message"]
    assert len(checked) == 4  # once each, the refused call included


def counted_echo() -> tuple[Tool, list[Any]]:
    """A tool with a plain JSON Schema whose every check is recorded."""

    async def echo(args: dict[str, Any]) -> int:
        return int(args["n"])

    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    echo_tool = Tool("echo", "Echo n.", schema, execute=echo, hints=ToolHints(read_only=True))
    checked: list[Any] = []
    check = echo_tool._validator

    def counting(args: Any) -> Any:
        checked.append(dict(args))
        return check(args)

    object.__setattr__(echo_tool, "_validator", counting)
    return echo_tool, checked


async def test_the_client_loop_checks_a_json_schema_once_per_call_unless_a_hook_replaced_it() -> (
    None
):
    # The loop checks a model's call before it takes a place in the lane; it ran the same check
    # again when the call ran, though only a before-hook could have changed the arguments. Now
    # the second check runs exactly for a call whose arguments a hook replaced.
    echo_tool, checked = counted_echo()

    def swap_four(name: str, args: dict[str, Any], ctx: Any) -> Any:
        return {"n": "not a number"} if args["n"] == 4 else None

    calls = [ToolCall(f"c{i}", "echo", f'{{"n": {i}}}') for i in range(5)]

    def model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        return calls if messages[-1]["role"] == "user" else "done"

    client = create_client(
        model=FunctionModel(model), code_mode="native", hooks=ToolHooks(before=[swap_four])
    )
    result = await client.run("go", tools=[echo_tool])
    outputs = [r.output for r in result.tool_calls]
    assert outputs[:4] == ["0", "1", "2", "3"]
    assert result.tool_calls[4].is_error and "n" in outputs[4]  # the replacement was checked
    assert checked == [*({"n": i} for i in range(5)), {"n": "not a number"}]


PLAIN_SCHEMA = {
    "type": "object",
    "description": "plain",
    "properties": {
        "n": {"type": "integer", "description": "a count"},
        "x": {"type": "number"},
        "s": {"type": "string", "default": ""},
        "b": {"type": "boolean"},
        "z": {"type": "null"},
        "l": {"type": "array"},
        "o": {"type": "object"},
        "any": {},
    },
    "required": ["n"],
}

PLAIN_ARGUMENTS: list[Any] = [
    {"n": 1},
    {"n": 1.0},  # an integer to JSON Schema, though not a Python int
    {"n": 1.5},
    {"n": True},
    {"n": "1"},
    {},
    {"n": 1, "x": 2, "s": "a", "b": False, "z": None, "l": [1], "o": {"a": 1}, "any": object},
    {"n": 1, "x": True},
    {"n": 1, "s": 3},
    {"n": 1, "b": 0},
    {"n": 1, "z": 0},
    {"n": 1, "l": (1,)},
    {"n": 1, "o": []},
    {"n": 1, "extra": 1},
]


async def test_a_plain_json_schema_accepts_and_refuses_exactly_what_jsonschema_does() -> None:
    import jsonschema

    async def run(args: dict[str, Any]) -> int:
        return 0

    for extra in (True, False):
        schema = {**PLAIN_SCHEMA, "additionalProperties": extra}
        reference = jsonschema.Draft7Validator(schema)
        checked = Tool("t", "T.", schema, execute=run)
        for args in PLAIN_ARGUMENTS:
            expected = sorted(e.message for e in reference.iter_errors(args))
            try:
                checked.validate_arguments(args)
                found: list[str] = []
            except ToolArgumentsError as exc:
                found = sorted(p.split(": ", 1)[-1] for p in exc.problems)
            assert found == expected, (extra, args)


def test_plain_arguments_of_a_plain_json_schema_are_not_walked_by_jsonschema() -> None:
    # jsonschema's walk (validators, descents, error iterators) was most of a call's cost for a
    # tool with a plain schema; arguments that plainly match it no longer take that walk.
    from jsonschema.validators import Draft7Validator

    walked: list[Any] = []
    original = Draft7Validator.iter_errors

    def counting(self: Any, instance: Any, *rest: Any) -> Any:
        walked.append(instance)
        return original(self, instance, *rest)

    async def run(args: dict[str, Any]) -> int:
        return 0

    checked = Tool("t", "T.", {**PLAIN_SCHEMA, "additionalProperties": False}, execute=run)
    Draft7Validator.iter_errors = counting  # type: ignore[method-assign]
    try:
        checked.validate_arguments({"n": 1, "s": "a", "any": [None]})
        assert walked == []
        with pytest.raises(ToolArgumentsError, match="n"):
            checked.validate_arguments({"n": "1"})  # refused by the reference check
        assert walked == [{"n": "1"}]
    finally:
        Draft7Validator.iter_errors = original  # type: ignore[method-assign]


def test_an_undeclared_call_is_decided_without_a_scan_of_the_queue(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A submission to a lane where nobody declared resources is decided in constant time
    # (the head of a non-empty queue is blocked, and a submission cannot free it); a settle
    # scans the queue only when something waits in it. Both scanned on every decision, which
    # made the lane's undeclared path dearer than the safe/unsafe rule it generalised.
    from toolnexus.scheduling import SchedulingRule
    from toolnexus.scheduling._rule import EVERYTHING, Wait

    scans: list[int] = []
    original = SchedulingRule._start_fifo

    def counting(rule: SchedulingRule) -> list[int]:
        scans.append(len(rule.pending))
        return original(rule)

    monkeypatch.setattr(SchedulingRule, "_start_fifo", counting)
    rule = SchedulingRule(2)
    assert rule.submit("parallel") == (1, [1])
    assert rule.submit("parallel") == (2, [2])
    assert rule.submit("parallel") == (3, [])  # the cap
    assert rule.submit("exclusive") == (4, [])
    assert rule.submit("parallel") == (5, [])
    assert scans == []
    assert rule.settle(2) == ([], [3])  # call 1 has not committed; 3 takes 2's place
    assert rule.settle(1) == ([1, 2], [])
    assert rule.settle(3) == ([3], [4])
    assert rule.settle(4) == ([4], [5])
    assert scans == [3, 2, 2, 1]  # one scan per settle while calls wait
    assert rule.settle(5) == ([5], [])
    assert scans == [3, 2, 2, 1]  # nothing waits: no scan
    assert [rule.waited_for(s) for s in (3, 4)] == [None, None]  # committed: forgotten
    assert rule.submit("exclusive") == (6, [6])  # everything committed: it starts at once
    assert rule.submit("parallel") == (7, [])
    assert rule.waited_for(7) == Wait(6, EVERYTHING)
    assert scans == [3, 2, 2, 1]


async def test_with_no_tracer_provider_a_lane_does_no_span_work_per_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The API's no-op tracer still cost a microsecond or two per call (a span object, a
    # context look-up, an attributes closure); a lane now asks once whether spans would do
    # anything, and skips them. ``test_tracing.py`` checks the spans when a provider is set.
    from opentelemetry import trace

    import toolnexus.scheduling._scheduler as scheduler_module

    started: list[str] = []
    real_tool_span = scheduler_module.tool_span

    def counting(name: str, attributes: Any) -> Any:
        started.append(name)
        return real_tool_span(name, attributes)

    monkeypatch.setattr(scheduler_module, "tool_span", counting)
    monkeypatch.setattr(trace, "get_tracer_provider", trace.ProxyTracerProvider)
    echo_tool, _ = counted_echo()
    calls = [ToolCall(f"c{i}", "echo", f'{{"n": {i}}}') for i in range(3)]
    outcomes = await run_batch(calls, [echo_tool])
    assert [o.value for o in outcomes] == [0, 1, 2]
    assert started == []

    monkeypatch.undo()  # whatever provider the test session has: spans are started again
    monkeypatch.setattr(scheduler_module, "tool_span", counting)
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: trace.NoOpTracerProvider())
    await run_batch(calls, [echo_tool])
    assert started == ["echo", "echo", "echo"]


async def test_with_no_tracer_provider_a_model_request_starts_no_span(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each model request went through the no-op tracer's context managers (a span looked up,
    # made current again, ended): nothing, at a measurable cost per turn. With no provider
    # the current span is handed back as it is; with one, the request's span is started.
    from opentelemetry import trace

    from toolnexus import _tracing

    started: list[str] = []

    class Counting:
        def __init__(self, real: Any) -> None:
            self.real = real

        def start_as_current_span(self, name: str, **kwargs: Any) -> Any:
            started.append(name)
            return self.real.start_as_current_span(name, **kwargs)

    monkeypatch.setattr(_tracing, "_tracer", Counting(_tracing._tracer))
    monkeypatch.setattr(trace, "get_tracer_provider", trace.ProxyTracerProvider)
    echo_tool, _ = counted_echo()
    client = create_client(model=hundred_calls_then_done(n=2), code_mode="native")
    result = await client.run("go", tools=[echo_tool])
    assert result.text == "done" and started == []

    monkeypatch.setattr(trace, "get_tracer_provider", lambda: trace.NoOpTracerProvider())
    client = create_client(model=hundred_calls_then_done(n=2), code_mode="native")
    await client.run("go", tools=[echo_tool])
    assert started == ["chat function-model", "chat function-model"]


async def test_a_plain_async_tool_is_awaited_by_the_lane_without_wrappers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A checked call of an async tool with no timeout, hooks, approval or hosted caller is the
    # tool's own coroutine: the lane awaited it through three or four coroutines that only
    # passed it on (and turned its value into an outcome the lane makes anyway).
    from toolnexus.tools import _calls

    wrapped: list[str] = []
    real_invoke_checked = Tool._invoke_checked
    real_guarded = _calls._guarded

    async def invoke_checked(self: Tool, args: dict[str, Any], ctx: Any = None) -> Any:
        wrapped.append("invoke")
        return await real_invoke_checked(self, args, ctx)

    def guarded(tool: Tool, args: dict[str, Any], ctx: Any, *, checked: bool) -> Any:
        wrapped.append("dispatch")
        return real_guarded(tool, args, ctx, checked=checked)

    monkeypatch.setattr(Tool, "_invoke_checked", invoke_checked)
    monkeypatch.setattr(_calls, "_guarded", guarded)
    echo_tool, _ = counted_echo()
    calls = [ToolCall(f"c{i}", "echo", f'{{"n": {i}}}') for i in range(3)]
    assert [o.value for o in await run_batch(calls, [echo_tool])] == [0, 1, 2]
    started = _calls.start_prechecked(echo_tool, {"n": 1}, None)
    assert inspect.iscoroutine(started) and started.cr_code.co_name == "echo"  # the tool's own
    assert await started == 1

    def model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        return calls if messages[-1]["role"] == "user" else "done"

    result = await create_client(model=FunctionModel(model), code_mode="native").run(
        "go", tools=[echo_tool]
    )
    assert [r.output for r in result.tool_calls] == ["0", "1", "2"]
    assert wrapped == []

    # a timeout, or a hook, still goes the long way round
    slow = dataclasses.replace(echo_tool, timeout=5.0)
    assert [o.value for o in await run_batch(calls, [slow])] == [0, 1, 2]
    assert wrapped == ["invoke"] * 3
    wrapped.clear()
    hooked = create_client(
        model=FunctionModel(model),
        code_mode="native",
        hooks=ToolHooks(after=[lambda name, args, outcome, ctx: None]),
    )
    result = await hooked.run("go", tools=[echo_tool])
    assert [r.output for r in result.tool_calls] == ["0", "1", "2"]
    assert wrapped == ["dispatch", "invoke"] * 3


async def test_a_lane_without_a_session_reads_no_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    # Call times are for the session's ``call_timing`` events; a lane with nobody to tell
    # read the clock three times per call all the same.
    import time

    import toolnexus.scheduling._scheduler as scheduler_module
    from toolnexus.session import Session

    reads: list[float] = []

    class Clock:
        @staticmethod
        def time() -> float:
            reads.append(1.0)
            return time.time()

    monkeypatch.setattr(scheduler_module, "time", Clock)
    echo_tool, _ = counted_echo()
    calls = [ToolCall(f"c{i}", "echo", f'{{"n": {i}}}') for i in range(3)]
    await run_batch(calls, [echo_tool])
    assert reads == []
    session = Session()
    await run_batch(calls, [echo_tool], session=session)
    assert len(reads) == 9  # admitted, started, finished
    timings = [e.data for e in session.events if e.type == "call_timing"]
    assert all(t["admitted"] <= t["started"] <= t["finished"] for t in timings)


def hundred_calls_then_done(tool_name: str = "echo", n: int = 100) -> FunctionModel:
    calls = [ToolCall(f"c{i}", tool_name, f'{{"n": {i}}}') for i in range(n)]

    def model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        return calls if messages[-1]["role"] == "user" else "done"

    return FunctionModel(model)


async def test_an_in_process_turn_encodes_and_decodes_the_transcript_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The whole transcript went through JSON five times per turn (a copy for ``requests``,
    # one for the function, the token estimate, and the request's check for lone
    # surrogates): now one encoding serves all four, and ``requests`` decodes when read.
    import json

    encoded: list[int] = []
    decoded: list[int] = []
    real_dumps, real_loads = json.dumps, json.loads

    def is_transcript(value: Any) -> bool:
        return isinstance(value, list) and any(
            isinstance(m, dict) and m.get("role") == "user" for m in value
        )

    real_dumps_plain = _models.dumps_plain

    def dumps_plain(value: Any) -> str:
        if is_transcript(value):
            encoded.append(len(value))
        return real_dumps_plain(value)

    def dumps(value: Any, *args: Any, **kwargs: Any) -> str:
        if is_transcript(value):
            encoded.append(len(value))
        return real_dumps(value, *args, **kwargs)

    def loads(text: Any, *args: Any, **kwargs: Any) -> Any:
        value = real_loads(text, *args, **kwargs)
        if is_transcript(value):
            decoded.append(len(value))
        return value

    monkeypatch.setattr(json, "dumps", dumps)
    monkeypatch.setattr(json, "loads", loads)
    monkeypatch.setattr(_models, "dumps_plain", dumps_plain)
    echo_tool, _ = counted_echo()
    model = hundred_calls_then_done(n=3)
    result = await create_client(model=model, code_mode="native").run("go", tools=[echo_tool])
    assert result.text == "done" and len(result.tool_calls) == 3
    assert encoded == [1, 5] and decoded == [1, 5]  # user; user, assistant, three results
    assert len(model.requests) == 2 and model.requests[1][-1]["role"] == "tool"
    assert decoded == [1, 5, 1, 5]  # read: decoded now, once
    assert model.requests is model.requests and len(decoded) == 4
    assert result.usage.input_tokens == sum(
        max(1, len(real_dumps(request)) // 4) for request in model.requests
    )


async def test_an_in_process_model_is_sent_no_lone_surrogate() -> None:
    # What a server would be sent: a lone surrogate (here in the model's own text, which the
    # transcript carries back) arrives as U+FFFD; one encoding of the transcript finds it.
    shown: list[list[dict[str, Any]]] = []

    def model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        shown.append(messages)
        if len(shown) == 1:
            return ModelReply(text="bad \ud800 text 😀", calls=[ToolCall("c1", "echo", "{}")])
        return "done"

    echo_tool, _ = counted_echo()
    client = create_client(model=FunctionModel(model), code_mode="native")
    result = await client.run("go", tools=[echo_tool])
    assert result.text == "done"
    assert shown[1][1]["content"] == "bad \ufffd text 😀"


async def test_client_run_makes_no_event_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    # ``client.run`` reads only the last event; each call's announcement and result went up
    # through four generators to be dropped. A stream still gets every one.
    from toolnexus.client import _loop
    from toolnexus.client._result import ToolCallEvent, ToolResultEvent

    made: list[str] = []

    def counted_call(call: ToolCall) -> ToolCallEvent:
        made.append("call")
        return ToolCallEvent(call)

    def counted_result(record: Any) -> ToolResultEvent:
        made.append("result")
        return ToolResultEvent(record)

    monkeypatch.setattr(_loop, "ToolCallEvent", counted_call)
    monkeypatch.setattr(_loop, "ToolResultEvent", counted_result)
    echo_tool, _ = counted_echo()
    client = create_client(model=hundred_calls_then_done(n=3), code_mode="native")
    result = await client.run("go", tools=[echo_tool])
    assert [r.output for r in result.tool_calls] == ["0", "1", "2"]
    assert made == []
    streamed = [event.type async for event in client.stream("go", tools=[echo_tool])]
    assert streamed.count("tool_call") == streamed.count("tool_result") == 3
    assert sorted(made) == ["call"] * 3 + ["result"] * 3


async def test_a_result_is_written_as_json_without_a_new_encoder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # ``json.dumps`` with options builds an encoder per call: one per tool result.
    import json

    built: list[int] = []
    real_init = json.JSONEncoder.__init__

    def init(self: json.JSONEncoder, *args: Any, **kwargs: Any) -> None:
        built.append(1)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(json.JSONEncoder, "__init__", init)
    texts = [Outcome(value=v).text for v in (7, {"a": [1, "é"]}, [True, None], 1.5, "s")]
    assert texts == ["7", '{"a": [1, "é"]}', "[true, null]", "1.5", "s"]
    assert built == []


def test_a_plain_schema_check_makes_no_call_per_argument() -> None:
    # The quick check of a plain schema called a predicate per argument; it looks each
    # argument's type up in a set now. Counted: Python functions entered per validation.
    import sys

    async def run(args: dict[str, Any]) -> int:
        return 0

    schema = {**PLAIN_SCHEMA, "additionalProperties": False}
    checked = Tool("t", "T.", schema, execute=run)
    entered: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            entered.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        checked.validate_arguments({"n": 1, "x": 2.5, "s": "a", "b": True, "l": [], "any": 3})
    finally:
        sys.setprofile(None)
    assert entered == ["validate_arguments", "validate", "plainly_valid"]


async def test_a_call_that_finishes_in_its_first_step_is_not_wrapped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A worker takes each call's first step itself, inside the call's context; only a call
    # that suspends is wrapped to be awaited there. Per-call contexts hold either way.
    import asyncio
    import contextvars

    import toolnexus.scheduling._scheduler as scheduler_module

    wrapped: list[int] = []
    real = scheduler_module.InContext

    def counting(*args: Any) -> Any:
        wrapped.append(1)
        return real(*args)

    monkeypatch.setattr(scheduler_module, "InContext", counting)
    seen: contextvars.ContextVar[int] = contextvars.ContextVar("seen", default=-1)

    async def mark(args: dict[str, Any]) -> int:
        before = seen.get()
        seen.set(args["n"])  # never leaks into the next call the worker runs
        if args.get("wait"):
            await asyncio.sleep(0)
        assert seen.get() == args["n"]
        return before

    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "wait": {}}}
    marker = Tool("mark", "Mark.", schema, execute=mark, hints=ToolHints(read_only=True))
    quick = [ToolCall(f"c{i}", "mark", f'{{"n": {i}}}') for i in range(20)]
    assert [o.value for o in await run_batch(quick, [marker])] == [-1] * 20
    assert wrapped == []
    slow = [ToolCall(f"c{i}", "mark", f'{{"n": {i}, "wait": true}}') for i in range(20)]
    assert [o.value for o in await run_batch(slow, [marker])] == [-1] * 20
    assert len(wrapped) == 20


async def test_the_loop_reads_finished_outcomes_without_waiting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Calls that finished while the response was still being recorded are read as they are:
    # the loop awaited a ``wait`` coroutine per call.
    from toolnexus.scheduling import Scheduler

    waits: list[int] = []
    real_wait = Scheduler.wait

    async def wait(self: Scheduler, ticket: Any, timeout: float | None = None) -> Outcome:  # noqa: ASYNC109
        waits.append(ticket.seq)
        return await real_wait(self, ticket, timeout)

    monkeypatch.setattr(Scheduler, "wait", wait)
    echo_tool, _ = counted_echo()
    client = create_client(model=hundred_calls_then_done(n=50), code_mode="native")
    result = await client.run("go", tools=[echo_tool])
    assert [r.output for r in result.tool_calls] == [str(i) for i in range(50)]
    assert len(waits) < 50


def toolnexus_calls_per_call(run: Any, calls: int) -> float:
    """Python functions of toolnexus entered per tool call while ``run()`` runs (warmed up)."""
    import asyncio
    import sys
    from pathlib import Path

    import toolnexus

    # The package's own folder: a checkout's path may hold "toolnexus" too (its virtualenv's
    # site-packages, its tests), and those frames are not the library's.
    package = str(Path(toolnexus.__file__).parent) + "/"
    entered = 0

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal entered
        if event == "call" and frame.f_code.co_filename.startswith(package):
            entered += 1

    async def measured() -> None:
        await run()
        sys.setprofile(profile)
        try:
            await run()
        finally:
            sys.setprofile(None)

    asyncio.run(measured())
    return entered / calls


def test_the_per_call_path_stays_short(monkeypatch: pytest.MonkeyPatch) -> None:
    # A budget of toolnexus's own function calls per tool call, for 100 plain async calls:
    # 38.7 for run_batch and 85.8 for client.run (in-process model) before the per-call path
    # was cut down to what each call needs; any step put back shows here. Measured with no
    # tracer provider (whatever an earlier test of the session set): spans cost their own.
    from opentelemetry import trace

    monkeypatch.setattr(trace, "get_tracer_provider", trace.ProxyTracerProvider)
    echo_tool, _ = counted_echo()
    calls = [ToolCall(f"c{i}", "echo", f'{{"n": {i}}}') for i in range(100)]
    assert toolnexus_calls_per_call(lambda: run_batch(calls, [echo_tool]), 100) <= 26
    client = create_client(model=hundred_calls_then_done(n=100), code_mode="native")
    assert toolnexus_calls_per_call(lambda: client.run("go", tools=[echo_tool]), 100) <= 50


async def test_a_run_record_holds_every_field_without_the_dataclass_init(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The frozen dataclass's __init__ (a set-attribute call per field) was half a record's
    # cost; the loop fills the fields in directly, so a field added to ToolCallRecord must be
    # added there too: this test compares every field with the constructor's record.
    from toolnexus.client._result import ToolCallRecord

    made: list[int] = []
    real_init = ToolCallRecord.__init__

    def init(self: ToolCallRecord, *args: Any, **kwargs: Any) -> None:
        made.append(1)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(ToolCallRecord, "__init__", init)
    echo_tool, _ = counted_echo()
    result = await create_client(model=hundred_calls_then_done(n=2), code_mode="native").run(
        "go", tools=[echo_tool]
    )
    assert made == []
    record = result.tool_calls[1]
    expected = ToolCallRecord("c1", "echo", {"n": 1}, "1", False, None)
    assert record == expected and repr(record) == repr(expected)
    for field in dataclasses.fields(expected):
        assert getattr(record, field.name) == getattr(expected, field.name), field.name
    assert not hasattr(record, "__dict__")  # slots: one object a record, for the collector
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.output = "changed"  # type: ignore[misc]


async def test_client_run_awaits_each_response_without_a_task(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A response is a task of its own only when its events are read while it streams
    # (``client.stream``); ``client.run`` awaits it, without a task, a queue and their loop
    # turns per response.
    import asyncio

    tasks: list[str] = []
    real_ensure_future = asyncio.ensure_future

    def ensure_future(awaitable: Any, **kwargs: Any) -> Any:
        name = getattr(getattr(awaitable, "cr_code", None), "co_name", "")
        tasks.append(name)
        return real_ensure_future(awaitable, **kwargs)

    monkeypatch.setattr(asyncio, "ensure_future", ensure_future)
    echo_tool, _ = counted_echo()
    client = create_client(model=hundred_calls_then_done(n=3), code_mode="native")
    result = await client.run("go", tools=[echo_tool])
    assert [r.output for r in result.tool_calls] == ["0", "1", "2"]
    assert "respond" not in tasks
    streamed = [event.type async for event in client.stream("go", tools=[echo_tool])]
    assert streamed[-1] == "done"
    assert tasks.count("respond") == 2  # one per turn


def test_a_plain_values_outcome_made_directly_equals_the_dataclass_one() -> None:
    # outcome_of sets a plain value's Outcome slots itself: every field must be set as
    # __init__ sets it (a field added to Outcome and not to outcome_of fails here).
    from toolnexus.tools._outcome import outcome_of

    for value in (None, 3, "text", {"a": [1, 2]}):
        made, reference = outcome_of("t", value), Outcome(value=value)
        for field in dataclasses.fields(Outcome):
            assert getattr(made, field.name) == getattr(reference, field.name), field.name
        assert made == reference and made.text == reference.text
        with pytest.raises(dataclasses.FrozenInstanceError):
            made.value = 1  # type: ignore[misc]


def test_the_transcript_encoder_skips_the_cycle_check_yet_refuses_a_cycle() -> None:
    # The copy's encoder has no cycle check (a set of every container's id); a cycle still
    # ends as "not JSON" (the model is then shown a deep copy), not as a crash.
    looped: dict[str, Any] = {"role": "user"}
    looped["self"] = looped
    from toolnexus import _json

    assert _json._PLAIN_ENCODER.markers is None  # no set of ids: no cycle check
    assert _models._encoded([looped]) is None
    assert _models._encoded([{"role": "user", "content": "hi"}]) == (
        '[{"role": "user", "content": "hi"}]'
    )


async def test_a_sub_call_of_a_plain_async_tool_reaches_the_lane_as_the_tools_coroutine() -> None:
    """A Code Mode lane's dispatch hands the lane the tool's own coroutine when nothing stands
    in front of the call (five coroutine frames fewer per sub-call), after the schema check;
    a hook, an approval, a hosted caller or a tool not called as it is (a timeout) take the
    full dispatch."""
    import asyncio

    from toolnexus.codemode import PermissionPolicy, RunContext
    from toolnexus.tools._calls import dispatch_call as sub_call_dispatch

    async def execute(args: dict[str, Any]) -> int:
        return int(args["n"])

    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    plain = Tool("plain", "Plain.", schema, execute=execute)
    started = sub_call_dispatch(plain, {"n": 2}, RunContext())
    assert inspect.iscoroutine(started) and started.cr_code is execute.__code__
    assert await started == 2
    with pytest.raises(ToolArgumentsError):
        sub_call_dispatch(plain, {"n": "two"}, RunContext())
    hooked = RunContext(hooks=ToolHooks(before=[lambda name, args, ctx: None]))
    asked = RunContext(policy=PermissionPolicy(approval_required=["plain"]))
    hosted = RunContext(caller="program-1")
    timed = Tool("timed", "Timed.", schema, execute=execute, timeout=5)
    for called, ctx in [(plain, hooked), (plain, asked), (plain, hosted), (timed, RunContext())]:
        full = sub_call_dispatch(called, {"n": 2}, ctx)
        assert inspect.iscoroutine(full) and full.cr_code is not execute.__code__
        outcome = await asyncio.wait_for(full, 5)
        assert isinstance(outcome, Outcome)
