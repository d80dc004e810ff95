"""JSON at the trust boundary: strict parsing, one shape check, and text that never fails.

Everything a model, a program or a server sends arrives as JSON text or as values decoded from
it, and everything toolnexus hands back must encode again (to a provider, a sandbox, a session
log). Python's ``json`` module is lenient where that hurts: it accepts ``NaN`` and ``Infinity``,
raises ``RecursionError`` (not ``ValueError``) on deep nesting, raises ``ValueError`` on
integers longer than Python's digit limit, and happily decodes lone surrogates that no UTF-8
encoder will write back. This module is the one place that knows those traps, so every surface
answers hostile input with a message instead of an exception.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from json.encoder import (  # type: ignore[attr-defined]  # untyped in typeshed
    c_make_encoder,
    encode_basestring_ascii,
)
from typing import Any

__all__ = [
    "MAX_NESTING",
    "dumps_plain",
    "encodable_data",
    "encodable_text",
    "json_problem",
    "loads_strict",
]

MAX_NESTING = 64
"""Deepest nesting of objects and arrays accepted from outside (tool arguments, results)."""

_INT_DIGITS = sys.get_int_max_str_digits() or 4300
_INT_BOUND = 10 ** (_INT_DIGITS - 1)
"""Integers at least this large (in magnitude) cannot be written as JSON by Python."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


_STRICT: dict[str, Any] = {"parse_constant": _reject_constant}
_DECODER = json.JSONDecoder(**_STRICT)  # one decoder: json.loads builds one per call


_SCAN: Callable[[str, int], tuple[Any, int]] = _DECODER.scan_once  # type: ignore[attr-defined]
"""The decoder's C scanner: the value at an index of a text, and where it ends. A text that is
one JSON value and nothing else is read by it alone, without `decode`'s two Python frames and
two whitespace matches; anything else goes to `decode`, whose messages say what is wrong."""


