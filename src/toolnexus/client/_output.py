"""Structured output: the run ends when the model hands over a value of the type asked for.

Why a tool (the mechanism both wire formats share, and what pydantic-ai does by default): the
model is offered ``final_result``, whose input schema is the output type's JSON Schema. Its
arguments are validated like any tool's (field errors go back to the model, which may try
again, at most ``output_retries`` times), then by pydantic against the type itself (custom
validators included); the validated value is ``RunResult.output``. A plain-text answer is
answered with a request to call ``final_result``, and counts as a try.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter, ValidationError

from toolnexus._checks import int_at_least
from toolnexus.errors import ConfigurationError, ModelRetry
from toolnexus.tools import Tool, ToolHints

__all__ = [
    "ACCEPTED",
    "ASK_FOR_OUTPUT",
    "OUTPUT_TOOL",
    "Output",
    "output_for",
    "output_tool",
    "requested_output",
]

OUTPUT_TOOL = "final_result"
ACCEPTED = "the final result was accepted"
"""What the output tool answers a call whose arguments are a valid result."""
ASK_FOR_OUTPUT = (
    f"Answer by calling the {OUTPUT_TOOL} tool with your final result (its arguments are the "
    "answer, in the shape its schema describes); a plain-text answer is not accepted."
)


@dataclass
class Output:
    """One run's output tool and, once the model called it well, the validated value."""

    tool: Tool
    value: Any = None
    received: bool = False
    retries: int = 1
    text_answers: list[str] = field(default_factory=list)


def requested_output(output_type: Any, retries: Any) -> Output | None:
    """The output of a run asked for ``output_type`` (``None``: none was), ``retries`` checked.

    Raises:
        ConfigurationError: ``retries`` is not an int >= 0, or as `output_for`.
    """
    if output_type is None:
        return None
    if not int_at_least(retries, 0):
        raise ConfigurationError(f"output_retries must be an int >= 0, got {retries!r}.")
    return output_for(output_type, retries)


def output_for(output_type: Any, retries: int) -> Output:
    """The output tool for ``output_type`` (a pydantic model, dataclass, TypedDict or scalar).

    Raises:
        ConfigurationError: pydantic cannot describe ``output_type`` as JSON Schema.
    """
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(output_type)
        schema = adapter.json_schema()
    except Exception as exc:
        raise ConfigurationError(
            f"output_type {output_type!r} cannot be described as JSON Schema ({exc}); use a "
            "pydantic model, a dataclass, a TypedDict or a JSON scalar type."
        ) from None
    wrapped = schema.get("type") != "object"
    if wrapped:  # a tool's arguments are an object: a scalar or a list travels as "result"
        definitions = schema.pop("$defs", None)
        schema = {"type": "object", "properties": {"result": schema}, "required": ["result"]}
        if definitions:
            schema["$defs"] = definitions
    output = Output(tool=Tool(OUTPUT_TOOL, execute=lambda args: None), retries=retries)

    def accept(args: dict[str, Any]) -> str:
        try:
            output.value = adapter.validate_python(args["result"] if wrapped else args)
        except ValidationError as exc:
            problems = [
                f"{'.'.join(str(p) for p in e['loc']) or 'result'}: {e['msg']}"
                for e in exc.errors(include_url=False)
            ]
            raise ModelRetry(
                "the result does not match its schema: " + "; ".join(problems)
            ) from None
        output.received = True
        return ACCEPTED

    output.tool = output_tool(schema, retries, accept)
    return output


def output_tool(schema: dict[str, Any], retries: int, execute: Callable[..., Any]) -> Tool:
    """The ``final_result`` tool offered for an output type of JSON Schema ``schema``.

    `output_for` makes it with a pydantic check as ``execute``; a durable run's workers,
    which have only the schema, make the same tool (the model is offered the same definition)
    and check the arguments against the schema.
    """
    return Tool(
        OUTPUT_TOOL,
        "Give your final answer: call this once, when you are done, with the result as its "
        "arguments.",
        schema,
        execute=execute,
        hints=ToolHints(read_only=True, destructive=False, idempotent=True, open_world=False),
        retries=retries,
        source="output",
    )
