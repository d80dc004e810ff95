"""The session log: append-only events, surface vs bookkeeping, derived messages."""

from __future__ import annotations

import math
from typing import Any

import pytest

from toolnexus.errors import SessionError
from toolnexus.session import BOOKKEEPING_TYPES, SURFACE_TYPES, Event, Session


def test_surface_events_project_to_messages_and_bookkeeping_to_nothing() -> None:
    s = Session()
    s.append("system_message", {"content": "be brief"})
    s.log_event("turn_start", {"turn": 1})
    s.append("user_message", {"content": "hi"})
    s.append("assistant_message", {"content": "", "tool_calls": [{"id": "c1", "name": "x"}]})
    for kind in sorted(BOOKKEEPING_TYPES):
        s.log_event(kind, {"k": kind})
    s.append("tool_result", {"tool_call_id": "c1", "content": "42"})
    s.log_event("custom_audit", {"who": "ops"})
    assert s.messages() == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "x"}]},
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
    ]
    assert len(s) == 4 + len(BOOKKEEPING_TYPES) + 2
    assert [e.seq for e in s.events] == list(range(1, len(s) + 1))
    assert s.events[1] == Event(2, "turn_start", {"turn": 1}, s.events[1].time)


def test_log_event_refuses_surface_types() -> None:
    s = Session()
    for kind in SURFACE_TYPES:
        with pytest.raises(SessionError, match="bookkeeping events only"):
            s.log_event(kind, {"content": "x"})
    assert len(s) == 0


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"x": {1, 2}}, r"data\['x'\] is a set, which is not JSON-shaped"),
        ({"x": [1, object()]}, r"data\['x'\]\[1\] is a object"),
        ({"x": math.nan}, r"data\['x'\] is nan, which JSON cannot represent"),
        ({"x": {2: "a"}}, r"data\['x'\] has a non-string key 2"),
        ({"x": b"bytes"}, "is a bytes"),
    ],
)
def test_data_that_is_not_json_shaped_is_refused(data: dict[str, Any], match: str) -> None:
    s = Session()
    with pytest.raises(SessionError, match=match):
        s.append("turn_end", data)
    assert len(s) == 0


def test_bad_types_and_non_dict_data_are_refused() -> None:
    s = Session()
    with pytest.raises(SessionError, match="non-empty string"):
        s.append("", {})
    with pytest.raises(SessionError, match="must be a dict, got list"):
        s.append("turn_end", [1])  # type: ignore[arg-type]
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(5000):
        node["n"] = {}
        node = node["n"]
    with pytest.raises(SessionError, match="nested too deeply"):
        s.append("turn_end", deep)


def test_the_log_owns_copies_of_its_data() -> None:
    s = Session()
    data = {"content": "hi", "parts": [1, (2, 3)]}
    s.append("user_message", data)
    data["content"] = "changed"
    assert s.events[0].data == {"content": "hi", "parts": [1, [2, 3]]}
    message = s.messages()[0]
    message["parts"].append(4)
    assert s.messages()[0]["parts"] == [1, [2, 3]]
    s.events.clear()
    assert len(s) == 1
    assert repr(s) == "<Session events=1>"
