"""An agent's handle and how its wakes end: the values the runtime and the ``task`` tool share.

Why a module of their own: the ``task`` tool reads handles and results, and the runtime makes
the tool; with these here, each of the two imports this module and neither imports the other.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from toolnexus.agents._definition import AgentDefinition, Budget
from toolnexus.client import Client, RunResult, Usage
from toolnexus.scheduling import ToolCall
from toolnexus.session import Event

__all__ = ["Handle", "TaskResult", "TaskStatus"]

TaskStatus = Literal["done", "incomplete", "pending", "interrupted", "closed", "timeout", "error"]


@dataclass
class TaskResult:
    """How an agent's wake ended.

    Attributes:
        text: The agent's last text.
        status: ``done``, ``incomplete`` (a budget or ``max_turns``; ``error`` says which),
            ``pending`` (its turn waits for the host's answers to relay calls, listed in
            ``pending``: give them to `AgentRuntime.resume`),
            ``interrupted``, ``closed``, ``timeout`` (of `AgentRuntime.wait` only: the agent
            keeps running) or ``error``.
        turns: Model round trips of the wake.
        usage: Tokens of the wake.
        error: What went wrong, in words, when ``status`` is not ``done`` or ``pending``.
        pending: When ``status`` is ``pending``: the relay calls waiting for answers.
    """

    text: str = ""
    status: TaskStatus = "done"
    turns: int = 0
    usage: Usage = field(default_factory=Usage)
    error: str | None = None
    pending: list[ToolCall] = field(default_factory=list)


class Handle:
    """One spawned agent. ``id`` is stable and readable: ``root/coordinator.1/researcher.2``."""

    def __init__(
        self, id: str, definition: AgentDefinition, parent: Handle | None, budget: Budget
    ) -> None:
        self.id = id
        self.definition = definition
        self.parent = parent
        self.depth: int = 0 if parent is None else parent.depth + 1
        self.budget = budget
        self.children: list[Handle] = []
        self.status: Literal["idle", "queued", "running", "closed"] = "idle"
        self.history: list[dict[str, Any]] = []
        self.events: list[Event] = []  # its turns' session events, for toolnexus.view
        self.prompts: deque[str] = deque()
        self.inbox: deque[str] = deque()
        self.usage = Usage()
        self.tool_calls = 0
        self.running_children = 0
        self.waiting_children: deque[Handle] = deque()
        self.task_children: dict[tuple[str, str], Handle] = {}
        self._task: asyncio.Task[TaskResult] | None = None
        self._done: asyncio.Future[TaskResult] | None = None
        self._last: TaskResult | None = None
        self._closing = False
        self._client: Client | None = None  # its definition and budget never change: made once
        self._paused: RunResult | None = None  # a run waiting for answers to its relay calls
        self._answers: Mapping[str, Any] | None = None  # given to resume, for the next wake

    @property
    def name(self) -> str:
        """The agent's definition name."""
        return self.definition.name

    def lineage(self) -> list[Handle]:
        """This handle and its ancestors, nearest first."""
        chain: list[Handle] = []
        node: Handle | None = self
        while node is not None:
            chain.append(node)
            node = node.parent
        return chain

    def __repr__(self) -> str:
        return f"<Handle {self.id} {self.status}>"
