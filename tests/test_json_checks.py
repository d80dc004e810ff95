"""The fast path of ``json_problem`` (flat dictionaries, and dictionaries of them) decides
exactly as the full check does."""

from __future__ import annotations

from typing import Any

import pytest

from toolnexus import _json

looped: dict[str, Any] = {"a": 1}
looped["self"] = looped
holds_looped: dict[str, Any] = {"inner": looped}

CASES: list[tuple[Any, int]] = [
    ({"t": "call", "id": 1, "name": "noop", "args": {"path": "a/b", "n": 3}}, 64),
    ({"args": {}}, 64),
    ({"args": {"x": 1}}, 1),  # the arguments are past the depth allowed
    ({"args": {"x": 1}}, 2),
    ({"args": {"x": "\ud800"}}, 64),
    ({"args": {"x": "café"}}, 64),
    ({"args": {1: "x"}}, 64),
    ({"args": {"x": 10**5000}}, 64),
    ({"args": {"x": float("nan")}}, 64),
    ({"args": {"x": {"y": 1}}}, 64),
    ({"args": {"x": [1, 2]}}, 64),
    ({"args": {"x": object()}}, 64),
    (looped, 64),
    (holds_looped, 64),
]


@pytest.mark.parametrize(("value", "max_depth"), CASES)
def test_the_fast_path_agrees_with_the_full_check(
    value: Any, max_depth: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = _json.json_problem(value, "the JSON", max_depth=max_depth)
    monkeypatch.setattr(_json, "_flat_plain", lambda *args: False)
    assert fast == _json.json_problem(value, "the JSON", max_depth=max_depth)


def test_a_message_carrying_flat_arguments_takes_the_fast_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A sandbox's call message is checked without the walk (3.6 us, 1.05 us with it)."""
    walked: list[Any] = []
    monkeypatch.setattr(_json, "_string_problem", lambda item, path: walked.append(item))
    assert _json.json_problem(CASES[0][0]) is None
    assert walked == []  # no string was looked at one by one
