"""snapshot(): independent, JSON-shaped copies."""

from __future__ import annotations

import enum
import json
import math
from collections import OrderedDict
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from toolnexus._snapshot import MAX_DEPTH
from toolnexus.scheduling import snapshot


class Color(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


class Name(enum.StrEnum):
    ADA = "ada"


def test_scalars_containers_and_keys() -> None:
    value = {
        "s": "x", "i": 1, "f": 1.5, "b": True, "n": None,
        "t": (1, [2, (3,)]), 1: "one", None: "null", False: "no", 2.5: "float",
        (1, 2): "tuple key",
    }  # fmt: skip
    assert snapshot(value) == {
        "s": "x", "i": 1, "f": 1.5, "b": True, "n": None,
        "t": [1, [2, [3]]], "1": "one", "null": "null", "false": "no", "2.5": "float",
        "(1, 2)": "tuple key",
    }  # fmt: skip


def test_non_json_values_become_their_repr() -> None:
    value = {
        "set": {1},
        "bytes": b"x",
        "nan": math.nan,
        "inf": -math.inf,
        "enum": Color.RED,
        "intenum": Level.HIGH,
        "strenum": Name.ADA,
        "fn": len,
        "mapping": OrderedDict(a=1),
    }
    snap = snapshot(value)
    assert snap["set"] == "{1}"
    assert snap["bytes"] == "b'x'"
    assert snap["nan"] == "nan" and snap["inf"] == "-inf"
    assert snap["enum"] == "<Color.RED: 'red'>"
    assert snap["intenum"] == 3 and type(snap["intenum"]) is int
    assert snap["strenum"] == "ada" and type(snap["strenum"]) is str
    assert snap["fn"] == "<built-in function len>"
    assert snap["mapping"] == {"a": 1}
    json.dumps(snap, allow_nan=False)


def test_cycles_depth_and_hostile_objects_never_raise() -> None:
    cycle: list[Any] = [1]
    cycle.append(cycle)
    assert snapshot(cycle) == [1, "[1, [...]]"]

    deep: list[Any] = []
    node = deep
    for _ in range(MAX_DEPTH + 10):
        node.append([])
        node = node[0]
    snap = snapshot(deep)
    for _ in range(MAX_DEPTH):
        snap = snap[0]
    assert isinstance(snap, str)

    class BadRepr:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    assert snapshot({"x": BadRepr()}) == {"x": "<unrepresentable BadRepr object>"}

    class BadMapping(dict[str, Any]):
        def items(self) -> Any:
            raise RuntimeError("no items")

    assert snapshot(BadMapping(a=1)) == "{'a': 1}"


def test_copies_are_independent() -> None:
    value = {"a": [1, {"b": 2}]}
    one, two = snapshot(value), snapshot(value)
    one["a"][1]["b"] = 99
    assert value == {"a": [1, {"b": 2}]} and two == {"a": [1, {"b": 2}]}
    flat = {"a": 1}
    assert snapshot(flat) == flat and snapshot(flat) is not flat


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=30,
)


@given(json_values)
def test_json_data_round_trips_unchanged(value: Any) -> None:
    assert snapshot(value) == value
    assert json.loads(json.dumps(snapshot(value))) == value


@given(st.recursive(st.integers() | st.sets(st.integers()) | st.binary() | st.just(object()),
                    lambda c: st.lists(c) | st.tuples(c, c) | st.dictionaries(st.integers(), c),
                    max_leaves=20))  # fmt: skip
def test_anything_becomes_json_serialisable(value: Any) -> None:
    json.dumps(snapshot(value), allow_nan=False)


def test_a_result_snapshot_keeps_non_finite_floats_and_copies_the_rest() -> None:
    import math

    from toolnexus.scheduling import result_snapshot

    live = {"items": [1, 2], "nan": math.nan, "inf": -math.inf, "tags": {"x"}}
    frozen = result_snapshot(live)
    live["items"].append(3)
    assert frozen["items"] == [1, 2]
    assert math.isnan(frozen["nan"]) and frozen["inf"] == -math.inf
    assert frozen["tags"] == "{'x'}"


def test_an_outcome_holds_a_snapshot_of_its_value() -> None:
    from toolnexus.scheduling import Outcome
    from toolnexus.tools import ToolResult, outcome_from_value
    from toolnexus.tools.mcp import ContentParts

    shared = [1]
    made = Outcome(value={"shared": shared})
    from_result = outcome_from_value("t", ToolResult(output={"shared": shared}))
    parts = outcome_from_value("t", ContentParts([{"type": "text", "text": "a"}]))
    shared.append(2)
    assert made.value == {"shared": [1]} and from_result.value == {"shared": [1]}
    assert type(parts.value) is ContentParts and parts.text == "a"


def test_a_result_snapshot_keeps_nesting_a_program_would_refuse() -> None:
    # A program refuses a result nested past 64 levels; the snapshot must not hide that depth by
    # turning the inner levels into their repr().
    from toolnexus._json import json_problem
    from toolnexus.scheduling import result_snapshot

    deep: Any = []
    for _ in range(100):
        deep = [deep]
    frozen = result_snapshot(deep)
    assert frozen == deep and frozen is not deep
    assert "nested deeper than" in (json_problem(frozen, "the result") or "")
