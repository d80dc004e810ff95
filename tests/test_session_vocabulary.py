"""The session log's vocabulary: each builder's event, and the set of bookkeeping types."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any, get_type_hints

from toolnexus.session import BOOKKEEPING_TYPES, SURFACE_TYPES, Session
from toolnexus.session import events as _events
from toolnexus.session.events import (
    ApprovalData,
    AssistantMessageData,
    CallTimingData,
    CancelledData,
    CodeRunData,
    Entry,
    FallbackData,
    ModelResponseData,
    ModelStopData,
    ToolCallData,
    ToolResultData,
    TurnData,
    UserMessageData,
    call_timing,
    code_run,
    code_run_cancelled,
    fallback,
    model_response,
    model_stop,
    tool_call_cancelled,
    tool_result,
    turn_end,
    turn_start,
    user_message,
)

SRC = Path(__file__).parent.parent / "src" / "toolnexus"

BUILT: list[tuple[Entry, type[Any]]] = [
    (user_message("hi"), UserMessageData),
    (turn_start(1), TurnData),
    (turn_end(1), TurnData),
    (turn_end(2, "the model at x failed"), TurnData),
    (model_response(1, "m", 3, 4, None, 0, "end_turn"), ModelResponseData),
    (model_stop(1, "refusal", {"why": ["policy"]}, "no"), ModelStopData),
    (fallback(1, failed="a at u", error="down", next="b at v"), FallbackData),
    (code_run_cancelled("c1"), CancelledData),
    (tool_call_cancelled("c2"), CancelledData),
    (tool_result("c3", "add", "5", False), ToolResultData),
    (code_run("run-code", "python", "by TestModel", "Sandbox", "print(1)"), CodeRunData),
    (code_run("p1", "js", "adds"), CodeRunData),
    (code_run("task-1", "python", "a program", task="toolnexus-task-1"), CodeRunData),
    (call_timing("c4", "add", 1, 2, "read", (1.0, 1.5, 2.0), True), CallTimingData),
    (
        call_timing("c5", "put", 1, 3, None, (1.0, 2.0, 2.5), False, error="boom",
                    resources={"writes": ["f"]}, waited_for={"seq": 2, "resource": "f"}),
        CallTimingData,
    ),
]  # fmt: skip


def test_each_builder_writes_todays_dict_exactly() -> None:
    # compared as JSON text: the keys in the order the log has always written them
    assert [json.dumps(tuple(entry)) for entry, _ in BUILT] == [json.dumps(e) for e in [
        ("user_message", {"content": "hi"}),
        ("turn_start", {"turn": 1}),
        ("turn_end", {"turn": 1}),
        ("turn_end", {"turn": 2, "error": "the model at x failed"}),
        ("model_response", {"turn": 1, "model": "m", "input_tokens": 3, "output_tokens": 4,
                            "cache_read_tokens": None, "cache_write_tokens": 0,
                            "stop_reason": "end_turn"}),
        ("model_stop", {"turn": 1, "reason": "refusal", "details": {"why": ["policy"]},
                        "text": "no"}),
        ("fallback", {"turn": 1, "failed": "a at u", "error": "down", "next": "b at v"}),
        ("code_run_cancelled", {"id": "c1"}),
        ("tool_call_cancelled", {"id": "c2"}),
        ("tool_result", {"tool_call_id": "c3", "name": "add", "content": "5",
                         "is_error": False}),
        ("code_run", {"id": "run-code", "language": "python", "runtime": "Sandbox",
                      "description": "by TestModel", "source": "print(1)"}),
        ("code_run", {"id": "p1", "language": "js", "description": "adds"}),
        ("code_run", {"id": "task-1", "language": "python", "description": "a program",
                      "task": "toolnexus-task-1", "durable": True}),
        ("call_timing", {"id": "c4", "name": "add", "lane": 1, "seq": 2, "mode": "read",
                         "admitted": 1.0, "started": 1.5, "finished": 2.0, "ok": True}),
        ("call_timing", {"id": "c5", "name": "put", "lane": 1, "seq": 3, "mode": None,
                         "admitted": 1.0, "started": 2.0, "finished": 2.5, "ok": False,
                         "resources": {"writes": ["f"]},
                         "waited_for": {"seq": 2, "resource": "f"}, "error": "boom"}),
    ]]  # fmt: skip


def test_builders_data_is_json_shaped_and_round_trips(tmp_path: Path) -> None:
    session = Session()
    for entry, _ in BUILT:
        session.append(*entry)  # append checks the data is JSON-shaped
    path = tmp_path / "vocabulary.jsonl"
    session.save(path)
    loaded = Session.load(path)
    assert [(e.type, e.data) for e in loaded.events] == [tuple(entry) for entry, _ in BUILT]
    assert [e.json_line() for e in loaded.events] == [e.json_line() for e in session.events]


def test_readers_typed_dicts_name_the_builders_keys() -> None:
    for entry, shape in BUILT:
        hints = get_type_hints(shape)
        required = shape.__required_keys__
        assert required <= entry.data.keys() <= hints.keys(), entry.type


def test_the_reports_checked_fields_are_the_vocabularys_keys() -> None:
    # the run viewer checks the fields it reads; each is a key of that event's TypedDict
    from toolnexus.view._model import _FIELDS

    shapes: dict[str, type[Any]] = {
        "turn_start": TurnData,
        "model_response": ModelResponseData,
        "assistant_message": AssistantMessageData,
        "tool_result": ToolResultData,
        "approval": ApprovalData,
        "code_run": CodeRunData,
        "tool_call": ToolCallData,
        "call_timing": CallTimingData,
    }
    assert shapes.keys() == _FIELDS.keys()
    for kind, fields in _FIELDS.items():
        assert fields.keys() <= get_type_hints(shapes[kind]).keys(), kind


def test_bookkeeping_types_are_what_the_vocabulary_registers() -> None:
    assert frozenset(_events._BOOKKEEPING) == BOOKKEEPING_TYPES
    assert not BOOKKEEPING_TYPES & SURFACE_TYPES.keys()
    built = {entry.type for entry, _ in BUILT} - SURFACE_TYPES.keys()
    assert built <= BOOKKEEPING_TYPES
    # the drift this vocabulary ended: listed but never written, written but never listed
    assert not {"step_start", "step_end", "request_header"} & BOOKKEEPING_TYPES
    assert {"code_run_cancelled", "tool_call_cancelled"} <= BOOKKEEPING_TYPES
    assert {"code_run", "call_timing"} <= BOOKKEEPING_TYPES


def _literal_types_logged_in_src() -> set[str]:
    """Every event type a module under src/ still logs as a string literal."""
    found: set[str] = set()
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("log_event", "_append_json", "append")
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
                and node.args[0].value.islower()
                and "_" in node.args[0].value
            ):
                found.add(node.args[0].value)
    return found


def test_no_writer_in_src_spells_an_event_type_itself() -> None:
    # every writer takes its type from the vocabulary (a builder's Entry, or a type's constant)
    assert _literal_types_logged_in_src() == set()


def test_a_provider_message_fits_its_event_in_a_saved_line() -> None:
    from toolnexus.session import MAX_DEPTH

    assert _events.PROVIDER_DEPTH == MAX_DEPTH - 2


def test_the_lanes_events_are_built_by_their_typed_dicts() -> None:
    # the per-call events: plain dicts, their keys those of the vocabulary's TypedDicts
    data = _events.CallTimingData(
        id="c", name="t", lane=1, seq=1, mode="safe", admitted=0.0, started=1.0,
        finished=2.0, ok=True,
    )  # fmt: skip
    assert type(data) is dict and list(data) == list(_events.CallTimingData.__annotations__)[:9]
    assert {_events.TOOL_CALL, _events.CALL_TIMING, _events.CALL_RESOURCES} <= BOOKKEEPING_TYPES
    assert _events.TOOL_RESULT in SURFACE_TYPES


READERS = ["view/_model.py", "cli.py", "client/_resume.py", "temporal/_history.py"]


def _cast_shape(node: ast.AST) -> type[Any] | None:
    """The vocabulary TypedDict ``node`` casts event data to (``cast(ToolCallData, ...)``)."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        return None
    if node.func.id != "cast" or not node.args or not isinstance(node.args[0], ast.Name):
        return None
    shape = getattr(_events, node.args[0].id, None)
    return shape if isinstance(shape, type) else None


