"""Hostile input at the MCP surface: what upstream MCP servers send the MCP client (unreadable
answers, silence, clashing tool names), what an operator writes in the config, and what MCP
clients send the gateway (approval answers, padded arguments, many connections). Real
subprocesses throughout: ``tests/mcp_hostile_server.py`` speaks raw JSON-RPC, so it can send
what no SDK would."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

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
    """Start the gateway, which must refuse to: its one line on stderr, exit status 2 (a bad
    config is the command line's error, as documented)."""
    done = subprocess.run(
        [sys.executable, *serve_command(config, *extra)],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2, done.stderr

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


# -- the gateway as a proxy: what upstreams list and send ------------------------------------

FIXTURE = str(HERE / "mcp_conformance_server.py")


def config_refused(config: Path) -> str:
    """Start the gateway, which must refuse its config: exit 2, one line on stderr."""
    done = subprocess.run(
        [sys.executable, *serve_command(config)],
        capture_output=True,
        text=True,
        timeout=90,
        stdin=subprocess.DEVNULL,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    return lines[0]


@pytest.fixture
def fixture_servers() -> Iterator[Any]:
    """Start conformance fixture servers (``tests/mcp_conformance_server.py``) on demand:
    ``start(*options)`` is the URL of a new one; all are stopped after the test."""
    started: list[Any] = []

    def start(*options: str) -> str:
        port = free_port()
        process = subprocess.Popen(
            [sys.executable, FIXTURE, str(port), *options],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        started.append(process)
        assert listening(port, process, seconds=60), "the fixture server did not start"
        return f"http://127.0.0.1:{port}/mcp"

    yield start
    for process in started:
        process.terminate()
        process.wait(timeout=10)


def test_a_resource_uri_claimed_by_two_upstreams_stops_the_gateway_naming_both(
    fixture_servers: Any, tmp_path: Path
) -> None:
    """Two servers listing one URI: a read could go to either, so the gateway refuses to
    start, in one line naming both servers and the URI."""
    servers = {"alpha": {"url": fixture_servers()}, "beta": {"url": fixture_servers()}}
    line = config_refused(write_config(tmp_path, servers))
    assert "'alpha'" in line and "'beta'" in line and "test://static-text" in line, line


def test_a_prompt_name_taken_by_two_upstreams_stops_the_gateway_naming_both(
    fixture_servers: Any, tmp_path: Path
) -> None:
    """Two servers without the prefix whose prompts share a name: refused, naming both."""
    servers = {
        "alpha": {"url": fixture_servers("--no-resources"), "prefix": False},
        "beta": {"url": fixture_servers("--no-resources"), "prefix": False},
    }
    line = config_refused(write_config(tmp_path, servers))
    assert "'alpha'" in line and "'beta'" in line and "test_simple_prompt" in line, line


async def test_an_upstream_whose_resources_page_forever_is_left_out_of_them(
    fixture_servers: Any, tmp_path: Path
) -> None:
    """A resources/list that never ends (a new cursor every page) is cut at the client's page
    bound: that server's resources are left out (its tools still serve), another server's
    resources are all there, and a read of a URI only it would serve is a clear error."""
    servers = {
        "endless": {"url": fixture_servers("--endless")},
        "fine": {"url": fixture_servers("--no-resources")},
    }
    config = write_config(tmp_path, servers, mode="both")
    async with gateway(config) as session:
        listed = await asyncio.wait_for(session.list_resources(), 60)
        assert listed.resources == []  # "endless" left out, "fine" has none
        tools = {t.name for t in (await session.list_tools()).tools}
        assert "endless_test_simple_text" in tools
        answer = await session.call_tool("endless_test_simple_text", {})
        assert text_of(answer) == "This is a simple text response for testing."


async def test_an_enormous_listing_is_served_in_pages(fixture_servers: Any, tmp_path: Path) -> None:
    """3,000 resources: the gateway answers a page at a time, never one huge message, and
    refuses cursors it did not issue (-32602), forged or out of range."""
    config = write_config(tmp_path, {"big": {"url": fixture_servers("--many", "3000")}})
    async with gateway(config) as session:
        first = await asyncio.wait_for(session.list_resources(), 60)
        assert len(first.resources) == 100 and first.next_cursor
        for forged in ("page:999999", "page:-1", "../../etc", "page:1e9", ""):
            with pytest.raises(MCPError) as refused:
                await session.list_resources(params=types.PaginatedRequestParams(cursor=forged))
            assert refused.value.error.code == types.INVALID_PARAMS


async def test_a_content_part_that_is_not_valid_fails_the_direct_call_only(
    tmp_path: Path,
) -> None:
    """An upstream answer with a part of no MCP type (``hologram``) cannot be passed through:
    the direct call fails as data (named, no traceback), and the next call works."""
    config = write_config(tmp_path, {"h": hostile(timeout=50)}, mode="both")
    async with gateway(config) as session:
        bad = await asyncio.wait_for(session.call_tool("h_answer", {"kind": "badpart"}), 30)
        after = await session.call_tool("h_answer", {"kind": "ok"})
    said = text_of(bad)
    assert bad.is_error and "'h'" in said and "not valid MCP" in said, said
    assert len(said.splitlines()) == 1 and "<script>" not in said
    assert all(part.type == "text" for part in bad.content)
    assert text_of(after) == "answer says ok"


async def test_servers_without_the_prefix_whose_tool_names_clash_stay_reachable() -> None:
    """``prefix: false`` names a server's tools by their own names; when two such servers
    (or a prefixed server's ``<server>_<tool>``) give one name, every tool of the clash is
    renamed with a digest and says which server and tool it is, and each still reaches its
    own tool; ``"prefix": "false"`` (a string) is refused, named."""
    servers = {
        "one": hostile("answer", "only_one", prefix=False),
        "two": hostile("answer", prefix=False),
        "p": hostile("q"),
        "p2": hostile("p_q", prefix=False),
    }
    async with mcp_servers({"mcpServers": servers}) as tools:
        names = {t.name for t in tools}
        answers = {
            t.name: (await run_batch([ToolCall("c", t.name, {"kind": "ok"})], tools))[0].text
            for t in tools
        }
        renamed = dict(tools.renamed)
    assert "only_one" in names  # no clash: its own name, no server prefix
    assert answers["only_one"] == "only_one says ok"
    assert set(renamed.values()) == {
        ("one", "answer"), ("two", "answer"), ("p", "q"), ("p2", "p_q")
    }  # fmt: skip
    for name, (_, remote) in renamed.items():
        assert answers[name] == f"{remote} says ok"
    with pytest.raises(ConfigurationError, match="prefix must be true or false"):
        parse_config({"x": hostile(prefix="false")})


# -- hostile task clients ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def task_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """One HTTP gateway (``--mode both``, audited) for the task tests: its URL and audit log."""
    from task_clients import http_gateway

    folder = tmp_path_factory.mktemp("hostile-tasks")
    audit = folder / "audit.jsonl"
    config = folder / "mcp.json"
    options = {"mode": "both", "audit_log": str(audit), "max_parallel": 4}
    config.write_text(
        json.dumps(
            {
                "mcpServers": {"up": {"command": sys.executable, "args": [UPSTREAM]}},
                "toolnexus": options,
            }
        )
    )
    with http_gateway(config) as (_, url):
        yield url, audit


def _audited(audit: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in audit.read_text().splitlines() if line.strip()]


SLOW = 'await tools.up_lookup({"key": "slow", "delay": 20})'


async def test_a_forged_or_foreign_task_id_is_not_found(task_gateway: tuple[str, Path]) -> None:
    from task_clients import wire

    url, _ = task_gateway
    async with wire(url) as owner, wire(url) as other:
        task = await owner.call_as_task("run_code", {"code": SLOW})
        mine = task["taskId"]
        forged = [
            "x" + mine[1:],  # one character off
            mine[:-1],
            "",
            "../../../etc/passwd",
            "toolnexus-task-" + "0" * 40,
            "\u0000" + mine,
        ]
        answers = [await other.task(m, mine) for m in ("get", "result", "cancel")]
        answers += [await owner.task("get", f) for f in forged]
        too_long = await owner.task("get", "a" * 10_000)
        listed = (await other.rpc("tasks/list", {}))["result"]["tasks"]
        still = (await owner.task("get", mine))["result"]
        await owner.task("cancel", mine)
    for answer in answers:  # the same answer for another session's id and a made-up one
        assert answer["error"] == {
            "code": -32602,
            "message": "Failed to retrieve task: Task not found",
        }
    assert too_long["error"]["code"] == -32602
    assert listed == []
    assert still["status"] == "working"  # the other session's cancel did not reach it


async def test_a_task_is_bound_to_the_credential_across_sessions(
    task_gateway: tuple[str, Path],
) -> None:
    from task_clients import wire

    url, _ = task_gateway
    alice = {"Authorization": "Bearer alice-token"}
    async with (
        wire(url, alice) as first,
        wire(url, alice) as second,
        wire(url, {"Authorization": "Bearer mallory"}) as mallory,
    ):
        task = await first.call_as_task(
            "run_code", {"code": 'await tools.up_lookup({"key": "c", "delay": 0})'}
        )
        found = await second.task("result", task["taskId"])  # the same credential, a new session
        refused = await mallory.task("result", task["taskId"])
    assert found["result"]["structuredContent"]["result"] == "value of c"
    assert refused["error"]["code"] == -32602


async def test_tasks_result_polled_in_a_tight_loop_runs_the_program_once(
    task_gateway: tuple[str, Path],
) -> None:
    from task_clients import wire

    url, audit = task_gateway
    marker = f"polled {uuid.uuid4().hex[:8]}"
    program = 'await tools.up_lookup({"key": "polled", "delay": 3})'
    async with wire(url) as client:
        task = await client.call_as_task("run_code", {"code": program, "description": marker})
        waiting = asyncio.gather(*[client.task("result", task["taskId"]) for _ in range(50)])
        gets = 0
        while True:  # tasks/get as fast as the gateway answers, meanwhile
            got = await client.task("get", task["taskId"])
            gets += 1
            if got["result"]["status"] != "working":
                break
        answers = await waiting
        results = [a for a in answers if "result" in a]
        turned_away = [a for a in answers if "error" in a]
        results += [await client.task("result", task["taskId"]) for _ in range(100)]
        after = await run_code_over(client, 'await tools.up_lookup({"key": "after", "delay": 0})')
    print(
        f"{len(results)} tasks/result answered, {len(turned_away)} turned away, "
        f"{gets} tasks/get polled while it ran"
    )
    assert 0 < len(turned_away) <= 50 - 16  # at most 16 wait on one task at once
    assert all("poll tasks/get" in a["error"]["message"] for a in turned_away)
    assert len({json.dumps(r["result"], sort_keys=True) for r in results}) == 1  # one for all
    assert results[0]["result"]["structuredContent"]["result"] == "value of polled"
    events = _audited(audit)
    [run] = [e for e in events if e["type"] == "code_run" and e["data"]["description"] == marker]
    sub_calls = [
        e
        for e in events
        if e["type"] == "tool_call" and e["data"]["id"].startswith(run["data"]["id"] + ":")
    ]
    assert len(sub_calls) == 1  # the program ran once, its call once
    assert after["structuredContent"]["result"] == "value of after"  # the gateway goes on


async def run_code_over(client: Any, code: str) -> Any:
    answer = await client.rpc("tools/call", {"name": "run_code", "arguments": {"code": code}})
    return answer["result"]


async def test_cancelling_a_finished_task_is_refused_and_changes_nothing(
    task_gateway: tuple[str, Path],
) -> None:
    from task_clients import wire

    url, _ = task_gateway
    quick = 'await tools.up_lookup({"key": "q", "delay": 0})'
    async with wire(url) as client:
        task = await client.call_as_task("run_code", {"code": quick})
        result = await client.task("result", task["taskId"])
        refused = await client.task("cancel", task["taskId"])
        state = (await client.task("get", task["taskId"]))["result"]
        again = await client.task("result", task["taskId"])
    assert refused["error"]["code"] == -32602 and "already completed" in refused["error"]["message"]
    assert state["status"] == "completed"
    assert again["result"] == result["result"]


async def test_a_task_past_its_ttl_is_gone_and_a_running_one_is_stopped(
    task_gateway: tuple[str, Path],
) -> None:
    from task_clients import wire

    url, audit = task_gateway
    marker = f"expiring {uuid.uuid4().hex[:8]}"
    async with wire(url) as client:
        quick = await client.call_as_task("up_lookup", {"key": "t", "delay": 0}, ttl=1)
        running = await client.call_as_task(
            "run_code", {"code": SLOW, "description": marker}, ttl=-5
        )
        huge = await client.call_as_task("up_lookup", {"key": "h", "delay": 0}, ttl=10**30)
        not_a_number = await client.rpc(
            "tools/call", {"name": "up_lookup", "arguments": {"key": "n"}, "task": {"ttl": "60000"}}
        )
        a_boolean = await client.rpc(
            "tools/call", {"name": "up_lookup", "arguments": {"key": "n"}, "task": {"ttl": True}}
        )
        await asyncio.sleep(1.5)
        gone = [await client.task("get", t["taskId"]) for t in (quick, running)]
        kept = await client.task("get", huge["taskId"])
        listed = [t["taskId"] for t in (await client.rpc("tasks/list", {}))["result"]["tasks"]]
    assert quick["ttl"] == 1000 and running["ttl"] == 1000  # clamped up to a second
    assert huge["ttl"] == 86_400_000  # and down to a day
    assert not_a_number["error"]["code"] == -32602 and a_boolean["error"]["code"] == -32602
    assert all(g["error"]["code"] == -32602 for g in gone)
    assert kept["result"]["status"] == "completed"
    assert quick["taskId"] not in listed and running["taskId"] not in listed
    events = _audited(audit)
    [run] = [e for e in events if e["type"] == "code_run" and e["data"]["description"] == marker]
    assert {"type": "code_run_cancelled", "id": run["data"]["id"]} in [
        {"type": e["type"], "id": e["data"].get("id")} for e in events
    ]  # the expired program was stopped, not left running


async def test_tasks_methods_need_the_extension_on_2026_07_28(
    task_gateway: tuple[str, Path],
) -> None:
    from mcp.shared.exceptions import MCPError

    from task_clients import GetTask, TaskIdParams, modern_session, wire

    url, _ = task_gateway
    async with wire(url) as old:
        task = await old.call_as_task("run_code", {"code": SLOW})
    async with modern_session(url) as session:  # declares no extension
        plain = await session.call_tool("up_lookup", {"key": "p", "delay": 0})
        with pytest.raises(MCPError) as refused:
            await session.send_request(
                GetTask(params=TaskIdParams(taskId=task["taskId"])), types.Result
            )
    assert isinstance(plain, types.CallToolResult)  # a plain result, no task
    assert refused.value.error.code == -32021
    assert refused.value.error.data == {
        "requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    }


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


async def test_a_rounds_state_answers_that_round_only(tmp_path: Path) -> None:
    """A program asks twice; the first round's state, replayed with an approval for the second
    question, is refused: each round has a state of its own, used once."""
    from mcp import Client, StdioServerParameters

    config = write_config(tmp_path, {"up": upstream()}, approval=["up_store"])
    audit = tmp_path / "audit.jsonl"
    params = StdioServerParameters(
        command=sys.executable,
        args=serve_command(config, "--audit-log", str(audit)),
        env=dict(os.environ),
    )
    code = (
        'await tools.up_store({"key": "read-first", "delay": 0})\n'
        'await tools.up_store({"key": "later-write", "delay": 0})'
    )

    async def answer(state: str | None, responses: dict[str, Any]) -> Any:
        return await client.session.call_tool(
            "run_code",
            {"code": code},
            input_responses=responses,
            request_state=state,
            allow_input_required=True,
        )

    async with Client(params, mode="auto", elicitation_callback=never_called) as client:
        first = await first_round(client, code)
        [one] = list(first.input_requests or {})
        second = await answer(first.request_state, {one: APPROVED})
        assert isinstance(second, types.InputRequiredResult), second
        [two] = list(second.input_requests or {})
        assert "later-write" in second.input_requests[two].params.message
        with pytest.raises(MCPError) as replayed:  # the stale state, approving the later write
            await answer(first.request_state, {two: APPROVED})
        denied = types.ElicitResult(action="accept", content={"approve": False})
        last = await answer(second.request_state, {two: denied})
    assert replayed.value.error.code == types.INVALID_PARAMS
    assert "round 1 of this call was answered already" in replayed.value.error.message
    assert isinstance(last, types.CallToolResult) and last.is_error
    events = [json.loads(line) for line in audit.read_text().splitlines()]
    answers = [e["data"]["outcome"] for e in events if e["type"] == "approval_answer"]
    assert answers == ["approved", "denied"]
    ran = [e["data"] for e in events if e["type"] == "call_timing" and e["data"]["ok"]]
    assert len(ran) == 1  # only the first write ran


def next_key(key: str) -> str:
    """The key a client would guess the next question takes (``q1`` -> ``q2``)."""
    head = key.rstrip("0123456789")
    return f"{head}{int(key[len(head) :] or 0) + 1}"


async def test_a_task_update_for_a_question_not_asked_answers_nothing(tmp_path: Path) -> None:
    """While a task waits on its first approval, a flood of ``tasks/update`` answers it and,
    guessing its key, the next question too: the next question is still asked, and only the
    answer given to it counts."""
    from task_clients import (
        Polling,
        UpdateParams,
        UpdateTask,
        http_gateway,
        modern_session,
        never_asked,
        task_state,
    )

    audit = tmp_path / "audit.jsonl"
    config = write_config(tmp_path, {"up": upstream()}, approval=["up_store"], audit_log=str(audit))
    code = (
        'await tools.up_store({"key": "first", "delay": 0})\n'
        'await tools.up_store({"key": "unseen", "delay": 0})'
    )
    yes = {"action": "accept", "content": {"approve": True}}
    no = {"action": "accept", "content": {"approve": False}}
    with http_gateway(config) as (_, url):
        async with modern_session(url, Polling(), elicitation_callback=never_asked) as session:

            async def update(task_id: str, responses: dict[str, Any]) -> None:
                params = UpdateParams(taskId=task_id, inputResponses=responses)
                await session.send_request(UpdateTask(params=params), types.EmptyResult)

            created = await session.call_tool("run_code", {"code": code}, allow_claimed=True)
            task_id = created.task_id
            first = await task_state(session, task_id, {"input_required"})
            [one] = list(first.input_requests or {})
            early = {one: yes, next_key(one): yes}
            await asyncio.gather(*[update(task_id, early) for _ in range(32)])
            later = await task_state(session, task_id, {"input_required", "completed"})
            while later.status == "input_required" and one in (later.input_requests or {}):
                later = await task_state(session, task_id, {"input_required", "completed"})
            asked_next = later.status == "input_required"
            if asked_next:
                [two] = list(later.input_requests or {})
                await update(task_id, {two: no})
            ended = await task_state(session, task_id, {"completed", "failed"})
    assert asked_next, later  # the second question was put to the client, not answered early
    assert ended.status == "completed" and ended.result is not None
    output = ended.result["structuredContent"]
    assert "error" in output and "not approved" in json.dumps(output), output
    events = [json.loads(line) for line in audit.read_text().splitlines()]
    answers = [e["data"]["outcome"] for e in events if e["type"] == "approval_answer"]
    assert answers == ["approved", "denied"]
    ran = [e["data"] for e in events if e["type"] == "call_timing" and e["data"]["ok"]]
    assert len(ran) == 1


# -- routing and protocol: what upstreams offer ------------------------------------------------

OFFER = str(HERE / "mcp_offer_server.py")


def offering(name: str, *offer: str) -> dict[str, Any]:
    """An upstream (``tests/mcp_offer_server.py``) offering what ``offer`` says
    (``"--template", "note://{+path}"``, ``"--prompt", "hello"``, ``"--tool", "t"``)."""
    return {"command": sys.executable, "args": [OFFER, name, *offer]}


async def test_a_read_goes_to_the_most_specific_template_not_a_catch_all(tmp_path: Path) -> None:
    """A catch-all ``note://{+path}`` of one server listed first does not take the reads meant
    for another's ``note://t/{id}``; equally specific templates that no URI matches twice
    (``note://t/{id}``, ``note://u/{id}``) both serve."""
    servers = {
        "notes": offering("notes", "--tool", "t", "--template", "note://{+path}"),
        "work": offering("work", "--tool", "t", "--template", "note://t/{id}"),
        "other": offering("other", "--tool", "t", "--template", "note://u/{id}"),
    }
    async with gateway(write_config(tmp_path, servers)) as session:
        read = {
            uri: (await session.read_resource(uri)).contents[0]
            for uri in ("note://t/42", "note://u/7", "note://x/y/z", "note://t/42/more")
        }
    said = {uri: getattr(content, "text", "") for uri, content in read.items()}
    assert said == {
        "note://t/42": "work read note://t/42",
        "note://u/7": "other read note://u/7",
        "note://x/y/z": "notes read note://x/y/z",
        "note://t/42/more": "notes read note://t/42/more",  # {id} does not span a "/"
    }


def test_equally_specific_templates_of_two_servers_matching_one_uri_stop_the_gateway(
    tmp_path: Path,
) -> None:
    """``note://{kind}/x`` and ``note://x/{id}`` are equally specific, and ``note://x/x``
    matches both: the gateway could not tell which server to ask, so it refuses to start,
    in one line naming both servers and both templates."""
    servers = {
        "alpha": offering("alpha", "--tool", "t", "--template", "note://{kind}/x"),
        "beta": offering("beta", "--tool", "t", "--template", "note://x/{id}"),
    }
    line = config_refused(write_config(tmp_path, servers))
    assert "'alpha'" in line and "'beta'" in line, line
    assert "note://{kind}/x" in line and "note://x/{id}" in line, line


async def test_a_direct_call_passes_on_only_increasing_upstream_progress(tmp_path: Path) -> None:
    """An upstream whose progress goes 1, 3, 2, 2, 5: the client of a direct call gets 1, 3,
    5 (the spec's progress MUST increase), as a program's own steps always do."""
    config = write_config(tmp_path, {"up": offering("up", "--tool", "t")}, mode="both")
    seen: list[float] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append(done)

    async with gateway(config) as session:
        answer = await session.call_tool("up_t", {"kind": "backwards"}, progress_callback=progress)
        for _ in range(50):  # the SDK runs each callback in a task of its own
            await asyncio.sleep(0.02)
    assert text_of(answer) == "t says backwards"
    assert seen == [1, 3, 5]


def offering_gateway(tmp_path: Path, *offer: str) -> Any:
    """The stdio gateway (``--mode both``) of one upstream ``up`` offering ``offer``."""
    tmp_path.mkdir(exist_ok=True)
    config = write_config(tmp_path, {"up": offering("up", "--tool", "t", *offer)}, mode="both")
    return gateway_process(config)


async def told_on_handshake(params: Any) -> tuple[types.ServerCapabilities, set[str]]:
    """What a 2025-11-25 client is told it will hear of, and the list changes it hears while
    the upstream changes its resources and prompts (``up_t`` with kind ``changed``)."""
    heard: set[str] = set()

    async def hear(message: Any) -> None:
        heard.add(str(getattr(message, "method", "")))

    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, message_handler=hear) as session,
    ):
        declared = (await session.initialize()).capabilities
        assert text_of(await session.call_tool("up_t", {"kind": "changed"})) == "t says changed"
        await asyncio.sleep(1)  # generous: the notifications came before the answer
    return declared, {m for m in heard if m.endswith("list_changed")}


async def told_on_listen(params: Any) -> set[str]:
    """The list changes a 2026-07-28 client hears on ``subscriptions/listen`` meanwhile."""
    from mcp import Client
    from mcp.client.subscriptions import listen

    heard: set[str] = set()
    async with Client(params, mode="auto") as client:
        assert client.protocol_version == "2026-07-28"
        async with listen(
            client.session, prompts_list_changed=True, resources_list_changed=True
        ) as events:
            await client.session.call_tool("up_t", {"kind": "changed"})
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(3):
                    async for event in events:
                        heard.add(type(event).__name__)
                        if len(heard) == 2:
                            break
    return heard


async def test_list_changes_are_sent_exactly_when_list_changed_is_declared(
    tmp_path: Path,
) -> None:
    """An upstream that offers resources and prompts, and says they changed: the gateway
    declares ``listChanged: true`` for both (and tools) and tells its clients, on either
    generation. One that offers neither, and says so anyway: the gateway declares neither
    and tells no one (a hostile upstream cannot make it send what it did not declare)."""
    offers = offering_gateway(tmp_path, "--template", "note://{id}", "--prompt", "hello")
    declared, heard = await told_on_handshake(offers)
    assert declared.tools and declared.tools.list_changed is True
    assert declared.resources and declared.resources.list_changed is True
    assert declared.prompts and declared.prompts.list_changed is True
    assert heard == {"notifications/resources/list_changed", "notifications/prompts/list_changed"}
    assert await told_on_listen(offers) == {"ResourcesListChanged", "PromptsListChanged"}

    bare = offering_gateway(tmp_path / "bare")
    declared, heard = await told_on_handshake(bare)
    assert declared.resources is None and declared.prompts is None
    assert heard == set()


# -- adversary pass, round 5 (written from the docs and the public API) --


@pytest.fixture
def approving_http_gateway(tmp_path: Path) -> Iterator[str]:
    from task_clients import http_gateway

    config = write_config(tmp_path, {"up": upstream()}, mode="both", approval=["up_store"])
    with http_gateway(config) as (_, url):
        yield url


def _initialize_body() -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "probe", "version": "1"},
        },
    }


