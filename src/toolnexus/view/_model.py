"""What a run did, read from its events: the calls, programs, model requests and waits to draw.

The session log is the only source. Three shapes reach it: a session (``Session`` or the file
``Session.save`` wrote), a gateway audit log (the same JSON lines, appended across runs, so
event numbers may restart), and a durable run's session (rebuilt from its Temporal histories:
each call when it ran and its class, but not when it was admitted nor what it waited for). A
log without call times (the transcript alone) is drawn one call after another in emitted
order, and the report says so.

The result is one JSON-shaped dict (``build``): the HTML report embeds it and the trace export
reads it, so both draw the same run.
"""

from __future__ import annotations

import heapq
import json
import os
from collections.abc import Iterable, Mapping
from json.encoder import encode_basestring
from typing import Any, TypeGuard, cast

from toolnexus._json import json_problem, loads_strict
from toolnexus.errors import ViewError
from toolnexus.session import MAX_DEPTH, Event, Session
from toolnexus.session.events import (
    ApprovalData,
    AssistantMessageData,
    CallTimingData,
    CodeRunData,
    ModelResponseData,
    ToolCallData,
    ToolResultData,
    TurnData,
    UserMessageData,
)

__all__ = ["RunSource", "build", "classify_call", "ran_together", "read_events", "together_line"]

RunSource = Session | Iterable[Event] | str | os.PathLike[str]
"""What `build` draws: a session, its events, or the path of a saved session or audit log."""

MAX_TEXT = 4000
"""Arguments and results longer than this many characters are cut (the report says by how much)."""

_REFUSED = ("not approved", "needs approval", "was not run", "denied", "refused", "not allowed")
_TIMED_OUT = (
    "timed out",
    "did not finish within",
    "timeout",
    "took longer than",
    "no outcome within",
)
UNTIMED_NOTE = (
    "this log has no call times (it predates call_timing events, or holds the transcript "
    "only): calls are drawn one after another in emitted order, one time unit each"
)


MAX_TIME = 1e11
"""The latest time a log may give, in seconds since the epoch (the year 5138): a larger one,
like a negative one or one that is not a finite number, is not a time, and would make the
report's numbers infinite."""

MAX_COUNT = 2**53 - 1
"""The largest count (tokens, a turn's number) drawn: the browser's numbers hold no more."""

_TEXT = (str, type(None))
_COUNT = "count"
_TIME = "time"
_FIELDS: dict[str, dict[str, Any]] = {
    # the fields the report reads, and their types (None: absent or null is allowed too)
    "turn_start": {"turn": _COUNT},
    "model_response": {
        "turn": _COUNT,
        "model": _TEXT,
        "input_tokens": _COUNT,
        "output_tokens": _COUNT,
    },
    "assistant_message": {"tool_calls": (list, type(None))},
    "tool_result": {"tool_call_id": (str,), "name": _TEXT, "is_error": (bool, type(None))},
    "approval": {
        "tool": _TEXT,
        "approved": (bool, type(None)),
        "asked": _TIME,
        "answered": _TIME,
    },
    "code_run": {"id": _TEXT, "language": _TEXT, "description": _TEXT},
    "tool_call": {"id": (str,), "name": _TEXT, "mode": _TEXT},
    "call_timing": {
        "id": (str,),
        "name": _TEXT,
        "lane": (int, str, type(None)),
        "seq": (int, type(None)),
        "mode": _TEXT,
        "admitted": _TIME,
        "started": _TIME,
        "finished": _TIME,
        "ok": (bool, type(None)),
        "error": _TEXT,
        "program": _TEXT,
        "resources": (dict, type(None)),
        "waited_for": (dict, type(None)),
    },
}
_KINDS = {
    _TEXT: "text",
    (str,): "text",
    (list, type(None)): "a list",
    (bool, type(None)): "true or false",
    (dict, type(None)): "an object",
    (int, str, type(None)): "a number or text",
    (int, type(None)): "an integer",
}


def _is_time(value: Any) -> TypeGuard[float]:
    kind = type(value)
    return (kind is float or kind is int) and 0 <= value <= MAX_TIME  # NaN fails both


def _shown(value: Any) -> str:
    if type(value) is int and not -(10**20) < value < 10**20:
        return f"an integer of {len(str(abs(value)))} digits"
    try:
        text = json.dumps(value, allow_nan=True) if not isinstance(value, str) else repr(value)
    except (TypeError, ValueError, RecursionError):
        text = f"a {type(value).__name__}"
    return text if len(text) <= 60 else text[:57] + "..."


