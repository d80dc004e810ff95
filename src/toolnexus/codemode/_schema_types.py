"""JSON Schema → type expressions, for the Python and TypeScript SDKs.

Total by design: any schema node, however malformed, yields a type (``Any`` / ``unknown`` for
what it cannot express: ``$ref``, unknown types, nesting deeper than `MAX_DEPTH`), and
nothing here raises. Object schemas with properties become named declarations (TypedDicts in
Python, inline object types in TypeScript); everything else is an inline expression.
"""

from __future__ import annotations

import json
import keyword
import math
import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "MAX_DEPTH",
    "SDK_NAMES",
    "TYPING_NAMES",
    "PythonTypes",
    "TypeScriptTypes",
    "pascal",
    "python_attribute",
    "python_literal",
    "safe_comment",
    "string_literal",
]

MAX_DEPTH = 12

_SCALARS_PY = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "null": "None",
}
_SCALARS_TS = {
    "string": "string",
    "integer": "number",
    "number": "number",
    "boolean": "boolean",
    "null": "null",
}
_LINE_BREAKS = re.compile(r"\r\n|[\r\n\u2028\u2029\x0b\x0c\x1c\x1d\x1e\x85]")
_UNPRINTABLE = re.compile(
    r"[\x00-\x08\x0e-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]"
)


def safe_comment(text: str, prefix: str) -> list[str]:
    """``text`` as comment lines, each starting with ``prefix`` (``"# "`` or ``"// "``).

    Every line break a Python or JavaScript tokenizer honours (``\\r``, U+2028, ...) starts a
    new, re-prefixed line, and control and bidi-override characters become spaces, so no
    description can end a comment early or hide code in it.
    """
    lines = _LINE_BREAKS.split(text.replace("\t", " "))
    return [(prefix + _UNPRINTABLE.sub(" ", line)).rstrip() for line in lines]


def python_attribute(name: str) -> bool:
    """Whether ``name`` can be written as ``tools.name`` in Python.

    ASCII identifiers that are not keywords, do not start with an underscore (which keeps
    every tool clear of the ``Tools`` class's own dunder methods) and are not a name the SDK's
    annotations use (`SDK_NAMES`). Every other name is reachable as ``tools["name"]``. The
    JavaScript SDK quotes every name, so it needs no such test.
    """
    return (
        name.isidentifier()
        and name.isascii()
        and not keyword.iskeyword(name)
        and not name.startswith("_")
        and name not in SDK_NAMES
    )


TYPING_NAMES = (
    "Any", "Awaitable", "Callable", "Literal", "NotRequired", "TypedDict", "overload",
)  # fmt: skip
"""The names the Python SDK imports from ``typing`` (those it uses)."""

SDK_NAMES = frozenset(TYPING_NAMES) | {
    "bool", "dict", "float", "int", "list", "object", "str", "tuple", "type",
}  # fmt: skip
"""Names the Python SDK's annotations use. Why no tool is a method by such a name: a method
``list`` of ``Tools`` shadows ``list`` in every later annotation of the class, so the type check
of wrong arguments was switched off, or checked them against another tool's type."""


def string_literal(value: str) -> str:
    """``value`` as an ASCII-only JavaScript string literal (JSON; UTF-16 escapes)."""
    return json.dumps(value, ensure_ascii=True)


def python_literal(value: str) -> str:
    """``value`` as an ASCII-only Python string literal that round-trips exactly.

    Not JSON: JSON escapes a character outside the BMP as a UTF-16 surrogate pair, which
    Python reads as two lone surrogates, a different string.
    """
    out = ['"']
    for ch in value:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 0x20 <= code < 0x7F:
            out.append(ch)
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def _literal(value: Any, *, python: bool) -> str | None:
    if isinstance(value, bool):
        return ("True" if value else "False") if python else ("true" if value else "false")
    if value is None:
        return "None" if python else "null"
    if isinstance(value, str):
        return python_literal(value) if python else string_literal(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value) and not python:
        return repr(value)
    return None


def _type_list(node: Mapping[str, Any]) -> list[str] | None:
    kind = node.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list) and kind and all(isinstance(k, str) for k in kind):
        return list(dict.fromkeys(kind))
    return None


def _union(parts: list[str], any_type: str) -> str:
    unique = list(dict.fromkeys(parts))
    if any_type in unique or not unique:
        return any_type
    return unique[0] if len(unique) == 1 else " | ".join(unique)