@pytest.mark.parametrize(
    "headers",
    [
        {"Host": "evil.example"},
        {"Host": "evil.example:8000"},
        {"Origin": "http://evil.example"},
        {"Origin": "null"},
    ],
    ids=["host", "host-port", "origin", "null-origin"],
)
def test_a_rebinding_host_or_foreign_origin_is_refused(
    approving_http_gateway: str, headers: dict[str, str]
) -> None:
    """mcp_server.md: "--transport http serves streamable HTTP at http://127.0.0.1:8000/mcp
    (loopback by default, with DNS-rebinding protection)": a request naming another host, or
    sent from another origin, opens no session."""
    import httpx

    from task_clients import ACCEPT

    with httpx.Client(timeout=10) as http:
        refused = http.post(
            approving_http_gateway, headers={**ACCEPT, **headers}, json=_initialize_body()
        )
        fine = http.post(approving_http_gateway, headers=ACCEPT, json=_initialize_body())
    assert refused.status_code in (400, 403, 421), refused.status_code
    assert "mcp-session-id" not in refused.headers
    assert fine.status_code == 200 and "mcp-session-id" in fine.headers


def test_an_oversized_request_body_leaves_the_gateway_serving(approving_http_gateway: str) -> None:
    """mcp_server.md: one lane per client session; a client's hostile request is its own
    problem: after a 30 MB body of junk, a new session is served."""
    import httpx

    from task_clients import ACCEPT

    junk = (
        b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"x": "'
        + (b"a" * (30 * 1024 * 1024))
        + b'"}}'
    )
    with httpx.Client(timeout=60) as http:
        with contextlib.suppress(httpx.HTTPError):  # refused by closing the connection: fine
            http.post(approving_http_gateway, headers=ACCEPT, content=junk)
        fine = http.post(approving_http_gateway, headers=ACCEPT, json=_initialize_body())
    assert fine.status_code == 200 and "mcp-session-id" in fine.headers


