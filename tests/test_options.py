"""The option objects: Endpoint (with Timeouts and Retries), Execution and Guards are frozen and
check themselves; Client takes them; create_client builds them; derive replaces them; and the
program entry points accept execution= and guards=."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections.abc import Iterator
from typing import Any

import pytest

from fake_provider import FakeProvider, Turn
from toolnexus import (
    Client,
    Endpoint,
    Execution,
    Guards,
    Retries,
    Timeouts,
    ToolHints,
    create_client,
    tool,
)
from toolnexus.codemode import PermissionPolicy, run_code_tool, run_program
from toolnexus.codemode.runtimes import MontyRuntime
from toolnexus.errors import ConfigurationError
from toolnexus.scheduling import ToolCall
from toolnexus.testing import ScriptedModel, TestModel
from toolnexus.tools import ToolHooks


class Peak:
    """The most calls of ``wait`` in flight at once."""

    def __init__(self) -> None:
        self.now = 0
        self.most = 0

    async def wait(self) -> str:
        self.now += 1
        self.most = max(self.most, self.now)
        await asyncio.sleep(0.02)
        self.now -= 1
        return "ok"


def peak_tool(peak: Peak) -> Any:
    @tool(hints=ToolHints(read_only=True))
    async def wait(n: int) -> str:
        """Wait a moment."""
        return await peak.wait()

    return wait


# -- frozen and checked -----------------------------------------------------------------------


@pytest.mark.parametrize("value", [Endpoint("test"), Timeouts(), Retries(), Execution(), Guards()])
def test_option_objects_are_frozen(value: Any) -> None:
    name = dataclasses.fields(value)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, name, None)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Timeouts(request=0), "timeout must be a positive number"),
        (lambda: Timeouts(turn=-1), "turn_timeout must be a positive number"),
        (lambda: Retries(count=-1), "retries must be an int >= 0"),
        (lambda: Endpoint("m", base_url="ftp://x"), "base_url must be an http"),
        (lambda: Endpoint("m"), "base_url must be a non-empty string"),
        (lambda: Endpoint("m", base_url="http://h/v1", style="soap"), "style must be one of"),
        (lambda: Endpoint("m", base_url="http://h/v1", store=True), "'responses' style"),
        (lambda: Endpoint("openai:m", hosted_code=True), "hosted_code=True needs a provider"),
        (lambda: Endpoint("m", base_url="http://h/v1", retries="2"), "retries must be"),
        (lambda: Endpoint.parse("qwen3:8b"), "Endpoint.parse takes 'provider:model'"),
        (lambda: Execution(code_mode="fast"), "code mode must be one of"),  # type: ignore[arg-type]
        (lambda: Execution(calls_timeout=0), "calls_timeout must be a positive number"),
        (lambda: Execution(hosted_call_timeout=-2), "hosted_call_timeout must be a positive"),
        (lambda: Execution(sdk_threshold=-1), "sdk_threshold"),
        (lambda: Execution(always_loaded="x"), "always_loaded"),
        (lambda: Guards(permissions={"deny": ["x"]}), "PermissionPolicy"),  # type: ignore[arg-type]
        (lambda: Guards(approval_handler=True), "approval_handler must be a function"),  # type: ignore[arg-type]
        (lambda: Guards(hooks=[print]), "hooks must be ToolHooks"),  # type: ignore[arg-type]
        (lambda: Client("openai:m"), "Client endpoint must be a toolnexus Endpoint"),  # type: ignore[arg-type]
    ],
)
def test_bad_values_are_refused_saying_what_to_do(build: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        build()


# -- Endpoint.parse ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "style", "url", "model", "variable"),
    [
        ("openai:gpt-4.1-mini", "openai", "https://api.openai.com/v1", "gpt-4.1-mini", "OPENAI_API_KEY"),
        ("anthropic:claude-sonnet-4-5", "anthropic", "https://api.anthropic.com", "claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
        ("openrouter:openai/gpt-4o-mini", "openai", "https://openrouter.ai/api/v1", "openai/gpt-4o-mini", "OPENROUTER_API_KEY"),
    ],
)  # fmt: skip
def test_parse_reads_each_provider_prefix(
    name: str, style: str, url: str, model: str, variable: str
) -> None:
    endpoint = Endpoint.parse(name)
    assert (endpoint.resolved_style, endpoint.url, endpoint.resolved_model) == (style, url, model)
    assert endpoint.key_variable == variable
    assert Endpoint.parse(name, style="responses").resolved_style == "responses"  # explicit wins


def test_parse_of_test_is_a_test_model() -> None:
    endpoint = Endpoint.parse("test")
    assert isinstance(endpoint.resolved_model, TestModel) and endpoint.url is None
    assert Client(endpoint).model == "test"


def test_replace_reads_the_new_prefix() -> None:
    moved = dataclasses.replace(Endpoint.parse("openai:gpt-4.1-mini"), model="anthropic:claude")
    assert (moved.resolved_style, moved.url) == ("anthropic", "https://api.anthropic.com")


# -- Client takes the objects -----------------------------------------------------------------


async def test_client_runs_with_execution_and_guards() -> None:
    peak = Peak()
    seen: list[str] = []
    calls = [ToolCall(f"c{i}", "wait", {"n": i}) for i in range(6)]
    client = Client(
        Endpoint(ScriptedModel([calls, "done"])),
        execution=Execution(max_tool_concurrency=2, code_mode="native"),
        guards=Guards(hooks=ToolHooks(before=[lambda name, args, ctx: seen.append(name)])),
        system_prompt="Be brief.",
    )
    result = await client.run("go", tools=[peak_tool(peak)])
    assert result.text == "done" and peak.most == 2 and seen == ["wait"] * 6
    assert (client.style_name, client.model) == ("openai", "scripted-model")


async def test_guards_permissions_refuse_a_tool() -> None:
    peak = Peak()
    client = Client(
        Endpoint(ScriptedModel([[ToolCall("c1", "wait", {"n": 1})], "done"])),
        execution=Execution(code_mode="native"),
        guards=Guards(permissions=PermissionPolicy(deny=["wait"])),
    )
    result = await client.run("go", tools=[peak_tool(peak)])
    assert peak.most == 0 and result.tool_calls[0].is_error


def test_create_client_builds_the_objects() -> None:
    policy = PermissionPolicy(deny=["x"])
    client = create_client(
        model="openai:gpt-4.1-mini",
        api_key="k",
        timeout=30,
        retries=0,
        retry_timeouts=True,
        max_tool_concurrency=3,
        code_mode="code",
        permissions=policy,
    )
    assert client.endpoint.timeouts == Timeouts(request=30, turn=600.0)
    assert client.endpoint.retries == Retries(count=0, timeouts=True)
    assert client.execution.max_tool_concurrency == 3 and client.execution.code_mode == "code"
    assert client.guards == Guards(permissions=policy)
    assert client._config.max_concurrency == 3 and client._config.guards.permissions is policy


# -- derive -----------------------------------------------------------------------------------


def test_derive_changes_exactly_what_it_is_given() -> None:
    hooks = ToolHooks()
    client = create_client(
        model="openai:gpt-4.1-mini",
        api_key="k",
        retries=1,
        retry_timeouts=True,
        max_parallel=3,
        hooks=hooks,
        system_prompt="S",
        sdk_threshold=10,
    )
    derived = client.derive(model="anthropic:claude", retries=4, turn_timeout=9, code_mode="code")
    assert (derived.style_name, derived.model) == ("anthropic", "claude")
    assert derived.endpoint.retries == Retries(count=4, timeouts=True)
    assert derived.endpoint.timeouts == Timeouts(request=120.0, turn=9)
    assert derived.execution == dataclasses.replace(client.execution, code_mode="code")
    assert derived.guards is client.guards and derived.system_prompt == "S"
    assert derived._config.max_concurrency == 3 and derived._config.sdk_threshold == 10
    # an option that only create_client's signature names (no hand-kept list to forget it in)
    assert client.derive(max_tool_concurrency=5)._config.max_concurrency == 5
    assert client.derive(always_loaded=["a"])._config.always_loaded == ("a",)


def test_derive_accepts_every_create_client_option() -> None:
    client = create_client(model="test")
    for name in inspect.signature(create_client).parameters:
        if name not in ("model", "base_url", "style", "api_key", "fallback", "store"):
            current = client.derive(**{name: _value_of(client, name)})
            assert isinstance(current, Client), name


def _value_of(client: Client, name: str) -> Any:
    defaults = {p.name: p.default for p in inspect.signature(create_client).parameters.values()}
    return defaults[name]


def test_derive_refuses_an_unknown_option_naming_it() -> None:
    with pytest.raises(ConfigurationError, match="unknown option 'temperature'"):
        create_client(model="test").derive(temperature=0.2)
    with pytest.raises(ConfigurationError, match="same cap"):
        create_client(model="test").derive(max_parallel=2, max_tool_concurrency=3)


# -- fallback takes endpoints -----------------------------------------------------------------


@pytest.fixture
def backup() -> Iterator[FakeProvider]:
    server = FakeProvider().start()
    yield server
    server.stop()


async def test_fallback_to_an_endpoint(provider: FakeProvider, backup: FakeProvider) -> None:
    provider.router = lambda body: Turn(status=503)
    backup.script(Turn(text="from the backup"))
    client = Client(
        Endpoint("primary-model", base_url=provider.url + "/v1", api_key="k", retries=0),
        fallback=[Endpoint("backup-model", base_url=backup.url + "/v1", api_key="k")],
        system_prompt="Be brief.",
    )
    result = await client.run("go")
    assert result.text == "from the backup" and result.models == ["backup-model"]
    assert backup.requests[0]["messages"][0] == {"role": "system", "content": "Be brief."}
    with pytest.raises(ConfigurationError, match="same style"):
        Client(
            Endpoint("a", base_url=provider.url, api_key="k", style="anthropic"),
            fallback=[Endpoint("b", base_url=backup.url + "/v1", api_key="k")],
        )


# -- the program entry points -----------------------------------------------------------------


async def test_run_program_takes_execution_and_guards(monty_runtime: MontyRuntime) -> None:
    peak = Peak()
    seen: list[str] = []
    program = "import asyncio\nawait asyncio.gather(*[tools.wait({'n': i}) for i in range(6)])"
    out = await run_program(
        program,
        [peak_tool(peak)],
        execution=Execution(max_tool_concurrency=2, runtime=monty_runtime),
        guards=Guards(hooks=ToolHooks(before=[lambda name, args, ctx: seen.append(name)])),
    )
    assert out["result"] == ["ok"] * 6 and peak.most == 2 and seen == ["wait"] * 6


async def test_run_code_tool_takes_execution_and_guards(monty_runtime: MontyRuntime) -> None:
    peak = Peak()
    denied = Guards(permissions=PermissionPolicy(deny=["wait"]))
    run_code = run_code_tool(
        [peak_tool(peak)], execution=Execution(runtime=monty_runtime), guards=denied
    )
    assert "Wait a moment." not in run_code.description
    allowed = run_code_tool(
        [peak_tool(peak)], execution=Execution(max_tool_concurrency=3, runtime=monty_runtime)
    )
    program = "import asyncio\nawait asyncio.gather(*[tools.wait({'n': i}) for i in range(6)])"
    result = await allowed.invoke({"code": program, "description": "Wait six times."})
    assert result.output["result"] == ["ok"] * 6 and peak.most == 3


def test_a_keyword_and_an_object_that_disagree_are_refused() -> None:
    hooks = ToolHooks()
    with pytest.raises(ConfigurationError, match="guards= and hooks="):
        run_code_tool([], guards=Guards(), hooks=hooks)
    with pytest.raises(ConfigurationError, match="execution= and max_parallel=4"):
        run_code_tool([], execution=Execution(max_tool_concurrency=2), max_parallel=4)
    with pytest.raises(ConfigurationError, match="execution= and sdk_threshold=5"):
        run_code_tool([], execution=Execution(), sdk_threshold=5)
    assert run_code_tool([], guards=Guards(hooks=hooks), hooks=hooks).name == "run_code"


def test_the_gateway_takes_execution_and_guards(monty_runtime: MontyRuntime) -> None:
    from toolnexus.mcp import Gateway
    from toolnexus.mcp import _overridden as overridden

    policy = PermissionPolicy(deny=["wait"])
    gateway = Gateway(
        [peak_tool(Peak())],
        execution=Execution(max_tool_concurrency=2, runtime=monty_runtime, sdk_threshold=0),
        guards=Guards(permissions=policy),
    )
    assert (gateway.max_parallel, gateway.runtime, gateway.policy) == (2, monty_runtime, policy)
    with pytest.raises(ConfigurationError, match="execution= and max_parallel=3"):
        Gateway([], execution=Execution(max_tool_concurrency=2), max_parallel=3)
    with pytest.raises(ConfigurationError, match="guards= and policy="):
        Gateway([], guards=Guards(permissions=policy), policy=PermissionPolicy())
    with pytest.raises(ConfigurationError, match="permissions only"):
        Gateway([], guards=Guards(hooks=ToolHooks()))
    # serve_config: an object given wins over the config options it stands for
    config = {"max_parallel": 4, "policy": policy, "mode": "both"}
    execution = Execution(max_tool_concurrency=2)
    assert overridden(config, {"execution": execution, "audit_log": None}) == {
        "policy": policy,
        "mode": "both",
        "execution": execution,
    }


async def test_a_durable_batch_takes_execution(temporal_address: str) -> None:
    import uuid

    from temporalio.client import Client as TemporalClient

    from toolnexus.temporal import run_batch, worker

    peak = Peak()
    wait = peak_tool(peak)
    calls = [ToolCall(f"c{i}", "wait", {"n": i}) for i in range(6)]
    temporal = await TemporalClient.connect(temporal_address)
    queue = f"q-{uuid.uuid4()}"
    async with worker(temporal, task_queue=queue, tools=[wait]):
        outcomes = await run_batch(
            temporal, calls, task_queue=queue, execution=Execution(max_tool_concurrency=2)
        )
        with pytest.raises(ConfigurationError, match="execution= and max_parallel=3"):
            await run_batch(
                temporal,
                calls,
                task_queue=queue,
                max_parallel=3,
                execution=Execution(max_tool_concurrency=2),
            )
    assert [o.value for o in outcomes] == ["ok"] * 6 and peak.most == 2


def test_the_key_stays_out_of_reprs() -> None:
    client = create_client(model="openai:gpt-4.1-mini", api_key="sk-secret")
    assert "sk-secret" not in repr(client) and "sk-secret" not in repr(client.endpoint)
    assert "gpt-4.1-mini" in repr(client)