def _key_read(node: ast.AST) -> tuple[ast.AST, str] | None:
    """What ``node`` reads a constant key of (``x["k"]``, ``x.get("k", ...)``), and the key."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return node.value, node.slice.value
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    ):
        return node.func.value, node.args[0].value
    return None


def _keys_read_outside_the_vocabulary(function: ast.AST) -> list[str]:
    shapes: dict[str, type[Any]] = {}  # a name assigned cast(Shape, ...) -> Shape
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            shape = _cast_shape(node.value)
            if shape is not None:
                shapes[node.targets[0].id] = shape
    unknown = []
    for node in ast.walk(function):
        read = _key_read(node)
        if read is None:
            continue
        holder, key = read
        name = holder.id if isinstance(holder, ast.Name) else None
        shape = shapes.get(name) if name is not None else _cast_shape(holder)
        if shape is not None and key not in get_type_hints(shape):
            unknown.append(f"{shape.__name__}[{key!r}]")
    return unknown


def test_readers_read_only_keys_the_vocabulary_defines() -> None:
    # mypy refuses x["unknown"] on a TypedDict, not x.get("unknown"): this covers both
    unknown, casts = [], 0
    for reader in READERS:
        tree = ast.parse((SRC / reader).read_text(encoding="utf-8"))
        casts += sum(_cast_shape(node) is not None for node in ast.walk(tree))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                unknown += [f"{reader}: {k}" for k in _keys_read_outside_the_vocabulary(node)]
    assert casts >= 10
    assert not unknown, unknown
