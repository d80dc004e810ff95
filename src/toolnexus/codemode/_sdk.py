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
import re
from collections.abc import Sequence
from typing import Literal, get_args

from toolnexus.codemode._schema_types import (
    TYPING_NAMES,
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

__all__ = ["SDK_HEADERS", "SdkLanguage", "parse_language", "render_sdk", "sdk_tools"]

SdkLanguage = Literal["python", "javascript", "typescript"]
_LANGUAGES: tuple[str, ...] = get_args(SdkLanguage)

_PYTHON_HEADER = """\
# Python in the Monty sandbox (a subset of Python). Each tool is an async method
# of `tools` taking one dict: `await tools.name({...})`, or `tools["any-name"]({...})`.
# Fan out with `await asyncio.gather(...)`. The final expression (JSON) is the result; print()
# goes to logs. A failed call raises ToolError (RuntimeError here; str(e) is the message)."""

_JS_HEADER = """\
// JavaScript in V8 (no file system or network). Each tool is an async function of `tools`
// taking one object: `await tools.name({...})`, or `tools["any-name"]({...})`. Fan out with
// `await Promise.all([...])`. `return` the result (JSON); console output goes to logs.
// A failed call throws a ToolError with two strings, `e.tool` and `e.message`."""

SDK_HEADERS = {"python": _PYTHON_HEADER, "javascript": _JS_HEADER, "typescript": _JS_HEADER}
"""The comment block each SDK opens with: how programs call tools, in that language."""


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
        result_type = _result_type(types, t)
        default = " = ..." if _optional_args(t) else ""
        doc = safe_comment(t.description, "    # ") if t.description else []
        doc += _property_comments(t, "    # ")
        if python_attribute(t.name):
            signature = f"(self, args: {arg_type}{default}, /) -> {result_type}: ..."
            methods += [*doc, f"    async def {t.name}{signature}"]
        else:  # reachable by name only: a typed overload of tools["name"], its doc above it
            items += [
                *doc,
                "    @overload",
                f"    def __getitem__(self, name: Literal[{python_literal(t.name)}]) -> "
                f"Callable[[{arg_type}], Awaitable[{result_type}]]: ...",
            ]
    body = [
        "ToolError = RuntimeError",
        *types.declarations,
        "class Tools:",
        *methods,
        *_getitem_overloads(items),
        "tools: Tools",
        "",
    ]
    text = "\n".join(body)
    used = [n for n in TYPING_NAMES if n in text and _TYPING_WORDS[n].search(text)]
    return "\n".join([_PYTHON_HEADER, f"from typing import {', '.join(used)}", text])


_TYPING_WORDS = {n: re.compile(rf"\b{n}\b") for n in TYPING_NAMES}
"""Each name as a word. Why looked up after a plain substring test: most SDKs use few of
them, and ``in`` turns away the rest at a fraction of a regex scan's cost."""


def _result_type(types: PythonTypes | TypeScriptTypes, t: Tool) -> str:
    """The type of what a call of ``t`` returns: from its output schema, else any."""
    if t.output_schema is None:
        return types.any_type
    return types.expr(t.output_schema, pascal(t.name) + "Result")


_GETITEM_FALLBACK = (
    "    def __getitem__(self, name: str) -> Callable[[dict[str, Any]], Awaitable[Any]]: ..."
)


def _getitem_overloads(items: list[str]) -> list[str]:
    """Typed ``tools["name"]`` for each tool whose name is not a method (``items``: each one's
    doc, ``@overload`` and declaration), then a fallback for any other name.

    Why the fallback: a tool the policy denies is not declared, yet it is present at run time
    as a stub that fails like any failing tool; the program must be able to reach it by name.
    """
    if not items:
        return [_GETITEM_FALLBACK]
    implementation = "    def __getitem__(self, name: str) -> Any: ..."
    return [*items, "    @overload", _GETITEM_FALLBACK, implementation]


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
        result_type = _result_type(types, t)
        members.append(
            f"  {string_literal(t.name)}(args{optional}: {arg_type}): Promise<{result_type}>;"
        )
    lines = [
        _JS_HEADER,
        "declare class ToolError extends Error { readonly tool: string; readonly message: string }",
        "declare const tools: {",
        *members,
        "};",
        "",
    ]
    return "\n".join(lines)
