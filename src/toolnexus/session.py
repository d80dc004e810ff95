"""The session log: an append-only list of events, from which model messages are derived.

Two kinds of event share one log:

* **surface** events (``system_message``, ``user_message``, ``assistant_message``,
  ``tool_result``) are the transcript; [`Session.messages`][toolnexus.session.Session.messages]
  projects each to one message;
* **bookkeeping** events (``tool_call``, ``call_timing``, ``turn_start``, ``turn_end``,
  ``step_start``, ``step_end``, ``request_header``, and any other type you log) project to
  nothing.

Why one log with two kinds: a Code Mode program may make hundreds of tool calls, and each must
be audited, but none of them may enter the model's history: only what the program returns does.
Logging them as bookkeeping keeps the audit trail and the transcript in one ordered record while
``messages()`` stays exactly what the model said and was told.

Example::

    session = Session()
    session.append("user_message", {"content": "hi"})
    session.log_event("turn_start", {"turn": 1})
    session.messages()  # [{"role": "user", "content": "hi"}]
"""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any, NamedTuple

from toolnexus._json import loads_strict
from toolnexus.errors import SessionError

__all__ = ["BOOKKEEPING_TYPES", "SURFACE_TYPES", "Event", "Session"]

SURFACE_TYPES: dict[str, str] = {
    "system_message": "system",
    "user_message": "user",
    "assistant_message": "assistant",
    "tool_result": "tool",
}
"""Surface event types and the message role each projects to."""

BOOKKEEPING_TYPES = frozenset(
    {
        "approval",
        "call_resources",
        "call_timing",
        "code_run",
        "fallback",
        "model_response",
        "tool_call",
        "turn_start",
        "turn_end",
        "step_start",
        "step_end",
        "request_header",
    }
)
"""The bookkeeping event types toolnexus itself writes. Any other non-surface type is allowed."""


class Event(NamedTuple):
    """One entry of the log (an immutable named tuple).

    Attributes:
        seq: Position in the log, from 1.
        type: The event type (see `SURFACE_TYPES` and `BOOKKEEPING_TYPES`).
        data: JSON-shaped payload, owned by the log: treat it as read-only.
        time: When it was appended, in seconds since the epoch.
    """

    seq: int
    type: str
    data: dict[str, Any]
    time: float

    def json_line(self) -> str:
        """The event as one line of JSON (``seq``, ``type``, ``data``, ``time``) with its
        newline: the format `Session.save` writes and `Session.load` reads."""
        return json.dumps(self._asdict(), ensure_ascii=False) + "\n"