def _field_problem(event: Event) -> str | None:
    """What keeps the report from drawing ``event``, or ``None``: a time or a count that is
    not one, or a field it reads holding the wrong type."""
    if event.time is not None and not _is_time(event.time):
        return f"its time {_shown(event.time)} is not a time (seconds since the epoch)"
    if type(event.seq) is not int:
        return f"its number {_shown(event.seq)} is not an integer"
    fields = _FIELDS.get(event.type)
    if fields is None:
        return None
    data = event.data
    for key, kind in fields.items():
        value = data.get(key)
        if value is None:
            continue
        if kind is _TIME:
            if not _is_time(value):
                return f"{key} {_shown(value)} is not a time (seconds since the epoch)"
        elif kind is _COUNT:
            if type(value) is not int or not 0 <= value <= MAX_COUNT:
                return f"{key} {_shown(value)} is not a count"
        elif not isinstance(value, kind) or (type(value) is bool and bool not in kind):
            return f"{key} is {_shown(value)}, where {_KINDS[kind]} was expected"
    if event.type == "assistant_message":
        for item in data.get("tool_calls") or []:
            if not isinstance(item, dict) or not isinstance(item.get("id"), str):
                return f"tool_calls holds {_shown(item)}, not a call with a text id"
            if not isinstance(item.get("name"), _TEXT):
                return f"a tool call's name is {_shown(item.get('name'))}, where text was expected"
    if event.type == "call_timing":
        waited = data.get("waited_for")
        if isinstance(waited, dict):
            seq, resource = waited.get("seq"), waited.get("resource")
            if not (seq is None or type(seq) is int):
                return f"waited_for.seq is {_shown(seq)}, where an integer was expected"
            if not isinstance(resource, _TEXT):
                return f"waited_for.resource is {_shown(resource)}, where text was expected"
    return None


def _checked(event: Event, where: str, data_checked: bool = False) -> Event:
    """``event``, or a `ViewError` naming ``where`` and what keeps it from being drawn (its
    data is checked to be plain JSON too, unless ``data_checked``: a file's lines are)."""
    problem = _field_problem(event)
    if problem is None and not data_checked:
        problem = json_problem(event.data, "its data", max_depth=MAX_DEPTH)
    if problem:
        raise ViewError(f"{where} ({event.type}): {problem}; the report cannot draw it")
    return event


def _not_a_number(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


_DECODER = json.JSONDecoder(parse_constant=_not_a_number)  # one, not one per line


def _record(line: str) -> Any:
    """One line decoded strictly, nested as deeply as a saved session's line may be."""
    try:
        record = _DECODER.decode(line)
    except RecursionError:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{exc.msg} at position {exc.pos}") from None
    except ValueError as exc:  # NaN/Infinity, or an integer past Python's digit limit
        raise ValueError(str(exc).splitlines()[0]) from None
    # What the decoder lets through: a lone surrogate (only written as an escape, in UTF-8
    # text) and nesting past the limit (only with that many brackets). Most lines have
    # neither, and need no walk.
    if "\\u" in line or line.count("[") + line.count("{") > MAX_DEPTH + 1:
        problem = json_problem(record, "the line", max_depth=MAX_DEPTH + 1)
        if problem:
            raise ValueError(problem)
    return record


def read_events(path: str | os.PathLike[str]) -> list[Event]:
    """The events of a saved session or a gateway audit log (JSON lines, one event a line).

    An audit log may hold several sessions one after another (event numbers restart): they are
    read in file order.

    Raises:
        ViewError: a line that is not an event, or one the report cannot draw (not UTF-8, not
            JSON, nested too deeply, a time or a count that is not one, a field of the wrong
            type), naming the line.
        OSError: the file cannot be read.
    """
    events: list[Event] = []
    name = os.fspath(path)
    with open(path, "rb") as lines:
        for number, raw in enumerate(lines, start=1):
            where = f"{name} line {number}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ViewError(
                    f"{where}: not UTF-8 text (byte {exc.start} of the line); pass a file "
                    "Session.save or the gateway's --audit-log wrote"
                ) from None
            if not line.strip():
                continue
            try:
                record = _record(line)
            except ValueError as exc:
                raise ViewError(f"{where}: not JSON ({exc})") from None
            if (
                not isinstance(record, dict)
                or not isinstance(record.get("type"), str)
                or not isinstance(record.get("data"), dict)
            ):
                raise ViewError(
                    f"{where}: not a session event (an object with "
                    "type and data); pass a file Session.save or the gateway's --audit-log wrote"
                )
            at = record.get("time")
            seq = record.get("seq")
            event = Event(
                seq if type(seq) is int else len(events) + 1,
                record["type"],
                record["data"],
                at if type(at) is int or type(at) is float else 0.0,
            )
            events.append(_checked(event, where, data_checked=True))
    return events


