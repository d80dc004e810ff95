"""Both generations of MCP against a real server on the python SDK 2.x, in a subprocess.

The client negotiates the newest revision a server speaks (the SDK's ``mode="auto"``): with
``tests/mcp_input_server.py`` that is 2026-07-28, where a tool asks for input through
``InputRequiredResult`` rounds (SEP-2322); pinned to ``protocol: "legacy"`` the same server
speaks 2025-11-25 and asks through server-initiated requests. The server records how each
tool was asked (``how_asked``). Servers that know only the handshake (``tests/mcp_raw_server.py``,
with no SDK) are spoken to as before. Hostile: a server asking forever, a huge requestState.
Task calls of tools that allow them (``task_calls: "auto"``) are here too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from test_mcp import _free_port
from toolnexus.errors import ConfigurationError
from toolnexus.scheduling import ToolCall, run_batch
from toolnexus.tools.mcp import mcp_servers, parse_config

HERE = Path(__file__).parent
INPUT_SERVER = str(HERE / "mcp_input_server.py")
RAW = str(HERE / "mcp_raw_server.py")
MODERN = "2026-07-28"
LEGACY = "2025-11-25"


async def _elicit(context: Any, params: Any) -> Any:
    """A handler for both modes (its ``params`` annotation, ElicitRequestParams, admits URL)."""
    from mcp.types import ElicitRequestURLParams, ElicitResult

    if isinstance(params, ElicitRequestURLParams):
        assert params.url == "https://example.com/connect"
        return ElicitResult(action="accept")
    return ElicitResult(action="accept", content={"dish": "soup"})


async def _sample(context: Any, params: Any) -> Any:
    from mcp.types import CreateMessageResult, TextContent

    text = params.messages[0].content.text
    return CreateMessageResult(
        role="assistant", content=TextContent(type="text", text=text.upper()), model="m"
    )


def _annotated() -> Any:
    from mcp.types import ElicitRequestParams, ElicitResult

    async def elicit(context: Any, params: ElicitRequestParams) -> ElicitResult:
        result: ElicitResult = await _elicit(context, params)
        return result

    return elicit


def _spec(transport: str, url: str | None, **extra: Any) -> dict[str, Any]:
    if transport == "stdio":
        return {"command": sys.executable, "args": [INPUT_SERVER], **extra}
    return {"url": url, **extra}


def _handlers(**extra: Any) -> dict[str, Any]:
    return {
        "elicitation_handler": _annotated(),
        "sampling_handler": _sample,
        "roots": ["file:///work/a", "file:///work/b"],
        **extra,
    }


@contextlib.contextmanager
def _served_http() -> Iterator[int]:
    """``tests/mcp_input_server.py`` over streamable HTTP in a subprocess; its port."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, INPUT_SERVER, "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60  # a loaded machine takes a while to import the SDK
        while True:  # wait until it listens
            with socket.socket() as client:
                if client.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the MCP HTTP server did not start")
            time.sleep(0.05)
        yield port
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture(params=["stdio", "http"])
def transport(request: pytest.FixtureRequest) -> Iterator[tuple[str, str | None]]:
    if request.param == "stdio":
        yield "stdio", None
        return
    with _served_http() as port:
        yield "http", f"http://127.0.0.1:{port}/mcp"


