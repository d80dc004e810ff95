"""Bindings: the functions a program is given, one per tool, and how a sub-call reaches its tool.

Granted tools dispatch through ``dispatch`` (in a real run, the run's scheduler lane). Denied
tools are stubs that fail with "tool 'NAME' is denied by the permission policy" without reaching
the lane: both are present, so a program never meets an undefined function and cannot tell
"denied" from "failed" by the shape of what it caught.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from toolnexus._tracing import note_caller
from toolnexus.codemode._policy import PermissionPolicy
from toolnexus.scheduling import Outcome
from toolnexus.scheduling._outcome import outcome_from_exception, outcome_from_value
from toolnexus.session import Session
from toolnexus.tools import Tool, ToolResult
from toolnexus.tools._hooks import ToolHooks, maybe_await

__all__ = [
    "ApprovalHandler",
    "Binding",
    "RunContext",
    "bindings",
    "denied_message",
    "direct_dispatch",
    "sub_call_dispatch",
    "unguarded",
]

logger = logging.getLogger("toolnexus.codemode")

_NO_HOOKS = ToolHooks()

ApprovalHandler = Callable[[str, dict[str, Any]], "bool | Awaitable[bool]"]
"""``handler(tool_name, args) -> bool`` (sync or async): only ``True`` approves the call."""

SubDispatch = Callable[[Tool, Any, Any], Awaitable[Outcome]]


def denied_message(name: str) -> str:
    """The failure a program sees when it calls a tool the policy denies."""
    return f"tool '{name}' is denied by the permission policy"


Deps = TypeVar("Deps")


@dataclass(frozen=True)
class RunContext(Generic[Deps]):
    """What every call of one run carries: the caller's dependencies and its guards.

    Tools that take a ``ctx`` parameter receive this object. Annotate it with your
    dependencies' type, and ``ctx.deps`` is typed for your type checker::

        @tool
        async def balance(account: str, ctx: RunContext[Bank]) -> int:
            return await ctx.deps.balance(account)

        await client.run("What is my balance?", tools=[balance], deps=Bank(...))

    Attributes:
        deps: Anything the caller wants its tools to see (a database handle, a user id).
        policy: The [`PermissionPolicy`][toolnexus.codemode.PermissionPolicy] in force (``None``:
            everything allowed).
        approval_handler: Consulted for every call that needs approval; without one, such
            calls are refused.
        hooks: Before/after hooks run around every call.
        parent_token: Set on the context of a program's sub-calls (see ``tag_transport``).
        session: The session log of the conversation; ``run_code`` sends its audit events here.
        call_id: The id of the model's tool call being executed, when known.
        caller: The id of the provider-hosted program that made the call (Anthropic's code
            execution ``tool_id``, OpenAI's program ``caller_id``); ``None`` for a call the
            model made directly.
    """

    deps: Deps = None  # type: ignore[assignment]  # None when the caller gave none
    policy: PermissionPolicy | None = None
    approval_handler: ApprovalHandler | None = None
    hooks: ToolHooks | None = None
    parent_token: str | None = None
    session: Session | None = None
    call_id: str | None = None
    caller: str | None = None

    def dispatch_tool_call(self, tool: Tool, args: dict[str, Any], /) -> Awaitable[Outcome]:
        """Run one call of ``tool`` under this context: approval, hooks, the tool
        (`direct_dispatch`). How ``call_tool`` of tool tiers runs the tool it calls."""
        return direct_dispatch(tool, args, self)


def needs_approval(tool: Tool, policy: PermissionPolicy | None) -> bool:
    """Whether a call of ``tool`` must be approved before it runs, under ``policy``."""
    return policy.needs_approval(tool) if policy is not None else tool.requires_approval


async def _approved(tool: Tool, args: dict[str, Any], ctx: RunContext[Any]) -> str | None:
    """``None`` when the call may run, else the message of its refusal."""
    if not needs_approval(tool, ctx.policy):
        return None
    if ctx.approval_handler is None:
        return (
            f"call to '{tool.name}' needs approval and no approval handler is configured; "
            "it was not run"
        )
    asked = time.time()
    failed = False
    try:
        verdict = await maybe_await(ctx.approval_handler(tool.name, dict(args)))
    except Exception:
        logger.exception("approval handler raised for tool %r; refusing the call", tool.name)
        verdict, failed = None, True
    if ctx.session is not None:  # bookkeeping: who was asked, how long the answer took
        ctx.session.log_event(
            "approval",
            {
                "tool": tool.name,
                "approved": verdict is True,
                "asked": asked,
                "answered": time.time(),
            },
        )
    if verdict is True:
        return None
    if failed:
        return f"call to '{tool.name}' was not approved (the approval handler failed)"
    return f"call to '{tool.name}' was not approved"


async def direct_dispatch(tool: Tool, args: dict[str, Any], run_ctx: Any = None) -> Outcome:
    """Run one call with no scheduling in front of it: approval, before-hooks, the tool,
    after-hooks. Never raises (cancellation aside); every failure is an error ``Outcome``.

    A call the approval handler refuses runs nothing, hooks included. A before-hook that raises
    refuses the call, and one that returns an ``Outcome`` or ``ToolResult`` answers it: either
    way the tool does not run, and the after-hooks see the result.

    This is what a run's scheduler lane dispatches to, so a program's sub-calls get exactly the
    approval and hooks a model's direct calls get. ``run_ctx`` is a
    [`RunContext`][toolnexus.codemode.RunContext]; any other object becomes the ``deps`` of a fresh
    one (no hooks, no approval handler). Tools that take a ``ctx`` parameter receive the
    [`RunContext`][toolnexus.codemode.RunContext].
    """
    return await _dispatch(tool, args, run_ctx, checked=False)


def sub_call_dispatch(tool: Tool, args: dict[str, Any], run_ctx: Any) -> Awaitable[Any]:
    """A Code Mode lane's dispatch: `direct_dispatch`, or, for a call that no hook, approval
    or hosted caller stands in front of, the tool's own coroutine once its arguments pass the
    schema (raising `ToolArgumentsError` here when they do not).

    Why: `direct_dispatch` would only turn the value or the exception into an outcome, which
    the lane does the same way; the tool's own coroutine spares five coroutine frames per
    sub-call. Only for a tool that is called as it is (async, no timeout, no parsed model):
    any other would validate its arguments again.
    """
    if tool._direct and isinstance(run_ctx, RunContext) and unguarded(tool, run_ctx):
        tool._validator(args)
        return tool._start_checked(args, run_ctx)
    return direct_dispatch(tool, args, run_ctx)


def unguarded(tool: Tool, ctx: RunContext[Any]) -> bool:
    """Whether nothing stands in front of a call of ``tool`` under ``ctx``: no hosted caller,
    no before- or after-hook, no approval. Such a call may be handed to the lane as the tool's
    own coroutine (`sub_call_dispatch`, and the client loop's dispatch of checked calls)."""
    hooks, policy = ctx.hooks, ctx.policy
    return (
        ctx.caller is None
        and (hooks is None or not (hooks.before or hooks.after))
        # `needs_approval`, spelled out: it runs once per call of every such lane
        and not (tool.requires_approval if policy is None else policy.needs_approval(tool))
    )


async def checked_dispatch(tool: Tool, args: dict[str, Any], run_ctx: Any = None) -> Outcome:
    """`direct_dispatch` of a call whose arguments passed ``tool.validate_arguments`` already
    (the client loop checks a model's call before it takes a place in the lane): the schema is
    not checked again unless a before-hook replaced the arguments."""
    return await _dispatch(tool, args, run_ctx, checked=True)


async def _dispatch(tool: Tool, args: dict[str, Any], run_ctx: Any, *, checked: bool) -> Outcome:
    ctx = run_ctx if isinstance(run_ctx, RunContext) else RunContext(deps=run_ctx)
    if ctx.caller is not None:
        note_caller(ctx.caller)
    if needs_approval(tool, ctx.policy):
        refusal = await _approved(tool, args, ctx)
        if refusal is not None:
            return Outcome.failure(tool.name, refusal)
    hooks = ctx.hooks or _NO_HOOKS
    outcome: Outcome | None = None
    try:
        for before in hooks.before:
            replacement = await maybe_await(before(tool.name, args, ctx))
            if isinstance(replacement, dict):
                args, checked = replacement, False  # new arguments: checked when it runs
            elif isinstance(replacement, (Outcome, ToolResult)):  # answered: the tool is skipped
                outcome = outcome_from_value(tool.name, replacement)
                break
    except Exception as exc:  # a refusal: the tool does not run, after-hooks still see it
        outcome = outcome_from_exception(tool.name, exc)
    if outcome is None:
        try:
            run = tool._invoke_checked if checked else tool.invoke
            outcome = outcome_from_value(tool.name, await run(args, ctx))
        except Exception as exc:
            outcome = outcome_from_exception(tool.name, exc)
    try:
        for after in hooks.after:
            replacement = await maybe_await(after(tool.name, args, outcome, ctx))
            if isinstance(replacement, Outcome):
                outcome = replacement
    except Exception as exc:
        outcome = outcome_from_exception(tool.name, exc)
    return outcome


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
        return Outcome.failure(name, denied_message(name))

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
