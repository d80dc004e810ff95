"""``TestModel``: an in-process model that exercises your tools with no script and no key.

At each prompt it calls every offered tool (or the ones named in ``call_tools``) once, with
arguments generated valid for the tool's JSON Schema (`sample_arguments`), then answers with a
JSON summary of what each call returned. Where ``run_code`` is offered (Code Mode: ``"code"``,
or ``"both"``, the default), it writes one ``run_code`` program instead, in the language of the
run's runtime (Python for Monty, JavaScript for V8), that calls the same tools together and
returns what each gave. Where the run asks for a structured answer (``output_type=``), it
hands one over through the ``final_result`` tool last. Re-exported from
[`toolnexus.testing`][toolnexus.testing].
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from typing import Any

from toolnexus.client._models import FunctionModel
from toolnexus.client._output import OUTPUT_TOOL
from toolnexus.client._schema_sample import sample_arguments
from toolnexus.codemode import RUN_CODE_NAME, python_attribute, python_literal
from toolnexus.errors import ConfigurationError
from toolnexus.scheduling import ToolCall

__all__ = ["TestModel", "program_for"]

_NOT_CALLED = frozenset({RUN_CODE_NAME, OUTPUT_TOOL})
_DESCRIPTION = "Call each tool once with generated arguments (TestModel)."


class TestModel(FunctionModel):
    """A model that calls your tools with valid arguments, then sums up what they returned.

    Args:
        call_tools: ``"all"`` (the default: every offered tool) or the names of the tools to
            call; a name the run does not offer fails the run with a
            [`ConfigurationError`][toolnexus.errors.ConfigurationError] naming the offered ones.
        code_mode: Where ``run_code`` is offered, write one program that calls the tools
            (default ``True``); ``False`` calls them as native tool calls whenever they are
            offered directly.
        text: The final answer, instead of the JSON summary of the results.
        name: The model name in spans and errors.

    Example::

        from toolnexus import create_client
        from toolnexus.testing import TestModel

        client = create_client(model=TestModel(), code_mode="native")
        result = client.run_sync("go", tools=[lookup])
        print(result.text)  # {"lookup": "a: sunny"}

    ``create_client(model="test")`` gives a ``TestModel()``; so does ``toolnexus chat --model
    test``. The arguments sent are in ``calls`` and the programs written in ``programs``, in
    order, for assertions.
    """

    __test__ = False  # not a pytest test class, whatever its name

    def __init__(
        self,
        *,
        call_tools: str | Sequence[str] = "all",
        code_mode: bool = True,
        text: str | None = None,
        name: str = "test",
    ) -> None:
        if call_tools != "all" and (
            isinstance(call_tools, str) or not all(isinstance(n, str) for n in call_tools)
        ):
            raise ConfigurationError(
                f"TestModel call_tools must be 'all' or a list of tool names, got {call_tools!r}."
            )
        self.call_tools: str | tuple[str, ...] = "all" if call_tools == "all" else tuple(call_tools)
        self.code_mode = bool(code_mode)
        self.text = text
        self.calls: list[ToolCall] = []
        self.programs: list[str] = []
        super().__init__(self._answer, name=name)

    async def _answer(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        exchange = _since_prompt(messages)
        if messages and messages[-1].get("role") == "user":
            calls = self._first_calls(tools, len(messages))
            if calls:
                self.calls += calls
                return calls
        called = _called(exchange)
        output = next((t for t in tools if t["name"] == OUTPUT_TOOL), None)
        if output is not None and OUTPUT_TOOL not in called.values():
            call = ToolCall(
                f"test_{len(messages)}_out", OUTPUT_TOOL, sample_arguments(output["input_schema"])
            )
            self.calls.append(call)
            return [call]
        if self.text is not None:
            return self.text
        return _summary(exchange, called)

    def _first_calls(self, tools: list[dict[str, Any]], turn: int) -> list[ToolCall]:
        direct = [t for t in tools if t["name"] not in _NOT_CALLED]
        run_code = next((t for t in tools if t["name"] == RUN_CODE_NAME), None)
        programmable = list(run_code.get("program_tools", ())) if run_code else []
        known = {t["name"] for t in direct} | {t["name"] for t in programmable}
        if self.call_tools != "all":
            missing = [n for n in self.call_tools if n not in known]
            if missing:
                offered = ", ".join(map(repr, sorted(known))) or "none"
                raise ConfigurationError(
                    f"TestModel was asked to call {', '.join(map(repr, missing))}, which this "
                    f"run does not offer; it offers {offered}."
                )
        if run_code is not None and self.code_mode and programmable:
            chosen = self._chosen(programmable)
            if chosen:
                code = program_for(chosen, str(run_code.get("language", "python")))
                self.programs.append(code)
                arguments = {"code": code, "description": _DESCRIPTION}
                return [ToolCall(f"test_{turn}_0", RUN_CODE_NAME, arguments)]
        return [
            ToolCall(f"test_{turn}_{i}", t["name"], sample_arguments(t["input_schema"]))
            for i, t in enumerate(self._chosen(direct))
        ]

    def _chosen(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if self.call_tools == "all":
            return tools
        return [t for t in tools if t["name"] in self.call_tools]


def program_for(tools: Sequence[dict[str, Any]], language: str = "python") -> str:
    """A ``run_code`` program calling each of ``tools`` once, together, with generated
    arguments, that returns ``{tool name: what it returned}`` (a failed call's entry is
    ``{"error": message}``).

    Args:
        tools: ``{"name", "input_schema"}`` per tool, as a model is shown them.
        language: ``"python"`` (Monty) or ``"javascript"`` (V8).
    """
    names = [str(t["name"]) for t in tools]
    args = [sample_arguments(t.get("input_schema") or {}) for t in tools]
    if language == "javascript":
        calls = [
            f"  attempt(tools[{json.dumps(n)}]({json.dumps(a)})),"
            for n, a in zip(names, args, strict=True)
        ]
        entries = ", ".join(f"{json.dumps(n)}: results[{i}]" for i, n in enumerate(names))
        return "\n".join(
            [
                "async function attempt(call) {",
                "  try {",
                "    return await call;",
                "  } catch (error) {",
                "    return { error: String(error && error.message) };",
                "  }",
                "}",
                "const results = await Promise.all([",
                *calls,
                "]);",
                f"return {{{entries}}};",
            ]
        )
    lines = [
        "import asyncio",
        "",
        "",
        "async def attempt(call):",
        "    try:",
        "        return await call",
        "    except ToolError as error:",
        '        return {"error": str(error)}',
        "",
        "",
        "results = await asyncio.gather(",
    ]
    for name, arguments in zip(names, args, strict=True):
        target = f"tools.{name}" if python_attribute(name) else f"tools[{python_literal(name)}]"
        lines.append(f"    attempt({target}({_python_value(arguments)})),")
    lines.append(")")
    entries = ", ".join(f"{python_literal(n)}: results[{i}]" for i, n in enumerate(names))
    lines.append(f"{{{entries}}}")
    return "\n".join(lines)


def _python_value(value: Any) -> str:
    """A JSON value as a Python literal (``True``, ``None``, ASCII-escaped strings)."""
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return python_literal(value)
    if isinstance(value, list):
        return "[" + ", ".join(map(_python_value, value)) + "]"
    if isinstance(value, dict):
        items = (f"{python_literal(str(k))}: {_python_value(v)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    return python_literal(str(value))


def _since_prompt(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages after the latest user message: this prompt's exchange."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user":
            return messages[i + 1 :]
    return list(messages)


def _called(exchange: list[dict[str, Any]]) -> dict[str, str]:
    """Call id -> tool name, for every call the model made in this exchange."""
    out: dict[str, str] = {}
    for message in exchange:
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            out[str(call.get("id"))] = str(function.get("name"))
    return out


def _summary(exchange: list[dict[str, Any]], called: dict[str, str]) -> str:
    """What each call returned, as JSON text: ``{tool name: result}``."""
    results: dict[str, Any] = {}
    for message in exchange:
        if message.get("role") != "tool":
            continue
        name = called.get(str(message.get("tool_call_id")), "?")
        content = message.get("content")
        if isinstance(content, str):
            with contextlib.suppress(ValueError):
                content = json.loads(content)
        results[name] = content
    if not results:
        return "success (no tool calls)"
    return json.dumps(results, ensure_ascii=False)
