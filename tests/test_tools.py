"""Tool, ToolHints, ToolResult, @tool and Toolkit."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from toolnexus import ConfigurationError, Tool, ToolHints, Toolkit, ToolResult, tool
from toolnexus.errors import ToolArgumentsError


def test_hints_default_to_mcp_pessimism() -> None:
    assert ToolHints() == ToolHints(
        read_only=False, destructive=True, idempotent=False, open_world=True
    )


def test_tool_result_defaults() -> None:
    assert ToolResult("x") == ToolResult(output="x", is_error=False)


# -- @tool -----------------------------------------------------------------------------------


class Point(BaseModel):
    x: int
    y: int = 0


@tool
async def search(query: str, limit: int = 10, mode: Literal["fast", "deep"] = "fast") -> list[str]:
    """Search the notes.

    Longer explanation of the search.

    Args:
        query: What to look for.
        limit: How many results at most.
    """
    return [query] * limit


def test_schema_and_description_come_from_signature_and_docstring() -> None:
    assert search.name == "search"
    assert search.description == "Search the notes.\n\nLonger explanation of the search."
    assert search.input_schema == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for."},
            "limit": {"type": "integer", "default": 10, "description": "How many results at most."},
            "mode": {"enum": ["fast", "deep"], "type": "string", "default": "fast"},
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    assert search.hints is None and search.concurrency_safe is None
    assert search.arguments_model is not None


async def test_decorated_async_function_runs_with_validated_arguments() -> None:
    assert await search.invoke({"query": "q", "limit": 2}) == ["q", "q"]
    assert await search.invoke({"query": "q", "limit": "3"}) == ["q"] * 3  # lax coercion


async def test_invalid_arguments_name_the_field_and_the_body_never_runs() -> None:
    ran = []

    @tool
    def move(to: Point, speed: float) -> str:
        ran.append(to)
        return "moved"

    with pytest.raises(ToolArgumentsError) as info:
        await move.invoke({"to": {"y": 1}, "speed": "fast", "extra": 1})
    assert info.value.tool == "move"
    assert info.value.problems == [
        "to.x: Field required",
        "speed: Input should be a valid number, unable to parse string as a number",
        "extra: Extra inputs are not permitted",
    ]
    assert str(info.value).startswith("invalid arguments for tool 'move': to.x: Field required;")
    assert ran == []
    assert await move.invoke({"to": {"x": 1}, "speed": 2}) == "moved"
    assert ran == [Point(x=1, y=0)]


def test_options_name_description_hints_predicate_approval() -> None:
    def safe(args: dict[str, Any]) -> bool:
        return True

    @tool(
        name="read-file",
        description="Reads.",
        hints=ToolHints(read_only=True),
        concurrency_safe=safe,
        requires_approval=True,
    )
    def read_file(path: str) -> str:
        """Ignored docstring."""
        return path

    assert read_file.name == "read-file"
    assert read_file.description == "Reads."
    assert read_file.hints == ToolHints(read_only=True)
    assert read_file.concurrency_safe is safe
    assert read_file.requires_approval is True


REQUEST: contextvars.ContextVar[str] = contextvars.ContextVar("REQUEST", default="none")


async def test_sync_tools_run_in_a_worker_thread_with_ctx_and_contextvars() -> None:
    seen: dict[str, Any] = {}

    @tool
    def who(name: str, ctx: Any = None) -> str:
        seen["thread"] = threading.current_thread().name
        seen["ctx"] = ctx
        seen["request"] = REQUEST.get()
        return f"hi {name}"

    assert "ctx" not in who.input_schema["properties"]
    REQUEST.set("req-1")
    assert await who.invoke({"name": "ada"}, {"user": 1}) == "hi ada"
    assert seen == {"thread": seen["thread"], "ctx": {"user": 1}, "request": "req-1"}
    assert seen["thread"].startswith("toolnexus-tool")


async def test_async_tool_with_ctx() -> None:
    @tool
    async def echo(text: str, ctx: Any) -> list[Any]:
        await asyncio.sleep(0)
        return [text, ctx]

    assert await echo.invoke({"text": "a"}, "the ctx") == ["a", "the ctx"]


async def test_parameters_may_shadow_basemodel_attributes() -> None:
    @tool
    def convert(json: str, schema: str = "s", copy: bool = False) -> str:
        return f"{json}/{schema}/{copy}"

    assert set(convert.input_schema["properties"]) == {"json", "schema", "copy"}
    assert await convert.invoke({"json": "j"}) == "j/s/False"


def test_functions_that_cannot_be_described_are_refused() -> None:
    def star(*args: int) -> None: ...

    def kw(**kwargs: int) -> None: ...

    def positional(a: int, /) -> None: ...

    for fn, what in [(star, r"\*args"), (kw, r"\*\*kwargs"), (positional, "positional-only")]:
        with pytest.raises(ConfigurationError, match=what):
            tool(fn)

    def unresolvable(a: "NoSuchType") -> None: ...  # type: ignore[name-defined]  # noqa: F821, UP037

    with pytest.raises(ConfigurationError, match="cannot resolve the type annotations"):
        tool(unresolvable)

    def opaque(lock: threading.Lock) -> None: ...  # type: ignore[valid-type]

    with pytest.raises(ConfigurationError, match="cannot be described as JSON Schema"):
        tool(opaque)

    with pytest.raises(ConfigurationError, match="must decorate a function"):
        tool(42)  # type: ignore[call-overload]


# -- Tool ------------------------------------------------------------------------------------


async def test_hand_written_tools_validate_against_json_schema() -> None:
    calls: list[Any] = []

    def execute(args: dict[str, Any]) -> str:
        calls.append(args)
        return "ok"

    t = Tool(
        "weather",
        "Weather for a city.",
        {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
            "required": ["city"],
        },
        execute=execute,
    )
    with pytest.raises(ToolArgumentsError) as info:
        t.validate_arguments({"days": 0})
    assert info.value.problems == [
        "'city' is a required property",
        "days: 0 is less than the minimum of 1",
    ]
    assert await t.invoke({"city": "Oslo"}) == "ok"
    assert calls == [{"city": "Oslo"}]
    assert t.definition() == {
        "name": "weather",
        "description": "Weather for a city.",
        "input_schema": t.input_schema,
    }


async def test_execute_may_be_a_callable_object_or_return_an_awaitable() -> None:
    class Caller:
        async def __call__(self, args: dict[str, Any]) -> str:
            return "object"

    async def later() -> str:
        return "awaited"

    assert await Tool("a", execute=Caller()).invoke({}) == "object"
    assert await Tool("b", execute=lambda args: later()).invoke({}) == "awaited"
    assert await Tool("c", execute=print).invoke({}) is None  # no signature: called with args


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"name": ""}, "name must be a non-empty string"),
        ({"name": 3}, "name must be a non-empty string"),
        ({"description": None}, "description must be a string"),
        ({"execute": "run"}, "execute must be callable"),
        ({"hints": {"read_only": True}}, "hints must be a ToolHints"),
        ({"concurrency_safe": True}, "concurrency_safe must be a callable"),
        ({"input_schema": []}, "input_schema must be a JSON Schema object"),
        ({"input_schema": {"type": "string"}}, "must describe an object"),
        ({"input_schema": {"type": "object", "properties": 5}}, "not a valid JSON Schema"),
    ],
)
def test_bad_tool_definitions_are_refused(kwargs: dict[str, Any], match: str) -> None:
    options: dict[str, Any] = {"name": "t", "execute": lambda args: None, **kwargs}
    with pytest.raises(ConfigurationError, match=match):
        Tool(**options)


# -- Toolkit ---------------------------------------------------------------------------------


def _t(name: str, source: str = "native") -> Tool:
    return Tool(name, f"{name} tool", execute=lambda args: None, source=source)


def test_toolkit_is_ordered_and_first_wins(caplog: pytest.LogCaptureFixture) -> None:
    first, dup = _t("a"), _t("a", source="mcp")
    with caplog.at_level(logging.WARNING, logger="toolnexus.tools"):
        kit = Toolkit([first, _t("b"), dup])
    assert kit.names == ["a", "b"]
    assert kit.get("a") is first and kit.get("zzz") is None
    assert "duplicate tool name 'a'" in caplog.text and "source mcp" in caplog.text
    assert [t.name for t in kit] == ["a", "b"]
    assert len(kit) == 2 and "b" in kit and "c" not in kit
    assert kit.add(_t("c")) is True and kit.add(_t("c")) is False
    assert repr(kit) == "Toolkit(['a', 'b', 'c'])"


def test_provider_definitions() -> None:
    kit = Toolkit([search])
    assert kit.to_openai() == [
        {
            "type": "function",
            "function": {
                "name": "search",
                "description": search.description,
                "parameters": search.input_schema,
            },
        }
    ]
    assert kit.to_anthropic() == [
        {"name": "search", "description": search.description, "input_schema": search.input_schema}
    ]


def test_toolkit_refuses_non_tools() -> None:
    with pytest.raises(ConfigurationError, match="decorate functions with @tool"):
        Toolkit([print])  # type: ignore[list-item]


def test_nested_models_are_inlined_and_recursive_ones_keep_their_refs() -> None:
    from pydantic import BaseModel

    from toolnexus.tools._decorator import inline_definitions

    class Point(BaseModel):
        x: int
        y: int

    @tool
    def plot(points: list[Point], origin: Point | None = None) -> int:
        """Plot points."""
        return len(points)

    schema = plot.input_schema
    assert "$defs" not in schema and "$ref" not in str(schema)
    assert schema["properties"]["points"]["items"]["properties"]["x"] == {"type": "integer"}

    recursive = {
        "type": "object",
        "properties": {"tree": {"$ref": "#/$defs/Node"}},
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
            }
        },
    }
    flat = inline_definitions(recursive)
    assert flat["$defs"] == recursive["$defs"]
    assert flat["properties"]["tree"]["properties"]["kids"]["items"] == {"$ref": "#/$defs/Node"}


# -- timeouts ----------------------------------------------------------------------------------


async def test_a_hung_async_tool_times_out_and_frees_the_lane() -> None:
    from toolnexus import ToolCall, run_batch

    @tool(timeout=0.05)
    async def hang() -> str:
        """Never finishes."""
        await asyncio.Event().wait()
        return "unreachable"

    @tool
    async def after() -> str:
        """Runs once the hung call is answered (both are exclusive: one at a time)."""
        return "ran"

    outcomes = await run_batch(
        [ToolCall("1", "hang", {}), ToolCall("2", "after", {})], [hang, after]
    )
    assert outcomes[0].error == {
        "tool": "hang",
        "message": "tool 'hang' did not finish within 0.05 s (its timeout)",
    }
    assert outcomes[1].value == "ran"


async def test_a_sync_tool_times_out_while_its_thread_runs_on() -> None:
    release = threading.Event()
    finished = threading.Event()

    def blocked(args: dict[str, Any]) -> str:
        release.wait(30)
        finished.set()
        return "late"

    slow = Tool("slow", execute=blocked, timeout=0.05)
    with pytest.raises(TimeoutError, match=r"did not finish within 0\.05 s"):
        await slow.invoke({})
    assert not finished.is_set()  # answered while the thread was still blocked
    release.set()
    assert await asyncio.to_thread(finished.wait, 30)


async def test_a_tool_within_its_timeout_is_unaffected() -> None:
    @tool(timeout=30)
    async def quick(x: int) -> int:
        """Double."""
        return 2 * x

    assert quick.timeout == 30
    assert await quick.invoke({"x": 4}) == 8


@pytest.mark.parametrize("bad", [0, -1, True, "5", float("nan")])
def test_timeout_must_be_a_positive_number(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="timeout must be None or a positive number"):
        Tool("t", execute=lambda args: None, timeout=bad)
