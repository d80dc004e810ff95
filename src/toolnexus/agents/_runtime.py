"""The agent runtime: spawn, wake, wait, post, interrupt, close.

The background recipe (a child works while its parent goes on) needs no extra API: ``spawn``
gives a handle (and its id) at once, ``wake`` starts a turn in the background and returns at
once, and ``wait`` in a task of your own delivers the result; to tell the parent, ``post`` to it
and ``wake`` it.

Scheduling: each parent runs at most ``max_children`` children at once (extra wakes queue, first
in, first started); the whole runtime has at most ``max_concurrent_turns`` model requests in
flight. Budgets are checked at every turn against the agent and each of its ancestors; usage rolls
up to every ancestor. See ``docs/agents.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
from collections import deque
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

from toolnexus._checks import positive_int
from toolnexus._json import encodable_text, json_problem
from toolnexus._tracing import agent_turn_span
from toolnexus.agents._definition import AgentDefinition, Budget
from toolnexus.agents._handle import Handle, TaskResult, TaskStatus
from toolnexus.agents._task import task_tool
from toolnexus.client import Client, RunResult, Usage
from toolnexus.errors import AgentError, ConfigurationError, ProviderError
from toolnexus.scheduling import snapshot
from toolnexus.session import Event
from toolnexus.tools import Tool

__all__ = ["AgentError", "AgentRuntime", "Handle", "TaskResult", "TaskStatus"]

logger = logging.getLogger("toolnexus.agents")


class _TreeMeter:
    """Counts one agent's spending against it and every ancestor, as it is spent."""

    def __init__(self, runtime: AgentRuntime, handle: Handle) -> None:
        self._runtime = runtime
        self._handle = handle

    def check(self) -> str | None:
        return self._runtime._exhausted(self._handle)

    def spend(self, usage: Usage) -> None:
        for node in self._handle.lineage():
            node.usage.add(usage)

    def tool_call(self) -> str | None:
        for node in self._handle.lineage():
            limit = node.budget.max_tool_calls
            if limit is not None and node.tool_calls >= limit:
                return f"the tool-call budget of {node.id} ({limit}) is used up"
        for node in self._handle.lineage():
            node.tool_calls += 1
        return None


class _Trace(list[tuple[str, str]]):
    """The runtime's event list, which also feeds every
    [`AgentRuntime.events`][toolnexus.agents.AgentRuntime.events] iterator."""

    def __init__(self) -> None:
        super().__init__()
        self.listeners: list[asyncio.Queue[tuple[str, str]]] = []

    def append(self, event: tuple[str, str]) -> None:
        super().append(event)
        for queue in self.listeners:
            queue.put_nowait(event)


def _with_members(agents: Sequence[AgentDefinition]) -> Iterator[AgentDefinition]:
    """Every definition in ``agents`` and, depth first, in their teams."""
    for definition in agents:
        yield definition
        yield from _with_members(definition.members)


def _give_back(handle: Handle, taken: tuple[list[str], list[str]]) -> None:
    """Put the prompts and inbox items a turn took, and never delivered, back in front."""
    handle.prompts.extendleft(reversed(taken[0]))
    handle.inbox.extendleft(reversed(taken[1]))


def _coalesce(prompts: deque[str], inbox: deque[str]) -> str:
    parts = list(prompts)
    if inbox:
        parts.append("Messages received:\n" + "\n".join(f"- {item}" for item in inbox))
    prompts.clear()
    inbox.clear()
    return "\n\n".join(parts)