class _Types:
    """Shared walk; subclasses say how each construct is spelled."""

    any_type = "Any"
    python = True
    scalars = _SCALARS_PY

    def expr(self, node: Any, path: str, depth: int = 0) -> str:
        """The type of ``node``; ``path`` names the declaration a nested object would get."""
        if depth > MAX_DEPTH or not isinstance(node, Mapping) or "$ref" in node:
            return self.any_type
        for key in ("oneOf", "anyOf"):
            options = node.get(key)
            if isinstance(options, list) and options:
                return _union(
                    [self.expr(o, f"{path}{i}", depth + 1) for i, o in enumerate(options)],
                    self.any_type,
                )
        all_of = node.get("allOf")
        if isinstance(all_of, list) and all_of:
            return self.intersection(all_of, path, depth)
        enum = node.get("enum")
        if isinstance(enum, list) and enum:
            literals = [_literal(v, python=self.python) for v in enum]
            if any(lit is None for lit in literals):
                return self.any_type
            return self.literal_union([lit for lit in literals if lit is not None])
        if "const" in node:
            lit = _literal(node["const"], python=self.python)
            return self.any_type if lit is None else self.literal_union([lit])
        kinds = _type_list(node)
        if kinds is None:
            if "type" not in node and node.get("properties"):  # an object that forgot its type
                return self.object(node, path, depth)
            return self.any_type
        parts = [self.single(node, kind, path, depth) for kind in kinds]
        return _union(parts, self.any_type)

    def single(self, node: Mapping[str, Any], kind: str, path: str, depth: int) -> str:
        if kind in self.scalars:
            return self.scalars[kind]
        if kind == "array":
            return self.array(node, path, depth)
        if kind == "object":
            return self.object(node, path, depth)
        return self.any_type

    def array(self, node: Mapping[str, Any], path: str, depth: int) -> str:
        items = node.get("items")
        if isinstance(items, list):  # draft-4 tuple
            if not items:
                return self.list_of(self.any_type)
            return self.tuple_of(
                [self.expr(i, f"{path}Item{n}", depth + 1) for n, i in enumerate(items)]
            )
        if isinstance(items, Mapping):
            return self.list_of(self.expr(items, f"{path}Item", depth + 1))
        return self.list_of(self.any_type)

    def extra_type(self, node: Mapping[str, Any], path: str, depth: int) -> str | None:
        extra = node.get("additionalProperties")
        if isinstance(extra, Mapping):
            return self.expr(extra, f"{path}Value", depth + 1)
        if extra is False:
            return None
        return self.any_type

    def properties(self, node: Mapping[str, Any]) -> list[tuple[str, Any, bool]]:
        props = node.get("properties")
        if not isinstance(props, Mapping):
            return []
        required = node.get("required")
        names = {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
        return [(str(k), props[k], k in names) for k in sorted(props, key=str)]

    # spelled by subclasses
    def object(self, node: Mapping[str, Any], path: str, depth: int) -> str:
        raise NotImplementedError

    def intersection(self, parts: list[Any], path: str, depth: int) -> str:
        raise NotImplementedError

    def literal_union(self, literals: list[str]) -> str:
        raise NotImplementedError

    def list_of(self, item: str) -> str:
        raise NotImplementedError

    def tuple_of(self, items: list[str]) -> str:
        raise NotImplementedError


class PythonTypes(_Types):
    """Python type expressions; object schemas with properties become TypedDict declarations.

    Declarations accumulate in `declarations`, innermost first, under names that are
    unique within this instance; emit them before the expressions that use them.
    """

    def __init__(self) -> None:
        self.declarations: list[str] = []
        self._used: set[str] = set()

    def unique(self, name: str) -> str:
        """``name``, or ``name`` plus the first free number, and reserve it."""
        candidate, n = name, 2
        while candidate in self._used:
            candidate, n = f"{name}{n}", n + 1
        self._used.add(candidate)
        return candidate

    def object(self, node: Mapping[str, Any], path: str, depth: int) -> str:
        props = self.properties(node)
        if not props:
            extra = self.extra_type(node, path, depth)
            return f"dict[str, {extra or self.any_type}]"
        name = self.unique(path)
        fields = []
        for key, schema, required in props:
            kind = self.expr(schema, name + pascal(key), depth + 1)
            fields.append(f"{python_literal(key)}: {kind if required else f'NotRequired[{kind}]'}")
        self.declarations.append(
            f"{name} = TypedDict({python_literal(name)}, {{{', '.join(fields)}}})"
        )
        return name

    def intersection(self, parts: list[Any], path: str, depth: int) -> str:
        return self.any_type  # Python has no intersection types

    def literal_union(self, literals: list[str]) -> str:
        return f"Literal[{', '.join(literals)}]"

    def list_of(self, item: str) -> str:
        return f"list[{item}]"

    def tuple_of(self, items: list[str]) -> str:
        return f"tuple[{', '.join(items)}]"


class TypeScriptTypes(_Types):
    """TypeScript type expressions, all inline."""

    any_type = "unknown"
    python = False
    scalars = _SCALARS_TS

    def object(self, node: Mapping[str, Any], path: str, depth: int) -> str:
        props = self.properties(node)
        members = [
            f"{string_literal(name)}{'' if required else '?'}: {self.expr(schema, path, depth + 1)}"
            for name, schema, required in props
        ]
        extra = self.extra_type(node, path, depth)
        if extra is not None and (
            not props or isinstance(node.get("additionalProperties"), Mapping)
        ):
            members.append(f"[key: string]: {extra}")
        return "{ " + "; ".join(members) + " }" if members else "Record<string, never>"

    def intersection(self, parts: list[Any], path: str, depth: int) -> str:
        return " & ".join(f"({self.expr(p, path, depth + 1)})" for p in parts)

    def literal_union(self, literals: list[str]) -> str:
        return " | ".join(literals)

    def list_of(self, item: str) -> str:
        return f"Array<{item}>"

    def tuple_of(self, items: list[str]) -> str:
        return f"[{', '.join(items)}]"


def pascal(name: str) -> str:
    words = re.findall(r"[A-Za-z0-9]+", name)
    text = "".join(w[:1].upper() + w[1:] for w in words)
    return text if text and not text[0].isdigit() else f"T{text}"
