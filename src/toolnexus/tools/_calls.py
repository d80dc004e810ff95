"""The call pipeline: what stands between a tool call and its tool, for every kind of call.

Every call reaches its tool here, whoever made it: the model (a native call, or ``call_tool``
of tool tiers), a program the provider hosts (Anthropic's code execution, OpenAI's programmatic
tool calling), a Code Mode program of ours, or a client of the MCP gateway. In order:

1. **callers**: a call the model made must come from a caller the tool lists in
   [`Tool.callers`][toolnexus.tools.Tool.callers]: ``"direct"`` for the model itself,
   ``"hosted"`` for a provider-hosted program (`refuse_caller`; a run that hosts no programs
   offers every tool to the model, so its direct calls are not checked). The provider's own
   ``allowed_callers`` is only a request to the provider; this is where it is enforced. A
   Code Mode program's sub-calls are not checked against it: that program is the model's call
   of ``run_code``, and what it may call is the permission policy's to say (its denied tools
   are stubs);
2. **approval**: a call that needs it (`needs_approval`) runs only when the approval handler
   says ``True``;
3. **before-hooks**: they may replace the arguments, answer the call, or refuse it;
4. **the tool**, its arguments validated against its schema unless the submission says they
   were already (`Prechecked`);
5. **after-hooks**: they may replace the outcome.

Why one module: the rule used to be spread over four packages, and a check that lives nowhere
in particular is a check some path forgets. Why ``Prechecked`` is a value and not a guess: a
model's calls are validated before they take a place in a lane (so that an invalid call takes
none), and validating them again when they run would only cost time; the submission says so
itself, so no other path (a Code Mode sub-call, ``call_tool``, a hook's new arguments) can
skip the check by looking like one.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from toolnexus._tracing import note_caller
from toolnexus.session import Session, events
from toolnexus.tools._hooks import ToolHooks, maybe_await
from toolnexus.tools._outcome import Outcome, outcome_from_exception, outcome_from_value, outcome_of
from toolnexus.tools._policy import PermissionPolicy
from toolnexus.tools._tool import Tool, ToolResult

__all__ = [
    "ApprovalHandler",
    "Prechecked",
    "RunContext",
    "caller_refusal",
    "direct_dispatch",
    "dispatch_call",
    "needs_approval",
    "refuse_caller",
    "start_prechecked",
    "unguarded",
]

logger = logging.getLogger("toolnexus.codemode")

_NO_HOOKS = ToolHooks()

ApprovalHandler = Callable[[str, dict[str, Any]], "bool | Awaitable[bool]"]
"""``handler(tool_name, args) -> bool`` (sync or async): only ``True`` approves the call."""

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
        """Run one call of ``tool`` under this context, as the model's own call: its caller
        is checked against ``tool.callers``, then approval, hooks and the tool
        (`direct_dispatch`). How ``call_tool`` of tool tiers runs the tool it calls."""
        refused = refuse_caller(tool, self.caller, self.session, self.call_id)
        if refused is not None:
            return _at_once(refused)
        return direct_dispatch(tool, args, self)


def _context(run_ctx: Any) -> RunContext[Any]:
    """``run_ctx`` as a `RunContext`: any other object becomes the ``deps`` of a fresh one."""
    return run_ctx if isinstance(run_ctx, RunContext) else RunContext(deps=run_ctx)


async def _at_once(outcome: Outcome) -> Outcome:
    return outcome


# -- 1. callers ---------------------------------------------------------------------------------


def caller_refusal(tool: Tool, program: str | None, *, hosting: bool) -> str | None:
    """Why the model's call of ``tool`` may not run, or ``None`` when `Tool.callers` allows it.

    ``program`` is the id of the provider-hosted program that made the call (``None``: the
    model itself); ``hosting``, whether the run offers tools to hosted programs at all
    (``create_client(hosted_code=True)``). A hosted program may call only tools whose callers
    include ``"hosted"``; the model itself, only tools whose callers include ``"direct"``,
    when the run hosts programs: without hosting, every tool is offered to the model directly,
    so ``callers`` is not consulted for its calls.
    """
    callers = tool.callers
    if program is not None:
        if "hosted" in callers:
            return None
        return (
            f"tool '{tool.name}' may not be called from the hosted program {program!r}: its "
            f"callers are {list(callers)} (add 'hosted' to Tool.callers to allow it); it "
            "was not run"
        )
    if not hosting or "direct" in callers:
        return None
    return (
        f"tool '{tool.name}' may be called only from a hosted program (its callers are "
        f"{list(callers)}), not by the model directly; it was not run"
    )


def refuse_caller(
    tool: Tool,
    program: str | None,
    session: Session | None,
    call_id: str | None,
    *,
    hosting: bool = False,
) -> Outcome | None:
    """The failure of a call `caller_refusal` refuses, audited as a ``call_refused`` event in
    ``session`` (naming the tool and the caller), or ``None`` when the call may run."""
    message = caller_refusal(tool, program, hosting=hosting)
    if message is None:
        return None
    if session is not None:
        refused = events.CallRefusedData(
            id=call_id,
            name=tool.name,
            caller="direct" if program is None else "hosted",
            program=program,
            message=message,
        )
        session.log_event(events.CALL_REFUSED, refused)
    return Outcome.failure(tool.name, message, "refused")


# -- 2. approval --------------------------------------------------------------------------------


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
        answer = events.ApprovalData(
            tool=tool.name, approved=verdict is True, asked=asked, answered=time.time()
        )
        ctx.session.log_event(events.APPROVAL, answer)
    if verdict is True:
        return None
    if failed:
        return f"call to '{tool.name}' was not approved (the approval handler failed)"
    return f"call to '{tool.name}' was not approved"


# -- 3.-5. hooks around the tool ----------------------------------------------------------------


def _failure(tool: Tool, exc: BaseException) -> Outcome:
    """A hook's or the tool's exception as the call's failure; the host's own exit, interrupt
    or cancellation is not a failure of the call, and goes on."""
    if isinstance(exc, (KeyboardInterrupt, SystemExit, asyncio.CancelledError)):
        raise exc
    return outcome_from_exception(tool.name, exc)


async def _guarded(
    tool: Tool, args: dict[str, Any], ctx: RunContext[Any], *, checked: bool
) -> Outcome:
    """Approval, before-hooks, the tool, after-hooks; never raises (the host's exit aside)."""
    if ctx.caller is not None:
        note_caller(ctx.caller)
    if needs_approval(tool, ctx.policy):
        refusal = await _approved(tool, args, ctx)
        if refusal is not None:
            return Outcome.failure(tool.name, refusal, "denied")
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
    except BaseException as exc:  # a refusal: the tool does not run, after-hooks still see it
        outcome = _failure(tool, exc)
    if outcome is None:
        try:
            run = tool._invoke_checked if checked else tool.invoke
            outcome = outcome_of(tool.name, await run(args, ctx))
        except BaseException as exc:
            outcome = _failure(tool, exc)
    try:
        for after in hooks.after:
            replacement = await maybe_await(after(tool.name, args, outcome, ctx))
            if isinstance(replacement, Outcome):
                outcome = replacement
    except BaseException as exc:
        outcome = _failure(tool, exc)
    return outcome


async def direct_dispatch(tool: Tool, args: dict[str, Any], run_ctx: Any = None) -> Outcome:
    """Run one call with no scheduling in front of it: approval, before-hooks, the tool,
    after-hooks. Never raises (the host's exit and cancellation aside); every failure is an
    error ``Outcome``, whatever the tool raised.

    A call the approval handler refuses runs nothing, hooks included. A before-hook that raises
    refuses the call, and one that returns an ``Outcome`` or ``ToolResult`` answers it: either
    way the tool does not run, and the after-hooks see the result.

    ``run_ctx`` is a [`RunContext`][toolnexus.codemode.RunContext]; any other object becomes
    the ``deps`` of a fresh one (no hooks, no approval handler). Tools that take a ``ctx``
    parameter receive the [`RunContext`][toolnexus.codemode.RunContext]. The caller is not
    checked here: a model's call is checked as it arrives (`refuse_caller`).
    """
    return await _guarded(tool, args, _context(run_ctx), checked=False)


# -- the lanes' dispatch ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Prechecked:
    """The run context of a submission whose arguments passed the tool's schema already.

    Made by whoever checked them (the agent loop checks a model's call before it takes a
    place in the lane), for that one submission; `dispatch_call` unwraps it, so the tool
    receives ``ctx`` itself, and validates the arguments of every other submission.
    """

    ctx: RunContext[Any]


def unguarded(tool: Tool, ctx: RunContext[Any]) -> bool:
    """Whether nothing stands in front of a call of ``tool`` under ``ctx``: no hosted caller
    (its calls are traced as such), no before- or after-hook, no approval."""
    hooks, policy = ctx.hooks, ctx.policy
    return (
        ctx.caller is None
        and (hooks is None or not (hooks.before or hooks.after))
        # `needs_approval`, spelled out: it runs once per call of every lane
        and not (tool.requires_approval if policy is None else policy.needs_approval(tool))
    )


def dispatch_call(tool: Tool, args: dict[str, Any], run_ctx: Any) -> Awaitable[Any]:
    """The dispatch of an agent turn's lane and of a Code Mode program's lane.

    The call goes through approval, hooks and the tool (`direct_dispatch`); its arguments are
    validated unless ``run_ctx`` is `Prechecked`. A call that nothing stands in front of
    (`unguarded`) of a tool that is called as it is (async, no timeout, no parsed model) is
    handed to the lane as the tool's own coroutine once its arguments pass (raising
    ``ToolArgumentsError`` here when they do not): `direct_dispatch` would only turn its
    value or exception into an outcome, which the lane does the same way, and the tool's own
    coroutine spares five coroutine frames per call.
    """
    checked = type(run_ctx) is Prechecked
    ctx = run_ctx.ctx if checked else _context(run_ctx)
    if tool._direct and unguarded(tool, ctx):
        if not checked:
            tool._validator(args)
        return tool._start_checked(args, ctx)
    return _guarded(tool, args, ctx, checked=checked)


start_prechecked: Callable[[Tool, dict[str, Any], Any], Awaitable[Any]] = Tool._start_checked
"""``start_prechecked(tool, args, run_ctx)``: start a call with nothing in front of it whose
arguments passed the tool's schema already (a batch's calls, checked before they take a place
in its lane), as the tool's own coroutine where it can be, so the lane awaits it directly. The
method itself, not a function calling it: it is one frame of every batch call."""
