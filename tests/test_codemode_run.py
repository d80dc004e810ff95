"""run_program and the run_code tool: the lane, the audit trail, policy, approval, hooks."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from helpers import Probe
from toolnexus import Session, ToolHints, ToolResult, tool
from toolnexus.codemode import (
    RUN_CODE_NAME,
    PermissionPolicy,
    RunContext,
    _run_code,
    await_timeout,
    render_sdk,
    run_code_tool,
    run_program,
    visible_tools,
)
from toolnexus.codemode.runtimes import MontyRuntime, V8Runtime
from toolnexus.errors import ConfigurationError
from toolnexus.scheduling import Outcome
from toolnexus.tools import ToolHooks


@tool(hints=ToolHints(read_only=True))
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def remember(fact: str) -> str:
    """Store a fact."""
    return f"stored {fact}"


async def test_sub_calls_are_audited_in_the_callers_session_outside_model_history(
    monty_runtime: MontyRuntime,
) -> None:
    session = Session()
    session.append("user_message", {"content": "hi"})
    before = session.messages()
    assert before == [{"role": "user", "content": "hi"}]
    out = await run_program(
        "import asyncio\nr = await asyncio.gather(tools.add({'a': 1, 'b': 2}), "
        "tools.remember({'fact': 'x'}))\nr",
        [add, remember],
        runtime=monty_runtime,
        session=session,
        call_id="call_7",
    )
    assert out == {"result": [3, "stored x"], "logs": []}
    audit = [e for e in session.events if e.type == "tool_call"]
    assert [(e.data["id"], e.data["name"], e.data["arguments"], e.data["mode"]) for e in audit] == [
        ("call_7:code:1", "add", {"a": 1, "b": 2}, "parallel"),
        ("call_7:code:2", "remember", {"fact": "x"}, "exclusive"),
    ]
    assert session.messages() == before


async def test_the_calls_list_reports_ok_error_and_abandoned(probe: Probe) -> None:
    slow = probe.tool("slow")

    @tool
    def explode() -> str:
        """Fails."""
        raise ValueError("kaboom")

    runtime = MontyRuntime(timeout=0.5)
    try:
        out = await run_program(
            "await tools.add({'a': 1, 'b': 1})\n"
            "try:\n    await tools.explode({})\nexcept ToolError:\n    pass\n"
            "await tools.slow({'gate': 'never'})",
            [add, slow, explode],
            runtime=runtime,
        )
    finally:
        await runtime.aclose()
    assert out["error"]["kind"] == "timeout"
    assert out["calls"] == [
        {"name": "add", "arguments": {"a": 1, "b": 1}, "status": "ok"},
        {"name": "explode", "arguments": {}, "status": "error", "message": "kaboom"},
        {"name": "slow", "arguments": {"gate": "never"}, "status": "abandoned"},
    ]
    assert probe.active == set()  # the lane was stopped and the running call cancelled


async def test_the_lane_is_stopped_even_when_the_run_fails(monty_runtime: MontyRuntime) -> None:
    lanes: list[Any] = []
    real = _run_code.Scheduler

    class Recording(real):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            lanes.append(self)

    _run_code.Scheduler = Recording  # type: ignore[misc]
    try:
        await run_program("1 / 0", [add], runtime=monty_runtime)
        await run_program("1", [add], runtime=monty_runtime)
    finally:
        _run_code.Scheduler = real  # type: ignore[misc]
    assert len(lanes) == 2
    assert all(lane.stopped for lane in lanes)


async def test_denied_tools_are_stubs_that_fail_like_failures_without_an_audit_event(
    runtime: Any,
) -> None:
    session = Session()
    code = (
        "try:\n    await tools['remember']({'fact': 'x'})\nexcept ToolError as e:\n    r = str(e)\nr"
        if runtime.language == "python"
        else "try { await tools.remember({fact: 'x'}) } catch (e) { return [e.tool, e.message] }"
    )
    out = await run_program(
        code,
        [add, remember],
        runtime=runtime,
        policy=PermissionPolicy(deny=["remember"]),
        session=session,
    )
    message = "tool 'remember' is denied by the permission policy"
    assert out["result"] == (message if runtime.language == "python" else ["remember", message])
    assert session.events == []


async def test_the_sdk_declares_only_granted_tools(monty_runtime: MontyRuntime) -> None:
    policy = PermissionPolicy(deny=["remember"])
    built = run_code_tool([add, remember], policy=policy, runtime=monty_runtime)
    assert built.description.endswith(render_sdk("python", [add]))
    out = await run_program(
        "await tools.remember({'fact': 'x'})",
        [add, remember],
        runtime=monty_runtime,
        policy=policy,
    )
    assert out["error"]["kind"] == "type_error"
    assert "remember" in out["error"]["message"]


async def test_approval_is_asked_per_sub_call_with_the_real_name_and_arguments(
    monty_runtime: MontyRuntime,
) -> None:
    ran: list[str] = []

    @tool(requires_approval=True)
    def deploy(env: str) -> str:
        """Deploy."""
        ran.append(env)
        return f"deployed {env}"

    asked: list[tuple[str, dict[str, Any]]] = []

    async def handler(name: str, args: dict[str, Any]) -> bool:
        asked.append((name, args))
        return args["env"] == "staging"

    out = await run_program(
        "a = await tools.deploy({'env': 'staging'})\n"
        "try:\n    b = await tools.deploy({'env': 'prod'})\nexcept ToolError as e:\n    b = str(e)\n"
        "[a, b]",
        [deploy],
        runtime=monty_runtime,
        approval_handler=handler,
    )
    assert out["result"] == ["deployed staging", "call to 'deploy' was not approved"]
    assert asked == [("deploy", {"env": "staging"}), ("deploy", {"env": "prod"})]
    assert ran == ["staging"]


async def test_without_an_approval_handler_a_call_needing_approval_is_refused(
    monty_runtime: MontyRuntime,
) -> None:
    out = await run_program(
        "await tools.add({'a': 1, 'b': 2})",
        [add],
        runtime=monty_runtime,
        policy=PermissionPolicy(approval_required=["add"]),
    )
    assert out["error"]["message"] == (
        "tool 'add' failed: call to 'add' needs approval and no approval handler is configured; "
        "it was not run"
    )


async def test_approving_run_code_does_not_approve_what_the_program_calls(
    monty_runtime: MontyRuntime,
) -> None:
    asked: list[str] = []

    def handler(name: str, args: dict[str, Any]) -> bool:
        asked.append(name)
        return name == RUN_CODE_NAME

    policy = PermissionPolicy(mode="strict", allow=[RUN_CODE_NAME, "add"])
    run_code = run_code_tool([add], policy=policy, runtime=monty_runtime)
    ctx = RunContext(policy=policy, approval_handler=handler)
    assert handler(RUN_CODE_NAME, {})  # the agent loop approved run_code itself
    result = await run_code.invoke(
        {"code": "await tools.add({'a': 1, 'b': 2})", "description": "add"}, ctx
    )
    assert isinstance(result, ToolResult)
    assert result.is_error
    assert "call to 'add' was not approved" in result.output["error"]["message"]
    assert asked == [RUN_CODE_NAME, "add"]


async def test_hooks_run_around_every_sub_call(monty_runtime: MontyRuntime) -> None:
    seen: list[tuple[str, str, Any]] = []

    def before(name: str, args: dict[str, Any], ctx: Any) -> dict[str, Any] | None:
        seen.append(("before", name, dict(args)))
        if name == "remember":
            raise PermissionError("remembering is off today")
        return {**args, "b": 100} if name == "add" else None

    async def after(name: str, args: dict[str, Any], outcome: Outcome, ctx: Any) -> Outcome:
        seen.append(("after", name, outcome.value))
        return Outcome(value=outcome.value * 2) if outcome.ok else outcome

    out = await run_program(
        "a = await tools.add({'a': 1, 'b': 2})\n"
        "try:\n    await tools.remember({'fact': 'x'})\n    b = 'ran'\n"
        "except ToolError as e:\n    b = str(e)\n[a, b]",
        [add, remember],
        runtime=monty_runtime,
        hooks=ToolHooks(before=[before], after=[after]),
    )
    assert out["result"] == [202, "remembering is off today"]
    assert seen == [
        ("before", "add", {"a": 1, "b": 2}),
        ("after", "add", 101),
        ("before", "remember", {"fact": "x"}),
        ("after", "remember", None),
    ]


async def test_await_timeout_stops_the_run_and_keeps_its_logs(runtime: Any, probe: Probe) -> None:
    code = (
        "print('started')\nawait tools.slow({'gate': 'never'})"
        if runtime.language == "python"
        else "console.log('started'); await tools.slow({gate: 'never'})"
    )
    out = await run_program(code, [probe.tool("slow")], runtime=runtime, await_timeout=0.3)
    assert out["logs"] == ["started"]
    assert out["error"] == {
        "kind": "timeout",
        "message": "the run took longer than 0.3 s (the caller's await_timeout)",
    }
    assert out["calls"] == [{"name": "slow", "arguments": {"gate": "never"}, "status": "abandoned"}]
    assert probe.active == set()


def test_await_timeout_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOLNEXUS_CODE_RUN_TIMEOUT", raising=False)
    assert await_timeout() == 120.0
    assert await_timeout(5) == 5.0
    monkeypatch.setenv("TOOLNEXUS_CODE_RUN_TIMEOUT", "7.5")
    assert await_timeout() == 7.5
    monkeypatch.setenv("TOOLNEXUS_CODE_RUN_TIMEOUT", "soon")
    with pytest.raises(ConfigurationError, match="TOOLNEXUS_CODE_RUN_TIMEOUT='soon'"):
        await_timeout()
    with pytest.raises(ConfigurationError, match="await_timeout must be a positive number"):
        await_timeout(0)


async def test_run_program_refuses_bad_arguments_before_running(
    monty_runtime: MontyRuntime,
) -> None:
    with pytest.raises(ConfigurationError, match="code must be a string"):
        await run_program(b"1", [], runtime=monty_runtime)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="runtime must be a CodeRuntime"):
        await run_program("1", [], runtime=object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="language must be 'python' or 'javascript'"):
        await run_program("1", [], language="ruby")


async def test_a_program_calling_an_unknown_name_gets_a_clear_error(
    monty_runtime: MontyRuntime,
) -> None:
    out = await run_program("tools['nope']", [add], runtime=monty_runtime)
    assert out["error"]["kind"] == "exception"
    assert "no tool named 'nope'" in out["error"]["message"]


# -- the run_code tool ---------------------------------------------------------------------------


def test_run_code_tool_shape(monty_runtime: MontyRuntime) -> None:
    built = run_code_tool([add, remember], runtime=monty_runtime)
    assert built.name == RUN_CODE_NAME == "run_code"
    assert built.input_schema["required"] == ["code", "description"]
    assert set(built.input_schema["properties"]) == {"code", "description"}
    base, sdk = built.description.split("\n\n", 1)
    assert base == _run_code.RUN_CODE_BASE_DESCRIPTION
    assert sdk == render_sdk("python", [add, remember])
    v8 = run_code_tool([add], runtime=V8Runtime())
    assert v8.description.endswith(render_sdk("javascript", [add]))


@pytest.mark.parametrize("description", ["", "   ", None])
async def test_run_code_refuses_a_blank_description(
    monty_runtime: MontyRuntime, description: str | None, probe: Probe
) -> None:
    built = run_code_tool([probe.tool("t")], runtime=monty_runtime)
    args = {"code": "await tools.t({})", "description": description}
    with pytest.raises(ValueError, match="description is blank"):
        await built.execute(args)
    assert probe.log == []


async def test_run_code_returns_the_output_and_flags_failures(
    monty_runtime: MontyRuntime,
) -> None:
    built = run_code_tool([add], runtime=monty_runtime)
    ok = await built.invoke({"code": "await tools.add({'a': 2, 'b': 3})", "description": "add"})
    assert ok == ToolResult(output={"result": 5, "logs": []}, is_error=False)
    bad = await built.invoke({"code": "1 / 0", "description": "divide"})
    assert bad.is_error
    assert bad.output["error"]["kind"] == "exception"


async def test_run_code_uses_the_session_and_call_id_of_its_context(
    monty_runtime: MontyRuntime,
) -> None:
    session = Session()
    built = run_code_tool([add], runtime=monty_runtime)
    ctx = RunContext(session=session, call_id="toolu_1")
    await built.invoke(
        {"code": "await tools.add({'a': 2, 'b': 3})", "description": " Add two numbers. "}, ctx
    )
    assert [(e.type, e.data["id"]) for e in session.events] == [
        ("code_run", "toolu_1"),
        ("tool_call", "toolu_1:code:1"),
        ("call_timing", "toolu_1:code:1"),
    ]
    assert session.events[0].data == {
        "id": "toolu_1",
        "language": "python",
        "description": "Add two numbers.",
    }
    assert session.messages() == []


# -- what the model sees -------------------------------------------------------------------------


def test_visible_tools_per_mode(monty_runtime: MontyRuntime) -> None:
    granted = [add]
    assert visible_tools("native", [add, remember], granted, runtime=monty_runtime) == [add]
    code = visible_tools("code", [add, remember], granted, runtime=monty_runtime)
    assert [t.name for t in code] == ["run_code"]
    both = visible_tools("both", [add, remember], granted, runtime=monty_runtime)
    assert [t.name for t in both] == ["add", "run_code"]
    assert both[1].description.endswith(render_sdk("python", granted))
    with pytest.raises(ConfigurationError, match="code mode must be one of"):
        visible_tools("codes", [add], granted)


def test_visible_tools_never_advertises_run_code_without_a_runtime(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_run_code, "runtime_available", lambda runtime=None: False)
    assert visible_tools("both", [add], [add]) == [add]
    with pytest.raises(ConfigurationError, match="code mode needs a Code Mode runtime"):
        visible_tools("code", [add], [add])


def test_runtime_available_checks_the_default_runtime() -> None:
    assert _run_code.runtime_available() is True
    assert _run_code.runtime_available(MontyRuntime()) is True


async def test_default_runtime_is_shared_and_works() -> None:
    first = _run_code.default_runtime("python")
    assert first is _run_code.default_runtime("python")
    assert await run_program("6 * 7", []) == {"result": 42, "logs": []}


async def test_sub_call_arguments_that_are_not_an_object_fail_the_call(
    monty_runtime: MontyRuntime,
) -> None:
    out = await run_program(
        "try:\n    await tools.add([1, 2])\nexcept ToolError as e:\n    r = str(e)\nr",
        [add],
        runtime=monty_runtime,
    )
    assert out.get("result") == "arguments must be an object, got list" or (
        out["error"]["kind"] == "type_error"
    )


async def test_invalid_sub_call_arguments_fail_with_field_messages(
    v8_runtime: V8Runtime,
) -> None:
    out = await run_program(
        "try { await tools.add({a: 'one'}) } catch (e) { return e.message }",
        [add],
        runtime=v8_runtime,
    )
    assert "invalid arguments for tool 'add'" in out["result"]
    assert "a:" in out["result"] and "b:" in out["result"]
    _ = asyncio


async def test_a_runtime_that_ignores_patience_is_cut_off_anyway(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Stubborn:
        language = "python"

        async def run(self, code: str, **kwargs: Any) -> Any:
            await asyncio.sleep(30)

    monkeypatch.setattr(_run_code, "PATIENCE_GRACE_SECONDS", 0.05)
    out = await run_program("1", [add], runtime=Stubborn(), await_timeout=0.05)  # type: ignore[arg-type]
    assert out == {
        "error": {
            "kind": "timeout",
            "message": "the run took longer than 0.05 s (the caller's await_timeout)",
        },
        "logs": [],
        "calls": [],
    }
