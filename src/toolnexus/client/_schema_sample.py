"""``sample_arguments``: one argument set valid for a tool's JSON Schema, always the same one.

What [`TestModel`][toolnexus.testing.TestModel] sends each tool. Deterministic (no randomness:
the same schema gives the same arguments on every run) and total (any schema node, however odd,
yields a value; nothing here raises). It follows ``$ref`` into ``$defs``/``definitions``,
``allOf`` (merged), ``anyOf``/``oneOf`` (the first option that is not ``null``), ``const``,
``enum``, ``type`` lists, string ``format``s, ``pattern`` (from a few candidates),
``minLength``/``maxLength``, numeric bounds (inclusive and exclusive) and ``multipleOf``,
``minItems``/``maxItems``/``uniqueItems``/``prefixItems``, and ``required``/``minProperties``.
Optional properties are given too (their ``default`` when they have one), until nesting gets
deep, so a recursive schema ends.
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

sre: Any = importlib.import_module("re._parser")  # the parser of Python's own re (3.11+)

__all__ = ["sample_arguments", "sample_value"]

_FORMATS = {
    "date-time": "2024-01-01T00:00:00Z",
    "date": "2024-01-01",
    "time": "00:00:00Z",
    "duration": "P1D",
    "email": "a@example.com",
    "idn-email": "a@example.com",
    "hostname": "example.com",
    "idn-hostname": "example.com",
    "ipv4": "127.0.0.1",
    "ipv6": "::1",
    "uri": "https://example.com",
    "url": "https://example.com",
    "iri": "https://example.com",
    "uri-reference": "https://example.com",
    "iri-reference": "https://example.com",
    "uri-template": "https://example.com/{id}",
    "uuid": "00000000-0000-4000-8000-000000000000",
    "json-pointer": "/a",
    "relative-json-pointer": "0",
    "regex": "a",
}
_MAX_DEPTH = 12
"""Past this nesting, a schema node gives ``None`` (a recursive schema must end)."""
_OPTIONAL_DEPTH = 4
"""Past this nesting, optional properties are left out and arrays are as short as allowed."""
_PATTERN_CANDIDATES = ("a", "A", "0", "a0", "aa", "abc", "a-b", "a_b", "A0", "a.b", "1.0", "00")


def sample_arguments(schema: Mapping[str, Any]) -> dict[str, Any]:
    """An argument set (a JSON object) valid for ``schema``, a tool's ``input_schema``.

    Example::

        >>> sample_arguments({"type": "object", "properties": {"n": {"type": "integer",
        ...     "minimum": 3}}, "required": ["n"]})
        {'n': 3}
    """
    value = sample_value(schema, schema)
    return value if isinstance(value, dict) else {}


def sample_value(node: Any, root: Any, depth: int = 0, index: int = 0) -> Any:
    """A JSON value valid for the schema ``node`` (``$ref``s resolved against ``root``).

    ``index`` varies the value among siblings (the items of an array with ``uniqueItems``).
    """
    if depth > _MAX_DEPTH:
        return None
    if node is True or not isinstance(node, Mapping):
        return _string({}, index)
    ref = node.get("$ref")
    if isinstance(ref, str):
        target = _resolve(ref, root)
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return sample_value(merged, root, depth + 1, index)
    if "const" in node:
        return node["const"]
    enum = node.get("enum")
    if isinstance(enum, list) and enum:
        return enum[index % len(enum)]
    all_of = node.get("allOf")
    if isinstance(all_of, list) and all_of:
        return sample_value(_merged(node, all_of, root), root, depth + 1, index)
    for choice in ("anyOf", "oneOf"):
        options = node.get(choice)
        if isinstance(options, list) and options:
            rest = {k: v for k, v in node.items() if k != choice}
            picked = next((o for o in options if not _is_null(o, root)), options[0])
            picked = _resolve_node(picked, root)
            return sample_value({**rest, **picked}, root, depth + 1, index)
    kind = _type_of(node)
    if kind == "object":
        return _object(node, root, depth, index)
    if kind == "array":
        return _array(node, root, depth, index)
    if kind == "integer":
        return _integer(node, index)
    if kind == "number":
        return _number(node, index)
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return _string(node, index)


def _resolve(ref: str, root: Any) -> Mapping[str, Any]:
    """The schema ``ref`` points to (a local JSON pointer), or ``{}`` (anything) when it
    cannot be found."""
    if not ref.startswith("#"):
        return {}
    target = root
    for part in ref[1:].lstrip("/").split("/") if ref != "#" else ():
        key = part.replace("~1", "/").replace("~0", "~")
        if isinstance(target, Mapping) and key in target:
            target = target[key]
        elif isinstance(target, list) and key.isdigit() and int(key) < len(target):
            target = target[int(key)]
        else:
            return {}
    return target if isinstance(target, Mapping) else {}


def _resolve_node(node: Any, root: Any) -> dict[str, Any]:
    if not isinstance(node, Mapping):
        return {}
    ref = node.get("$ref")
    if isinstance(ref, str):
        return {**_resolve(ref, root), **{k: v for k, v in node.items() if k != "$ref"}}
    return dict(node)


def _is_null(option: Any, root: Any) -> bool:
    resolved = _resolve_node(option, root)
    return resolved.get("type") == "null" or resolved.get("const", 0) is None


def _merged(node: Mapping[str, Any], parts: Sequence[Any], root: Any) -> dict[str, Any]:
    """``allOf``'s parts as one schema: properties and ``required`` united, the rest
    overwritten in order."""
    merged: dict[str, Any] = {k: v for k, v in node.items() if k != "allOf"}
    properties = dict(merged.get("properties") or {})
    required = list(merged.get("required") or [])
    for part in parts:
        resolved = _resolve_node(part, root)
        properties.update(resolved.get("properties") or {})
        required += [r for r in resolved.get("required") or [] if r not in required]
        merged.update({k: v for k, v in resolved.items() if k not in ("properties", "required")})
    if properties:
        merged["properties"] = properties
    if required:
        merged["required"] = required
    return merged


def _type_of(node: Mapping[str, Any]) -> str:
    kind = node.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if isinstance(k, str)]
        kind = next((k for k in kinds if k != "null"), kinds[0] if kinds else None)
    if isinstance(kind, str):
        return kind
    if any(k in node for k in ("properties", "required", "additionalProperties")):
        return "object"
    if any(k in node for k in ("items", "prefixItems", "minItems", "maxItems")):
        return "array"
    if any(k in node for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")):
        return "number"
    return "string"


def _object(node: Mapping[str, Any], root: Any, depth: int, index: int) -> dict[str, Any]:
    properties = node.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    required = [r for r in node.get("required") or [] if isinstance(r, str)]
    out: dict[str, Any] = {}
    for name, schema in properties.items():
        if name in required:
            out[name] = sample_value(schema, root, depth + 1, index)
        elif isinstance(schema, Mapping) and "default" in schema:
            out[name] = schema["default"]
        elif depth < _OPTIONAL_DEPTH:
            out[name] = sample_value(schema, root, depth + 1, index)
    for name in required:  # required but not described: anything will do
        out.setdefault(name, sample_value(node.get("additionalProperties", {}), root, depth + 1))
    extra = node.get("additionalProperties", True)
    wanted = node.get("minProperties")
    if isinstance(wanted, int) and extra is not False:
        n = 0
        while len(out) < wanted:
            out.setdefault(f"key{n}", sample_value(extra, root, depth + 1, n))
            n += 1
    return out


def _array(node: Mapping[str, Any], root: Any, depth: int, index: int) -> list[Any]:
    prefix = node.get("prefixItems")
    prefix = list(prefix) if isinstance(prefix, list) else []
    items = node.get("items", {})
    low: int = node["minItems"] if isinstance(node.get("minItems"), int) else 0
    high: int | None = node["maxItems"] if isinstance(node.get("maxItems"), int) else None
    wanted = max(low, len(prefix), 0 if depth >= _OPTIONAL_DEPTH else 1)
    if high is not None:
        wanted = max(min(wanted, high), 0)
    out: list[Any] = []
    for i in range(wanted):
        schema = prefix[i] if i < len(prefix) else items
        if isinstance(items, list) and i >= len(prefix):  # draft 4-7 tuple form
            schema = items[i] if i < len(items) else node.get("additionalItems", {})
        out.append(sample_value(schema, root, depth + 1, index + i))
    return out


def _bounds(node: Mapping[str, Any], step: float) -> tuple[float | None, float | None]:
    low: float | None = node["minimum"] if _is_number(node.get("minimum")) else None
    high: float | None = node["maximum"] if _is_number(node.get("maximum")) else None
    ex_low: Any = node.get("exclusiveMinimum")
    ex_high: Any = node.get("exclusiveMaximum")
    if _is_number(ex_low):
        low = ex_low + step if low is None else max(low, ex_low + step)
    elif ex_low is True and low is not None:  # draft 4's boolean form
        low += step
    if _is_number(ex_high):
        high = ex_high - step if high is None else min(high, ex_high - step)
    elif ex_high is True and high is not None:
        high -= step
    return low, high


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _integer(node: Mapping[str, Any], index: int) -> int:
    low, high = _bounds(node, 1)
    low_int = math.ceil(low) if low is not None else None
    high_int = math.floor(high) if high is not None else None
    value = 1 + index
    if low_int is not None and value < low_int:
        value = low_int
    if high_int is not None and value > high_int:
        value = high_int
    step = node.get("multipleOf")
    if isinstance(step, int) and not isinstance(step, bool) and step > 0 and value % step:
        value = (value // step + 1) * step
        if high_int is not None and value > high_int:
            value -= step
    return value


def _number(node: Mapping[str, Any], index: int) -> float | int:
    low, high = _bounds(node, 0)
    value: float = 1.0 + index
    if low is not None and value < low:
        value = float(low)
    if high is not None and value > high:
        value = float(high)
    if _is_number(node.get("exclusiveMinimum")) and value <= node["exclusiveMinimum"]:
        limit = high if high is not None else node["exclusiveMinimum"] + 2
        value = (node["exclusiveMinimum"] + limit) / 2
    if _is_number(node.get("exclusiveMaximum")) and value >= node["exclusiveMaximum"]:
        limit = low if low is not None else node["exclusiveMaximum"] - 2
        value = (node["exclusiveMaximum"] + limit) / 2
    step = node.get("multipleOf")
    if isinstance(step, (int, float)) and _is_number(step) and step > 0:
        value = math.ceil(value / step) * step
        if isinstance(step, int):
            return int(value)
    return int(value) if value.is_integer() else value


def _string(node: Mapping[str, Any], index: int) -> str:
    fmt = node.get("format")
    base = _FORMATS.get(fmt, "") if isinstance(fmt, str) else ""
    if not base:
        base = chr(ord("a") + index % 26) + (str(index // 26) if index >= 26 else "")
    pattern = node.get("pattern")
    if isinstance(pattern, str):
        try:
            compiled = re.compile(pattern)
        except re.error:
            compiled = None
        if compiled is not None and not compiled.search(base):
            made = _from_pattern(pattern)
            candidates = (*([made] if made is not None else []), *_PATTERN_CANDIDATES)
            base = next((c for c in candidates if compiled.search(c)), base)
            if made is not None and made == base:
                return base  # the pattern decides the length; minLength/maxLength agree or not
    low = node.get("minLength")
    high = node.get("maxLength")
    if isinstance(low, int) and len(base) < low:
        base += base[-1:] * (low - len(base)) if base else "a" * low
    if isinstance(high, int) and high >= 0 and len(base) > high:
        base = base[:high]
    return base


def _from_pattern(pattern: str) -> str | None:
    """The shortest string the regular expression ``pattern`` matches, built from its parse
    tree (first branch, fewest repeats, the first character of each set), or ``None`` when
    it has a construct not handled here."""
    try:
        parsed = sre.parse(pattern)
    except (re.error, RecursionError, OverflowError):
        return None
    try:
        return _from_parsed(list(parsed))
    except (LookupError, TypeError, ValueError):
        return None


_CATEGORY_CHARS = {
    sre.CATEGORY_DIGIT: "0",
    sre.CATEGORY_NOT_DIGIT: "a",
    sre.CATEGORY_SPACE: " ",
    sre.CATEGORY_NOT_SPACE: "a",
    sre.CATEGORY_WORD: "a",
    sre.CATEGORY_NOT_WORD: "-",
}


def _from_parsed(items: list[tuple[Any, Any]]) -> str:
    out: list[str] = []
    for op, value in items:
        if op is sre.LITERAL:
            out.append(chr(value))
        elif op is sre.ANY:
            out.append("a")
        elif op is sre.IN:
            out.append(_from_set(value))
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
            low, _high, inner = value
            out.append(_from_parsed(list(inner)) * low)
        elif op is sre.SUBPATTERN:
            out.append(_from_parsed(list(value[-1])))
        elif op is sre.ATOMIC_GROUP:
            out.append(_from_parsed(list(value)))
        elif op is sre.BRANCH:
            out.append(_from_parsed(list(value[1][0])))
        elif op is sre.AT:
            continue
        else:  # lookarounds, back references, conditionals: not built here
            raise ValueError(op)
    return "".join(out)


def _from_set(items: list[tuple[Any, Any]]) -> str:
    if items and items[0][0] is sre.NEGATE:
        excluded = _from_parsed_set_chars(items[1:])
        return next(c for c in "a0A_-. " if c not in excluded)
    op, value = items[0]
    if op is sre.LITERAL:
        return chr(value)
    if op is sre.RANGE:
        return chr(value[0])
    if op is sre.CATEGORY:
        return _CATEGORY_CHARS[value]
    raise ValueError(op)


def _from_parsed_set_chars(items: list[tuple[Any, Any]]) -> set[str]:
    chars: set[str] = set()
    for op, value in items:
        if op is sre.LITERAL:
            chars.add(chr(value))
        elif op is sre.RANGE:
            chars.update(chr(c) for c in range(value[0], min(value[1], value[0] + 512) + 1))
        elif op is sre.CATEGORY:
            chars.update(c for c in "a0A_-. " if re.fullmatch(_CATEGORY_RE[value], c))
    return chars


_CATEGORY_RE = {
    sre.CATEGORY_DIGIT: r"\d",
    sre.CATEGORY_NOT_DIGIT: r"\D",
    sre.CATEGORY_SPACE: r"\s",
    sre.CATEGORY_NOT_SPACE: r"\S",
    sre.CATEGORY_WORD: r"\w",
    sre.CATEGORY_NOT_WORD: r"\W",
}
