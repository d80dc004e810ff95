"""Structured output: the run ends when the model hands over a value of the type asked for.

Why a tool (the mechanism both wire formats share, and what pydantic-ai does by default): the
model is offered ``final_result``, whose input schema is the output type's JSON Schema. Its
arguments are validated like any tool's (field errors go back to the model, which may try
again, at most ``output_retries`` times), then by pydantic against the type itself (custom
validators included); the validated value is ``RunResult.output``. A plain-text answer is
answered with a request to call ``final_result``, and counts as a try.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter, ValidationError

from toolnexus.errors import ConfigurationError, ModelRetry
from toolnexus.tools import Tool, ToolHints

__all__ = ["OUTPUT_TOOL", "Output", "output_for"]

OUTPUT_TOOL = "final_result"
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
        return "the final result was accepted"

    output.tool = Tool(
        OUTPUT_TOOL,
        "Give your final answer: call this once, when you are done, with the result as its "
        "arguments.",
        schema,
        execute=accept,
        hints=ToolHints(read_only=True, destructive=False, idempotent=True, open_world=False),
        retries=retries,
        source="output",
    )
    return output
