"""Agent definitions and budgets."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from toolnexus._checks import int_at_least
from toolnexus.errors import ConfigurationError
from toolnexus.tools import Tool

__all__ = ["AgentDefinition", "Budget", "agent"]


@dataclass(frozen=True)
class Budget:
    """Limits for an agent and everything below it; ``None`` means no limit.

    A child's budget is carved from its parent's remaining budget (the smaller of the two wins),
    and a child's usage counts against every ancestor *as it is spent*: every model request
    and tool call is checked against the agent and all its ancestors first, so recursive
    delegation stops as soon as the tree's budget is used up.

    Attributes:
        max_turns: Model round trips per wake.
        max_tokens: Tokens (input + output), used over the agent's whole life.
        max_tool_calls: Tool calls over the agent's whole life.
        max_children: Children it may spawn.
        max_depth: How deep below it agents may be spawned.
    """

    max_turns: int | None = None
    max_tokens: int | None = None
    max_tool_calls: int | None = None
    max_children: int | None = None
    max_depth: int | None = None

    def __post_init__(self) -> None:
        if self.max_turns is not None and not int_at_least(self.max_turns, 1):
            raise ConfigurationError(
                f"Budget max_turns must be None or an int >= 1, got {self.max_turns!r}: a wake "
                "is at least one model request (to stop an agent from running, do not wake it)."
            )
        for name in ("max_tokens", "max_tool_calls", "max_children", "max_depth"):
            value = getattr(self, name)
            if value is not None and not int_at_least(value, 0):
                raise ConfigurationError(
                    f"Budget {name} must be None or an int >= 0, got {value!r}."
                )


@dataclass(frozen=True)
class AgentDefinition:
    """What [`agent`][toolnexus.agents.agent] defines."""

    name: str
    instructions: str
    tools: tuple[Tool, ...] = ()
    team: tuple[str, ...] = ()
    model: str | None = None
    code_mode: str | None = None
    budget: Budget | None = None
    members: tuple[AgentDefinition, ...] = ()
    """Team members given as definitions (``team`` holds every member's name)."""


def agent(
    name: str,
    *,
    instructions: str,
    tools: Sequence[Tool] = (),
    team: Sequence[str | AgentDefinition] = (),
    model: str | None = None,
    code_mode: str | None = None,
    budget: Budget | None = None,
) -> AgentDefinition:
    """Define an agent: its system instructions, its tools, and the agents it may delegate to.

    Args:
        name: How the agent is spawned and named in ids (no ``/``).
        instructions: Its system prompt.
        tools: Its own tools (an agent with a team also gets the ``task`` tool).
        team: The agents it may delegate to with ``task``: names of agents given to the
            runtime, or definitions (the runtime then knows them too, their own teams
            included).
        model: Overrides the client's model (same endpoint).
        code_mode: Overrides the client's code mode.
        budget: Its default budget.

    Raises:
        ConfigurationError: a bad name or field.
    """
    if not isinstance(name, str) or not name or "/" in name:
        raise ConfigurationError(
            f"agent name must be a non-empty string without '/', got {name!r}."
        )
    if not isinstance(instructions, str):
        raise ConfigurationError(f"agent {name!r}: instructions must be a string.")
    if isinstance(team, str):
        raise ConfigurationError(
            f"agent {name!r}: team must be a list of agents (names or definitions), e.g. "
            f"[{team!r}]."
        )
    names: list[str] = []
    members: list[AgentDefinition] = []
    for member in team:
        if isinstance(member, AgentDefinition):
            members.append(member)
            names.append(member.name)
        elif isinstance(member, str) and member:
            names.append(member)
        else:
            raise ConfigurationError(
                f"agent {name!r}: a team member must be an agent name or an agent(...) "
                f"definition, got {member!r}."
            )
    return AgentDefinition(
        name,
        instructions,
        tuple(tools),
        tuple(names),
        model,
        code_mode,
        budget,
        tuple(members),
    )
