"""Hostile input at the MCP surface: what upstream MCP servers send the MCP client (unreadable
answers, silence, clashing tool names), what an operator writes in the config, and what MCP
clients send the gateway (approval answers, padded arguments, many connections). Real
subprocesses throughout: ``tests/mcp_hostile_server.py`` speaks raw JSON-RPC, so it can send
what no SDK would."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

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
