"""Sub-agents: a runtime of agent handles (spawn / wake / wait / post / interrupt / close) and
the ``task`` tool. See ``docs/agents.md``."""

from toolnexus.agents._definition import AgentDefinition, Budget, agent
from toolnexus.agents._runtime import AgentError, AgentRuntime, Handle, TaskResult, TaskStatus
from toolnexus.agents._task import task_tool

__all__ = [
    "AgentDefinition",
    "AgentError",
    "AgentRuntime",
    "Budget",
    "Handle",
    "TaskResult",
    "TaskStatus",
    "agent",
    "task_tool",
]