RUN_CODE_CASES = {
    "no-code": {},
    "code-not-a-string": {"code": 5},
    "nan": {"code": "float('nan')"},
    "raises": {"code": "raise ValueError('x' * 100000)"},
    "type-error": {"code": "await tools.up_lookup({'key': 5})"},
    "extra-argument": {"code": "1", "surprise": True},
}


async def test_every_run_code_answer_matches_its_output_schema(config_path: Path) -> None:
    """mcp_server.md: "run_code declares an outputSchema ... every answer's structuredContent
    matches it (a refused call too), with the same JSON as its text part"."""
    import jsonschema

    async with gateway(config_path) as session:
        (run_code_tool,) = [t for t in (await session.list_tools()).tools if t.name == "run_code"]
        answers = {}
        for name, arguments in RUN_CODE_CASES.items():
            answers[name] = await session.call_tool("run_code", arguments)
    schema = run_code_tool.output_schema
    assert schema
    for name, answer in answers.items():
        assert isinstance(answer, types.CallToolResult), name
        assert answer.structured_content is not None, (name, answer)
        jsonschema.validate(answer.structured_content, schema)
        assert json.loads(text_of(answer)) == answer.structured_content, name


async def test_upstream_names_with_control_characters_are_served_under_clean_names(
    tmp_path: Path,
) -> None:
    """mcp_server.md: tools "are named <server>_<name>"; builtins.md: "characters providers
    refuse become _"; names that then coincide get a digest suffix, and each stays reachable."""
    import re

    odd = ["a\nb", "a_b", "a\u202eb", "a\x7fb", "tab\there"]
    config = write_config(tmp_path, {"h": hostile(*odd)}, mode="both")
    async with gateway(config) as session:
        names = [t.name for t in (await session.list_tools()).tools if t.name != "run_code"]
        answers = sorted([text_of(await session.call_tool(n, {"kind": "ok"})) for n in names])
    assert len(names) == len(set(names)) == len(odd)
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", n) for n in names), names
    assert answers == sorted(f"{n} says ok" for n in odd)


