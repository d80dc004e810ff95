"""Bindings: the functions a program is given, one per tool, and how a sub-call reaches its tool.

Granted tools dispatch through ``dispatch`` (in a real run, the run's scheduler lane, whose
dispatch is the call pipeline's `dispatch_call`). Denied tools are stubs that fail with "tool
'NAME' is denied by the permission policy" without reaching the lane: both are present, so a
program never meets an undefined function and cannot tell "denied" from "failed" by the shape
of what it caught.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from toolnexus.tools import Outcome, PermissionPolicy, Tool, direct_dispatch

__all__ = ["Binding", "bindings", "denied_message"]

SubDispatch = Callable[[Tool, Any, Any], Awaitable[Outcome]]


def denied_message(name: str) -> str:
    """The failure a program sees when it calls a tool the policy denies."""
    return f"tool '{name}' is denied by the permission policy"


@dataclass(frozen=True)
class Binding:
    """One function of a program's ``tools`` global.

    Attributes:
        name: The tool's exact name.
        granted: Whether the policy allows it (a denied binding is a failing stub).
        call: ``await call(args) -> Outcome``; never raises.
    """

    name: str
    granted: bool
    call: Callable[[Any], Awaitable[Outcome]]


def _granted(tool: Tool, run_ctx: Any, dispatch: SubDispatch) -> Binding:
    def call(args: Any) -> Awaitable[Outcome]:  # dispatch's own awaitable: no frame of its own
        return dispatch(tool, args, run_ctx)

    return Binding(tool.name, True, call)


def _stub(name: str) -> Binding:
    async def call(args: Any) -> Outcome:
        return Outcome.failure(name, denied_message(name), "denied")

    return Binding(name, False, call)


def bindings(
    tools: Sequence[Tool],
    policy: PermissionPolicy | None = None,
    run_ctx: Any = None,
    *,
    dispatch: SubDispatch | None = None,
) -> list[Binding]:
    """The bindings a program is given: one per tool (first of a name wins), sorted by name.

    Args:
        tools: Every tool, before the permission filter: denied ones become stubs.
        policy: The policy in force; ``None`` grants everything.
        run_ctx: Passed to ``dispatch`` with every call.
        dispatch: How a granted call reaches its tool. A real run passes its scheduler's
            [`dispatch_fun`][toolnexus.scheduling.Scheduler.dispatch_fun]; the default,
            [`direct_dispatch`][toolnexus.codemode.direct_dispatch], runs calls unscheduled (right
            for a test or a direct caller, wrong for a run).
    """
    route: SubDispatch = dispatch if dispatch is not None else direct_dispatch
    seen: dict[str, Binding] = {}
    for t in tools:
        if t.name in seen:
            continue
        allowed = policy is None or policy.allows(t.name)
        seen[t.name] = _granted(t, run_ctx, route) if allowed else _stub(t.name)
    return [seen[name] for name in sorted(seen)]
