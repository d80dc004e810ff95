"""The ``task`` tool: delegate to a team member and wait for its answer (always concurrent)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from toolnexus.tools import Tool, ToolResult

if TYPE_CHECKING:
    from toolnexus.agents._runtime import AgentRuntime, Handle

__all__ = ["task_tool"]


def _always(args: Any) -> bool:
    return True


def task_tool(runtime: AgentRuntime, handle: Handle) -> Tool:
    """``task(agent, prompt)`` for ``handle``: spawn (or re-attach), wake, wait, close.

    Always concurrent: a response with three ``task`` calls gets three sub-agents at once
    (within the runtime's caps); it is never a barrier, whatever its arguments.
    """
    team = list(handle.definition.team)

    async def execute(args: dict[str, Any]) -> ToolResult:
        name, prompt = args["agent"], args["prompt"]
        key = (name, prompt)
        child = handle.task_children.get(key)
        if child is None or child.status == "closed":  # else: re-attach to the one still open
            child = runtime.spawn(handle, name)
            handle.task_children[key] = child
        runtime.wake(child, prompt)
        result = await runtime.wait(child)
        await runtime.close(child)
        handle.task_children.pop(key, None)
        metadata = {
            "agent_id": child.id,
            "status": result.status,
            "turns": result.turns,
            "usage": {
                "input_tokens": result.usage.input_tokens,
                "output_tokens": result.usage.output_tokens,
            },
        }
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