async def test_an_unknown_tool_with_a_huge_hostile_name_is_an_error_and_the_lane_goes_on(
    config_path: Path,
) -> None:
    """mcp_server.md: "a call of a tool the gateway does not offer is the JSON-RPC error
    -32602, naming the tools it does offer"."""
    async with gateway(config_path, "--mode", "both") as session:
        with pytest.raises(MCPError) as refused:
            await session.call_tool("x\n" * 50_000, {})
        after = await session.call_tool("up_lookup", {"key": "k", "delay": 0})
    assert refused.value.error.code == types.INVALID_PARAMS
    assert text_of(after) == "value of k"


async def test_direct_call_arguments_that_are_not_an_object_fail_that_call_only(
    config_path: Path,
) -> None:
    """mcp_server.md: "A call that never reached the server (refused, server gone) answers one
    text part with isError"; the session goes on."""
    async with gateway(config_path, "--mode", "both") as session:
        bad = await session.send_request(
            types.CallToolRequest(
                params=types.CallToolRequestParams(name="up_lookup", arguments={"key": ["x"]})
            ),
            types.CallToolResult,
        )
        after = await session.call_tool("up_lookup", {"key": "k", "delay": 0})
    assert isinstance(bad, types.CallToolResult) and bad.is_error
    assert text_of(after) == "value of k"


