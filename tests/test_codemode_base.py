"""Runtime building blocks: log capture, JSON-shape checks, the warm type checker."""

from __future__ import annotations

import math

import pydantic_monty as monty

from toolnexus.codemode.runtimes._base import LogCapture, json_shape_problem
from toolnexus.codemode.runtimes._monty_checker import (
    MAX_CHECKS_PER_SESSION,
    CheckerCache,
)


def test_log_capture_joins_chunks_into_lines_per_stream() -> None:
    logs = LogCapture(1000)
    logs.write("stdout", "hel")
    logs.write("stderr", "oops\nsecond")
    logs.write("stdout", "lo\nwor")
    logs.write("stdout", "ld")
    assert logs.finish() == [{"stderr": "oops"}, "hello", "world", {"stderr": "second"}]


def test_log_capture_truncates_once_past_the_budget() -> None:
    logs = LogCapture(10)
    for i in range(5):
        logs.write("stdout", f"line{i}\n")
    lines = logs.finish()
    assert lines[0] == "line0"
    assert lines[1].startswith("[toolnexus: output truncated") and len(lines) == 2


def test_a_line_that_never_ends_cannot_grow_without_bound() -> None:
    logs = LogCapture(50)
    for _ in range(10):
        logs.write("stdout", "x" * 20)
    assert logs.truncated
    assert logs.finish()[-1].startswith("[toolnexus: output truncated")


def test_json_shape_problem_names_what_is_wrong_and_where() -> None:
    assert json_shape_problem({"a": [1, 2.5, "x", None, True, (1, 2)]}) is None
    assert json_shape_problem({"a": [1, {2}]}) == 'result["a"][1] is a set, which is not JSON'
    assert json_shape_problem({1: "x"}) == "result has a non-string key 1"
    assert json_shape_problem(math.nan) == "result is nan, which JSON cannot hold"
    deep: object = 1
    for _ in range(300):
        deep = [deep]
    assert "nested deeper than 64 levels" in (json_shape_problem(deep) or "")
    assert json_shape_problem(10**5000) == "result is an integer too large for JSON"
    assert "lone surrogate" in (json_shape_problem(["\ud800"]) or "")


def test_checker_sessions_are_reused_and_recycled() -> None:
    sdk = "tools: int\n"
    cache = CheckerCache(size=1)
    with monty.Monty(min_processes=1, max_processes=3) as pool:
        try:
            assert cache.check(pool, sdk, "x = tools + 1") is None
            first = cache._checkers[sdk]
            problem = cache.check(pool, sdk, "y = 1\nz = tools + 'a'")
            assert problem is not None and "line 2" in problem
            assert cache._checkers[sdk] is first
            first.checks = MAX_CHECKS_PER_SESSION - 1
            cache.check(pool, sdk, "1")
            assert sdk not in cache._checkers  # recycled after its quota
            cache.check(pool, "other: str\n", "other.upper()")
            cache.check(pool, sdk, "tools")
            assert list(cache._checkers) == [sdk]  # LRU of one evicted "other"
        finally:
            cache.close()