class AgentRuntime:
    """Runs agents as a tree of handles on one client.

    Args:
        agents: The definitions that may be spawned (by name).
        client: From [`create_client`][toolnexus.client.create_client]; an agent's ``model``
            overrides its model on the same endpoint.
        max_children: Running children per parent; more wakes queue (FIFO).
        max_concurrent_turns: Model requests in flight across the runtime.
        inbox_cap: Items a handle's inbox holds; posting to a full one is an error.

    Raises:
        ConfigurationError: duplicate or unknown agent names, or bad limits.
    """

    def __init__(
        self,
        agents: Sequence[AgentDefinition],
        *,
        client: Client,
        max_children: int = 8,
        max_concurrent_turns: int = 8,
        inbox_cap: int = 8,
    ) -> None:
        for option, value in (
            ("max_children", max_children),
            ("max_concurrent_turns", max_concurrent_turns),
            ("inbox_cap", inbox_cap),
        ):
            positive_int(f"AgentRuntime {option}", value)
        self.definitions: dict[str, AgentDefinition] = {}
        for definition in agents:
            if definition.name in self.definitions:
                raise ConfigurationError(f"two agents are named {definition.name!r}.")
            self.definitions[definition.name] = definition
        for definition in list(_with_members(agents)):  # team members given as definitions
            known = self.definitions.setdefault(definition.name, definition)
            if known is not definition and known != definition:
                raise ConfigurationError(
                    f"two different agents are named {definition.name!r} (one given in a team)."
                )
        for definition in self.definitions.values():
            unknown = [n for n in definition.team if n not in self.definitions]
            if unknown:
                raise ConfigurationError(
                    f"agent {definition.name!r} has unknown team members {unknown}."
                )
        self.client = client
        self.max_children = max_children
        self.inbox_cap = inbox_cap
        self._max_concurrent_turns = max_concurrent_turns
        self._gate: asyncio.Semaphore | None = None
        self._numbers = itertools.count(1)
        everyone = AgentDefinition("root", "", team=tuple(self.definitions))
        self.root = Handle("root", everyone, None, Budget())
        self.trace = _Trace()  # (event, handle id): spawned, queued, started, finished, closed

    def sessions(self) -> dict[str, list[Event]]:
        """Each agent's session events so far (every turn it ran), by agent id, closed agents
        included: ``toolnexus.view.render(runtime.sessions())`` draws each as its own group."""
        found: dict[str, list[Event]] = {}
        pending = list(self.root.children)
        while pending:
            handle = pending.pop(0)
            if handle.events:
                found[handle.id] = list(handle.events)
            pending.extend(handle.children)
        return found

    # -- verbs -----------------------------------------------------------------------------------

    async def run(self, name: str, prompt: str, *, budget: Budget | None = None) -> TaskResult:
        """Spawn agent ``name`` under the root, give it ``prompt``, wait, close it: one call.

        Raises:
            AgentError: as `spawn` does.
        """
        handle = self.spawn(self.root, name, budget)
        try:
            self.wake(handle, prompt)
            return await self.wait(handle)
        finally:
            await self.close(handle)

    async def events(self) -> AsyncIterator[tuple[str, str]]:
        """The team's events as they happen: ``(event, agent id)`` with ``event`` one of
        ``spawned``, ``queued``, ``started``, ``finished``, ``closed``. Runs until the caller
        stops iterating (each iterator sees the events from when it started)."""
        queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self.trace.listeners.append(queue)
        try:
            while True:
                yield await queue.get()
        finally:
            self.trace.listeners.remove(queue)

    def spawn(self, parent: Handle, name: str, budget: Budget | None = None) -> Handle:
        """A new child of ``parent`` running agent ``name``; returns at once.

        Raises:
            AgentError: ``name`` is not in the parent's team, the parent is closed, or a
                children/depth budget would be exceeded.
        """
        self._open(parent)
        if name not in parent.definition.team:
            valid = ", ".join(parent.definition.team) or "none"
            raise AgentError(f"{parent.id} cannot spawn {name!r}; its team is: {valid}")
        for ancestor in parent.lineage():
            limit = ancestor.budget.max_depth
            if limit is not None and parent.depth + 1 - ancestor.depth > limit:
                raise AgentError(
                    f"spawning {name!r} under {parent.id} exceeds the depth budget of "
                    f"{ancestor.id} ({limit})"
                )
        open_children = [c for c in parent.children if c.status != "closed"]
        if (
            parent.budget.max_children is not None
            and len(open_children) >= parent.budget.max_children
        ):
            raise AgentError(
                f"{parent.id} may have {parent.budget.max_children} children; close one first"
            )
        definition = self.definitions[name]
        child = Handle(
            f"{parent.id}/{name}.{next(self._numbers)}",
            definition,
            parent,
            budget or definition.budget or Budget(),
        )
        parent.children.append(child)
        self.trace.append(("spawned", child.id))
        return child

    def wake(self, handle: Handle, prompt: str | None = None) -> None:
        """Start a turn of ``handle`` in the background and return at once.

        A handle that is running (or queued) keeps the prompt for its next turn.

        Raises:
            AgentError: the handle is closed, or it is the runtime's root.
        """
        self._open(handle)
        if handle.parent is None:
            raise AgentError("the root is the host; wake the agents it spawned")
        if handle._paused is not None and handle.status not in ("running", "queued"):
            waiting = ", ".join(f"{c.name} ({c.id})" for c in handle._paused.pending)
            raise AgentError(
                f"{handle.id} is waiting for answers to its relay calls {waiting}; give them "
                "with AgentRuntime.resume(handle, answers) (post() queues messages meanwhile)"
            )
        if prompt:
            handle.prompts.append(prompt)
        if handle.status in ("running", "queued"):
            return
        self._schedule(handle)

    def resume(self, handle: Handle, answers: Mapping[str, Any]) -> None:
        """Carry on a ``pending`` wake with the host's answers to its relay calls, in the
        background (as `wake` does); `wait` gives the result.

        Args:
            handle: An agent whose last wake ended ``pending``.
            answers: One answer per pending call, by call id (a value, a ``ToolResult`` or an
                ``Outcome``), as for ``client.resume``.

        Raises:
            AgentError: the handle is closed, not waiting for answers, or an answer is missing.
        """
        self._open(handle)
        paused = handle._paused
        if paused is None or handle.status in ("running", "queued"):
            raise AgentError(f"{handle.id} is not waiting for answers to relay calls")
        missing = [c.id for c in paused.pending if c.id not in answers]
        if missing:
            raise AgentError(f"no answer for the pending calls {missing} of {handle.id}")
        handle._answers = dict(answers)
        self._schedule(handle)

    def _schedule(self, handle: Handle) -> None:
        """Start a wake of ``handle`` now, or queue it behind its parent's running children."""
        assert handle.parent is not None
        handle._done = asyncio.get_running_loop().create_future()
        parent = handle.parent
        if parent.running_children < self.max_children:
            self._start(handle)
        else:
            handle.status = "queued"
            parent.waiting_children.append(handle)
            self.trace.append(("queued", handle.id))

    async def wait(
        self,
        handle: Handle,
        timeout: float | None = None,  # noqa: ASYNC109 - the verb's documented argument
    ) -> TaskResult:
        """The result of ``handle``'s current (or last) wake; ``timeout`` leaves it running."""
        done = handle._done
        if done is None:
            return handle._last or TaskResult(status="error", error=f"{handle.id} was never woken")
        try:
            return await asyncio.wait_for(asyncio.shield(done), timeout)
        except TimeoutError:
            return TaskResult(
                status="timeout", error=f"{handle.id} did not finish within {timeout} s"
            )

    def post(self, handle: Handle, item: Any) -> None:
        """Put ``item`` in the handle's inbox; the next turn gets the queued items as one message.

        Raises:
            AgentError: the handle is closed, or its inbox is full (nothing is dropped silently).
        """
        self._open(handle)
        if len(handle.inbox) >= self.inbox_cap:
            raise AgentError(
                f"the inbox of {handle.id} is full ({self.inbox_cap} items); wake it first"
            )
        if not isinstance(item, str):
            problem = json_problem(item, "the item", foreign_ok=True)
            if problem:
                raise AgentError(f"{problem}; post text or JSON data to {handle.id}")
            item = json.dumps(snapshot(item), ensure_ascii=False)
        handle.inbox.append(encodable_text(item))

    def interrupt(self, handle: Handle) -> None:
        """Cancel the running turn of ``handle`` (its result: ``interrupted``).

        The prompts and inbox items the cut-short turn had taken go back to the front of the
        handle's queue and inbox, in order: the next `wake` sends them (nothing posted is lost;
        the same holds for a turn that fails, or finds its budget used up, before its
        transcript has them).
        """
        if handle._task is not None and not handle._task.done():
            handle._task.cancel()

    async def close(self, handle: Handle) -> None:
        """Close ``handle``'s children (leaves first), then ``handle``; later posts fail."""
        if handle.status == "closed":
            return
        handle._closing = True
        for child in list(handle.children):
            await self.close(child)
        if handle.status == "queued" and handle.parent is not None:
            handle.parent.waiting_children.remove(handle)
            self._finish(handle, TaskResult(status="closed"))
        task = handle._task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        handle.status = "closed"
        self.trace.append(("closed", handle.id))

    # -- running turns ---------------------------------------------------------------------------

    def _open(self, handle: Handle) -> None:
        if handle.status == "closed" or handle._closing:
            raise AgentError(f"{handle.id} is closed")

    def _start(self, handle: Handle) -> None:
        assert handle.parent is not None
        handle.parent.running_children += 1
        handle.status = "running"
        self.trace.append(("started", handle.id))
        handle._task = asyncio.ensure_future(self._wake_cycle(handle))
        handle._task.add_done_callback(lambda task: self._cancelled_early(handle, task))

    def _cancelled_early(self, handle: Handle, task: asyncio.Task[TaskResult]) -> None:
        """A task cancelled before its first step never ran its own clean-up: do it here."""
        if task.cancelled() and handle._done is not None and not handle._done.done():
            self._finish(handle, TaskResult(status="closed" if handle._closing else "interrupted"))

    async def _wake_cycle(self, handle: Handle) -> TaskResult:
        result = TaskResult(status="error", error="no turn ran")
        taken: tuple[list[str], list[str]] = ([], [])  # what the running turn drained
        try:
            go_on = True
            if handle._answers is not None:
                result = await self._resume_turn(handle)
                go_on = result.status == "done" and bool(handle.prompts or handle.inbox)
            while go_on:
                taken = (list(handle.prompts), list(handle.inbox))
                message = _coalesce(handle.prompts, handle.inbox) or "Continue."
                before = handle.history
                result = await self._turn(handle, message)
                if handle.history is before and result.status != "pending":
                    _give_back(handle, taken)  # the turn failed before its transcript took them
                taken = ([], [])
                go_on = result.status == "done" and bool(handle.prompts or handle.inbox)
        except asyncio.CancelledError:  # interrupt() or close(): this task's own cancellation
            if not handle._closing:  # the turn never finished: what it took goes back
                _give_back(handle, taken)
            result = TaskResult(
                status="closed" if handle._closing else "interrupted",
                turns=result.turns,
                usage=result.usage,
            )
        except Exception as exc:  # never leave a wake unfinished and its slot taken
            logger.warning("the wake of %s failed", handle.id, exc_info=True)
            result = TaskResult(status="error", error=f"{type(exc).__name__}: {exc}")
        self._finish(handle, result)
        return result

    def _finish(self, handle: Handle, result: TaskResult) -> None:
        if handle._done is not None and handle._done.done():
            return  # this wake already ended
        handle._last = result
        if handle._done is not None:
            handle._done.set_result(result)
        self.trace.append(("finished", handle.id))
        parent = handle.parent
        if handle.status == "running" and parent is not None:
            parent.running_children -= 1
            handle.status = "idle"
            if parent.waiting_children:
                self._start(parent.waiting_children.popleft())
        elif handle.status == "queued":
            handle.status = "idle"

    def _exhausted(self, handle: Handle) -> str | None:
        for node in handle.lineage():
            b = node.budget
            if b.max_tokens is not None and (node.usage.total or 0) >= b.max_tokens:
                return f"the token budget of {node.id} ({b.max_tokens}) is used up"
            if b.max_tool_calls is not None and node.tool_calls >= b.max_tool_calls:
                return f"the tool-call budget of {node.id} ({b.max_tool_calls}) is used up"
        return None

    def _client_for(self, handle: Handle) -> Client:
        if handle._client is not None:
            return handle._client
        definition = handle.definition
        changes: dict[str, Any] = {"system_prompt": definition.instructions or None}
        if definition.model:
            changes["model"] = definition.model
        if definition.code_mode:
            changes["code_mode"] = definition.code_mode
        if handle.budget.max_turns is not None:
            changes["max_turns"] = handle.budget.max_turns
        if self._gate is None:
            self._gate = asyncio.Semaphore(self._max_concurrent_turns)
        derived = self.client.derive(**changes).gated(self._gate)
        handle._client = derived.metered(_TreeMeter(self, handle))
        return handle._client

    async def _turn(self, handle: Handle, message: str) -> TaskResult:
        exhausted = self._exhausted(handle)
        if exhausted:
            return TaskResult(status="incomplete", error=exhausted)
        tools: list[Tool] = list(handle.definition.tools)
        if handle.definition.team:
            tools.append(task_tool(self, handle))
        client = self._client_for(handle)
        with agent_turn_span(handle.name, handle.id):  # its requests and calls nest
            try:
                run = await client.run(message, tools=tools, history=handle.history)
            except ProviderError as exc:
                return TaskResult(status="error", error=str(exc))
            except Exception as exc:  # any failure ends the turn as data and frees its slot
                logger.warning("the turn of %s failed", handle.id, exc_info=True)
                return TaskResult(status="error", error=f"{type(exc).__name__}: {exc}")
        return self._ended(handle, run)

    async def _resume_turn(self, handle: Handle) -> TaskResult:
        """The paused run carried on with the answers `resume` was given."""
        paused, answers = handle._paused, handle._answers
        assert paused is not None
        assert answers is not None
        client = self._client_for(handle)
        with agent_turn_span(handle.name, handle.id):
            try:
                run = await client.resume(paused, answers)
            except ProviderError as exc:
                return TaskResult(status="error", error=str(exc))
            except Exception as exc:  # any failure ends the turn as data and frees its slot
                logger.warning("the resumed turn of %s failed", handle.id, exc_info=True)
                return TaskResult(status="error", error=f"{type(exc).__name__}: {exc}")
            finally:
                handle._answers = None
        return self._ended(handle, run)

    def _ended(self, handle: Handle, run: RunResult) -> TaskResult:
        """A finished (or paused) run as the wake's result; the history keeps what it said."""
        handle._paused = None
        if run.status == "pending":  # relay calls wait for the host: resumable, not over
            handle._paused = run
            return TaskResult(run.text, "pending", run.turns, run.usage, pending=list(run.pending))
        handle.history = run.messages  # its usage and tool calls were counted as they happened
        handle.events += run.session.events
        if run.status == "done":
            return TaskResult(run.text, "done", run.turns, run.usage)
        error = run.stopped_by or "the turn budget (max_turns) ran out"
        return TaskResult(run.text, "incomplete", run.turns, run.usage, error)
