"""The log itself: `Session` (append, project to messages, save, load) and its `Event`."""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import time
from collections.abc import Mapping
from typing import Any, NamedTuple

from toolnexus._json import MAX_NESTING, encodable_data, json_problem
from toolnexus.errors import SessionError
from toolnexus.session.events import SURFACE_TYPES

__all__ = ["MAX_DEPTH", "Event", "Session"]

MAX_DEPTH = 2 * MAX_NESTING
"""Deepest nesting of lists and dicts an event's data may hold (the data itself is level 1).

Twice the nesting accepted from outside, so a recorded tool call or result (itself at most
that deep) always fits inside its event. `Session.append` refuses deeper data and
`Session.load` refuses a line holding it, so what is accepted is what reads back."""


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

    def append(self, type: str, data: Mapping[str, Any]) -> Event:
        """Append an event of any type.

        ``data`` must be a JSON-shaped dict; it is copied, so later changes to it do not reach
        the log.

        Only data that `save` can write and `load` read back unchanged is accepted: strings
        without lone surrogates, integers within Python's digit limit, finite floats, nesting
        at most `MAX_DEPTH` levels. An ``assistant_message`` must also have the shape the
        client reads back: ``content`` a string (or null), ``tool_calls`` a list of objects
        with a string ``id`` and ``name``.

        Raises:
            SessionError: ``type`` is not a non-empty string, or ``data`` is not JSON-shaped
                or would not read back (the message names the offending key).
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
        # What is accepted must write and read back as it is: no lone surrogate, no integer
        # past Python's digit limit, no deeper nesting than a saved line may hold.
        problem = json_problem(copy, "data", max_depth=MAX_DEPTH) or _shape_problem(type, copy)
        if problem:
            raise SessionError(f"event {type!r} refused: {problem}")
        return self._append_json(type, copy)

    def _append_json(self, type: str, data: Mapping[str, Any], at: float | None = None) -> Event:
        """Append data that is already a private JSON-shaped copy (the scheduler's snapshots).

        Skips the check-and-copy of `append`, which would otherwise be the largest
        per-call cost of an audited tool call. ``at``: the event's time (now by default).
        """
        # tuple.__new__: a named tuple's own constructor is a Python function, one call more
        event = tuple.__new__(
            Event, (len(self._events) + 1, type, data, time.time() if at is None else at)
        )
        self._events.append(event)
        return event

    def log_event(self, type: str, data: Mapping[str, Any]) -> Event:
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
        ``data``, ``time``), replacing the file. `load` reads it back.

        The write is atomic: the lines go to a temporary file in the same folder, which is
        flushed to disk and then renamed over ``path``. If anything fails on the way (a full
        disk, an event that cannot be written), ``path`` still holds what it held before and
        the temporary file is removed.

        Raises:
            SessionError: an event cannot be written as UTF-8 JSON (only possible for events
                the library appended itself, which skip `append`'s check); nothing is replaced.
            OSError: the folder cannot be written.
        """
        target = os.fspath(path)
        folder = os.path.dirname(os.path.abspath(target))
        temporary = os.path.join(folder, f".{os.path.basename(target)}.{secrets.token_hex(6)}.tmp")
        # 0o666 less the umask, as open() would create it; a replaced file keeps its mode.
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            with os.fdopen(fd, "wb") as out:
                for event in self._events:
                    out.write(_encoded_line(event))
                out.flush()
                os.fsync(out.fileno())
            with contextlib.suppress(FileNotFoundError):
                os.chmod(temporary, os.stat(target).st_mode & 0o7777)
            os.replace(temporary, target)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
            raise
        _sync_folder(folder)

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
        with open(path, "rb") as lines:
            for number, raw in enumerate(lines, start=1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise SessionError(
                        f"session file line {number}: not UTF-8 text (byte {exc.start} of the "
                        "line); the file is damaged or was not written by Session.save"
                    ) from None
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
        record = _loads_line(line)
    except ValueError as exc:
        raise SessionError(f"{where}: {exc}") from None
    if not isinstance(record, dict) or not {"seq", "type", "data"} <= record.keys():
        raise SessionError(f"{where}: not a saved event (seq, type, data, time)")
    seq = record["seq"]
    if type(seq) is not int or seq != expected_seq:
        raise SessionError(
            f"{where}: event number {seq!r} where {expected_seq} was expected "
            "(events are missing or out of order)"
        )
    kind, data = record["type"], record["data"]
    if not isinstance(kind, str) or not kind or not isinstance(data, dict):
        raise SessionError(f"{where}: an event needs a type (text) and data (an object)")
    problem = _shape_problem(kind, data)
    if problem:
        raise SessionError(f"{where}: {problem}")
    at = record.get("time")
    if type(at) is int or type(at) is float:  # not a bool (_loads_line refused NaN)
        return kind, _json_copy(data, "data"), at
    return kind, _json_copy(data, "data"), None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _loads_line(line: str) -> Any:
    """One saved line decoded strictly (as `toolnexus._json.loads_strict`, but allowing the
    nesting `MAX_DEPTH` lets an event's data have inside its record)."""
    try:
        record = json.loads(line, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at position {exc.pos})") from None
    except RecursionError:
        raise ValueError(f"not valid JSON: nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # NaN/Infinity, or an integer past the digit limit
        raise ValueError(f"not valid JSON ({str(exc).splitlines()[0]})") from None
    problem = json_problem(record, "the line", max_depth=MAX_DEPTH + 1)
    if problem:
        raise ValueError(f"not valid JSON: {problem}")
    return record


def _shape_problem(kind: str, data: dict[str, Any]) -> str | None:
    """What is wrong with the shape of an event the library reads back, or ``None``.

    Only ``assistant_message`` has fields the client reads as more than text: its
    ``tool_calls`` are answered on resume and sent again as history, so a damaged one (a
    string, a call without an id) would fail a later run far from its cause. Only what the
    library reads is checked; any other key is the caller's.
    """
    if kind != "assistant_message":
        return None
    content = data.get("content")
    if content is not None and not isinstance(content, str):
        return "assistant_message content must be a string (or null)"
    calls = data.get("tool_calls")
    if calls is not None:
        if not isinstance(calls, list):
            return "assistant_message tool_calls must be a list of calls, got " + _kind(calls)
        for i, call in enumerate(calls):
            if not isinstance(call, dict):
                return f"assistant_message tool_calls[{i}] must be an object, got {_kind(call)}"
            for key in ("id", "name"):
                if not isinstance(call.get(key), str):
                    return f"assistant_message tool_calls[{i}] needs a string {key!r}"
    provider = data.get("provider")
    if provider is not None and not (
        isinstance(provider, dict)
        and isinstance(provider.get("style"), str)
        and isinstance(provider.get("message"), dict)
    ):
        return (
            "assistant_message provider must be an object with a string 'style' and an "
            "object 'message'"
        )
    return None


def _kind(value: object) -> str:
    kinds = {str: "a string", bool: "a boolean", type(None): "null", list: "a list"}
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return "a number"
    return kinds.get(type(value), "an object")


def _encoded_line(event: Event) -> bytes:
    """The event's line as UTF-8 bytes, or a `SessionError` naming the event.

    `append` refuses text UTF-8 cannot write, but the library records some events itself
    without that check (a model's reply, its call ids): a lone surrogate there is written as
    U+FFFD, which is also what the model was sent (request bodies are mended the same way).
    """
    try:
        return event.json_line().encode("utf-8")
    except UnicodeEncodeError:
        mended = event._replace(data=encodable_data(event.data))
        try:
            return mended.json_line().encode("utf-8")
        except (ValueError, UnicodeEncodeError, RecursionError) as exc:
            problem = json_problem(event.data, "data", max_depth=MAX_DEPTH) or str(exc)
    except (ValueError, RecursionError) as exc:
        problem = json_problem(event.data, "data", max_depth=MAX_DEPTH) or str(exc)
    raise SessionError(
        f"event {event.seq} ({event.type!r}) cannot be saved: {problem}; nothing was written"
    )


def _sync_folder(folder: str) -> None:
    """Flush the rename itself to disk (where the platform allows opening a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
