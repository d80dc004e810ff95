"""``render_sdk``: the typed declaration of the tools a program may call.

The SDK rides in ``run_code``'s description, so it is part of the prompt prefix of every request
of a run: it must be **byte-stable**. The same tool set gives the same bytes whatever order the
tools came in (deduplicated first-wins, sorted by name, properties sorted), and any change of
the set, a name or a description changes it. Nothing in a name or a description can break out
of the generated code: names are emitted as ASCII-escaped string literals (or as attributes
only when they are plain identifiers), and descriptions only as line comments, re-prefixed at
every line break either language honours.

The Python SDK is valid Python and is also what Monty's type checker checks a program against,
so it matches the runtime surface exactly: each tool is an ``async`` method of the global
``tools`` taking one dict of arguments.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Literal, get_args

from toolnexus.codemode._schema_types import (
    PythonTypes,
    TypeScriptTypes,
    pascal,
    python_attribute,
    python_literal,
    safe_comment,
    string_literal,
)
from toolnexus.errors import ConfigurationError
from toolnexus.tools import Tool

__all__ = ["SdkLanguage", "parse_language", "render_sdk", "sdk_tools"]

SdkLanguage = Literal["python", "javascript", "typescript"]
_LANGUAGES: tuple[str, ...] = get_args(SdkLanguage)

_PYTHON_HEADER = """\
# toolnexus SDK (Python, run in the Monty sandbox: a subset of Python, no third-party modules).
# Every tool is an async method of the global `tools` taking one dict of arguments:
#   result = await tools.read_file({"path": "a.txt"})     # when the name is an identifier
#   result = await tools["read-file"]({"path": "a.txt"})  # any tool, by its exact name
# Put calls in flight together with `await asyncio.gather(...)` (import asyncio first); the host
# decides which of them may really overlap. Results come back as JSON-shaped values.
# The program's result is the value of its final expression (top-level await is allowed); it
# must be JSON-shaped. print() output is returned as logs.
# A failed call raises ToolError. Monty cannot define exception classes or give exceptions
# attributes, so here ToolError is the built-in RuntimeError: `except ToolError as e` catches it,
# str(e) is the failure message, and the failing tool is the one you awaited. An uncaught
# ToolError fails the run with that message."""

_JS_HEADER = """\
// toolnexus SDK (JavaScript, run in V8 with no file system, network or environment).
// Every tool is an async function of the global `tools` taking one object of arguments:
//   const text = await tools.read_file({ path: "a.txt" });     // when the name is an identifier
//   const same = await tools["read-file"]({ path: "a.txt" });  // any tool, by its exact name
// Put calls in flight together with `await Promise.all([...])`; the host decides which of them
// may really overlap. Results come back as JSON values.
// The program is the body of an async function: `return` its result (JSON-serialisable).
// console.log/info/debug go to stdout and console.error/warn to stderr; both are returned as logs.
// A failed call throws a ToolError with exactly two string fields, `e.tool` and `e.message`;
// catch it with try/catch. An uncaught one fails the run with the tool's message."""


def parse_language(language: object) -> SdkLanguage:
    """``language`` as an SDK language, or
    [`ConfigurationError`][toolnexus.errors.ConfigurationError] listing the valid ones."""
    if isinstance(language, str) and language in _LANGUAGES:
        return language  # type: ignore[return-value]  # narrowed by the membership test
    raise ConfigurationError(
        f"SDK language must be one of {', '.join(map(repr, _LANGUAGES))}, got {language!r}."
    )


def sdk_tools(tools: Sequence[Tool]) -> list[Tool]:
    """``tools`` deduplicated by name (first wins) and sorted by name: the SDK's order."""
    first: dict[str, Tool] = {}
    for t in tools:
        first.setdefault(t.name, t)
    return [first[name] for name in sorted(first)]


