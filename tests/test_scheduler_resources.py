"""Declarations the scheduler cannot use are read the fail-safe way: the call writes
everything. Counted with a probe that records who was in flight at every start."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from toolnexus import Resources, Tool, ToolHints
from toolnexus.scheduling import Scheduler
from toolnexus.tools import classify


class Probe:
    def __init__(self) -> None:
        self.now = 0
        self.peak = 0

    def tool(self, name: str, **options: Any) -> Tool:
        async def execute(args: dict[str, Any]) -> str:
            self.now += 1
            self.peak = max(self.peak, self.now)
            await asyncio.sleep(0.01)
            self.now -= 1
            return name

        return Tool(name, "", execute=execute, **options)


def raising(args: dict[str, Any]) -> Resources:
    raise KeyError("path")


@pytest.mark.parametrize(
    ("declare", "logged"),
    [
        (raising, "raised KeyError"),
        (lambda args: ["a.txt"], "not Resources or None"),
        (lambda args: {"writes": ["a.txt"]}, "not Resources or None"),
    ],
)
async def test_an_unusable_declaration_writes_everything(
    declare: Any, logged: str, caplog: pytest.LogCaptureFixture
) -> None:
    probe = Probe()
    reader = probe.tool("reader", hints=ToolHints(read_only=True))
    odd = probe.tool("odd", hints=ToolHints(read_only=True), resources=declare)
    assert classify(odd, {}) == ("exclusive", None)
    async with Scheduler() as lane:
        tickets = [lane.submit(reader, {}), lane.submit(odd, {}), lane.submit(reader, {})]
        assert all([(await lane.wait(t)).ok for t in tickets])
    assert probe.peak == 1  # the odd call ran alone, between the reads
    assert logged in caplog.text and "writes everything" in caplog.text


async def test_a_declaration_of_none_keeps_the_safety_class() -> None:
    probe = Probe()
    reader = probe.tool("reader", hints=ToolHints(read_only=True), resources=lambda a: None)
    assert classify(reader, {}) == ("parallel", None)
    async with Scheduler() as lane:
        tickets = [lane.submit(reader, {}) for _ in range(3)]
        assert all([(await lane.wait(t)).ok for t in tickets])
    assert probe.peak == 3


async def test_a_declaration_cannot_change_the_arguments_the_tool_receives() -> None:
    seen: list[dict[str, Any]] = []

    def meddling(args: dict[str, Any]) -> Resources:
        args["path"] = "elsewhere"
        return Resources(writes=["x"])

    async def execute(args: dict[str, Any]) -> None:
        seen.append(args)

    async with Scheduler() as lane:
        await lane.call(Tool("t", "", execute=execute, resources=meddling), {"path": "here"})
    assert seen == [{"path": "here"}]


def test_resources_must_be_a_function(caplog: pytest.LogCaptureFixture) -> None:
    from toolnexus.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="resources must be a function"):
        Tool("t", "", execute=lambda a: a, resources=Resources(writes=["x"]))  # type: ignore[arg-type]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