def _events_of(source: RunSource) -> list[Event]:
    if isinstance(source, (str, os.PathLike)):
        return read_events(source)
    events = source.events if isinstance(source, Session) else list(source)
    for event in events:
        if not isinstance(event, Event):
            raise ViewError(
                f"expected session events (toolnexus.session.Event), got {_shown(event)}; pass "
                "a Session, its .events, or the path of a saved session"
            )
        if not isinstance(event.data, dict) or not isinstance(event.type, str):
            raise ViewError(
                f"event {_shown(event.seq)}: not a session event (a type and an object of data)"
            )
        _checked(event, f"event {event.seq}")
    return events


def classify_call(mode: str | None, ok: bool, error: str | None) -> str:
    """The class a call is drawn in: safe, unsafe, failed, refused or timeout (or unknown,
    when the log does not say how it was scheduled)."""
    if not ok:
        message = (error or "").lower()
        if any(mark in message for mark in _REFUSED):
            return "refused"
        if any(mark in message for mark in _TIMED_OUT):
            return "timeout"
        return "failed"
    if mode == "exclusive":
        return "unsafe"
    if mode == "parallel":
        return "safe"
    return "unknown"


_SCALARS = (str, int, float, bool, type(None))


def _scalar_text(value: str | float | bool | None) -> str:
    """A plain JSON scalar's text, as ``json.dumps(value, ensure_ascii=False)`` writes it."""
    if type(value) is str:
        return encode_basestring(value)
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    return repr(value)  # an int, or a finite float (the data is checked)