@pytest.mark.parametrize(
    ("protocol", "version", "how"),
    [("auto", MODERN, "input_required"), ("legacy", LEGACY, "request")],
)
async def test_elicitation_sampling_and_roots_are_answered_on_both_generations(
    transport: tuple[str, str | None], protocol: str, version: str, how: str
) -> None:
    kind, url = transport
    config = {"s": _spec(kind, url, protocol=protocol, **_handlers())}
    async with mcp_servers(config) as tools:
        assert tools.protocols == {"s": version}
        named = {t.name: t for t in tools}
        # form mode; SEP-1034 defaults (size, count) come from the schema
        assert await named["s_ask_form"].invoke({}) == {
            "action": "accept",
            "data": {"dish": "soup", "size": "large", "count": 2},
            "how": how,
        }
        assert await named["s_sample_it"].invoke({"prompt": "hi"}) == {"text": "HI", "how": how}
        assert await named["s_list_them"].invoke({}) == {
            "roots": ["file:///work/a", "file:///work/b"],
            "how": how,
        }
        url_answer = await named["s_ask_url"].invoke({})
        assert url_answer["action"] == "accept" and url_answer["how"] == how
        if how == "input_required":
            assert url_answer["state"] == "s1"  # the requestState came back byte-exact
        recorded = await named["s_how_asked"].invoke({})
    asked = [entry for entry in recorded if entry[0] != "how_asked"]
    if kind == "stdio":  # one server process per connection: only this test's calls
        assert asked == [
            [tool, version, how] for tool in ("ask_form", "sample_it", "list_them", "ask_url")
        ]
    else:
        assert {(t, v, h) for t, v, h in asked} >= {
            (t, version, how) for t in ("ask_form", "sample_it", "list_them", "ask_url")
        }


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_a_handler_that_raises_or_hangs_fails_the_call_as_data_on_both_generations(
    protocol: str,
) -> None:
    async def broken(context: Any, params: Any) -> Any:
        raise RuntimeError("the user's secret answer: hunter2")

    async def hanging(context: Any, params: Any) -> Any:
        await asyncio.sleep(60)

    config = {
        "b": _spec("stdio", None, protocol=protocol, elicitation_handler=broken),
        "h": _spec("stdio", None, protocol=protocol, sampling_handler=hanging, handler_timeout=0.5),
    }
    async with mcp_servers(config) as tools:
        assert set(tools.protocols.values()) == {MODERN if protocol == "auto" else LEGACY}
        outcomes = await run_batch(
            [
                ToolCall("1", "b_ask_form", {}),
                ToolCall("2", "h_sample_it", {"prompt": "x"}),
                ToolCall("3", "b_lookup", {"key": "k", "delay": 0}),
            ],
            tools,
        )
        again = await run_batch([ToolCall("4", "h_lookup", {"key": "j", "delay": 0})], tools)
    assert not outcomes[0].ok and "hunter2" not in outcomes[0].text
    assert "elicitation handler failed (RuntimeError)" in outcomes[0].text
    assert not outcomes[1].ok and "did not answer within 0.5 s" in outcomes[1].text
    if protocol == "auto":  # failed on our side, naming the server
        assert "MCP server 'b'" in outcomes[0].text and "MCP server 'h'" in outcomes[1].text
    assert outcomes[2].value == "value of k"
    assert again[0].value == "value of j"  # the lane, and the server, go on


async def test_a_server_asking_for_input_forever_fails_the_call_naming_it() -> None:
    asked: list[str] = []

    async def answer(context: Any, params: Any) -> Any:
        from mcp.types import ElicitResult

        asked.append(params.message)
        return ElicitResult(action="accept", content={"n": 1})

    config = {"f": _spec("stdio", None, elicitation_handler=answer)}
    async with mcp_servers(config) as tools:
        outcomes = await run_batch(
            [ToolCall("1", "f_ask_forever", {}), ToolCall("2", "f_lookup", {"key": "k"})], tools
        )
    assert not outcomes[0].ok
    assert (
        "MCP server 'f' was still asking for input (InputRequiredResult) after 10 rounds"
        in outcomes[0].text
    )
    assert asked == [f"Round {n}" for n in range(1, 11)]  # bounded: ten rounds, then no more
    assert outcomes[1].value == "value of k"


async def test_a_huge_request_state_is_not_echoed_back() -> None:
    asked: list[str] = []

    async def answer(context: Any, params: Any) -> Any:
        from mcp.types import ElicitResult

        asked.append(params.message)
        return ElicitResult(action="accept", content={"n": 1})

    config = {"x": _spec("stdio", None, elicitation_handler=answer, timeout=60)}
    async with mcp_servers(config) as tools:
        named = {t.name: t for t in tools}
        # a small state is echoed byte-exact
        assert await named["x_huge_state"].invoke({"megabytes": 1}) == (
            f"echoed {1024 * 1024} characters"
        )
        assert len(asked) == 1
        outcomes = await run_batch(
            [
                ToolCall("1", "x_huge_state", {"megabytes": 5}),
                ToolCall("2", "x_lookup", {"key": "k"}),
            ],
            tools,
        )
    assert not outcomes[0].ok
    # (the SDK's server seals its state, so 5 MB of it is about 7 million characters)
    assert "MCP server 'x' asked for input with a requestState of " in outcomes[0].text
    assert "characters (at most 4,194,304 are echoed back)" in outcomes[0].text
    assert len(asked) == 1  # the user was not asked for a call that could not go on
    assert outcomes[1].value == "value of k"


