"""Streamed pieces merged into the message they build, the way each provider means them.

A streamed assistant message arrives as deltas. Text-like fields (``content``,
``reasoning_content``, ``reasoning``, a thinking block's ``thinking`` and ``signature``) are
pieces of one string; lists whose entries carry an ``index`` (``tool_calls``,
``reasoning_details``) are pieces of the entry at that index; objects (``extra_content``) are
merged key by key. Anything else a server adds is kept by the same rules, so a field
toolnexus has never heard of still comes back whole on the next request.
"""

from __future__ import annotations

from typing import Any

__all__ = ["merge_delta", "without_indexes"]

_SET_ONCE = frozenset({"id", "type", "name", "role", "format", "index"})
"""Fields that name a piece rather than hold its text: a repeat replaces, never appends (some
servers repeat a call's name in every chunk)."""


def merge_delta(target: dict[str, Any], delta: dict[str, Any]) -> None:
    """Merge one streamed ``delta`` into ``target`` (in place)."""
    for key, value in delta.items():
        if value is None:
            continue
        current = target.get(key)
        if isinstance(value, list) and _indexed(value):
            target[key] = _merge_indexed(current if isinstance(current, list) else [], value)
        elif isinstance(value, str) and isinstance(current, str) and key not in _SET_ONCE:
            target[key] = current + value
        elif isinstance(value, dict) and isinstance(current, dict):
            merge_delta(current, value)
        elif isinstance(value, list) and isinstance(current, list):
            current.extend(value)
        elif isinstance(value, dict):
            target[key] = {}
            merge_delta(target[key], value)
        elif isinstance(value, list):
            target[key] = list(value)
        elif value != "" or key not in target:
            target[key] = value


def _indexed(pieces: list[Any]) -> bool:
    return bool(pieces) and all(isinstance(p, dict) and "index" in p for p in pieces)


def _merge_indexed(entries: list[Any], pieces: list[Any]) -> list[Any]:
    """Each piece merged into the entry with its ``index`` (a new entry at the end when none
    has it yet), so fragments of one entry become one entry again."""
    for piece in pieces:
        for entry in reversed(entries):
            same = isinstance(entry, dict) and entry.get("index") == piece["index"]
            if same and piece.get("type") in (None, entry.get("type")):
                merge_delta(entry, piece)
                break
        else:
            entry = {}
            merge_delta(entry, piece)
            entries.append(entry)
    return entries


def without_indexes(entries: list[Any]) -> list[Any]:
    """``tool_calls`` entries as a request takes them: without the streaming ``index``."""
    return [
        {k: v for k, v in e.items() if k != "index"} if isinstance(e, dict) else e for e in entries
    ]
