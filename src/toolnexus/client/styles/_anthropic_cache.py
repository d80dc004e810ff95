"""Prompt-cache breakpoints for Anthropic Messages requests.

A tool loop resends its tool list (and, in Code Mode, the SDK in ``run_code``'s description),
its system prompt and the whole conversation on every turn. Anthropic caches a request's prefix
up to each ``cache_control`` breakpoint, so toolnexus marks, by default:

* the last tool definition (the whole tool list),
* the system prompt,
* the last block of the latest user message (a rolling breakpoint: each turn reads the cache
  the previous turn wrote, and writes one step further).

The API's rules are kept: at most 4 breakpoints in all, counting the ones a caller put in
``request_params`` (a top-level ``cache_control``, the automatic breakpoint, which then takes
the rolling one's place) or in the history (on any block, those inside a ``tool_result``
included); time-to-live never increasing in the order
tools → system → messages. Breakpoints go on copies: the transcript, whose bytes a thinking
signature is bound to, is never changed. Thinking blocks never carry one (the API does not
allow it); the rolling breakpoint only ever goes on a user message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["MAX_BREAKPOINTS", "place_breakpoints"]

MAX_BREAKPOINTS = 4
"""What the API accepts in one request ("A maximum of 4 blocks with cache_control ...")."""

_LONG, _SHORT = "1h", "5m"
_CACHEABLE = frozenset({"text", "image", "document", "tool_result", "search_result", "tool_use"})


def place_breakpoints(params: dict[str, Any], request_params: Mapping[str, Any]) -> None:
    """Add toolnexus's breakpoints to the request body ``params`` (in place, on copies of the
    parts it marks), within the room the caller's own breakpoints leave."""
    messages: list[dict[str, Any]] = params["messages"]
    automatic = request_params.get("cache_control")
    theirs = _markers(messages) + ([automatic] if isinstance(automatic, Mapping) else [])
    ttls = {_ttl(marker) for marker in theirs}
    head = _LONG if _LONG in ttls else _SHORT  # tools and system: never below a later one
    tail = _SHORT if _SHORT in ttls else head  # the rolling one: never above an earlier one
    room = MAX_BREAKPOINTS - len(theirs)
    if room > 0 and params.get("tools"):
        tools = params["tools"]
        params["tools"] = [*tools[:-1], {**tools[-1], "cache_control": _marker(head)}]
        room -= 1
    if room > 0 and isinstance(params.get("system"), str):
        params["system"] = [
            {"type": "text", "text": params["system"], "cache_control": _marker(head)}
        ]
        room -= 1
    if room > 0 and automatic is None:
        params["messages"] = _with_rolling_breakpoint(messages, _marker(tail))


def _marker(ttl: str) -> dict[str, Any]:
    return {"type": "ephemeral"} if ttl == _SHORT else {"type": "ephemeral", "ttl": ttl}


def _ttl(marker: Any) -> str:
    return _LONG if isinstance(marker, Mapping) and marker.get("ttl") == _LONG else _SHORT


def _markers(messages: list[dict[str, Any]]) -> list[Any]:
    """The breakpoints the messages already carry (a caller's history may hold some), those
    on the blocks inside a ``tool_result``'s content included: the API counts every block."""
    found: list[Any] = []
    for message in messages:
        _collect(message.get("content"), found)
    return found


def _collect(content: Any, found: list[Any]) -> None:
    if not isinstance(content, list):
        return
    for block in content:
        if isinstance(block, dict):
            if block.get("cache_control"):
                found.append(block["cache_control"])
            _collect(block.get("content"), found)  # a tool_result's (or search_result's) blocks


def _with_rolling_breakpoint(
    messages: list[dict[str, Any]], marker: dict[str, Any]
) -> list[dict[str, Any]]:
    """``messages`` with the latest user message's last block marked (a new list; the marked
    message and its content are copies)."""
    for position in range(len(messages) - 1, -1, -1):
        message = messages[position]
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            if not content:
                return messages
            blocks: list[Any] = [{"type": "text", "text": content, "cache_control": marker}]
        elif isinstance(content, list) and content:
            last = content[-1]
            if not isinstance(last, dict) or last.get("type") not in _CACHEABLE:
                return messages
            if last.get("cache_control"):
                return messages
            blocks = [*content[:-1], {**last, "cache_control": marker}]
        else:
            return messages
        return [*messages[:position], {**message, "content": blocks}, *messages[position + 1 :]]
    return messages
