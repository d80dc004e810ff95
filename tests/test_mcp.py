"""MCP tools from a real MCP server (the SDK's MCPServer) in a subprocess, over stdio and HTTP."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolnexus.errors import ConfigurationError
from toolnexus.scheduling import ToolCall, concurrency_mode, run_batch
from toolnexus.tools.mcp import mcp_servers, parse_config

SERVER = str(Path(__file__).parent / "mcp_server.py")


def stdio(**extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [SERVER], **extra}


@pytest.fixture
def http_url() -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, SERVER, "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(200):  # wait until it listens
            with socket.socket() as client:
                if client.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if process.poll() is not None:
                raise RuntimeError("the MCP HTTP server did not start")
            import time

            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture(params=["stdio", "http"])
def config(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The test server over each transport. (Tests open it themselves: an MCP connection must
    be closed by the task that opened it, and async fixtures tear down in another task.)"""
    spec = stdio() if request.param == "stdio" else {"url": request.getfixturevalue("http_url")}
    return {"mcpServers": {"test": spec}}


async def test_tools_are_named_and_classified_by_their_annotations(config: dict[str, Any]) -> None:
    async with mcp_servers(config) as tools:
        named = {t.name: t for t in tools}
        assert set(named) == {"test_lookup", "test_store", "test_stats", "test_explode"}
        assert concurrency_mode(named["test_lookup"], {}) == "parallel"
        assert concurrency_mode(named["test_store"], {}) == "exclusive"
        assert named["test_lookup"].source == "mcp"
        assert named["test_lookup"].input_schema["properties"]["key"]["type"] == "string"


async def test_read_only_tools_overlap_and_unannotated_ones_run_alone(
    config: dict[str, Any],
) -> None:
    async with mcp_servers(config) as tools:
        named = {t.name: t for t in tools}
        reads = [ToolCall(f"r{i}", "test_lookup", {"key": str(i)}) for i in range(4)]
        outcomes = await run_batch(reads, tools)
        assert [o.value for o in outcomes] == [f"value of {i}" for i in range(4)]
        assert await named["test_stats"].invoke({}) == {"peak": 4}
        writes = [ToolCall(f"w{i}", "test_store", {"key": str(i), "delay": 0.05}) for i in range(3)]
        assert [o.value for o in await run_batch(writes, tools)] == [
            f"stored {i}" for i in range(3)
        ]
        assert await named["test_stats"].invoke({}) == {"peak": 1}


async def test_an_error_result_is_a_failed_call(config: dict[str, Any]) -> None:
    async with mcp_servers(config) as tools:
        outcome = (await run_batch([ToolCall("e", "test_explode", {"message": "boom"})], tools))[0]
    assert not outcome.ok
    assert outcome.error is not None and "explode" in outcome.error["message"]


async def test_trust_and_read_only_overrides() -> None:
    config = {"mcpServers": {"s": stdio(trust_annotations=False, read_only_tools=["store"])}}
    async with mcp_servers(config) as found:
        named = {t.name: t for t in found}
        assert concurrency_mode(named["s_lookup"], {}) == "exclusive"  # annotations not trusted
        assert concurrency_mode(named["s_store"], {}) == "parallel"  # named read-only


async def test_a_failing_server_is_isolated() -> None:
    config = {"mcpServers": {"good": stdio(), "broken": {"command": "/nonexistent/server"}}}
    async with mcp_servers(config) as found:
        assert {t.name.split("_")[0] for t in found} == {"good"}
        assert "broken" in found.failures
        assert (await run_batch([ToolCall("x", "good_lookup", {"key": "k", "delay": 0})], found))[
            0
        ].ok


async def test_a_server_timeout_fails_a_slow_call_and_the_session_goes_on() -> None:
    config = {"mcpServers": {"s": stdio(timeout=1.5)}}
    async with mcp_servers(config) as found:
        slow, quick = await run_batch(
            [
                ToolCall("a", "s_store", {"key": "k", "delay": 5}),
                ToolCall("b", "s_lookup", {"key": "k", "delay": 0}),
            ],
            found,
        )
        assert slow.error is not None
        assert slow.error["message"] == "tool 's_store' did not finish within 1.5 s (its timeout)"
        assert quick.value == "value of k"


def test_config_errors_are_named() -> None:
    with pytest.raises(ConfigurationError, match="'x' needs a command"):
        parse_config({"mcpServers": {"x": {}}})
    with pytest.raises(ConfigurationError, match="'y': timeout must be a positive number"):
        parse_config({"y": {"url": "http://h/mcp", "timeout": 0}})
    assert [s.name for s in parse_config({"a": {"url": "http://h/mcp"}})] == ["a"]


async def test_names_are_sanitised() -> None:
    from toolnexus.tools._mcp import tool_name

    assert tool_name("my server", "do.thing/now") == "my_server_do_thing_now"
    assert len(tool_name("s", "x" * 100)) == 64
    await asyncio.sleep(0)
