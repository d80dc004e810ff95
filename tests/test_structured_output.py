"""Structured output: run(..., output_type=...) ends with a validated, typed RunResult.output."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from pydantic import BaseModel, field_validator
from typing_extensions import TypedDict  # pydantic needs it for TypedDicts before 3.12

from fake_provider import FakeProvider, Turn
from test_client import client_for
from toolnexus import ToolCall, create_client
from toolnexus.testing import FunctionModel, ScriptedModel


class City(BaseModel):
    name: str
    population: int

    @field_validator("population")
    @classmethod
    def positive(cls, value: int) -> int:
        if value <= 0:
            raise ValueError("a population is positive")
        return value


@dataclasses.dataclass
class Point:
    x: float
    y: float


class Pair(TypedDict):
    left: str
    right: str


def final(args: Any, call_id: str = "f1") -> ToolCall:
    return ToolCall(call_id, "final_result", args)


def test_what_cannot_be_described_is_refused_clearly() -> None:
    from toolnexus.errors import ConfigurationError

    client = create_client(model=ScriptedModel([]))
    with pytest.raises(ConfigurationError, match="cannot be described as JSON Schema"):
        client.run_sync("go", output_type=object())
    with pytest.raises(ConfigurationError, match="output_retries"):
        client.run_sync("go", output_type=int, output_retries=-1)


@pytest.mark.parametrize(
    ("output_type", "args", "expected"),
    [
        (City, {"name": "Oslo", "population": 700000}, City(name="Oslo", population=700000)),
        (Point, {"x": 1, "y": 2.5}, Point(1.0, 2.5)),
        (Pair, {"left": "a", "right": "b"}, {"left": "a", "right": "b"}),
        (int, {"result": 42}, 42),
        (list[str], {"result": ["a", "b"]}, ["a", "b"]),
    ],
)
async def test_the_output_is_validated_and_typed(
    output_type: Any, args: Any, expected: Any
) -> None:
    model = ScriptedModel([[final(args)]])
    result = await create_client(model=model).run("go", output_type=output_type)
    assert result.status == "done" and result.output == expected
    assert type(result.output) is type(expected)


async def test_field_errors_go_back_to_the_model_and_it_tries_again() -> None:
    model = ScriptedModel(
        [
            [final({"name": "Oslo", "population": -1}, "f1")],
            [final({"name": "Oslo", "population": 7}, "f2")],
        ]
    )
    result = await create_client(model=model, code_mode="native").run("go", output_type=City)
    assert result.output == City(name="Oslo", population=7)
    told = model.requests[1][-1]
    assert told["role"] == "tool" and "population" in told["content"]
    assert "a population is positive" in told["content"]


async def test_schema_errors_are_field_errors_too() -> None:
    model = ScriptedModel(
        [[final({"name": "Oslo"}, "f1")], [final({"name": "Oslo", "population": 1}, "f2")]]
    )
    result = await create_client(model=model, code_mode="native").run("go", output_type=City)
    assert result.output == City(name="Oslo", population=1)
    assert "population" in model.requests[1][-1]["content"]


async def test_a_text_answer_is_asked_to_use_the_output_tool() -> None:
    model = ScriptedModel(["Oslo, about 700k", [final({"name": "Oslo", "population": 700000})]])
    result = await create_client(model=model, code_mode="native").run("go", output_type=City)
    assert result.output == City(name="Oslo", population=700000)
    assert "final_result" in model.requests[1][-1]["content"]


async def test_the_tries_are_bounded() -> None:
    model = ScriptedModel(["no", "still no", "never"])
    result = await create_client(model=model, code_mode="native").run(
        "go", output_type=City, output_retries=1
    )
    assert result.status == "incomplete" and result.output is None
    assert "final_result" in (result.stopped_by or "")
    assert len(model.requests) == 2
    # the transcript holds only what was sent: no request for the output after the last turn
    assert result.messages[-1] == {"role": "assistant", "content": "still no"}
    assert [m["role"] for m in result.session.messages()][-2:] == ["user", "assistant"]


async def test_other_calls_of_the_same_response_still_run(probe: Any) -> None:
    read = probe.tool("read")

    def model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        return [ToolCall("r1", "read", {}), final({"result": 3})]

    result = await create_client(model=FunctionModel(model), code_mode="native").run(
        "go", tools=[read], output_type=int
    )
    assert result.output == 3 and probe.starts() == ["read"]


async def test_the_output_tool_is_offered_directly_in_code_mode() -> None:
    model = ScriptedModel([[final({"result": "x"})]])
    result = await create_client(model=model, code_mode="code").run("go", output_type=str)
    assert result.output == "x"


@pytest.mark.parametrize("style", ["openai", "anthropic"])
async def test_structured_output_over_the_wire(provider: FakeProvider, style: str) -> None:
    provider.script(Turn(calls=[("f1", "final_result", {"name": "Rome", "population": 3})]))
    result = await client_for(provider, style).run("go", output_type=City)
    assert result.output == City(name="Rome", population=3)
    sent = json.dumps(provider.requests[0]["tools"])
    assert "final_result" in sent and "population" in sent
