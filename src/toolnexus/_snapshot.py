"""JSON-shaped snapshots of tool-call arguments and results.

The scheduler takes two independent snapshots of every call's arguments: one is dispatched to
the tool, the other is written to the session log. Neither can influence the other, so a tool
that mutates its arguments cannot change the audit record; and because both are rebuilt as plain
JSON data, a live object (a socket, a function, a lock, an instance of some class) never reaches
the tool or the log, only its ``repr()``.

It takes one snapshot of every call's result (`result_snapshot`), when the call finishes and
before any later call may start. Why: a tool may return a live object (``{"watchlist":
self.watchlist}``) that a later call changes; what the model, the program and the session log
read of a call must be its result as it was when the call finished, not when someone first
reads it.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from typing import Any

__all__ = ["MAX_DEPTH", "result_snapshot", "safe_repr", "snapshot"]

MAX_DEPTH = 64
"""Containers nested deeper than this are rendered with ``repr()`` instead of copied."""

RESULT_MAX_DEPTH = 4 * MAX_DEPTH
"""The same for a result's snapshot. Deeper than `MAX_DEPTH`, so that whoever refuses a result
nested past `MAX_DEPTH` (a program) still sees how deep it was, rather than a ``repr()``."""


_INT_BOUND = 10 ** ((sys.get_int_max_str_digits() or 4300) - 1)
"""Integers this large cannot be written as JSON (or even ``repr``'d) by Python."""


def _big_int(value: int) -> str:
    return f"<int of {value.bit_length()} bits, too large for JSON>"


def safe_repr(value: object) -> str:
    """``repr(value)``, or a stand-in naming its type when its ``__repr__`` raises."""
    try:
        return repr(value)
    except Exception:  # a broken __repr__ must not break the snapshot
        return f"<unrepresentable {type(value).__name__} object>"


def _key(key: object) -> str:
    """A JSON object key, the way ``json.dumps`` would write it (``repr`` for the rest)."""
    if isinstance(key, str):
        return str.__str__(key)
    if key is None:
        return "null"
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):
        return int.__repr__(key)
    if isinstance(key, float) and math.isfinite(key):
        return float.__repr__(key)
    return safe_repr(key)


_SCALARS = frozenset({str, bool, type(None)})
"""Passed through as they are; ints too, when they fit in JSON (checked inline)."""


def _copy_mapping(
    value: Mapping[Any, Any], depth: int, path: set[int], result: bool
) -> dict[str, Any]:
    # The loop inlines the common case (str key, scalar value): two snapshots per call are on the
    # scheduler's hot path.
    copy = {}
    for key, item in value.items():
        kind = type(item)
        copy[key if type(key) is str else _key(key)] = (
            item
            if kind in _SCALARS or (kind is int and -_INT_BOUND < item < _INT_BOUND)
            else _copy(item, depth, path, result)
        )
    return copy


def _copy(value: Any, depth: int, path: set[int], result: bool) -> Any:
    """``value`` rebuilt as JSON data. With ``result`` (a result's snapshot), non-finite floats
    are kept (a result's text writes them as JSON's ``NaN``/``Infinity``, as ``json.dumps``
    does), not their ``repr()`` (an argument's, which must survive ``allow_nan=False``), and
    nesting is kept to `RESULT_MAX_DEPTH`, so that a check for `MAX_DEPTH` downstream (a
    program cannot take a result nested deeper) still sees it."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is int:
        return value if -_INT_BOUND < value < _INT_BOUND else _big_int(value)
    if kind is float:
        return value if result or math.isfinite(value) else safe_repr(value)
    if kind is dict or kind is list or isinstance(value, Mapping | list | tuple):
        if depth >= (RESULT_MAX_DEPTH if result else MAX_DEPTH) or id(value) in path:
            return safe_repr(value)
        path.add(id(value))
        try:
            if kind is dict or isinstance(value, Mapping):
                return _copy_mapping(value, depth + 1, path, result)
            return [
                item if type(item) in _SCALARS else _copy(item, depth + 1, path, result)
                for item in value
            ]
        finally:
            path.discard(id(value))
    # Subclasses of JSON scalars (enums over str/int, ...) keep their JSON value.
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int(value) if -_INT_BOUND < value < _INT_BOUND else _big_int(value)
    if isinstance(value, float):
        return float(value) if result or math.isfinite(value) else safe_repr(value)
    return safe_repr(value)


def snapshot(value: Any) -> Any:
    """Return an independent, JSON-shaped copy of ``value``.

    Scalars pass through; mappings are rebuilt with string keys (``1`` becomes ``"1"``, as
    ``json.dumps`` would write it); lists and tuples become lists; anything else (sets, bytes,
    objects, functions, NaN, cycles, nesting past `MAX_DEPTH`) becomes its ``repr()``;
    an integer too large for JSON becomes a short text saying so.
    The result always survives ``json.dumps(..., allow_nan=False)`` and shares no mutable
    container with the input. Never raises.

    Example::

        >>> snapshot({"n": 1, "tags": ("a", "b"), 2: {1, 2}})
        {'n': 1, 'tags': ['a', 'b'], '2': '{1, 2}'}
    """
    if type(value) is dict:  # fast path: a flat object of str keys and scalar values
        flat = {}
        for key, item in value.items():
            kind = type(item)
            if type(key) is not str or (
                kind not in _SCALARS and (kind is not int or not -_INT_BOUND < item < _INT_BOUND)
            ):
                break
            flat[key] = item
        else:
            return flat
    try:
        return _copy(value, 0, set(), False)
    except Exception:  # a hostile Mapping (raising items(), ...) still yields a snapshot
        return safe_repr(value)


def result_snapshot(value: Any) -> Any:
    """A call's result as it is now: `snapshot`, except that non-finite floats stay floats and
    nesting is kept to `RESULT_MAX_DEPTH` levels.

    Taken by the scheduler lane as a call finishes (see the module's docstring), so a later
    call that changes an object the tool returned cannot change what anyone reads of this
    call. A string, an integer, a float, a bool or ``None`` is returned as it is (nothing to
    copy). Never raises.

    Example::

        >>> watchlist = ["NVDA"]
        >>> frozen = result_snapshot({"watchlist": watchlist})
        >>> watchlist.append("QUAS")
        >>> frozen
        {'watchlist': ['NVDA']}
    """
    kind = type(value)
    if kind in _SCALARS or kind is float or (kind is int and -_INT_BOUND < value < _INT_BOUND):
        return value
    try:
        return _copy(value, 0, set(), True)
    except Exception:  # a hostile Mapping (raising items(), ...) still yields a snapshot
        return safe_repr(value)
