"""concurrency_mode: fail-safe classification."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from toolnexus import Tool, ToolHints
from toolnexus.scheduling import concurrency_mode


def _tool(**options: Any) -> Tool:
    return Tool("t", execute=lambda args: None, **options)


def test_without_a_predicate_hints_decide() -> None:
    assert concurrency_mode(_tool(), {}) == "exclusive"
    assert concurrency_mode(_tool(hints=ToolHints()), {}) == "exclusive"
    assert concurrency_mode(_tool(hints=ToolHints(read_only=True)), {}) == "parallel"
    assert concurrency_mode(_tool(hints=ToolHints(idempotent=True, destructive=False)), {}) == (
        "exclusive"
    )


def test_the_predicate_decides_per_call_and_overrides_hints() -> None:
    t = _tool(hints=ToolHints(read_only=True), concurrency_safe=lambda a: a.get("dryRun") is True)
    assert concurrency_mode(t, {"dryRun": True}) == "parallel"
    assert concurrency_mode(t, {"dryRun": False}) == "exclusive"
    assert concurrency_mode(t, {}) == "exclusive"


async def _coroutine_verdict() -> bool:
    return True


@pytest.mark.parametrize("verdict", ["yes", 1, 1.0, [True], None, object()])
def test_only_true_counts(verdict: object, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="toolnexus.scheduling"):
        mode = concurrency_mode(_tool(concurrency_safe=lambda a: verdict), {})
    assert mode == "exclusive"
    assert "not a bool" in caplog.text


def test_false_is_exclusive_without_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="toolnexus.scheduling"):
        assert concurrency_mode(_tool(concurrency_safe=lambda a: False), {}) == "exclusive"
    assert caplog.text == ""


def test_a_raising_or_async_predicate_means_exclusive(caplog: pytest.LogCaptureFixture) -> None:
    def boom(args: dict[str, Any]) -> bool:
        raise KeyError("path")

    async def asynchronous(args: dict[str, Any]) -> bool:
        return True

    with caplog.at_level(logging.WARNING, logger="toolnexus.scheduling"):
        assert concurrency_mode(_tool(concurrency_safe=boom), {}) == "exclusive"
        assert concurrency_mode(_tool(concurrency_safe=asynchronous), {}) == "exclusive"
    assert "raised KeyError" in caplog.text
    assert "must be synchronous" in caplog.text  # and the coroutine was closed (no warning)


async def test_the_predicate_sees_the_snapshot_the_tool_receives() -> None:
    from toolnexus.scheduling import Scheduler

    seen: list[Any] = []

    def predicate(args: dict[str, Any]) -> bool:
        seen.append(("predicate", args))
        return True

    async def execute(args: dict[str, Any]) -> None:
        seen.append(("tool", args))

    t = Tool("t", execute=execute, concurrency_safe=predicate)
    async with Scheduler() as lane:
        await lane.call(t, {"when": (1, 2), "obj": Ellipsis})
    (_, p), (_, received) = seen
    assert p == received == {"when": [1, 2], "obj": "Ellipsis"}
    assert p is not received  # a copy of its own: it cannot change what the tool gets
