"""The ``task`` tool: delegate to a team member and wait for its answer (always concurrent)."""

from __future__ import annotations

from typing import Any, Protocol

from toolnexus.agents._handle import Handle, TaskResult
from toolnexus.tools import Tool, ToolResult

__all__ = ["task_tool"]


class Delegation(Protocol):
    """The verbs of the agent runtime that a ``task`` call uses (``AgentRuntime`` has them)."""

    def spawn(self, parent: Handle, name: str) -> Handle:
        """A new child of ``parent`` from its team member ``name``."""
        ...

    def wake(self, handle: Handle, prompt: str | None = None) -> None:
        """Start a turn of ``handle`` on ``prompt`` in the background."""
        ...

    async def wait(self, handle: Handle) -> TaskResult:
        """The result of ``handle``'s current wake, when it ends."""
        ...

    async def close(self, handle: Handle) -> None:
        """Close ``handle`` and its children."""
        ...


def _always(args: Any) -> bool:
    return True


def task_tool(runtime: Delegation, handle: Handle) -> Tool:
    """``task(agent, prompt)`` for ``handle``: spawn (or re-attach), wake, wait, close.

    Each call gets a child of its own; a call re-attaches only to the child of an identical
    earlier call that was cut short (and whose wake still answers the same prompt).

    Always concurrent: a response with three ``task`` calls gets three sub-agents at once
    (within the runtime's caps); it is never a barrier, whatever its arguments.
    """
    team = list(handle.definition.team)
    claimed: set[Handle] = set()  # children a task call of this tool is waiting for

    async def execute(args: dict[str, Any]) -> ToolResult:
        name, prompt = args["agent"], args["prompt"]
        key = (name, prompt)
        child = handle.task_children.get(key)
        if child is None or child.status == "closed" or child in claimed:
            # A new child. Re-attach only to one that a task call cut short left open and that
            # no other call is waiting for: its wake (running or done) answers this prompt, so
            # the prompt is not sent again; two identical calls get two children.
            child = runtime.spawn(handle, name)
            handle.task_children[key] = child
            runtime.wake(child, prompt)
        claimed.add(child)
        try:
            result = await runtime.wait(child)
            if result.status != "pending":  # a pending child stays open for the host's answers
                await runtime.close(child)
        finally:
            claimed.discard(child)
        if handle.task_children.get(key) is child:
            del handle.task_children[key]
        metadata: dict[str, Any] = {
            "agent_id": child.id,
            "status": result.status,
            "turns": result.turns,
            "usage": {
                "input_tokens": result.usage.input_tokens,
                "output_tokens": result.usage.output_tokens,
            },
        }
        if result.status == "pending":
            waiting = ", ".join(f"{c.name} ({c.id})" for c in result.pending)
            metadata["pending"] = [c.id for c in result.pending]
            return ToolResult(
                f"{child.id} is waiting for the host's answers to its calls {waiting}; it "
                "carries on when the host resumes it",
                True,
                metadata,
            )
        if result.status != "done":
            reason = result.error or result.status
            return ToolResult(f"{child.id} ended {result.status}: {reason}", True, metadata)
        return ToolResult(result.text, False, metadata)

    return Tool(
        "task",
        "Delegate a piece of work to a member of your team and wait for its answer. Several task "
        f"calls run at once. Team: {', '.join(team)}.",
        {
            "type": "object",
            "properties": {
                "agent": {"type": "string", "enum": team, "description": "Who should do it."},
                "prompt": {"type": "string", "description": "The complete instructions."},
            },
            "required": ["agent", "prompt"],
            "additionalProperties": False,
        },
        execute=execute,
        concurrency_safe=_always,
        source="agents",
    )