def _as_text(value: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, indent=1)``; for an object of plain values (a
    call's arguments, mostly) written here from the C encoder's text of each value, since the
    ``indent`` encoder is pure Python and was most of the cost of a large log."""
    if type(value) is dict and value and all(type(v) in _SCALARS for v in value.values()):
        items = (f" {_scalar_text(k)}: {_scalar_text(v)}" for k, v in value.items())
        return "{\n" + ",\n".join(items) + "\n}"
    return json.dumps(value, ensure_ascii=False, indent=1)


def _clip(value: Any) -> dict[str, Any]:
    """A value as text for the report, cut to `MAX_TEXT` characters (how much is said)."""
    text = value if isinstance(value, str) else _as_text(value)
    if len(text) > MAX_TEXT:
        return {"text": text[:MAX_TEXT], "cut": len(text) - MAX_TEXT}
    return {"text": text, "cut": 0}


def build(source: RunSource | Mapping[str, RunSource]) -> dict[str, Any]:
    """The run to draw, as a JSON-shaped dict (the report's and the trace's one source).

    Args:
        source: A session, its events, a saved session or audit log path, or a mapping of
            group name to any of these (sub-agents: one group each).

    Returns:
        ``{"groups": [...], "summary": {...}, "notes": [...], "t0": float}``; each group
        holds ``rows`` of ``calls`` (times in ms from ``t0``), ``programs``, ``requests``.
        Every call has a ``key`` of its own (two calls may share an ``id``: a model that
        reuses ids across turns, one audit log holding several runs), and a wait names the
        ``key`` of the call waited on.

    Raises:
        ViewError: the source is not one of these, a file in it is not a session log, or an
            event holds what cannot be drawn (a time or a count that is not one, a field of
            the wrong type), naming the line or the event.
    """
    if isinstance(source, Mapping):
        named = [(str(name), _events_of(item)) for name, item in source.items()]
    else:
        named = [("", _events_of(source))]
    times = [
        value for _, events in named for event in events for value in _times_of(event) if value > 0
    ]
    t0 = float(min(times)) if times else 0.0
    groups = [
        _Group(index, name, events, t0).result() for index, (name, events) in enumerate(named)
    ]
    notes = sorted({note for group in groups for note in group.pop("notes")})
    return {"t0": t0, "groups": groups, "summary": _summary(groups), "notes": notes}


def _times_of(event: Event) -> list[float]:
    if event.type == "call_timing":
        data = cast(CallTimingData, event.data)
        return [float(v) for v in (data.get("admitted"), data.get("started")) if _is_time(v)]
    if event.type in ("turn_start", "model_response", "assistant_message", "code_run"):
        return [event.time]
    return []


class _Group:
    """One session's calls, programs and requests, laid out in rows.

    A call is one record from the first event that names it to its answer: an id met again
    after that (a model reusing ``call_0`` in a later turn, a second run in an audit log) is a
    new call, with a key of its own. Programs likewise. An audit log's event numbers restart
    with each run it holds: a restart ends what ids, programs and lanes refer to.
    """

    def __init__(self, index: int, name: str, events: list[Event], t0: float) -> None:
        self.index = index
        self.name = name
        self.t0 = t0
        self.notes: list[str] = []
        self.calls: list[dict[str, Any]] = []  # in emitted order
        self.current: dict[str, dict[str, Any]] = {}  # id -> the latest call of that id
        self.programs: list[dict[str, Any]] = []
        self.program_of: dict[str, dict[str, Any]] = {}  # id -> the latest program of that id
        self.orphans: dict[str, dict[str, Any]] = {}  # sub-calls' programs with no code_run
        self.subs: dict[str, list[dict[str, Any]]] = {}  # program key -> its sub-calls
        self.requests: list[dict[str, Any]] = []
        self.approvals: list[dict[str, Any]] = []
        self.lanes: dict[tuple[Any, Any], dict[str, Any]] = {}  # (lane, seq) -> call
        self.prompt: dict[str, Any] | None = None  # the latest user message, for its request
        self.timed = any(e.type == "call_timing" for e in events)
        self.run = 0  # which run of an audit log
        last = None
        for event in events:
            if last is not None and event.seq <= last:
                self._restart()
            last = event.seq
            handler = getattr(self, "_on_" + event.type, None)
            if handler is not None:
                handler(event)
        if self.calls and not self.timed:
            self.notes.append(UNTIMED_NOTE)
            for clock, call in enumerate(self.calls):
                call["start"], call["end"] = float(clock), float(clock) + 1.0

    def _restart(self) -> None:
        self.run += 1
        self.current.clear()
        self.program_of.clear()
        self.lanes.clear()

    def ms(self, at: float) -> float:
        return round((at - self.t0) * 1000.0, 3)

    def call(self, call_id: str, name: Any, stage: str) -> dict[str, Any]:
        """The call ``call_id`` names at this ``stage`` of a call's life: the latest of that
        id, unless it has been through this stage already (then a new one)."""
        call = self.current.get(call_id)
        if call is None or stage in call["stages"]:
            call = {
                "id": call_id,
                "key": f"{self.index}.{len(self.calls)}",
                "name": str(name),
                "order": len(self.calls),
                "program": None,
                "program_key": None,
                "mode": None,
                "class": "unknown",
                "start": None,
                "end": None,
                "admitted": None,
                "arguments": None,
                "result": None,
                "error": None,
                "waited_for": None,
                "resources": None,
                "timed": False,
                "stages": [],
            }
            self.calls.append(call)
            self.current[call_id] = call
        call["stages"].append(stage)
        return call

    def _in_program(self, call: dict[str, Any], program_id: str) -> None:
        """``call`` is a sub-call of the latest program of that id (one not in the log, an
        orphan, when there is none)."""
        if call["program_key"] is not None:
            if call["program"] == program_id:
                return
            self.subs[call["program_key"]].remove(call)
        program = self.program_of.get(program_id)
        if program is None:
            program = self.orphans.get(f"{self.run}:{program_id}")
        if program is None:
            key = f"{self.index}.orphan.{len(self.orphans)}"
            program = self.orphans[f"{self.run}:{program_id}"] = {"id": program_id, "key": key}
        call["program"], call["program_key"] = program_id, program["key"]
        self.subs.setdefault(program["key"], []).append(call)

    # -- events --------------------------------------------------------------------------------

    def _on_turn_start(self, event: Event) -> None:
        turn = cast(TurnData, event.data).get("turn")
        self.requests.append({"turn": turn, "start": self.ms(event.time)})
        if self.prompt is not None:  # the prompt this request answers (its first turn)
            self.requests[-1]["prompt"], self.prompt = self.prompt, None

    def _on_user_message(self, event: Event) -> None:
        self.prompt = _clip(cast(UserMessageData, event.data).get("content") or "")

    def _on_model_response(self, event: Event) -> None:
        request = self._open_request(event)
        data = cast(ModelResponseData, event.data)
        request.update(
            model=data.get("model"),
            input_tokens=data.get("input_tokens"),
            output_tokens=data.get("output_tokens"),
            end=self.ms(event.time),
        )

    def _on_assistant_message(self, event: Event) -> None:
        request = self._open_request(event)
        request.setdefault("end", self.ms(event.time))
        data = cast(AssistantMessageData, event.data)
        request["text"] = _clip(data.get("content") or "")
        for item in data.get("tool_calls") or []:
            call = self.call(item["id"], item.get("name"), "asked")
            call["arguments"] = _clip(item.get("arguments"))
            call["turn"] = request.get("turn")

    def _open_request(self, event: Event) -> dict[str, Any]:
        if self.requests and "text" not in self.requests[-1]:
            return self.requests[-1]
        request: dict[str, Any] = {"turn": None, "start": self.ms(event.time)}
        self.requests.append(request)
        return request

    def _on_tool_result(self, event: Event) -> None:
        data = cast(ToolResultData, event.data)
        call_id = data["tool_call_id"]
        call = self.call(call_id, data.get("name"), "answered")
        is_error = bool(data.get("is_error"))
        content = data.get("content")
        call["result"] = _clip(content if content is not None else "")
        call["answered"] = self.ms(event.time)
        if is_error:
            call["error"] = str(content)
        program = self.program_of.get(call_id)
        if call["program"] is None and program is not None and program["owner"] in (None, call):
            program["owner"] = call  # the run_code call answered with this program's output
            call["owns"] = program["key"]
            self._program_output(program, content)
        if not call["timed"]:
            call["class"] = classify_call(call["mode"], not is_error, call["error"])

    def _on_approval(self, event: Event) -> None:
        data = cast(ApprovalData, event.data)
        asked, answered = data.get("asked"), data.get("answered")
        if asked is not None and answered is not None:
            self.approvals.append(
                {
                    "tool": data.get("tool"),
                    "approved": bool(data.get("approved")),
                    "asked": self.ms(asked),
                    "answered": self.ms(answered),
                    "call": None,
                    "order": len(self.approvals),
                }
            )

    def _on_code_run(self, event: Event) -> None:
        data = cast(CodeRunData, event.data)
        program_id = str(data.get("id"))
        owner = self.current.get(program_id)
        if owner is not None and (owner.get("owns") or "answered" in owner["stages"]):
            owner = None  # the run_code call of that id before, not this program's
        program: dict[str, Any] = {
            "id": program_id,
            "key": f"{self.index}.p{len(self.programs)}",
            "language": data.get("language"),
            "runtime": data.get("runtime"),
            "description": _clip(data.get("description") or ""),
            "source": _clip(data["source"]) if isinstance(data.get("source"), str) else None,
            "result": None,
            "logs": None,
            "error": None,
            "admitted": self.ms(event.time),
            "owner": owner,
        }
        if owner is not None:
            owner["owns"] = program["key"]
        self.programs.append(program)
        self.program_of[program_id] = program
        self.subs[program["key"]] = []

    def _program_output(self, program: dict[str, Any], content: Any) -> None:
        """A program's sub-call results, from the ``calls`` of its output (when it has one)."""
        try:
            output = loads_strict(content) if isinstance(content, str) else None
        except ValueError:
            return
        if isinstance(output, dict):  # what the program returned, printed, or failed with
            if "result" in output:
                program["result"] = _clip(output["result"])
            if isinstance(output.get("logs"), list) and output["logs"]:
                program["logs"] = _clip("\n".join(map(_log_line, output["logs"])))
            if isinstance(output.get("error"), dict):
                program["error"] = _clip(output["error"])
        entries = output.get("calls") if isinstance(output, dict) else None
        if not isinstance(entries, list):
            return
        for call, entry in zip(self.subs[program["key"]], entries, strict=False):
            if isinstance(entry, dict) and call["result"] is None:
                shown = {k: v for k, v in entry.items() if k not in ("name", "args", "arguments")}
                call["result"] = _clip(shown)

    def _on_tool_call(self, event: Event) -> None:
        data = cast(ToolCallData, event.data)
        call = self.call(data["id"], data.get("name"), "logged")
        call["arguments"] = _clip(data.get("arguments"))
        call["mode"] = data.get("mode")
        program, _, _ = data["id"].rpartition(":code:")
        if program:
            self._in_program(call, program)

    def _on_call_timing(self, event: Event) -> None:
        data = cast(CallTimingData, event.data)
        call = self.call(data["id"], data.get("name"), "timed")
        started, finished = data.get("started"), data.get("finished")
        admitted = data.get("admitted")
        if started is not None and finished is not None:
            call["start"], call["end"] = self.ms(started), self.ms(max(finished, started))
            call["timed"] = True
        if admitted is not None:
            call["admitted"] = self.ms(admitted)
        call["mode"] = data.get("mode")
        ok = bool(data.get("ok"))
        if not ok:
            call["error"] = str(data.get("error", ""))
        call["class"] = classify_call(call["mode"], ok, call["error"])
        program = data.get("program")
        if program is not None:
            self._in_program(call, program)
        call["resources"] = data.get("resources")
        waited = data.get("waited_for")
        if isinstance(waited, dict):
            on = self.lanes.get((data.get("lane"), waited.get("seq")))
            resource = waited.get("resource")
            call["waited_for"] = {
                "id": on["id"] if on is not None else None,
                "key": on["key"] if on is not None else None,
                "name": on["name"] if on is not None else None,
                "resource": resource,
                "barrier": resource == "*",
            }
        self.lanes[(data.get("lane"), data.get("seq"))] = call

    # -- layout --------------------------------------------------------------------------------

    def result(self) -> dict[str, Any]:
        owned = {program["key"]: program for program in self.programs}
        for call in self.calls:
            del call["stages"]
            program = owned.get(call.get("owns"))
            if call["start"] is None and program is not None and "answered" in call:
                call["start"], call["end"] = program["admitted"], call["answered"]  # its run
            elif call["start"] is None:  # never entered a lane (e.g. an unknown tool), or no answer
                call["start"] = call["end"] = call.get("answered", 0.0)
        for program in self.programs:
            owner = program.pop("owner")
            subs = self.subs[program["key"]]
            spans = ([owner] if owner is not None else []) + subs
            program["start"] = min((c["start"] for c in spans), default=program["admitted"])
            program["end"] = max((c["end"] for c in spans), default=program["admitted"])
            program["calls"] = len(subs)
            program["failed"] = owner is not None and owner["error"] is not None
            program["owner"] = owner["key"] if owner is not None else None
            program["together"] = together_line(subs)
        for request in self.requests:
            request.setdefault("end", request["start"])
        _match_approvals(self.approvals, self.calls)
        rows = _rows([c for c in self.calls if c["program_key"] is None], "tools", None)
        for program in self.programs:
            label = f"program {program['id']}"
            rows += _rows(self.subs[program["key"]], label, program)
        for orphan in sorted(self.orphans.values(), key=lambda p: p["id"]):
            # sub-calls whose code_run is not in the log
            rows += _rows(self.subs[orphan["key"]], f"program {orphan['id']}", orphan)
        return {
            "name": self.name,
            "rows": rows,
            "programs": self.programs,
            "requests": self.requests,
            "approvals": self.approvals,
            "timed": self.timed or not self.calls,
            "notes": self.notes,
        }


def _match_approvals(approvals: list[dict[str, Any]], calls: list[dict[str, Any]]) -> None:
    """Each approval on the call of its tool running when it was asked (the first emitted of
    those not matched yet), in one sweep over the approvals by when they were asked.

    Per tool, calls enter a heap (by emitted order) as the sweep passes their start, and leave
    it once matched or ended before the approval at hand; each call enters and leaves once.
    """
    by_tool: dict[Any, list[dict[str, Any]]] = {}
    for call in calls:
        by_tool.setdefault(call["name"], []).append(call)
    for same in by_tool.values():
        same.sort(key=lambda c: (c["start"], c["order"]))
    passed: dict[Any, int] = {}
    running: dict[Any, list[tuple[int, float]]] = {}
    for approval in sorted(approvals, key=lambda a: (a["asked"], a["order"])):
        tool, asked = approval["tool"], approval["asked"]
        same = by_tool.get(tool, [])
        heap = running.setdefault(tool, [])
        index = passed.get(tool, 0)
        while index < len(same) and same[index]["start"] <= asked:
            heapq.heappush(heap, (same[index]["order"], same[index]["end"]))
            index += 1
        passed[tool] = index
        while heap and heap[0][1] < asked:  # ended before this one was asked: and before later
            heapq.heappop(heap)
        if heap:
            order, _ = heapq.heappop(heap)
            call = calls[order]
            approval["call"] = call["key"]
            call["approval"] = approval
    for approval in approvals:
        del approval["order"]


def _log_line(entry: Any) -> str:
    if isinstance(entry, dict) and "stderr" in entry:
        return f"stderr: {entry['stderr']}"
    return str(entry)


def ran_together(spans: list[tuple[float, float | None]]) -> list[list[int]]:
    """Groups of calls that ran at the same time: each call numbered from 1 in start order
    (ties in the order given), a call joining the group whose calls had not all ended when it
    started. ``spans`` are ``(start, end)``; ``end`` ``None`` for a call still running."""
    groups: list[list[int]] = []
    group_end = -1.0
    ordered = sorted(range(len(spans)), key=lambda i: (spans[i][0], i))
    for number, i in enumerate(ordered, 1):
        start, end = spans[i]
        finish = end if end is not None else float("inf")
        if groups and start < group_end:
            groups[-1].append(number)
            group_end = max(group_end, finish)
        else:
            groups.append([number])
            group_end = finish
    return groups


def together_line(calls: list[dict[str, Any]]) -> str:
    """`ran_together` of ``calls`` as the terminal prints it: ``[1]  ->  [2 3 4]  ->  [5]``."""
    ordered = sorted(calls, key=lambda c: (c["start"], c["order"]))
    groups = ran_together([(c["start"], c["end"]) for c in ordered])
    return "  ->  ".join("[" + " ".join(map(str, g)) + "]" for g in groups)


def _rows(
    calls: list[dict[str, Any]], label: str, program: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """Calls laid out one row per concurrent slot: each call goes to the first row free at its
    start, so a row's bars are in emitted order (calls start in submission order).

    The rows that have ended by a call's start are kept in a heap by number (fed from a heap
    of the busy rows by end): the first free one is found in logarithmic time, not by a scan.
    """
    rows: list[dict[str, Any]] = []
    busy: list[tuple[float, int]] = []  # (end, row)
    free: list[int] = []
    for call in sorted(calls, key=lambda c: (c["start"], c["order"])):
        while busy and busy[0][0] <= call["start"]:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            index = heapq.heappop(free)
        else:
            index = len(rows)
            rows.append(
                {
                    "label": f"{label} · slot {index + 1}",
                    "program": program["id"] if program is not None else None,
                    "program_key": program["key"] if program is not None else None,
                    "calls": [],
                }
            )
        heapq.heappush(busy, (call["end"], index))
        rows[index]["calls"].append(call)
    return rows


def _summary(groups: list[dict[str, Any]]) -> dict[str, Any]:
    """The header's numbers. A program's own ``run_code`` call is drawn as its band: its time
    is not added beside its sub-calls', nor counted in flight with them."""
    every = [c for g in groups for row in g["rows"] for c in row["calls"]]
    calls = [c for c in every if not c.get("owns")]
    edges = sorted(
        [(c["start"], 1) for c in calls if c["end"] > c["start"]]
        + [(c["end"], -1) for c in calls if c["end"] > c["start"]]
    )
    peak = current = 0
    for _, step in edges:  # an end at the same moment as a start is counted first
        current += step
        peak = max(peak, current)
    if calls and not edges:
        peak = 1
    requests = [r for g in groups for r in g["requests"]]
    inputs = [r["input_tokens"] for r in requests if isinstance(r.get("input_tokens"), int)]
    outputs = [r["output_tokens"] for r in requests if isinstance(r.get("output_tokens"), int)]
    wall = max((c["end"] for c in every), default=0.0) - min(
        (c["start"] for c in every), default=0.0
    )
    return {
        "calls": len(every),
        "peak": peak,
        "wall_ms": round(wall, 3),
        "sum_ms": round(sum(c["end"] - c["start"] for c in calls), 3),
        "failures": sum(c["class"] in ("failed", "refused", "timeout") for c in every),
        "refused": sum(c["class"] == "refused" for c in every),
        "programs": sum(len(g["programs"]) for g in groups),
        "requests": len(requests),
        "approvals": sum(len(g["approvals"]) for g in groups),
        "input_tokens": sum(inputs) if inputs else None,
        "output_tokens": sum(outputs) if outputs else None,
        "timed": all(g["timed"] for g in groups),
    }
