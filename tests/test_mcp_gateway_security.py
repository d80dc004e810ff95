"""Hostile input at the MCP surface: what upstream MCP servers send the MCP client (unreadable
answers, silence, clashing tool names), what an operator writes in the config, and what MCP
clients send the gateway (approval answers, padded arguments, many connections). Real
subprocesses throughout: ``tests/mcp_hostile_server.py`` speaks raw JSON-RPC, so it can send
what no SDK would."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

import toolnexus
from conftest import free_port, listening
from test_mcp_gateway import UPSTREAM, gateway, gateway_process, run_code, serve_command
from toolnexus.errors import ConfigurationError
from toolnexus.scheduling import ToolCall, run_batch
from toolnexus.tools.mcp import mcp_servers, parse_config

HERE = Path(__file__).parent
HOSTILE = str(HERE / "mcp_hostile_server.py")


def hostile(*names: str, **extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [HOSTILE, *names], **extra}


# -- unreadable answers and silence ----------------------------------------------------------


@pytest.mark.parametrize("kind", ["deep", "cut", "surrogate", "bignum"])
async def test_an_unreadable_answer_fails_the_waiting_calls_at_once(kind: str) -> None:
    """The SDK drops a message it cannot parse (handing the error to the message handler):
    the calls waiting on that server fail at once, well before their timeout, and the server's
    later calls still work."""
    config = {"mcpServers": {"h": hostile(timeout=50)}}
    async with mcp_servers(config) as tools:
        calls = [ToolCall(f"c{i}", "h_answer", {"kind": kind}) for i in range(2)]
        outcomes = await asyncio.wait_for(run_batch(calls, tools), 30)
        after = await run_batch([ToolCall("c", "h_answer", {"kind": "ok"})], tools)
    for outcome in outcomes:
        assert not outcome.ok
        assert "could not be read" in outcome.text and "'h'" in outcome.text, outcome.text
    assert after[0].ok and after[0].text == "answer says ok"


async def test_every_upstream_call_has_a_timeout() -> None:
    assert parse_config({"h": hostile()})[0].timeout == 120.0  # the default
    config = {"mcpServers": {"h": hostile(timeout=0.5)}}
    async with mcp_servers(config) as tools:
        assert all(t.timeout is not None for t in tools)
        silent = await asyncio.wait_for(
            run_batch([ToolCall("c", "h_answer", {"kind": "silent"})], tools), 30
        )
    assert not silent[0].ok and "did not finish within 0.5 s" in silent[0].text


# -- name clashes ----------------------------------------------------------------------------


async def test_tools_whose_names_clash_stay_reachable_under_unique_stable_names() -> None:
    long_a = "l" * 70 + "a"
    long_b = "l" * 70 + "b"
    servers = {
        "a": hostile("x.y", "x_y", long_a, long_b, "free"),
        "s": hostile("t_u"),
        "s_t": hostile("u"),
    }
    async with mcp_servers({"mcpServers": servers}) as tools:
        names = [t.name for t in tools]
        renamed = dict(tools.renamed)
        answers = {
            t.name: (await run_batch([ToolCall("c", t.name, {"kind": "ok"})], tools))[0].text
            for t in tools
        }
        described = {t.name: t.description for t in tools}
    # again, the servers in the other order: the same names
    reordered = {name: servers[name] for name in reversed(servers)}
    async with mcp_servers({"mcpServers": reordered}) as tools:
        names_again = sorted(t.name for t in tools)
    assert len(names) == len(set(names)) == 7  # every upstream tool is there
    assert all(len(n) <= 64 for n in names)
    assert sorted(names) == names_again
    assert "a_free" in names  # no clash: the plain name
    originals = {(server, remote) for server, remote in renamed.values()}
    assert originals == {
        ("a", "x.y"), ("a", "x_y"), ("a", long_a), ("a", long_b), ("s", "t_u"), ("s_t", "u")
    }  # fmt: skip
    for name, (server, remote) in renamed.items():
        assert answers[name] == f"{remote} says ok"  # each name reaches its own tool
        assert f"{remote!r} of MCP server {server!r}" in described[name]


async def test_a_tool_named_like_a_reserved_one_is_renamed() -> None:
    config = {"mcpServers": {"tool": hostile("search")}}
    async with mcp_servers(config, reserved={"tool_search", "run_code"}) as tools:
        names = [t.name for t in tools]
    assert len(names) == 1 and names[0].startswith("tool_search_") and len(names[0]) == 18


# -- the config ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"args": 5}, "'up': args must be a list of strings, like .*, got 5"),
        ({"args": ["ok", 5]}, "'up': args.1 must be a list of strings"),
        ({"env": "HOME=/"}, "'up': env must be an object of strings"),
        ({"env": {"HOME": 5}}, "'up': env.HOME must be an object of strings"),
        ({"headers": 5}, "'up': headers must be an object of strings"),
        ({"read_only_tools": 5}, "'up': read_only_tools must be a list of the server's tool"),
        ({"read_only_tools": "lookup"}, "'up': read_only_tools must be a list"),
        ({"trust_annotations": "false"}, "'up': trust_annotations must be true or false"),
        ({"cwd": 3}, "'up': cwd must be a string"),
        ({"resources": []}, "'up': resources must be an object"),
    ],
)
def test_a_server_entry_of_the_wrong_type_is_one_line_naming_the_key(
    entry: dict[str, Any], message: str
) -> None:
    spec = {"command": sys.executable, **entry}
    with pytest.raises(ConfigurationError, match="MCP server " + message) as info:
        parse_config({"mcpServers": {"up": spec}})
    assert "\n" not in str(info.value)


def test_the_servers_themselves_must_be_objects() -> None:
    with pytest.raises(ConfigurationError, match="mcpServers must be an object"):
        parse_config({"mcpServers": ["up"]})
    with pytest.raises(ConfigurationError, match=r"mcpServers\.up must be an object"):
        parse_config({"mcpServers": {"up": "python server.py"}})


# -- the gateway -----------------------------------------------------------------------------


def write_config(tmp_path: Path, servers: dict[str, Any], **options: Any) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers, "toolnexus": options}))
    return path


def upstream() -> dict[str, Any]:
    return {"command": sys.executable, "args": [UPSTREAM]}


def text_of(result: Any) -> str:
    assert isinstance(result, types.CallToolResult)
    return "".join(getattr(part, "text", "") for part in result.content)


@pytest.mark.parametrize(
    "policy",
    [{"approval_required": ["up_lookup"]}, {"mode": "strict", "allow": ["up_lookup"]}],
)
async def test_a_direct_call_needs_the_approval_a_programs_call_needs(
    tmp_path: Path, policy: dict[str, Any]
) -> None:
    config = write_config(tmp_path, {"up": upstream()}, mode="both", policy=policy)
    asked: list[str] = []

    async def refuse(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": False})

    async with gateway(config, elicitation=refuse) as session:
        direct = await session.call_tool("up_lookup", {"key": "d", "delay": 0})
        program = await run_code(session, 'await tools.up_lookup({"key": "p", "delay": 0})')
    assert program.structured_content["calls"][0]["status"] == "error"  # the program's rule
    assert isinstance(direct, types.CallToolResult) and direct.is_error  # ... is the direct one
    assert "value of d" not in text_of(direct) and "not approved" in text_of(direct)
    assert len(asked) == 2 and "up_lookup" in asked[0]


@pytest.mark.parametrize(
    ("content", "ran"),
    [
        ({"approve": True}, True),
        ({"approve": "false"}, False),
        ({"approve": "true"}, False),
        ({"approve": 1}, False),
    ],
)
async def test_only_a_boolean_true_is_consent(
    config_path: Path, content: dict[str, Any], ran: bool
) -> None:
    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content=content)

    async with gateway(config_path, "--mode", "both", elicitation=answer) as session:
        program = await run_code(session, 'await tools.up_store({"key": "p", "delay": 0})')
        direct = await session.call_tool("up_store", {"key": "d", "delay": 0})
    assert (program.structured_content.get("result") == "stored p") is ran
    assert ("stored d" in text_of(direct)) is ran


@pytest.mark.parametrize("padding", [600, 5000])
async def test_the_arguments_asked_about_are_whole_or_visibly_cut(
    config_path: Path, padding: int
) -> None:
    asked: list[str] = []

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="decline")

    key = " " * padding + "rm -rf /"
    async with gateway(config_path, "--mode", "both", elicitation=answer) as session:
        await session.call_tool("up_store", {"key": key, "delay": 0})
    shown = json.dumps({"key": key, "delay": 0})
    [message] = asked
    if "rm -rf /" in message:
        assert shown in message
    else:  # cut, saying so and by how much
        kept = message.split(" with ", 1)[1].split(" [... CUT: ")[0]
        left_out = int(message.split("CUT: ")[1].split(" more")[0].replace(",", ""))
        assert shown.startswith(kept) and len(kept) + left_out == len(shown)


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    return write_config(tmp_path, {"up": upstream()}, approval=["up_store"])


async def test_a_direct_call_is_in_the_audit_log_as_it_happens(
    config_path: Path, tmp_path: Path
) -> None:
    audit = tmp_path / "audit.jsonl"
    async with gateway(config_path, "--mode", "both", "--audit-log", str(audit)) as session:
        await session.call_tool("up_lookup", {"key": "d", "delay": 0})
        written = audit.read_text()  # the gateway is still serving, no program ran
    events = [json.loads(line) for line in written.splitlines()]
    assert [e["type"] for e in events] == ["tool_call", "tool_result"]
    assert events[0]["data"]["name"] == "up_lookup"
    assert events[0]["data"]["id"] == events[1]["data"]["tool_call_id"]
    assert "value of d" in events[1]["data"]["content"]


@pytest.fixture
def audited_http_gateway(config_path: Path, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    audit = tmp_path / "audit.jsonl"
    port = free_port()
    extra = ("--transport", "http", "--port", str(port), "--audit-log", str(audit))
    command = [sys.executable, *serve_command(config_path, *extra)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert listening(port, process, seconds=30), "the HTTP gateway did not start"
        yield f"http://127.0.0.1:{port}/mcp", audit
    finally:
        process.terminate()
        process.wait(timeout=10)


async def test_audit_ids_are_unique_across_http_clients(
    audited_http_gateway: tuple[str, Path],
) -> None:
    url, audit = audited_http_gateway
    for _ in range(2):  # two clients, one after the other, the same requests each
        async with (
            streamable_http_client(url) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await run_code(session, 'await tools.up_lookup({"key": "k", "delay": 0})')
    runs = [e for e in map(json.loads, audit.read_text().splitlines()) if e["type"] == "code_run"]
    ids = [e["data"]["id"] for e in runs]
    assert len(ids) == 2 and len(set(ids)) == 2, ids


def serve_fails(config: Path, *extra: str) -> str:
    """Start the gateway, which must refuse to: its one line on stderr."""
    done = subprocess.run(
        [sys.executable, *serve_command(config, *extra)],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2, done.stderr  # a bad config is the command line's: exit 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def test_an_unwritable_audit_log_is_refused_at_start(config_path: Path, tmp_path: Path) -> None:
    line = serve_fails(config_path, "--audit-log", str(tmp_path / "no-folder" / "audit.jsonl"))
    assert "audit log" in line and "cannot be written" in line
    line = serve_fails(config_path, "--audit-log", str(tmp_path))  # a folder
    assert "audit log" in line


@pytest.mark.parametrize(
    ("entry", "options", "said"),
    [
        ({"args": 5}, {}, "'up': args must be a list of strings"),
        ({"env": "HOME=/"}, {}, "'up': env must be an object of strings"),
        ({"headers": 5}, {}, "'up': headers must be an object of strings"),
        ({"read_only_tools": 5}, {}, "'up': read_only_tools must be a list"),
        ({"trust_annotations": "false"}, {}, "'up': trust_annotations must be true or false"),
        ({}, {"audit_log": 5}, "toolnexus.audit_log must be a string"),
        ({}, {"max_parallel": "4"}, "toolnexus.max_parallel must be a positive integer"),
        ({}, {"mode": "all"}, 'toolnexus.mode must be "code" or "both"'),
        ({}, {"budgets": {"timeout": "60"}}, "toolnexus.budgets.timeout must be a positive"),
    ],
)
def test_a_config_of_the_wrong_type_is_one_line_naming_the_key(
    tmp_path: Path, entry: dict[str, Any], options: dict[str, Any], said: str
) -> None:
    config = write_config(tmp_path, {"up": {**upstream(), **entry}}, **options)
    assert said in serve_fails(config)


def test_a_config_path_naming_a_folder_is_one_line(tmp_path: Path) -> None:
    assert "is a folder" in serve_fails(tmp_path)


async def test_the_server_announces_the_package_version(config_path: Path) -> None:
    params = gateway_process(config_path)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        initialized = await session.initialize()
    assert initialized.server_info.version == toolnexus.__version__


async def test_clashing_upstream_names_are_all_offered_under_unique_names(tmp_path: Path) -> None:
    servers = {"tool": hostile("search"), "x": hostile("y_z"), "x_y": hostile("z")}
    config = write_config(tmp_path, servers, mode="both")
    async with gateway(config) as session:
        listed = (await session.list_tools()).tools
        names = [t.name for t in listed]
        answers = {
            name: text_of(await session.call_tool(name, {"kind": "ok"})) for name in names[1:]
        }
    assert names[0] == "run_code" and len(names) == len(set(names)) == 4
    assert "tool_search" not in names  # the gateway's own name is not taken
    assert sorted(answers.values()) == ["search says ok", "y_z says ok", "z says ok"]
    description = listed[0].description or ""
    assert all(name in description for name in names[1:])  # listed, with what they were
    assert "MCP server 'x_y'" in description and "MCP server 'x'" in description


def test_a_tool_given_twice_or_named_like_the_gateways_own_is_refused_at_start(
    tmp_path: Path,
) -> None:
    extra = tmp_path / "extra.py"
    extra.write_text(
        "from toolnexus import Tool\n\n"
        "def make(name):\n"
        "    return Tool(name, 'x', {'type': 'object'}, execute=lambda args: 1)\n\n"
        "CLASH = [make('run_code')]\n"
        "TWICE = [make('same'), make('same')]\n"
    )
    config = write_config(tmp_path, {})
    assert "'run_code'" in serve_fails(config, "--tools", f"{extra}:CLASH")
    assert "two tools are named 'same'" in serve_fails(config, "--tools", f"{extra}:TWICE")


async def test_an_audit_log_that_fails_later_is_not_shown_to_programs_and_loses_nothing(
    tmp_path: Path,
) -> None:
    from mcp import Client

    from toolnexus import Tool
    from toolnexus.mcp import Gateway

    folder = tmp_path / "audit-folder"
    folder.mkdir()
    audit = folder / "audit.jsonl"
    echo = Tool("echo", "Echo.", {"type": "object"}, execute=lambda args: "echoed")
    gateway_ = Gateway([echo], audit_log=audit)
    audit.unlink(missing_ok=True)  # (created at start)
    folder.rmdir()  # every write now fails
    async with Client(gateway_.server) as client:
        failing = await client.call_tool("run_code", {"code": "await tools.echo({})"})
        folder.mkdir()  # writable again: the next write catches up
        after = await client.call_tool("run_code", {"code": 'await tools.echo({"n": 2})'})
    assert failing.structured_content is not None and after.structured_content is not None
    assert failing.structured_content["result"] == after.structured_content["result"] == "echoed"
    assert str(tmp_path) not in json.dumps(failing.structured_content)
    assert not failing.is_error and not after.is_error
    events = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [e["type"] for e in events].count("code_run") == 2  # the first program's too
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))


async def test_an_unreadable_upstream_answer_fails_direct_calls_and_programs_at_once(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, {"h": hostile(timeout=50)}, mode="both")
    program = """