def _not_json(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_PLAIN_ENCODER = (
    None
    if c_make_encoder is None
    else c_make_encoder(
        None, _not_json, encode_basestring_ascii, None, ": ", ", ", False, False, True
    )
)


def dumps_plain(value: Any) -> str:
    """``json.dumps(value)`` with its defaults (ASCII text, ``NaN`` allowed), from one C
    encoder made once, and without its check for cycles.

    Why: ``json.dumps`` makes a new encoder for every value that is not a string (a third of a
    small value's cost), and its cycle check keeps a set of every container's id (about a sixth
    of a long transcript's encoding). A cycle ends in ``RecursionError``; a value JSON cannot
    hold raises ``TypeError``, as in ``json.dumps``.
    """
    if _PLAIN_ENCODER is None:  # pragma: no cover - CPython has the C encoder
        return json.dumps(value, check_circular=False)
    return "".join(_PLAIN_ENCODER(value, 0))


def loads_strict(text: str | bytes) -> Any:
    """Decode JSON text that came from outside; every failure is a ``ValueError`` that says why.

    Refuses ``NaN``/``Infinity``, nesting deeper than `MAX_NESTING`, integers past
    Python's digit limit, and strings that hold lone surrogates (they cannot be encoded again).

    Raises:
        ValueError: what is wrong, in words a model can act on.
    """
    try:
        if isinstance(text, str):
            try:
                value, end = _SCAN(text, 0)
            except StopIteration:  # no value at the start
                end = -1
            if end != len(text):  # whitespace around it, or not JSON: the full decoder says
                value = _DECODER.decode(text)
        else:
            value = json.loads(text, **_STRICT)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the text is not valid JSON ({exc.msg} at position {exc.pos})") from None
    except RecursionError:
        raise ValueError(f"the JSON is nested deeper than {MAX_NESTING} levels") from None
    except ValueError as exc:  # NaN/Infinity, or an integer past the digit limit
        raise ValueError(f"the text is not valid JSON ({_first_line(exc)})") from None
    if type(value) is dict and _flat_plain(value, True):
        return value  # the common cases (a call's arguments, a message carrying them)
    problem = json_problem(value, "the JSON")
    if problem:
        raise ValueError(problem)
    return value


def _first_line(exc: BaseException) -> str:
    return str(exc).split(";")[0].split("\n")[0]


_Path = str | tuple[Any, Any]
"""Where a value sits: the root's name, or ``(parent path, key or index)``, or
``(_KEY_OF, path)`` for a key of the dictionary at ``path``. Rendered only when needed."""

_KEY_OF = object()


def _string_problem(text: str, where: _Path) -> str | None:
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return (
            f"{_render(where)} holds a lone surrogate (\\ud800-\\udfff), which UTF-8 cannot encode"
        )
    return None


def json_problem(
    value: Any, where: str = "value", *, max_depth: int = MAX_NESTING, foreign_ok: bool = False
) -> str | None:
    """``None`` when ``value`` is plain JSON data that will encode anywhere, else what is wrong.

    Plain JSON data: ``None``, bools, finite floats, ints within Python's digit limit, strings
    without lone surrogates, lists/tuples and dicts with string keys, nested at most
    ``max_depth`` levels, without cycles. With ``foreign_ok``, values of other types (objects a
    host put in, which a snapshot renders with ``repr()``) are let through; everything else is
    still checked. Iterative: no input can exhaust the stack.
    """
    kind = type(value)
    if kind is dict and max_depth > 0 and _flat_plain(value, max_depth > 1):
        return None  # the common cases: a call's arguments, a message that carries them
    if (  # and a plain scalar (a tool's result, often), without the walk's set-up
        value is None
        or kind is bool
        or (kind is int and -_INT_BOUND < value < _INT_BOUND)
        or (kind is str and value.isascii())
    ):
        return None
    # A path is rendered only for the message of a problem: most values have none, and
    # formatting every key's path up front was most of the cost of checking them.
    stack: list[tuple[Any, _Path, int]] = [(value, where, 0)]
    active: set[int] = set()
    while stack:
        item, path, depth = stack.pop()
        kind = type(item)
        if item is None or kind is bool:
            continue
        if kind is str or isinstance(item, str):
            problem = _string_problem(item, path)
        elif kind is int or isinstance(item, int):
            big = not -_INT_BOUND < item < _INT_BOUND
            problem = f"{_render(path)} is an integer too large for JSON" if big else None
        elif kind is float or isinstance(item, float):
            finite = math.isfinite(item)
            problem = None if finite else f"{_render(path)} is {item!r}, which JSON cannot hold"
        elif isinstance(item, (dict, list, tuple)):
            if depth >= max_depth:
                return f"a value nested deeper than {max_depth} levels in {where}"
            if id(item) in active:
                return f"{_render(path)} contains itself"
            active.add(id(item))
            if isinstance(item, dict):
                for key, child in item.items():
                    if not isinstance(key, str):
                        return f"{_render(path)} has a non-string key {_short(key)}"
                    problem = _string_problem(key, (_KEY_OF, path))
                    if problem:
                        return problem
                    stack.append((child, (path, key), depth + 1))
            else:
                stack.extend((child, (path, i), depth + 1) for i, child in enumerate(item))
            continue
        elif foreign_ok:
            continue
        else:
            problem = f"{_render(path)} is a {kind.__name__}, which is not JSON"
        if problem:
            return problem
    return None


def _flat_plain(value: dict[Any, Any], nested: bool = False) -> bool:
    """Whether ``value`` holds only ASCII string keys and plain JSON scalars (ASCII strings,
    ints within the digit limit, finite floats, bools, ``None``), or with ``nested`` also
    dictionaries that hold only those (a sandbox's call message and its arguments): nothing
    `json_problem` could object to. Anything else (or deeper) is left to the full check."""
    for key, item in value.items():
        if type(key) is not str or not key.isascii():
            return False
        kind = type(item)
        if kind is str:
            if not item.isascii():
                return False
        elif kind is int:
            if not -_INT_BOUND < item < _INT_BOUND:
                return False
        elif kind is float:
            if not math.isfinite(item):
                return False
        elif kind is dict and nested:
            if not _flat_plain(item):  # a dictionary holding itself is not flat: full check
                return False
        elif item is not None and kind is not bool:
            return False
    return True


def _render(path: _Path) -> str:
    steps: list[str] = []
    while isinstance(path, tuple):
        parent, step = path
        if parent is _KEY_OF:
            return "a key of " + _render(step) + "".join(reversed(steps))
        steps.append(f"[{step}]" if isinstance(step, int) else f"[{_short(step)}]")
        path = parent
    return path + "".join(reversed(steps))


def _short(key: object) -> str:
    try:
        text = json.dumps(key) if isinstance(key, str) else repr(key)
    except Exception:  # a key whose repr raises
        text = f"<{type(key).__name__}>"
    return text if len(text) <= 40 else text[:37] + '..."'


def encodable_text(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD, so it always encodes as UTF-8."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # In a str every surrogate is a lone one: UTF-16 writes it as one unit, and decoding
        # with "replace" turns each such unit into U+FFFD.
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def encodable_data(value: Any) -> Any:
    """``value`` (JSON data) with every string made `encodable_text`; ``value`` itself
    when nothing needed it. For a request body about to be sent: one lone surrogate anywhere
    (from a model's text, a tool's result) would otherwise fail the whole request."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return _encodable(value)
    except (TypeError, ValueError, RecursionError):
        return value  # not ours to judge here: the sender reports it
    return value


def _encodable(value: Any) -> Any:
    if isinstance(value, str):
        return encodable_text(value)
    if isinstance(value, dict):
        return {encodable_text(str(k)): _encodable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encodable(v) for v in value]
    return value
