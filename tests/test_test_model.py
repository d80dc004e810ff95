"""``TestModel``: every tool called once with arguments valid for its schema, natively or
through one ``run_code`` program that type-checks, against the built-ins, a real MCP server's
tools and a tool with a nested schema."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Literal

import jsonschema
import pytest
from pydantic import BaseModel, Field

from toolnexus import Session, ToolHints, create_client, tool
from toolnexus.codemode.runtimes import CodeRuntime
from toolnexus.errors import ConfigurationError
from toolnexus.testing import TestModel, sample_arguments
from toolnexus.tools import Tool
from toolnexus.tools.builtins import builtin_tools
from toolnexus.tools.mcp import mcp_servers

SERVER = str(Path(__file__).parent / "mcp_server.py")


class Address(BaseModel):
    street: str = Field(min_length=3, max_length=40)
    postcode: str = Field(pattern=r"^[0-9]{4}$")
    country: Literal["NO", "SE", "DK"]


class Item(BaseModel):
    sku: str
    quantity: int = Field(ge=2, le=9, multiple_of=3)
    price: float = Field(gt=0, lt=1)
    tags: list[str] = Field(min_length=2, max_length=3)


class Order(BaseModel):
    id: str = Field(json_schema_extra={"format": "uuid"})
    email: str = Field(json_schema_extra={"format": "email"})
    placed: str = Field(json_schema_extra={"format": "date-time"})
    address: Address
    items: list[Item] = Field(min_length=1)
    note: str | None = None
    gift: bool = False


@tool(hints=ToolHints(read_only=True))
def place_order(order: Order, priority: int = 1) -> str:
    """Place an order.

    Args:
        order: The order.
        priority: 1 (low) to 3.
    """
    return f"{order.address.country}:{len(order.items)}:{order.items[0].quantity}"


NESTED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "mode": {"enum": ["fast", "slow"]},
        "window": {
            "type": "object",
            "properties": {
                "start": {"type": "string", "format": "date"},
                "days": {"type": "integer", "exclusiveMinimum": 0, "maximum": 7},
            },
            "required": ["start", "days"],
            "additionalProperties": False,
        },
        "points": {
            "type": "array",
            "items": {"type": "array", "prefixItems": [{"type": "number"}, {"type": "number"}]},
            "minItems": 3,
            "uniqueItems": True,
        },
        "labels": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "minProperties": 2,
        },
        "child": {"$ref": "#/$defs/node"},
        "either": {"anyOf": [{"type": "null"}, {"type": "integer", "minimum": 5}]},
        "all": {"allOf": [{"properties": {"a": {"type": "string"}}, "required": ["a"]}]},
        "host": {"type": "string", "format": "ipv4"},
    },
    "required": ["mode", "window", "points", "labels", "child", "either", "all", "host"],
    "additionalProperties": False,
    "$defs": {
        "node": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "next": {"$ref": "#/$defs/node"}},
            "required": ["name"],
        }
    },
}


def _schema_tool() -> Tool:
    def execute(args: dict[str, Any]) -> str:
        jsonschema.validate(args, NESTED_SCHEMA)
        return "ok"

    return Tool("plan", "Plan a route.", NESTED_SCHEMA, execute=execute, hints=ToolHints(True))


def _assert_valid(tools: list[Tool]) -> None:
    for t in tools:
        arguments = sample_arguments(t.input_schema)
        validator = jsonschema.validators.validator_for(t.input_schema)
        validator(t.input_schema, format_checker=validator.FORMAT_CHECKER).validate(arguments)
        t.validate_arguments(arguments)  # the tool's own validator agrees


def test_generated_arguments_validate_for_a_nested_schema_and_are_deterministic() -> None:
    _assert_valid([_schema_tool(), place_order])
    assert sample_arguments(NESTED_SCHEMA) == sample_arguments(NESTED_SCHEMA)
    assert sample_arguments(place_order.input_schema)["order"]["items"][0]["quantity"] == 3


def test_generated_arguments_validate_for_every_builtin(tmp_path: Path) -> None:
    tools = builtin_tools(tmp_path)
    assert len(tools) >= 10
    _assert_valid(tools)


async def test_generated_arguments_validate_for_an_mcp_servers_tools() -> None:
    config = {"mcpServers": {"s": {"command": sys.executable, "args": [SERVER]}}}
    async with mcp_servers(config) as remote:
        tools = list(remote)
        assert {"s_lookup", "s_store"} <= {t.name for t in tools}
        _assert_valid(tools)
        model = TestModel(call_tools=["s_lookup", "s_store"], code_mode=False)
        result = await create_client(model=model).run("go", tools=tools)
    assert json.loads(result.text) == {"s_lookup": "value of a", "s_store": "stored a"}


async def test_native_calls_every_tool_once_then_sums_up(tmp_path: Path) -> None:
    tools = [place_order, _schema_tool()]
    model = TestModel()
    result = await create_client(model=model, code_mode="native").run("go", tools=tools)
    assert result.status == "done" and result.turns == 2
    assert [c.name for c in result.tool_calls] == ["place_order", "plan"]
    assert not any(c.is_error for c in result.tool_calls)
    assert json.loads(result.text) == {"place_order": "NO:1:3", "plan": "ok"}


async def test_code_mode_writes_a_program_that_type_checks_and_calls_every_tool(
    runtime: CodeRuntime, tmp_path: Path
) -> None:
    tools = [place_order, _schema_tool(), *builtin_tools(tmp_path)]
    model = TestModel(call_tools=["place_order", "plan", "read", "glob"])
    session = Session()
    client = create_client(model=model, code_mode="code", runtime=runtime)
    result = await client.run("go", tools=tools, session=session)
    assert [c.name for c in result.tool_calls] == ["run_code"]
    out = json.loads(result.tool_calls[0].output)
    assert "error" not in out, out  # a type error would be here, with nothing run
    assert out["result"]["place_order"] == "NO:1:3" and out["result"]["plan"] == "ok"
    assert set(out["result"]) == {"place_order", "plan", "read", "glob"}
    sub_calls = [e.data["name"] for e in session.events if e.type == "tool_call"]
    assert sorted(sub_calls) == ["glob", "place_order", "plan", "read"]
    expected = "async function" if runtime.language == "javascript" else "asyncio.gather"
    assert expected in model.programs[0]


async def test_code_mode_over_every_builtin_type_checks(tmp_path: Path) -> None:
    tools = builtin_tools(tmp_path)
    names = [t.name for t in tools if t.name not in ("bash", "kill_shell", "web_fetch")]
    model = TestModel(call_tools=names)
    result = await create_client(model=model, code_mode="code").run("go", tools=tools)
    out = json.loads(result.tool_calls[0].output)
    assert "error" not in out, out
    assert set(out["result"]) == set(names)


async def test_a_chosen_subset_and_misnamed_tools() -> None:
    model = TestModel(call_tools=["place_order"], text="finished")
    client = create_client(model=model, code_mode="native")
    result = await client.run("go", tools=[place_order, _schema_tool()])
    assert [c.name for c in result.tool_calls] == ["place_order"] and result.text == "finished"
    with pytest.raises(ConfigurationError, match="'nope', which this run does not offer"):
        await create_client(model=TestModel(call_tools=["nope"])).run("go", tools=[place_order])
    with pytest.raises(ConfigurationError, match="list of tool names"):
        TestModel(call_tools="place_order")


async def test_a_structured_answer_is_handed_over_through_final_result() -> None:
    result = await create_client(model=TestModel(), code_mode="native").run(
        "go", tools=[place_order], output_type=Address
    )
    assert isinstance(result.output, Address) and result.output.postcode == "0000"


async def test_no_tools_answers_at_once_and_each_prompt_calls_again() -> None:
    client = create_client(model=TestModel(), code_mode="native")
    first = await client.run("hi")
    assert first.text == "success (no tool calls)" and first.turns == 1
    again = await client.run("again", tools=[place_order], history=first.messages)
    assert [c.name for c in again.tool_calls] == ["place_order"]