try:
    await tools.h_answer({"kind": "deep"})
    outcome = "answered"
except ToolError as failure:
    outcome = str(failure)
outcome
"""
    async with gateway(config) as session:
        direct = await asyncio.wait_for(session.call_tool("h_answer", {"kind": "cut"}), 30)
        ran = await asyncio.wait_for(run_code(session, program), 30)
        after = await session.call_tool("h_answer", {"kind": "ok"})
    assert isinstance(direct, types.CallToolResult) and direct.is_error
    assert "could not be read" in text_of(direct)
    assert "could not be read" in ran.structured_content["result"]
    assert text_of(after) == "answer says ok"


# -- 2026-07-28 rounds and resumption (what a hostile client sends back) ----------------------


async def first_round(client: Any, code: str) -> types.InputRequiredResult:
    """Start ``run_code`` driving the rounds by hand: its first ``InputRequiredResult``."""
    first = await client.session.call_tool("run_code", {"code": code}, allow_input_required=True)
    assert isinstance(first, types.InputRequiredResult), first
    return first


APPROVED = types.ElicitResult(action="accept", content={"approve": True})


async def never_called(context: Any, params: Any) -> types.ElicitResult:
    """Declares elicitation; the rounds are driven by hand, so it is never asked."""
    raise AssertionError("the rounds are answered by the test itself")


async def test_a_request_state_the_gateway_did_not_issue_is_refused(tmp_path: Path) -> None:
    from mcp import Client, StdioServerParameters
    from mcp.shared.exceptions import MCPError

    config = write_config(tmp_path, {"up": upstream()}, approval=["up_store"])
    audit = tmp_path / "audit.jsonl"
    params = StdioServerParameters(
        command=sys.executable,
        args=serve_command(config, "--audit-log", str(audit)),
        env=dict(os.environ),
    )
    code = 'await tools.up_store({"key": "x", "delay": 0})'
    forged_states = [
        json.dumps({"call": "x", "round": 1}),  # the plaintext shape, unsealed
        "v1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",  # a token of no key
    ]
    async with Client(params, mode="auto", elicitation_callback=never_called) as client:
        assert client.protocol_version == "2026-07-28"
        first = await first_round(client, code)
        key = next(iter(first.input_requests or {}))
        refusals = []
        for forged in [*forged_states, (first.request_state or "")[:-4] + "AAAA"]:
            with pytest.raises(MCPError) as raised:
                await client.session.call_tool(
                    "run_code",
                    {"code": code},
                    input_responses={key: APPROVED},
                    request_state=forged,
                    allow_input_required=True,
                )
            refusals.append(raised.value.error.code)
        # the genuine state, bound to the call: another call's arguments cannot use it
        with pytest.raises(MCPError) as moved:
            await client.session.call_tool(
                "run_code",
                {"code": 'await tools.up_store({"key": "other", "delay": 0})'},
                input_responses={key: APPROVED},
                request_state=first.request_state,
                allow_input_required=True,
            )
    assert refusals == [types.INVALID_PARAMS] * 3
    assert moved.value.error.code == types.INVALID_PARAMS
    assert "stored" not in audit.read_text()  # nothing forged ran the write


async def test_an_approval_answered_twice_is_refused_the_second_time(tmp_path: Path) -> None:
    from mcp import Client, StdioServerParameters
    from mcp.shared.exceptions import MCPError

    config = write_config(tmp_path, {"up": upstream()}, approval=["up_store"])
    audit = tmp_path / "audit.jsonl"
    params = StdioServerParameters(
        command=sys.executable,
        args=serve_command(config, "--audit-log", str(audit)),
        env=dict(os.environ),
    )
    code = 'await tools.up_store({"key": "x", "delay": 0})'
    async with Client(params, mode="auto", elicitation_callback=never_called) as client:
        first = await first_round(client, code)
        key = next(iter(first.input_requests or {}))

        async def answer() -> Any:
            return await client.session.call_tool(
                "run_code",
                {"code": code},
                input_responses={key: APPROVED},
                request_state=first.request_state,
                allow_input_required=True,
            )

        result = await answer()
        with pytest.raises(MCPError) as twice:
            await answer()
    assert isinstance(result, types.CallToolResult)
    assert (result.structured_content or {})["result"] == "stored x"
    assert twice.value.error.code == types.INVALID_PARAMS
    assert "answered already" in twice.value.error.message or "no call" in twice.value.error.message
    events = [json.loads(line) for line in audit.read_text().splitlines()]
    answers = [e["data"]["outcome"] for e in events if e["type"] == "approval_answer"]
    stored = [e for e in events if e["type"] == "tool_call" and e["data"]["name"] == "up_store"]
    assert answers == ["approved"] and len(stored) == 1  # asked once, ran once


def test_a_forged_or_foreign_last_event_id_replays_nothing(config_path: Path) -> None:
    import httpx

    from test_mcp_gateway_relay import open_session, sse_events, start_slow_call

    port = free_port()
    command = [
        sys.executable,
        *serve_command(config_path, "--transport", "http", "--port", str(port)),
    ]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert listening(port, process, seconds=30)
        url = f"http://127.0.0.1:{port}/mcp"
        with httpx.Client(timeout=10) as http:
            victim = open_session(http, url)
            seen = start_slow_call(http, url, victim)  # the victim's events, with their ids
            attacker = open_session(http, url)
            replayed: dict[str, list[dict[str, str]]] = {}
            for name, last in [("forged", "forged-id"), ("foreign", seen[-1]["id"])]:
                got: list[dict[str, str]] = []
                try:
                    resume = {**attacker, "last-event-id": last}
                    with http.stream("GET", url, headers=resume, timeout=3) as stream:
                        got.extend(sse_events(stream.iter_lines()))
                except httpx.ReadTimeout:
                    pass  # an open stream with nothing on it
                replayed[name] = got
    finally:
        process.terminate()
        process.communicate(timeout=10)
    for name, got in replayed.items():
        assert not [e for e in got if e.get("data")], (name, got)  # none of the victim's
