"""The client API a production team expects: typed per-run deps, ModelRetry bounded by
Tool.retries, run_sync, and the layering of safety classes. Real HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fake_provider import FakeProvider, Turn
from test_client import client_for, tool_results
from toolnexus import ModelRetry, RunContext, Tool, ToolHints, tool

TYPED = Path(__file__).parent / "typed"


class Bank:
    def __init__(self, balances: dict[str, int]) -> None:
        self.balances = balances


@tool(hints=ToolHints(read_only=True))
def balance(account: str, ctx: RunContext[Bank]) -> int:
    """The balance of an account."""
    if account not in ctx.deps.balances:
        raise ModelRetry(
            f"no account {account!r}; accounts: {', '.join(sorted(ctx.deps.balances))}"
        )
    return ctx.deps.balances[account]


async def test_deps_are_per_run_and_reach_tools_as_run_context(provider: FakeProvider) -> None:
    client = client_for(provider, "openai", deps=Bank({"savings": 1}))
    provider.router = lambda body: (
        Turn(calls=[("c1", "balance", {"account": "savings"})])
        if body["messages"][-1]["role"] == "user"
        else Turn(text="ok")
    )
    first, second, default = await asyncio.gather(
        client.run("a", tools=[balance], deps=Bank({"savings": 100})),
        client.run("b", tools=[balance], deps=Bank({"savings": 200})),
        client.run("c", tools=[balance]),
    )
    assert [r.tool_calls[0].output for r in (first, second, default)] == ["100", "200", "1"]


@pytest.mark.timeout(300)  # mypy reads toolnexus and its SDKs: a minute on a loaded machine
def test_user_code_using_run_context_type_checks_strictly(tmp_path: Path) -> None:
    files = [str(TYPED / "deps_ok.py"), str(TYPED / "deps_wrong.py")]
    checked = subprocess.run(  # one run for both files: the dependencies are read once
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path), *files],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    errors = [line for line in checked.stdout.splitlines() if ": error:" in line]
    assert checked.returncode == 1 and errors, checked.stdout
    wrong = {Path(line.split(":", 1)[0]).name for line in errors}
    assert wrong == {"deps_wrong.py"}, checked.stdout  # deps_ok.py checks clean
    assert '"Bank" has no attribute "balanse"' in checked.stdout


@pytest.mark.parametrize("style", ["openai", "anthropic"])
async def test_model_retry_hands_the_model_a_message_and_it_tries_again(
    provider: FakeProvider, style: str
) -> None:
    provider.script(
        Turn(calls=[("c1", "balance", {"account": "checking"})]),
        Turn(calls=[("c2", "balance", {"account": "savings"})]),
        Turn(text="You have 5."),
    )
    result = await client_for(provider, style).run(
        "how much?", tools=[balance], deps=Bank({"savings": 5})
    )
    assert result.status == "done" and result.text == "You have 5."
    results = dict(tool_results(result, style))
    assert "no account 'checking'; accounts: savings" in results["c1"]
    assert results["c2"] == "5"
    assert [r.is_error for r in result.tool_calls] == [True, False]


async def test_retries_are_bounded_by_the_tool_and_count_invalid_arguments(
    provider: FakeProvider,
) -> None:
    strict = Tool(
        "strict",
        "",
        {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        execute=lambda args: args["n"],
        retries=2,
    )
    provider.script(
        Turn(calls=[("c1", "strict", {"n": "one"})]),
        Turn(calls=[("c2", "strict", "{not json")]),
        Turn(calls=[("c3", "strict", {})]),
        Turn(text="never reached"),
    )
    result = await client_for(provider, "openai").run("go", tools=[strict])
    assert result.status == "incomplete"
    assert (
        result.stopped_by
        == "tool 'strict' needed another try more often than its retries (2) allow"
    )
    assert len(provider.requests) == 3


async def test_a_tool_without_retries_gets_one_more_try(provider: FakeProvider) -> None:
    provider.script(
        Turn(calls=[("c1", "balance", {"account": "x"})]),
        Turn(calls=[("c2", "balance", {"account": "y"})]),
        Turn(text="never reached"),
    )
    result = await client_for(provider, "openai").run("go", tools=[balance], deps=Bank({}))
    assert result.status == "incomplete" and "retries (1)" in (result.stopped_by or "")
    assert len(provider.requests) == 2


@pytest.mark.parametrize("style", ["openai", "anthropic"])
async def test_retries_are_counted_per_response_not_per_call(
    provider: FakeProvider, style: str
) -> None:
    """Three calls of one tool asking for another try in one response are one retry: the
    model gets its next response to correct them all (a second tool counts on its own)."""
    strict = Tool(
        "strict",
        "",
        {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        execute=lambda args: args["n"],
        retries=1,
    )
    provider.script(
        Turn(
            calls=[
                ("c1", "balance", {"account": "x"}),
                ("c2", "balance", {"account": "y"}),
                ("c3", "balance", {"account": "z"}),
                ("c4", "strict", {"n": "one"}),
                ("c5", "strict", {"n": "two"}),
            ]
        ),
        Turn(calls=[("c6", "balance", {"account": "savings"}), ("c7", "strict", {"n": 1})]),
        Turn(text="You have 5."),
    )
    result = await client_for(provider, style).run(
        "how much?", tools=[balance, strict], deps=Bank({"savings": 5})
    )
    assert result.status == "done" and result.stopped_by is None
    assert result.text == "You have 5." and len(provider.requests) == 3
    assert [r.is_error for r in result.tool_calls] == [True] * 5 + [False, False]


def test_run_sync_outside_and_inside_a_running_loop(provider: FakeProvider) -> None:
    provider.router = lambda body: Turn(text="hello")
    client = client_for(provider, "openai")
    assert client.run_sync("hi").text == "hello"

    async def notebook_cell() -> str:  # a Jupyter cell runs inside an event loop
        return client.run_sync("hi").text

    assert asyncio.run(notebook_cell()) == "hello"


def test_run_context_is_generic_and_defaults_to_no_deps() -> None:
    ctx: RunContext[Any] = RunContext()
    assert ctx.deps is None
    assert RunContext[int](deps=3).deps == 3


# -- model fallback ------------------------------------------------------------------------------


@pytest.fixture
def backup() -> Iterator[FakeProvider]:
    server = FakeProvider().start()
    yield server
    server.stop()


def _dead_url() -> str:
    closed = FakeProvider().start()
    url = closed.url
    closed.stop()
    return url


@pytest.mark.parametrize("failure", ["no answer", "503", "429"])
async def test_fallback_answers_when_the_primary_cannot(
    provider: FakeProvider, backup: FakeProvider, failure: str
) -> None:
    from toolnexus import create_client

    backup.script(Turn(calls=[("c1", "balance", {"account": "a"})]), Turn(text="from the backup"))
    if failure == "no answer":
        primary_url = _dead_url() + "/v1"
    else:
        provider.router = lambda body: Turn(status=int(failure))
        primary_url = provider.url + "/v1"
    second = create_client(base_url=backup.url + "/v1", model="backup-model", api_key="k")
    client = create_client(
        base_url=primary_url,
        model="primary-model",
        api_key="k",
        retries=0,
        fallback=[second],
        code_mode="native",
    )
    result = await client.run("go", tools=[balance], deps=Bank({"a": 1}))
    assert result.text == "from the backup" and result.models == ["backup-model", "backup-model"]
    logged = [e.data for e in result.session.events if e.type == "fallback"]
    assert len(logged) == 2 and logged[0]["failed"].startswith("primary-model at ")
    assert logged[0]["next"].startswith("backup-model at ")


async def test_no_fallback_for_a_request_the_server_refused(
    provider: FakeProvider, backup: FakeProvider
) -> None:
    from toolnexus import create_client
    from toolnexus.errors import ConfigurationError, ProviderError

    provider.router = lambda body: Turn(status=400)
    second = create_client(base_url=backup.url + "/v1", model="b", api_key="k")
    client = create_client(base_url=provider.url + "/v1", model="a", api_key="k", fallback=[second])
    with pytest.raises(ProviderError, match="HTTP 400"):
        await client.run("go")
    assert backup.requests == []  # the request itself was wrong: another model would refuse it too
    with pytest.raises(ConfigurationError, match="same style"):
        create_client(
            base_url=provider.url, model="a", api_key="k", style="anthropic", fallback=[second]
        )


async def test_no_fallback_once_a_stream_has_been_used(
    provider: FakeProvider, backup: FakeProvider
) -> None:
    from toolnexus import create_client
    from toolnexus.errors import ProviderError

    provider.script(Turn(text="half an answer", cut=True))
    second = create_client(base_url=backup.url + "/v1", model="b", api_key="k")
    client = create_client(base_url=provider.url + "/v1", model="a", api_key="k", fallback=[second])
    with pytest.raises(ProviderError, match="cut off"):
        async for _ in client.stream("go"):
            pass
    assert backup.requests == []  # text had reached the caller: a second answer would mix in


async def test_later_calls_never_get_the_arguments_of_earlier_ones(provider: FakeProvider) -> None:
    """A wide turn, then one call a turn, over HTTP (each call a new object, the old ones
    freed): every call must run with its own arguments."""
    reads = [(f"r{i}", "balance", {"account": f"a{i}"}) for i in range(20)]
    singles = [Turn(calls=[(f"w{i}", "balance", {"account": f"b{i}"})]) for i in range(5)]
    provider.script(Turn(calls=reads), *singles, Turn(text="done"))
    bank = Bank({**{f"a{i}": i for i in range(20)}, **{f"b{i}": 100 + i for i in range(5)}})
    result = await client_for(provider, "openai").run("go", tools=[balance], deps=bank)
    assert [r.output for r in result.tool_calls] == [str(i) for i in range(20)] + [
        str(100 + i) for i in range(5)
    ]
