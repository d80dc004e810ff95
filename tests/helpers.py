"""Test helpers: a probe that records what ran together, and tools wired to it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from toolnexus import Tool, ToolHints

if TYPE_CHECKING:
    from toolnexus.codemode.runtimes import CodeRuntime


class Probe:
    """Counts calls in flight and records starts, ends and overlap violations.

    Tools made by :meth:`tool` run for ``args["steps"]`` loop turns (default 1), or until
    ``gate(key)`` is set when ``args["gate"]`` names a key: tests decide when a call finishes
    without sleeping on a wall clock.
    """

    def __init__(self) -> None:
        self.active: set[str] = set()
        self.peak = 0
        self.log: list[tuple[str, str]] = []
        self.overlaps: list[tuple[str, frozenset[str]]] = []  # exclusive calls that had company
        self.gates: dict[str, asyncio.Event] = {}
        self.exclusive_running: str | None = None

    def gate(self, key: str) -> asyncio.Event:
        return self.gates.setdefault(key, asyncio.Event())

    def starts(self) -> list[str]:
        return [key for kind, key in self.log if kind == "start"]

    def tool(self, name: str, *, read_only: bool = True, **options: Any) -> Tool:
        probe = self

        async def execute(args: dict[str, Any]) -> Any:
            key = str(args.get("id", name))
            if probe.exclusive_running is not None or (not read_only and probe.active):
                probe.overlaps.append((key, frozenset(probe.active)))
            probe.active.add(key)
            if not read_only:
                probe.exclusive_running = key
            probe.peak = max(probe.peak, len(probe.active))
            probe.log.append(("start", key))
            try:
                if "gate" in args:
                    await probe.gate(str(args["gate"])).wait()
                else:
                    for _ in range(int(args.get("steps", 1))):
                        await asyncio.sleep(0)
                if args.get("fail"):
                    raise RuntimeError(str(args["fail"]))
                return key
            finally:
                probe.active.discard(key)
                if not read_only:
                    probe.exclusive_running = None
                probe.log.append(("end", key))

        return Tool(
            name,
            f"test tool {name}",
            {"type": "object"},
            execute=execute,
            hints=ToolHints(read_only=read_only),
            **options,
        )


async def settle_loop(turns: int = 20) -> None:
    """Let the event loop run ``turns`` iterations."""
    for _ in range(turns):
        await asyncio.sleep(0)


RuntimeFactory = Callable[..., "CodeRuntime"]
"""``make_runtime(**budgets)``: a runtime of the test's language, closed after the test."""


class ToolsOwnBaseException(BaseException):
    """A BaseException a tool raises that is neither the host's exit nor a cancellation."""


RAISERS = ["sync_stop", "async_stop", "sync_base", "async_base", "sync_exit", "self_cancel"]
"""The tools of `raising_tools` that fail in a way a plain ``except Exception`` misses."""


def raising_tools() -> list[Tool]:
    """Tools with everyday bugs past ``Exception`` (each named in `RAISERS`), and ``fine``."""
    from toolnexus import tool

    @tool(hints=ToolHints(read_only=True))
    def sync_stop() -> str:
        """next() of an empty iterator, in a sync tool."""
        return next(iter([]))

    @tool(hints=ToolHints(read_only=True))
    async def async_stop() -> str:
        """The same in an async tool."""
        return next(iter([]))

    @tool
    def sync_base() -> str:
        """A BaseException subclass from a thread."""
        raise ToolsOwnBaseException("sync base")

    @tool
    async def async_base() -> str:
        """A BaseException subclass on the loop."""
        raise ToolsOwnBaseException("async base")

    @tool
    def sync_exit() -> str:
        """sys.exit() on the tool's own thread."""
        raise SystemExit(3)

    @tool
    async def self_cancel() -> str:
        """Cancels its own task."""
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        await asyncio.sleep(1)
        return "not reached"

    @tool(hints=ToolHints(read_only=True))
    async def fine(x: str = "fine") -> str:
        """Answers x."""
        return x

    return [sync_stop, async_stop, sync_base, async_base, sync_exit, self_cancel, fine]