async def test_a_bogus_log_level_is_refused_and_the_session_goes_on(config_path: Path) -> None:
    """mcp_server.md: "The gateway declares logging, honours logging/setLevel (per client ...)".
    A level MCP does not have is invalid params; later requests are served."""
    async with gateway(config_path, "--mode", "both") as session:
        level = types.SetLevelRequestParams.model_construct(level="nonsense")
        with pytest.raises(MCPError) as refused:
            await session.send_request(types.SetLevelRequest(params=level), types.EmptyResult)
        after = await session.call_tool("up_lookup", {"key": "k", "delay": 0})
    assert refused.value.error.code in (types.INVALID_PARAMS, types.INVALID_REQUEST)
    assert text_of(after) == "value of k"


async def _direct_round(client: Any, name: str, arguments: dict[str, Any]) -> Any:
    first = await client.session.call_tool(name, arguments, allow_input_required=True)
    assert isinstance(first, types.InputRequiredResult), first
    return first


async def test_a_direct_calls_approval_state_cannot_approve_other_arguments_or_twice(
    tmp_path: Path,
) -> None:
    """mcp_server.md: on 2026-07-28 the state is "bound to the tool and its arguments: a state
    the gateway did not issue, or moved to another call, is refused (-32602), and so is a second
    answer to a round already answered" -- for a direct call (--mode both) as for run_code."""
    from mcp import Client, StdioServerParameters

    config = write_config(tmp_path, {"up": upstream()}, mode="both", approval=["up_store"])
    audit = tmp_path / "audit.jsonl"
    params = StdioServerParameters(
        command=sys.executable,
        args=serve_command(config, "--audit-log", str(audit)),
        env=dict(os.environ),
    )
    args = {"key": "x", "delay": 0}
    async with Client(params, mode="auto", elicitation_callback=never_called) as client:
        assert client.protocol_version == "2026-07-28"
        first = await _direct_round(client, "up_store", args)
        key = next(iter(first.input_requests or {}))

        async def answer(name: str, arguments: dict[str, Any]) -> Any:
            return await client.session.call_tool(
                name,
                arguments,
                input_responses={key: APPROVED},
                request_state=first.request_state,
                allow_input_required=True,
            )

        codes = []
        for name, arguments in [("up_store", {"key": "other", "delay": 0}),
                                ("up_lookup", args)]:  # fmt: skip
            with pytest.raises(MCPError) as moved:
                await answer(name, arguments)
            codes.append(moved.value.error.code)
        result = await answer("up_store", args)
        with pytest.raises(MCPError) as twice:
            await answer("up_store", args)
    assert codes == [types.INVALID_PARAMS] * 2
    assert isinstance(result, types.CallToolResult) and "stored x" in text_of(result)
    assert twice.value.error.code == types.INVALID_PARAMS
    events = [json.loads(line) for line in audit.read_text().splitlines()]
    stored = [e for e in events if e["type"] == "tool_call" and e["data"]["name"] == "up_store"]
    assert len(stored) == 1 and "other" not in audit.read_text()


