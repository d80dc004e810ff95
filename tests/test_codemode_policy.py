"""PermissionPolicy, bindings and direct_dispatch."""

from __future__ import annotations

from typing import Any

import pytest

from toolnexus import Tool, tool
from toolnexus.codemode import (
    PermissionPolicy,
    RunContext,
    bindings,
    denied_message,
    direct_dispatch,
    filter_tools,
)
from toolnexus.errors import ConfigurationError
from toolnexus.scheduling import Outcome
from toolnexus.tools import ToolHooks


def named(name: str, **options: Any) -> Tool:
    return Tool(name, "", {"type": "object"}, execute=lambda args: name, **options)


def test_default_policy_allows_all_but_denied() -> None:
    policy = PermissionPolicy(deny=["rm"], deny_prefixes=["mcp__github__"])
    assert policy.allows("read")
    assert not policy.allows("rm")
    assert not policy.allows("mcp__github__push")
    assert not policy.needs_approval(named("read"))
    assert policy.needs_approval(named("deploy", requires_approval=True))


def test_allow_list_and_strict_mode() -> None:
    allow = PermissionPolicy(allow=["read", "rm"], deny=["rm"])
    assert allow.allows("read") and not allow.allows("rm") and not allow.allows("write")
    strict = PermissionPolicy(mode="strict")
    assert not strict.allows("read")
    assert strict.needs_approval(named("read"))
    assert PermissionPolicy(mode="strict", allow=["read"]).allows("read")


def test_permissive_mode_needs_no_approval() -> None:
    policy = PermissionPolicy(mode="permissive", approval_required=["deploy"])
    assert not policy.needs_approval(named("deploy", requires_approval=True))
    assert PermissionPolicy(approval_required=["deploy"]).needs_approval(named("deploy"))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"mode": "lenient"}, "mode must be one of"),
        ({"deny": "rm"}, "deny must be a list of tool names"),
        ({"allow": [1]}, "allow must hold strings"),
    ],
)
def test_bad_policies_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        PermissionPolicy(**options)


def test_filter_tools() -> None:
    tools = [named("a"), named("b")]
    assert filter_tools(tools, None) == tools
    assert filter_tools(tools, PermissionPolicy(deny=["a"])) == [tools[1]]


async def test_bindings_cover_every_tool_and_stub_the_denied_ones() -> None:
    dispatched: list[str] = []

    async def dispatch(t: Tool, args: Any, ctx: Any) -> Outcome:
        dispatched.append(t.name)
        return Outcome(value=t.name)

    binds = bindings(
        [named("b"), named("a"), named("a")], PermissionPolicy(deny=["b"]), None, dispatch=dispatch
    )
    assert [(b.name, b.granted) for b in binds] == [("a", True), ("b", False)]
    assert await binds[0].call({}) == Outcome(value="a")
    assert await binds[1].call({}) == Outcome.failure("b", denied_message("b"))
    assert dispatched == ["a"]


async def test_bindings_default_to_direct_dispatch() -> None:
    binds = bindings([named("a")])
    assert await binds[0].call({}) == Outcome(value="a")


async def test_direct_dispatch_never_raises_and_folds_every_shape() -> None:
    @tool
    def boom() -> str:
        """Fails."""
        raise KeyError("missing")

    assert (await direct_dispatch(boom, {}, None)).error == {"tool": "boom", "message": "'missing'"}

    def after(name: str, args: Any, outcome: Outcome, ctx: Any) -> Outcome:
        raise RuntimeError("after-hook broke")

    ctx = RunContext(hooks=ToolHooks(after=[after]))
    failed = await direct_dispatch(named("a"), {}, ctx)
    assert failed.error == {"tool": "a", "message": "after-hook broke"}


async def test_direct_dispatch_passes_deps_to_tools_that_take_a_context() -> None:
    seen: list[Any] = []

    def execute(args: dict[str, Any], ctx: Any) -> str:
        seen.append(ctx)
        return "ok"

    t = Tool("t", "", {"type": "object"}, execute=execute)
    await direct_dispatch(t, {}, "plain deps")
    run_ctx = RunContext(deps={"db": 1})
    await direct_dispatch(t, {}, run_ctx)
    assert seen[0].deps == "plain deps"
    assert seen[1] is run_ctx


async def test_an_approval_handler_that_raises_refuses_the_call() -> None:
    ran: list[str] = []

    def execute(args: dict[str, Any]) -> str:
        ran.append("ran")
        return "ok"

    t = Tool("t", "", {"type": "object"}, execute=execute, requires_approval=True)

    def handler(name: str, args: Any) -> bool:
        raise RuntimeError("no UI")

    outcome = await direct_dispatch(t, {}, RunContext(approval_handler=handler))
    assert outcome.error == {
        "tool": "t",
        "message": "call to 't' was not approved (the approval handler failed)",
    }
    truthy = await direct_dispatch(t, {}, RunContext(approval_handler=lambda n, a: "yes"))
    assert truthy.error is not None  # only True approves
    assert ran == []


def test_tool_hooks_validate() -> None:
    with pytest.raises(ConfigurationError, match="ToolHooks before must hold callables"):
        ToolHooks(before=["nope"])  # type: ignore[list-item]


async def test_a_before_hook_may_answer_the_call_itself() -> None:
    ran: list[str] = []

    def execute(args: dict[str, Any]) -> str:
        ran.append("ran")
        return "real"

    t = Tool("t", "", {"type": "object"}, execute=execute)
    seen: list[Any] = []

    def cached(name: str, args: Any, ctx: Any) -> Outcome:
        return Outcome(value="cached")

    def after(name: str, args: Any, outcome: Outcome, ctx: Any) -> None:
        seen.append(outcome.value)

    ctx = RunContext(hooks=ToolHooks(before=[cached], after=[after]))
    assert await direct_dispatch(t, {}, ctx) == Outcome(value="cached")
    assert ran == [] and seen == ["cached"]
