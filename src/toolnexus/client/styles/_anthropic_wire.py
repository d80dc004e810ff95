"""What the Messages API accepts of a transcript: the mends a request makes, on copies.

A transcript reaches the Anthropic style from several places: its own turns, ``history=`` in
another style's shape (rebuilt from the neutral transcript), a saved session, a chat carried on
turn after turn. Each may hold something the API refuses on input even though it is the
conversation as it happened:

* an assistant turn with no content (Claude's documented empty ``end_turn`` after tool
  results, an empty ``pause_turn``): ``[]`` is refused anywhere but last, and an empty text
  block everywhere ("messages: text content blocks must be non-empty"). The turn said
  nothing, so it is left out of the request; the user messages it stood between are sent as
  one, so user and assistant turns still alternate. Only the final message may be an empty
  assistant turn (a paused one, sent back as it is to continue it): its empty text blocks go,
  it stays;
* tool-call ids made by another provider (``functions.get_weather:0`` from Kimi, ``call 1``):
  the API takes only ``^[a-zA-Z0-9_-]+$``. Each such id is sent as one that matches, made from
  it alone (`wire_id`), so a ``tool_use`` and its ``tool_result`` still pair up, and two ids
  never become one;
* response-only fields: a citation's ``file_id`` (the request's citation types have none).

The transcript itself is never changed: a thinking signature is bound to its bytes, and the
same mends are made again, identically, on every request.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

__all__ = ["wire_id", "wire_messages"]

_ID = re.compile(r"[a-zA-Z0-9_-]+")
_NOT_ID = re.compile(r"[^a-zA-Z0-9_-]+")
_CITATION_RESPONSE_ONLY = frozenset({"file_id"})
_SHOWN = 40
"""How much of a foreign id its replacement keeps, for a person reading the request."""


def wire_id(value: Any) -> str:
    """A tool-call id as the Messages API takes it: a valid one as it is; any other (another
    provider's ``functions.get_weather:0``, an empty or missing one) as its valid characters
    and a hash of the whole id.

    The same id always gives the same result (on every request, and for the ``tool_use`` and
    its ``tool_result`` alike), and two ids give two results: ids that differ only in the
    characters replaced (``a.b`` and ``a:b``) differ in their hash (64 bits of SHA-256 of the
    whole id), and a valid id is never changed.
    """
    if isinstance(value, str) and _ID.fullmatch(value):
        return value
    text = "" if value is None else str(value)
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    shown = _NOT_ID.sub("_", text)[:_SHOWN].strip("_")
    return f"{shown}_x{digest}" if shown else f"toolu_x{digest}"


def wire_messages(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` as a request sends them (a new list; a message that needs no mend is
    the same object, a mended one a copy): see the module docstring."""
    out: list[dict[str, Any]] = []
    dropped = False  # an empty assistant turn was just left out
    last = len(messages) - 1
    for position, message in enumerate(messages):
        role = message.get("role")
        mended = _mended(message, role)
        if (
            role == "assistant"
            and position < last  # the final one may be empty: an empty pause_turn, sent back
            and not _said_something(mended.get("content"))
        ):
            dropped = True
            continue
        if dropped and role == "user" and out and out[-1].get("role") == "user":
            out[-1] = _joined(out[-1], mended)
        else:
            out.append(mended)
        dropped = False
    return out


def _said_something(content: Any) -> bool:
    if isinstance(content, str):
        return bool(content)
    return isinstance(content, list) and bool(content)


def _mended(message: dict[str, Any], role: Any) -> dict[str, Any]:
    """The message with its blocks mended (itself when none needs it)."""
    content = message.get("content")
    if not isinstance(content, list):
        return message
    blocks: list[Any] = []
    changed = False
    for block in content:
        fixed = _block(block, role)
        if fixed is not block:
            changed = True
            if fixed is None:
                continue
        blocks.append(fixed)
    return {**message, "content": blocks} if changed else message


def _block(block: Any, role: Any) -> Any:
    """One block as sent: itself, a mended copy, or ``None`` (left out)."""
    if not isinstance(block, dict):
        return block
    kind = block.get("type")
    if kind == "text":
        if not block.get("text") and role == "assistant":
            return None  # an empty text block the API refuses (a user's is the caller's)
        citations = block.get("citations")
        if isinstance(citations, list) and any(
            isinstance(c, dict) and _CITATION_RESPONSE_ONLY & c.keys() for c in citations
        ):
            kept = [
                {k: v for k, v in c.items() if k not in _CITATION_RESPONSE_ONLY}
                if isinstance(c, dict)
                else c
                for c in citations
            ]
            return {**block, "citations": kept}
        return block
    if kind == "tool_use":
        sent = wire_id(block.get("id"))
        return block if sent == block.get("id") else {**block, "id": sent}
    if kind == "tool_result":
        sent = wire_id(block.get("tool_use_id"))
        return block if sent == block.get("tool_use_id") else {**block, "tool_use_id": sent}
    return block


def _joined(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """Two user messages as one (tool results stay first: the first one's come first)."""
    return {**first, "content": [*_blocks(first.get("content")), *_blocks(second.get("content"))]}


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, list):
        return list(content)
    if isinstance(content, str) and content:
        return [{"type": "text", "text": content}]
    return []