def render_sdk(language: str, tools: Sequence[Tool]) -> str:
    """The SDK declaring ``tools`` for programs in ``language``.

    Args:
        language: ``"python"``, ``"javascript"`` or ``"typescript"`` (the last two render the
            same TypeScript-annotated declaration).
        tools: The tools a program may call (the granted ones).

    Raises:
        ConfigurationError: an unknown language.
    """
    lang = parse_language(language)
    ordered = sdk_tools(tools)
    if lang == "python":
        return _render_python(ordered)
    return _render_javascript(ordered)


def _optional_args(t: Tool) -> bool:
    required = t.input_schema.get("required")
    return not (isinstance(required, list) and required)


def _render_python(tools: list[Tool]) -> str:
    types = PythonTypes()
    methods: list[str] = []
    items: list[str] = []
    for t in tools:
        arg_type = types.expr(t.input_schema, pascal(t.name) + "Args")
        default = " = ..." if _optional_args(t) else ""
        signature = f"(self, args: {arg_type}{default}, /) -> Any: ..."
        attribute = python_attribute(t.name)
        if methods:
            methods.append("")
        if not attribute:  # reachable by name only: say how, above its description
            methods.append(f"    # tools[{python_literal(t.name)}]({arg_type})")
        methods.extend(safe_comment(t.description, "    # ") if t.description else [])
        methods.extend(_property_comments(t, "    # "))
        if attribute:
            methods.append(f"    async def {t.name}{signature}")
        items.append(
            f"    def __getitem__(self, name: Literal[{python_literal(t.name)}]) -> "
            f"Callable[[{arg_type}], Awaitable[Any]]: ..."
        )
    lines = [
        _PYTHON_HEADER,
        "from typing import Any, Awaitable, Callable, Literal, NotRequired, TypedDict, overload",
        "",
        "ToolError = RuntimeError",
        "",
        *types.declarations,
        "",
        "class Tools:",
        *methods,
        *_getitem_overloads(items),
        "",
        "tools: Tools",
        "",
    ]
    return "\n".join(lines)


_GETITEM_FALLBACK = (
    "    def __getitem__(self, name: str) -> Callable[[dict[str, Any]], Awaitable[Any]]: ..."
)


def _getitem_overloads(items: list[str]) -> list[str]:
    """Typed ``tools["name"]`` per tool, then a fallback for any other name.

    Why the fallback: a tool the policy denies is not declared, yet it is present at run time
    as a stub that fails like any failing tool; the program must be able to reach it by name.
    """
    if not items:
        return [_GETITEM_FALLBACK]
    out: list[str] = []
    for item in items:
        out += ["    @overload", item]
    implementation = "    def __getitem__(self, name: str) -> Any: ..."
    return [*out, "    @overload", _GETITEM_FALLBACK, implementation]


def _property_comments(t: Tool, prefix: str) -> list[str]:
    props = t.input_schema.get("properties")
    if not isinstance(props, dict):
        return []
    lines: list[str] = []
    for key in sorted(props, key=str):
        schema = props[key]
        desc = schema.get("description") if isinstance(schema, dict) else None
        if isinstance(desc, str) and desc.strip():
            lines += safe_comment(f"  {json.dumps(str(key), ensure_ascii=True)}: {desc}", prefix)
    return lines


def _render_javascript(tools: list[Tool]) -> str:
    types = TypeScriptTypes()
    members: list[str] = []
    for t in tools:
        arg_type = types.expr(t.input_schema, pascal(t.name) + "Args")
        optional = "?" if _optional_args(t) else ""
        members.extend(safe_comment(t.description, "  // ") if t.description else [])
        members.extend(_property_comments(t, "  // "))
        members.append(f"  {string_literal(t.name)}(args{optional}: {arg_type}): Promise<unknown>;")
    lines = [
        _JS_HEADER,
        "declare class ToolError extends Error { readonly tool: string; readonly message: string }",
        "declare const tools: {",
        *members,
        "};",
        "",
    ]
    return "\n".join(lines)
