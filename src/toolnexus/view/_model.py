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

import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

from toolnexus._json import loads_strict
from toolnexus.errors import ViewError
from toolnexus.session import Event, Session

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


def read_events(path: str | os.PathLike[str]) -> list[Event]:
    """The events of a saved session or a gateway audit log (JSON lines, one event a line).

    An audit log may hold several sessions one after another (event numbers restart): they are
    read in file order.

    Raises:
        ViewError: a line that is not an event, naming the line.
        OSError: the file cannot be read.
    """
    events: list[Event] = []
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = loads_strict(line)
            except ValueError as exc:
                raise ViewError(f"{os.fspath(path)} line {number}: not JSON ({exc})") from None
            if (
                not isinstance(record, dict)
                or not isinstance(record.get("type"), str)
                or not isinstance(record.get("data"), dict)
            ):
                raise ViewError(
                    f"{os.fspath(path)} line {number}: not a session event (an object with "
                    "type and data); pass a file Session.save or the gateway's --audit-log wrote"
                )
            at = record.get("time")
            seq = record.get("seq")
            events.append(
                Event(
                    seq if isinstance(seq, int) else len(events) + 1,
                    record["type"],
                    record["data"],
                    float(at) if isinstance(at, (int, float)) else 0.0,
                )
            )
    return events


def _events_of(source: RunSource) -> list[Event]:
    if isinstance(source, Session):
        return source.events
    if isinstance(source, (str, os.PathLike)):
        return read_events(source)
    events = list(source)
    for event in events:
        if not isinstance(event, Event):
            raise ViewError(
                f"expected session events (toolnexus.session.Event), got {event!r}; pass a "
                "Session, its .events, or the path of a saved session"
            )
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


def _clip(value: Any) -> dict[str, Any]:
    """A value as text for the report, cut to `MAX_TEXT` characters (how much is said)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=1)
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

    Raises:
        ViewError: the source is not one of these, or a file in it is not a session log.
    """
    if isinstance(source, Mapping):
        named = [(str(name), _events_of(item)) for name, item in source.items()]
    else:
        named = [("", _events_of(source))]
    times = [
        value for _, events in named for event in events for value in _times_of(event) if value > 0
    ]
    t0 = min(times) if times else 0.0
    groups = [_Group(name, events, t0).result() for name, events in named]
    notes = sorted({note for group in groups for note in group.pop("notes")})
    return {"t0": t0, "groups": groups, "summary": _summary(groups), "notes": notes}


def _times_of(event: Event) -> list[float]:
    if event.type == "call_timing":
        data = event.data
        return [v for v in (data.get("admitted"), data.get("started")) if isinstance(v, float)]
    if event.type in ("turn_start", "model_response", "assistant_message", "code_run"):
        return [event.time]
    return []


