"""The Chrome Trace Event Format export, for Perfetto UI and ``chrome://tracing``.

Each group (a session, or one sub-agent) is a process; its model requests, and each row of
calls (one concurrent slot), are threads. Calls are complete (``X``) events; programs and
agents are ``B``/``E`` parent slices on their own tracks; "waited for" is a flow (``s`` on the
call waited on, ``f`` on the call that waited).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolnexus.view._model import RunSource, build

__all__ = ["trace"]


def _us(ms: float) -> float:
    return round(ms * 1000.0, 3)


def trace(session: RunSource | Mapping[str, RunSource]) -> dict[str, Any]:
    """The run in the Chrome Trace Event Format (JSON object form).

    Args:
        session: What `toolnexus.view.render` takes: a session, its events, a file path, or a
            mapping of group name (a sub-agent) to any of these.

    Returns:
        ``{"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}``; write it with
        ``json.dump`` and open it in https://ui.perfetto.dev or ``chrome://tracing``. Times
        are microseconds from the run's first event.

    Raises:
        ViewError: a file that is not a session log, a source of another kind, or an event
            the trace cannot hold (naming the line or the event).
    """
    run = build(session)
    events: list[dict[str, Any]] = []
    flows = 0
    for number, group in enumerate(run["groups"], start=1):
        pid = number
        name = group["name"] or "toolnexus run"
        events.append(_meta(pid, 0, "process_name", name))
        places: dict[str, tuple[int, dict[str, Any]]] = {}  # by call key
        tid = 1
        ends = [0.0]
        if group["requests"]:
            events.append(_meta(pid, tid, "thread_name", "model requests"))
            for request in group["requests"]:
                args = {
                    "model": request.get("model"),
                    "input_tokens": request.get("input_tokens"),
                    "output_tokens": request.get("output_tokens"),
                }
                turn = f"model turn {request.get('turn')}"
                events.append(_complete(turn, "model", request, pid, tid, args))
                ends.append(request["end"])
            tid += 1
        programs = {p["key"]: p for p in group["programs"]}
        opened: set[str] = set()
        for row in group["rows"]:
            program, key = row["program"], row["program_key"]
            if key is not None and key not in opened and key in programs:
                opened.add(key)
                p = programs[key]
                events.append(_meta(pid, tid, "thread_name", f"program {program}"))
                args = {"language": p.get("language"), "sub_calls": p.get("calls")}
                events.append(
                    _slice("B", f"program {program}", "program", p["start"], pid, tid, args)
                )
                events.append(_slice("E", f"program {program}", "program", p["end"], pid, tid, {}))
                tid += 1
            events.append(_meta(pid, tid, "thread_name", row["label"]))
            for call in row["calls"]:
                places[call["key"]] = (tid, call)
                args = {
                    key: call[key]
                    for key in ("id", "class", "mode", "program", "error", "resources")
                    if call.get(key) is not None
                }
                category = f"tool,{call['class']}"
                events.append(_complete(call["name"], category, call, pid, tid, args))
                ends.append(call["end"])
            tid += 1
        for waiting_tid, call in places.values():
            waited = call["waited_for"]
            if not waited or waited["key"] not in places:
                continue
            on_tid, on = places[waited["key"]]
            flows += 1
            what = "barrier" if waited["barrier"] else f"resource {waited['resource']}"
            for phase, at, where in (("s", on["start"], on_tid), ("f", call["start"], waiting_tid)):
                flow = {
                    "name": f"waited for ({what})",
                    "cat": "wait",
                    "ph": phase,
                    "id": flows,
                    "ts": _us(at),
                    "pid": pid,
                    "tid": where,
                }
                if phase == "f":
                    flow["bp"] = "e"
                events.append(flow)
        if len(run["groups"]) > 1:  # each agent as a parent slice over its whole run
            events.append(_meta(pid, tid, "thread_name", "agent"))
            events.append(_slice("B", f"agent {name}", "agent", 0.0, pid, tid, {}))
            events.append(_slice("E", f"agent {name}", "agent", max(ends), pid, tid, {}))
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {"source": "toolnexus", "notes": run["notes"], "t0": run["t0"]},
    }


def _meta(pid: int, tid: int, kind: str, name: str) -> dict[str, Any]:
    return {"name": kind, "ph": "M", "ts": 0, "pid": pid, "tid": tid, "args": {"name": name}}


def _complete(
    name: str, cat: str, span: Mapping[str, Any], pid: int, tid: int, args: dict[str, Any]
) -> dict[str, Any]:
    """A complete event (``X``) from ``span``'s ``start`` to its ``end`` (ms)."""
    event = _slice("X", name, cat, span["start"], pid, tid, args)
    event["dur"] = _us(max(0.0, span["end"] - span["start"]))
    return event


def _slice(
    phase: str, name: str, cat: str, at: float, pid: int, tid: int, args: dict[str, Any]
) -> dict[str, Any]:
    return {
        "name": name,
        "cat": cat,
        "ph": phase,
        "ts": _us(at),
        "pid": pid,
        "tid": tid,
        "args": args,
    }