@pytest.mark.parametrize("headers", [{"Host": "evil.example"}, {"Origin": "http://evil.example"}])
def test_a_stateless_2026_request_from_a_rebinding_host_is_refused_too(
    approving_http_gateway: str, headers: dict[str, str]
) -> None:
    """mcp_server.md: the gateway serves both generations on streamable HTTP, "loopback by
    default, with DNS-rebinding protection": a 2026-07-28 request (no session) from another
    host or origin is refused as a handshake one is, and never runs a tool."""
    import httpx

    from task_clients import ACCEPT

    modern = {**ACCEPT, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
              "Mcp-Name": "up_lookup"}  # fmt: skip
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {
            "name": "up_lookup",
            "arguments": {"key": "rebound", "delay": 0},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "probe", "version": "1"},
            },
        },
    }
    with httpx.Client(timeout=30) as http:
        refused = http.post(approving_http_gateway, headers={**modern, **headers}, json=call)
        control = http.post(approving_http_gateway, headers=modern, json=call)
    assert "value of rebound" in control.text, control.text[:300]  # the request itself is fine
    assert refused.status_code in (400, 403, 421), (refused.status_code, refused.text[:300])
    assert "value of rebound" not in refused.text


async def test_a_read_of_a_uri_no_upstream_serves_is_invalid_params(
    fixture_servers: Any, tmp_path: Path
) -> None:
    """mcp_server.md: "A read (or subscription) goes to the server that listed the URI, else to
    the one whose template matches it; a URI no server serves is JSON-RPC -32602"."""
    config = write_config(tmp_path, {"fix": {"url": fixture_servers()}})
    hostile_uris = ["file:///etc/passwd", "test://static-text/../../etc", "x" * 20_000,
                    "test://static-text\n", "test://STATIC-TEXT"]  # fmt: skip
    codes = []
    async with gateway(config) as session:
        for uri in hostile_uris:
            with pytest.raises(MCPError) as refused:
                await session.read_resource(uri)
            codes.append(refused.value.error.code)
        fine = await session.read_resource("test://static-text")
    assert codes == [types.INVALID_PARAMS] * len(hostile_uris)
    assert fine.contents