class _Group:
    """One session's calls, programs and requests, laid out in rows."""

    def __init__(self, name: str, events: list[Event], t0: float) -> None:
        self.name = name
        self.t0 = t0
        self.notes: list[str] = []
        self.calls: dict[str, dict[str, Any]] = {}  # by id, in emitted order
        self.programs: dict[str, dict[str, Any]] = {}
        self.requests: list[dict[str, Any]] = []
        self.approvals: list[dict[str, Any]] = []
        self.lanes: dict[tuple[Any, Any], str] = {}  # (lane, seq) -> call id
        self.prompt: dict[str, Any] | None = None  # the latest user message, for its request
        self.timed = any(e.type == "call_timing" for e in events)
        self.untimed_clock = 0.0
        for event in events:
            handler = getattr(self, "_on_" + event.type, None)
            if handler is not None:
                handler(event)
        if self.calls and not self.timed:
            self.notes.append(UNTIMED_NOTE)
            for call in self.calls.values():
                call["start"] = self.untimed_clock
                call["end"] = self.untimed_clock + 1.0
                self.untimed_clock += 1.0

    def ms(self, at: float) -> float:
        return round((at - self.t0) * 1000.0, 3)

    def call(self, call_id: str, name: str) -> dict[str, Any]:
        call = self.calls.get(call_id)
        if call is None:
            call = self.calls[call_id] = {
                "id": call_id,
                "name": name,
                "order": len(self.calls),
                "program": None,
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
            }
        return call

    # -- events --------------------------------------------------------------------------------

    def _on_turn_start(self, event: Event) -> None:
        self.requests.append({"turn": event.data.get("turn"), "start": self.ms(event.time)})
        if self.prompt is not None:  # the prompt this request answers (its first turn)
            self.requests[-1]["prompt"], self.prompt = self.prompt, None

    def _on_user_message(self, event: Event) -> None:
        self.prompt = _clip(event.data.get("content") or "")

    def _on_model_response(self, event: Event) -> None:
        request = self._open_request(event)
        data = event.data
        request.update(
            model=data.get("model"),
            input_tokens=data.get("input_tokens"),
            output_tokens=data.get("output_tokens"),
            end=self.ms(event.time),
        )

    def _on_assistant_message(self, event: Event) -> None:
        request = self._open_request(event)
        request.setdefault("end", self.ms(event.time))
        request["text"] = _clip(event.data.get("content") or "")
        for item in event.data.get("tool_calls") or []:
            if isinstance(item, dict) and isinstance(item.get("id"), str):
                call = self.call(item["id"], str(item.get("name")))
                call["arguments"] = _clip(item.get("arguments"))
                call["turn"] = request.get("turn")

    def _open_request(self, event: Event) -> dict[str, Any]:
        if self.requests and "text" not in self.requests[-1]:
            return self.requests[-1]
        request: dict[str, Any] = {"turn": None, "start": self.ms(event.time)}
        self.requests.append(request)
        return request

    def _on_tool_result(self, event: Event) -> None:
        data = event.data
        call_id = data.get("tool_call_id")
        if not isinstance(call_id, str):
            return
        call = self.call(call_id, str(data.get("name")))
        is_error = bool(data.get("is_error"))
        content = data.get("content")
        call["result"] = _clip(content if content is not None else "")
        call["answered"] = self.ms(event.time)
        if is_error:
            call["error"] = str(content)
        if call["program"] is None and call_id in self.programs:
            self._program_output(self.programs[call_id], content)
        if not call["timed"]:
            call["class"] = classify_call(call["mode"], not is_error, call["error"])

    def _on_approval(self, event: Event) -> None:
        data = event.data
        asked, answered = data.get("asked"), data.get("answered")
        if isinstance(asked, float) and isinstance(answered, float):
            self.approvals.append(
                {
                    "tool": data.get("tool"),
                    "approved": bool(data.get("approved")),
                    "asked": self.ms(asked),
                    "answered": self.ms(answered),
                    "call": None,
                }
            )

    def _on_code_run(self, event: Event) -> None:
        data = event.data
        program_id = str(data.get("id"))
        self.programs[program_id] = {
            "id": program_id,
            "language": data.get("language"),
            "runtime": data.get("runtime"),
            "description": _clip(data.get("description") or ""),
            "source": _clip(data["source"]) if isinstance(data.get("source"), str) else None,
            "result": None,
            "logs": None,
            "error": None,
            "admitted": self.ms(event.time),
        }

    def _program_output(self, program: dict[str, Any], content: Any) -> None:
        """A program's sub-call results, from the ``calls`` of its output (when it has one)."""
        try:
            output = json.loads(content) if isinstance(content, str) else None
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
        subs = [c for c in self.calls.values() if c["program"] == program["id"]]
        for call, entry in zip(subs, entries, strict=False):
            if isinstance(entry, dict) and call["result"] is None:
                shown = {k: v for k, v in entry.items() if k not in ("name", "args", "arguments")}
                call["result"] = _clip(shown)

    def _on_tool_call(self, event: Event) -> None:
        data = event.data
        if not isinstance(data.get("id"), str):
            return
        call = self.call(data["id"], str(data.get("name")))
        call["arguments"] = _clip(data.get("arguments"))
        call["mode"] = data.get("mode")
        program, _, _ = data["id"].rpartition(":code:")
        call["program"] = program or None

    def _on_call_timing(self, event: Event) -> None:
        data = event.data
        call_id = data.get("id")
        if not isinstance(call_id, str):
            return
        call = self.call(call_id, str(data.get("name")))
        started, finished = data.get("started"), data.get("finished")
        admitted = data.get("admitted")
        if isinstance(started, float) and isinstance(finished, float):
            call["start"], call["end"] = self.ms(started), self.ms(max(finished, started))
            call["timed"] = True
        if isinstance(admitted, float):
            call["admitted"] = self.ms(admitted)
        call["mode"] = data.get("mode")
        ok = bool(data.get("ok"))
        if not ok:
            call["error"] = str(data.get("error", ""))
        call["class"] = classify_call(call["mode"], ok, call["error"])
        if "program" in data:
            call["program"] = data["program"]
        call["resources"] = data.get("resources")
        lane = (data.get("lane"), data.get("seq"))
        waited = data.get("waited_for")
        if isinstance(waited, dict):
            on = self.lanes.get((data.get("lane"), waited.get("seq")))
            resource = waited.get("resource")
            call["waited_for"] = {
                "id": on,
                "name": self.calls[on]["name"] if on in self.calls else None,
                "resource": resource,
                "barrier": resource == "*",
            }
        self.lanes[lane] = call_id

    # -- layout --------------------------------------------------------------------------------

    def result(self) -> dict[str, Any]:
        for call in self.calls.values():
            program = self.programs.get(call["id"])
            if call["start"] is None and program is not None and "answered" in call:
                call["start"], call["end"] = program["admitted"], call["answered"]  # its run
            elif call["start"] is None:  # never entered a lane (e.g. an unknown tool), or no answer
                call["start"] = call["end"] = call.get("answered", 0.0)
        for program in self.programs.values():
            owner = self.calls.get(program["id"])
            subs = [c for c in self.calls.values() if c["program"] == program["id"]]
            spans = [c for c in ([owner] if owner else []) + subs if c["start"] is not None]
            program["start"] = min((c["start"] for c in spans), default=program["admitted"])
            program["end"] = max((c["end"] for c in spans), default=program["admitted"])
            program["calls"] = len(subs)
            program["failed"] = owner is not None and owner["error"] is not None
            program["together"] = together_line(subs)
        for request in self.requests:
            request.setdefault("end", request["start"])
        taken: set[str] = set()
        for approval in self.approvals:  # the call of that tool running when it was asked
            for call in self.calls.values():
                if (
                    call["name"] == approval["tool"]
                    and call["id"] not in taken
                    and call["start"] <= approval["asked"] <= call["end"]
                ):
                    taken.add(call["id"])
                    approval["call"] = call["id"]
                    call["approval"] = approval
                    break
        rows = _rows([c for c in self.calls.values() if c["program"] is None], "tools", None)
        for program in self.programs.values():
            subs = [c for c in self.calls.values() if c["program"] == program["id"]]
            rows += _rows(subs, f"program {program['id']}", program["id"])
        orphans = {c["program"] for c in self.calls.values()} - set(self.programs) - {None}
        for program_id in sorted(orphans, key=str):  # sub-calls whose code_run is not in the log
            subs = [c for c in self.calls.values() if c["program"] == program_id]
            rows += _rows(subs, f"program {program_id}", program_id)
        return {
            "name": self.name,
            "rows": rows,
            "programs": list(self.programs.values()),
            "requests": self.requests,
            "approvals": self.approvals,
            "timed": self.timed or not self.calls,
            "notes": self.notes,
        }


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


def _rows(calls: list[dict[str, Any]], label: str, program: str | None) -> list[dict[str, Any]]:
    """Calls laid out one row per concurrent slot: each call goes to the first row free at its
    start, so a row's bars are in emitted order (calls start in submission order)."""
    rows: list[dict[str, Any]] = []
    ends: list[float] = []
    for call in sorted(calls, key=lambda c: (c["start"], c["order"])):
        index = next((i for i, end in enumerate(ends) if end <= call["start"]), -1)
        if index < 0:
            index = len(ends)
            ends.append(0.0)
            rows.append({"label": f"{label} · slot {index + 1}", "program": program, "calls": []})
        ends[index] = call["end"]
        rows[index]["calls"].append(call)
    return rows


def _summary(groups: list[dict[str, Any]]) -> dict[str, Any]:
    """The header's numbers. A program's own ``run_code`` call is drawn as its band: its time
    is not added beside its sub-calls', nor counted in flight with them."""
    every = [c for g in groups for row in g["rows"] for c in row["calls"]]
    programs = {p["id"] for g in groups for p in g["programs"]}
    calls = [c for c in every if c["id"] not in programs]
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