async def test_a_changed_tool_list_is_heard_on_a_2026_connection() -> None:
    async with mcp_servers({"s": _spec("stdio", None)}) as tools:
        assert tools.protocols == {"s": MODERN}
        named = {t.name: t for t in tools}
        assert await named["s_grow"].invoke({"name": "fresh"}) == "grew fresh"
        for _ in range(100):
            if any(t.name == "s_fresh" for t in tools):
                break
            await asyncio.sleep(0.05)
        fresh = next(t for t in tools if t.name == "s_fresh")
        assert await fresh.invoke({}) == "I am fresh"


def _raw(record: Path, **extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [RAW, "plain", str(record)], **extra}


def _methods(record: Path) -> list[str]:
    return [json.loads(line)["method"] for line in record.read_text().splitlines()]


async def test_a_server_that_knows_only_the_handshake_is_spoken_to_as_before(
    tmp_path: Path,
) -> None:
    auto, legacy = tmp_path / "auto.jsonl", tmp_path / "legacy.jsonl"
    config = {"a": _raw(auto), "l": _raw(legacy, protocol="legacy")}
    async with mcp_servers(config) as tools:
        assert tools.protocols == {"a": LEGACY, "l": LEGACY}
        named = {t.name: t for t in tools}
        assert await named["a_t00"].invoke({}) == "t00 ran"
        assert await named["l_t00"].invoke({}) == "t00 ran"
    # auto: one server/discover probe, then the handshake, as the SDK's Client(mode="auto")
    assert _methods(auto)[:3] == ["server/discover", "initialize", "notifications/initialized"]
    assert _methods(legacy)[:2] == ["initialize", "notifications/initialized"]


async def test_a_pinned_revision_the_server_does_not_speak_is_a_named_failure(
    tmp_path: Path,
) -> None:
    config = {
        "old": _raw(tmp_path / "r.jsonl", protocol=MODERN),
        "new": _spec("stdio", None, protocol=MODERN),
    }
    async with mcp_servers(config) as tools:
        assert "MCP server 'old' did not answer server/discover" in tools.failures["old"]
        assert "its entry pins protocol 2026-07-28" in tools.failures["old"]
        assert tools.protocols == {"new": MODERN}


def test_the_protocol_setting_is_checked() -> None:
    (server,) = parse_config({"x": {"command": "s"}})
    assert server.protocol == "auto" and server.task_calls == "auto"
    for given in ("legacy", "auto", MODERN):
        (server,) = parse_config({"x": {"command": "s", "protocol": given}})
        assert server.protocol == given
    for wrong in ("2025-11-25", "newest", 2026):
        with pytest.raises(ConfigurationError, match="'x': protocol must be"):
            parse_config({"x": {"command": "s", "protocol": wrong}})


@pytest.mark.parametrize(
    ("settings", "as_task"),
    [
        ({}, False),  # auto, the default 120 s timeout: not long
        ({"timeout": 600}, True),  # auto, a timeout above 120 s: long, so a task
        ({"timeout": 600, "task_calls": "required"}, False),
        ({"task_calls": "optional"}, True),
    ],
)
async def test_a_tool_that_allows_tasks_is_called_as_one_when_its_calls_are_long(
    tmp_path: Path, settings: dict[str, Any], as_task: bool
) -> None:
    record = tmp_path / "requests.jsonl"
    async with mcp_servers({"r": _raw(record, **settings)}) as tools:
        named = {t.name: t for t in tools}
        answer = await named["r_task_optional"].invoke({})
        assert answer == ("task_optional done" if as_task else "task_optional ran")
        assert await named["r_task"].invoke({}) == "task done"  # required: always a task
    calls = [
        json.loads(line)["params"]
        for line in record.read_text().splitlines()
        if '"tools/call"' in line
    ]
    optional = next(c for c in calls if c["name"] == "task_optional")
    assert ("task" in optional) is as_task