def _json_copy(value: Any, where: str) -> Any:
    """A copy of ``value`` if it is JSON-shaped; else raise naming the offending place."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float:
        if math.isfinite(value):
            return value
        raise SessionError(f"{where} is {value!r}, which JSON cannot represent")
    if kind is dict:
        copy = {}
        for key, item in value.items():
            if type(key) is not str:
                raise SessionError(f"{where} has a non-string key {key!r}; JSON keys are strings")
            copy[key] = _json_copy(item, f"{where}[{key!r}]")
        return copy
    if kind is list or kind is tuple:
        return [_json_copy(item, f"{where}[{i}]") for i, item in enumerate(value)]
    raise SessionError(
        f"{where} is a {kind.__name__}, which is not JSON-shaped; convert it to str, int, float, "
        "bool, None, list or dict (toolnexus.scheduling.snapshot does this with repr())"
    )


class Session:
    """An append-only event log; messages are derived from it, never stored beside it."""

    def __init__(self) -> None:
        self._events: list[Event] = []

    def append(self, type: str, data: dict[str, Any]) -> Event:
        """Append an event of any type.

        ``data`` must be a JSON-shaped dict; it is copied, so later changes to it do not reach
        the log.

        Raises:
            SessionError: ``type`` is not a non-empty string, or ``data`` is not JSON-shaped
                (the message names the offending key).
        """
        if not isinstance(type, str) or not type:
            raise SessionError(f"event type must be a non-empty string, got {type!r}")
        if not isinstance(data, dict):
            raise SessionError(
                f"event data for {type!r} must be a dict, got {data.__class__.__name__}"
            )
        try:
            copy = _json_copy(data, "data")
        except SessionError as exc:
            raise SessionError(f"event {type!r} refused: {exc}") from None
        except RecursionError:
            raise SessionError(f"event {type!r} refused: data is nested too deeply") from None
        return self._append_json(type, copy)

    def _append_json(self, type: str, data: dict[str, Any], at: float | None = None) -> Event:
        """Append data that is already a private JSON-shaped copy (the scheduler's snapshots).

        Skips the check-and-copy of `append`, which would otherwise be the largest
        per-call cost of an audited tool call. ``at``: the event's time (now by default).
        """
        event = Event(len(self._events) + 1, type, data, time.time() if at is None else at)
        self._events.append(event)
        return event

    def log_event(self, type: str, data: dict[str, Any]) -> Event:
        """Append a bookkeeping event (one that never becomes a message).

        Raises:
            SessionError: ``type`` is a surface type (use `append` for transcript
                entries), or the data is not JSON-shaped.
        """
        if type in SURFACE_TYPES:
            raise SessionError(
                f"log_event() takes bookkeeping events only; {type!r} is a surface event that "
                "would change the model's messages. Use Session.append() for transcript entries."
            )
        return self.append(type, data)

    @property
    def events(self) -> list[Event]:
        """Every event, in order (a new list; the events themselves are shared)."""
        return list(self._events)

    def __len__(self) -> int:
        return len(self._events)

    def messages(self) -> list[dict[str, Any]]:
        """The transcript: one ``{"role": ..., **data}`` message per surface event, in order.

        Each message is a fresh copy; changing it does not change the log.
        """
        return [
            {"role": SURFACE_TYPES[e.type], **_json_copy(e.data, "data")}
            for e in self._events
            if e.type in SURFACE_TYPES
        ]

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the log to ``path`` as JSON lines, one event a line (``seq``, ``type``,
        ``data``, ``time``), replacing the file. `load` reads it back."""
        with open(path, "w", encoding="utf-8") as out:
            for event in self._events:
                out.write(event.json_line())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Session:
        """A session read from a file `save` wrote.

        Pass it to ``client.run(..., session=...)`` to carry the conversation on: the model is
        shown its transcript, and a tool call that has no result (the run was interrupted) is
        answered honestly as interrupted.

        Raises:
            SessionError: a line that is not one of its events, naming the line and what is
                wrong (the file is not half-read).
            OSError: the file cannot be read.
        """
        session = cls()
        with open(path, encoding="utf-8") as lines:
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                session._append_json(*_event_fields(line, number, len(session._events) + 1))
        return session

    def __repr__(self) -> str:
        return f"<Session events={len(self._events)}>"


def _event_fields(
    line: str, number: int, expected_seq: int
) -> tuple[str, dict[str, Any], float | None]:
    """The type and (checked, copied) data of one saved event line."""
    where = f"session file line {number}"
    try:
        record = loads_strict(line)
    except ValueError as exc:
        raise SessionError(f"{where}: {exc}") from None
    if not isinstance(record, dict) or not {"seq", "type", "data"} <= record.keys():
        raise SessionError(f"{where}: not a saved event (seq, type, data, time)")
    if record["seq"] != expected_seq:
        raise SessionError(
            f"{where}: event number {record['seq']!r} where {expected_seq} was expected "
            "(events are missing or out of order)"
        )
    kind, data = record["type"], record["data"]
    if not isinstance(kind, str) or not kind or not isinstance(data, dict):
        raise SessionError(f"{where}: an event needs a type (text) and data (an object)")
    at = record.get("time")
    return kind, _json_copy(data, "data"), at if isinstance(at, (int, float)) else None
