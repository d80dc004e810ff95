"""MCP tools from a real MCP server (the SDK's MCPServer) in a subprocess, over stdio and HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolnexus import Resources
from toolnexus.errors import ConfigurationError
from toolnexus.scheduling import ToolCall, concurrency_mode, run_batch
from toolnexus.tools.mcp import mcp_servers, parse_config

SERVER = str(Path(__file__).parent / "mcp_server.py")


def stdio(**extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [SERVER], **extra}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@contextlib.contextmanager
def _served(transport: str) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """The test server over HTTP (``http``: streamable, or ``sse``) in a subprocess."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, SERVER, transport, str(port)],
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
            time.sleep(0.05)
        yield port, process
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture
def http_url() -> Iterator[str]:
    with _served("http") as (port, _):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(params=["stdio", "http"])
def config(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The test server over each transport. (Tests open it themselves: an MCP connection must
    be closed by the task that opened it, and async fixtures tear down in another task.)"""
    spec = stdio() if request.param == "stdio" else {"url": request.getfixturevalue("http_url")}
    return {"mcpServers": {"test": spec}}


async def test_tools_are_named_and_classified_by_their_annotations(config: dict[str, Any]) -> None:
    async with mcp_servers(config) as tools:
        named = {t.name: t for t in tools}
        assert set(named) == {
            "test_lookup", "test_store", "test_stats", "test_explode", "test_die", "test_grow",
            "test_ask", "test_sign_in", "test_sample", "test_roots", "test_capabilities", "test_progress", "test_image",
        }  # fmt: skip
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


# -- transports and servers that fail ------------------------------------------------------------


async def test_the_sse_transport() -> None:
    with _served("sse") as (port, _):
        config = {"mcpServers": {"old": {"url": f"http://127.0.0.1:{port}/sse", "type": "sse"}}}
        async with mcp_servers(config) as tools:
            assert not tools.failures
            named = {t.name: t for t in tools}
            assert await named["old_lookup"].invoke({"key": "k", "delay": 0}) == "value of k"


def _silent_server() -> tuple[socket.socket, int]:
    """Accepts connections and never answers (a hung server)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                held.append(listener.accept()[0])

    threading.Thread(target=accept, daemon=True).start()
    return listener, listener.getsockname()[1]


async def test_unreachable_refusing_and_slow_http_servers_are_failures_not_crashes() -> None:
    silent, silent_port = _silent_server()
    refused = _free_port()  # nothing listens there
    config = {
        "mcpServers": {
            "good": stdio(),
            "refused": {"url": f"http://127.0.0.1:{refused}/mcp"},
            "unroutable": {"url": "http://not-a-host.invalid/mcp", "connect_timeout": 2},
            "slow": {"url": f"http://127.0.0.1:{silent_port}/mcp", "connect_timeout": 1},
            "slow_sse": {
                "url": f"http://127.0.0.1:{silent_port}/sse",
                "type": "sse",
                "connect_timeout": 1,
            },
        }
    }
    started = time.monotonic()
    try:
        async with mcp_servers(config) as tools:
            assert set(tools.failures) == {"refused", "unroutable", "slow", "slow_sse"}
            assert "within 1 s (connect_timeout)" in tools.failures["slow"]
            assert all("\n" not in why for why in tools.failures.values())
            lookup = next(t for t in tools if t.name == "good_lookup")
            assert await lookup.invoke({"key": "k", "delay": 0}) == "value of k"
    finally:
        silent.close()
    assert time.monotonic() - started < 20  # connected at once, each bounded by its timeout


async def test_a_server_that_dies_fails_only_its_own_calls() -> None:
    with _served("http") as (port, process):
        config = {
            "mcpServers": {
                "mortal": {"url": f"http://127.0.0.1:{port}/mcp", "timeout": 5},
                "good": stdio(),
            }
        }
        async with mcp_servers(config) as tools:
            named = {t.name: t for t in tools}
            assert await named["mortal_lookup"].invoke({"key": "a", "delay": 0}) == "value of a"
            process.kill()
            process.wait(10)
            outcomes = await run_batch(
                [
                    ToolCall("1", "mortal_lookup", {"key": "b", "delay": 0}),
                    ToolCall("2", "good_lookup", {"key": "c", "delay": 0}),
                ],
                tools,
            )
            assert outcomes[0].error is not None and outcomes[0].error["message"]
            assert outcomes[1].value == "value of c"


async def test_servers_may_be_opened_and_closed_in_different_tasks() -> None:
    """Each server lives in a task of its own, so the caller's tasks do not matter."""
    manager = mcp_servers({"mcpServers": {"s": stdio()}})
    tools = await asyncio.ensure_future(manager.__aenter__())
    assert [t.name for t in tools if t.name == "s_lookup"] == ["s_lookup"]
    await asyncio.ensure_future(manager.__aexit__(None, None, None))


def test_transports_are_named_and_checked() -> None:
    parsed = parse_config(
        {"a": {"url": "http://h/mcp"}, "b": {"url": "http://h/sse", "type": "sse"}, "c": stdio()}
    )
    assert [s.transport for s in parsed] == ["http", "sse", "stdio"]
    with pytest.raises(ConfigurationError, match="transport must be one of"):
        parse_config({"x": {"url": "http://h", "transport": "carrier-pigeon"}})
    with pytest.raises(ConfigurationError, match="connect_timeout"):
        parse_config({"x": {"url": "http://h", "connect_timeout": -1}})


async def test_resources_from_argument_names_let_writes_to_different_keys_overlap() -> None:
    config = {"mcpServers": {"s": stdio(resources={"store": {"writes_arg": "key"}})}}
    async with mcp_servers(config) as tools:
        named = {t.name: t for t in tools}
        assert named["s_lookup"].resources is None  # no entry: its annotations decide
        different = [ToolCall(f"w{k}", "s_store", {"key": k, "delay": 0.1}) for k in "abc"]
        assert all(o.ok for o in await run_batch(different, tools))
        assert await named["s_stats"].invoke({}) == {"peak": 3}
        same = [ToolCall(f"x{i}", "s_store", {"key": "a", "delay": 0.05}) for i in range(3)]
        assert all(o.ok for o in await run_batch(same, tools))
        assert await named["s_stats"].invoke({}) == {"peak": 1}
        # an argument that is not a key: the call keeps its class (unsafe: runs alone)
        assert named["s_store"].resources is not None
        assert named["s_store"].resources({"key": 7}) is None
        assert named["s_store"].resources({"key": ["a", "b"]}) == Resources(writes=["a", "b"])


@pytest.mark.parametrize(
    "resources",
    [
        ["store"],
        {"store": "key"},
        {"store": {"writes": "key"}},
        {"store": {}},
        {"store": {"writes_arg": 3}},
        {"store": {"reads_arg": ["key", None]}},
    ],
)
def test_a_malformed_resources_setting_is_a_named_configuration_error(resources: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"'s'.*resources"):
        parse_config({"s": {"command": "x", "resources": resources}})


# -- lists, content parts, tasks, capabilities, progress -----------------------------------------

RAW = str(Path(__file__).parent / "mcp_raw_server.py")


def raw(mode: str = "plain", record: Path | None = None, **extra: Any) -> dict[str, Any]:
    args = [RAW, mode, *([str(record)] if record else [])]
    return {"command": sys.executable, "args": args, **extra}


async def test_every_page_of_tools_is_listed() -> None:
    async with mcp_servers({"p": raw("paged")}) as tools:
        assert not tools.failures
        names = {t.name for t in tools}
    assert {f"p_t{i:02}" for i in range(15)} <= names  # 15 tools in pages of 5


async def test_every_content_part_comes_back_whole_under_mcps_names() -> None:
    from toolnexus.tools.mcp import ContentParts

    async with mcp_servers({"r": raw()}) as tools:
        named = {t.name: t for t in tools}
        (outcome,) = await run_batch([ToolCall("1", "r_parts", {})], tools)
        value = outcome.value
        assert isinstance(value, ContentParts)
        assert [p["type"] for p in value] == [
            "text", "image", "audio", "resource_link", "resource", "resource",
        ]  # fmt: skip
        assert value[0]["annotations"] == {"audience": ["user"], "priority": 0.5}
        assert value[1]["mimeType"] == "image/png" and value[1]["_meta"] == {"k": 1}
        assert value[3] == {
            "type": "resource_link",
            "uri": "https://example.com/r/1",
            "name": "r1",
            "mimeType": "text/plain",
        }
        assert value[4]["resource"] == {
            "uri": "mem://t",
            "mimeType": "text/plain",
            "text": "inner text",
        }
        assert value[5]["resource"]["blob"] == "AQI="
        assert outcome.metadata == {
            "mcp": {"content": list(value), "isError": False, "_meta": {"trace": "abc"}}
        }
        # what a model reads: text as is, every other part as one line, no base64
        lines = outcome.text.splitlines()
        assert lines[0] == "hello"
        assert lines[1] == "[image image/png, 68 bytes]"
        assert lines[2] == "[audio audio/wav, 44 bytes]"
        assert lines[3] == "[resource_link https://example.com/r/1, text/plain, not fetched]"
        assert lines[4:6] == ["[resource mem://t, text/plain, 10 characters of text]", "inner text"]
        assert lines[6] == "[resource mem://b, application/octet-stream, 2 bytes]"
        assert value[1]["data"] not in outcome.text
        # only embedded resources: MCP's camelCase names, not the SDK's snake_case
        only = await named["r_resources"].invoke({})
        assert only == [
            {
                "type": "resource",
                "resource": {"uri": "mem://t", "mimeType": "text/plain", "text": "only"},
            }
        ]
        # structuredContent is the value; the image beside it travels in the metadata
        (structured,) = await run_batch([ToolCall("2", "r_structured", {})], tools)
        assert structured.value == {"answer": 42}
        assert structured.metadata is not None
        assert structured.metadata["mcp"]["content"][0]["type"] == "image"


async def test_code_mode_gets_the_parts_as_dicts_and_the_sdk_says_so() -> None:
    from toolnexus.codemode import render_sdk, run_program

    async with mcp_servers({"r": raw()}) as tools:
        parts = next(t for t in tools if t.name == "r_parts")
        assert "mimeType" in render_sdk("typescript", [parts])
        program = (
            "r = await tools.r_parts({})\n"
            'out = [p["type"] for p in r] + [r[1]["mimeType"]] if isinstance(r, list) else r\n'
            "out"
        )
        out = await run_program(program, [parts])
    assert out["result"] == [
        "text",
        "image",
        "audio",
        "resource_link",
        "resource",
        "resource",
        "image/png",
    ]


async def test_a_task_only_tool_is_called_as_a_task(tmp_path: Path) -> None:
    record = tmp_path / "requests.jsonl"
    async with mcp_servers({"r": raw(record=record)}) as tools:
        named = {t.name: t for t in tools}
        assert await named["r_task"].invoke({}) == "task done"
    methods = [json.loads(line)["method"] for line in record.read_text().splitlines()]
    calls = [json.loads(line) for line in record.read_text().splitlines() if '"tools/call"' in line]
    assert calls[0]["params"]["task"] == {}
    assert methods[-4:] == ["tools/call", "tasks/get", "tasks/get", "tasks/result"]


async def test_capabilities_are_declared_exactly_when_given() -> None:
    from mcp.types import ElicitRequestFormParams, ElicitRequestParams, ElicitResult

    async def form_only(context: Any, params: ElicitRequestFormParams) -> ElicitResult:
        return ElicitResult(action="decline")

    async def any_mode(context: Any, params: ElicitRequestParams) -> ElicitResult:
        return ElicitResult(action="decline")

    async def sampler(context: Any, params: Any) -> Any:
        raise AssertionError("not called")

    config = {
        "none": stdio(),
        "form": stdio(elicitation_handler=form_only),
        "all": stdio(elicitation_handler=any_mode, sampling_handler=sampler, roots=["file:///tmp"]),
    }
    async with mcp_servers(config) as tools:
        named = {t.name: t for t in tools}
        assert await named["none_capabilities"].invoke({}) == {}
        assert await named["form_capabilities"].invoke({}) == {"elicitation": {"form": {}}}
        assert await named["all_capabilities"].invoke({}) == {
            "elicitation": {"form": {}, "url": {}},
            "sampling": {},
            "roots": {"listChanged": True},
        }


async def test_elicitation_sampling_and_roots_reach_the_users_handlers() -> None:
    from mcp.types import CreateMessageResult, ElicitRequestParams, ElicitResult, TextContent

    asked: list[Any] = []

    async def elicit(context: Any, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params)
        return ElicitResult(action="accept", content={"dish": "soup"})  # size, count left out

    async def sample(context: Any, params: Any) -> CreateMessageResult:
        text = params.messages[0].content.text
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text=text.upper()), model="m"
        )

    config = {
        "s": stdio(
            elicitation_handler=elicit,
            sampling_handler=sample,
            roots=["file:///work/a", "file:///work/b"],
        )
    }
    async with mcp_servers(config) as tools:
        named = {t.name: t for t in tools}
        # SEP-1034: the fields the user left out are filled from the schema's defaults
        assert await named["s_ask"].invoke({}) == {
            "action": "accept",
            "data": {"dish": "soup", "size": "large", "count": 2},
        }
        assert asked[0].message == "What would you like?"
        assert await named["s_sample"].invoke({"prompt": "hi"}) == "HI"
        assert await named["s_roots"].invoke({}) == ["file:///work/a", "file:///work/b"]


async def test_a_handler_that_raises_or_hangs_fails_the_call_as_data_and_the_lane_goes_on() -> None:
    async def broken(context: Any, params: Any) -> Any:
        raise RuntimeError("the user's secret answer: hunter2")

    async def hanging(context: Any, params: Any) -> Any:
        await asyncio.sleep(60)

    config = {
        "b": stdio(elicitation_handler=broken),
        "h": stdio(sampling_handler=hanging, handler_timeout=0.5),
    }
    async with mcp_servers(config) as tools:
        outcomes = await run_batch(
            [
                ToolCall("1", "b_ask", {}),
                ToolCall("2", "h_sample", {"prompt": "x"}),
                ToolCall("3", "b_lookup", {"key": "k", "delay": 0}),
            ],
            tools,
        )
    assert not outcomes[0].ok and "hunter2" not in outcomes[0].text
    assert not outcomes[1].ok
    assert outcomes[2].value == "value of k"


async def test_progress_is_asked_for_and_reaches_the_hook_and_the_session_log_only() -> None:
    from toolnexus.codemode import RunContext
    from toolnexus.session import Session

    heard: list[tuple[Any, ...]] = []

    async def on_progress(*event: Any) -> None:
        heard.append(event)

    log = Session()
    async with mcp_servers({"s": stdio(on_progress=on_progress)}) as tools:
        named = {t.name: t for t in tools}
        assert await named["s_progress"].invoke({"steps": 3}, RunContext(session=log)) == "done"
    assert heard == [("s", "progress", float(i), 3.0, f"step {i}") for i in (1, 2, 3)]
    events = [e for e in log.events if e.type == "mcp_progress"]
    assert [e.data["progress"] for e in events] == [1, 2, 3]
    assert log.messages() == []  # bookkeeping, never the transcript


async def test_a_changed_tool_list_is_listed_again() -> None:
    changed: list[int] = []

    async def listener(tools: Any) -> None:
        changed.append(len(tools))

    async with mcp_servers({"s": stdio()}) as tools:
        tools.on_change(listener)
        named = {t.name: t for t in tools}
        assert await named["s_grow"].invoke({"name": "fresh"}) == "grew fresh"
        for _ in range(100):
            if any(t.name == "s_fresh" for t in tools):
                break
            await asyncio.sleep(0.05)
        fresh = next(t for t in tools if t.name == "s_fresh")
        assert await fresh.invoke({}) == "I am fresh"
    assert changed


@pytest.mark.parametrize("style", ["anthropic", "responses", "openai"])
async def test_images_reach_the_model_as_images_where_the_style_takes_them(style: str) -> None:
    from fake_provider import FakeProvider, Turn
    from test_client import client_for

    provider = FakeProvider().start()
    try:
        provider.script(Turn(calls=[("call_1", "r_parts", {})]), Turn(text="seen"))
        async with mcp_servers({"r": raw()}) as tools:
            parts = next(t for t in tools if t.name == "r_parts")
            result = await client_for(provider, style).run("look", tools=[parts])
        assert result.text == "seen"
        body = provider.requests[1]
    finally:
        provider.stop()
    png = "data:image/png;base64,"
    if style == "anthropic":
        (block,) = [
            b
            for m in body["messages"]
            if isinstance(m["content"], list)
            for b in m["content"]
            if b.get("type") == "tool_result"
        ]
        kinds = [piece["type"] for piece in block["content"]]
        assert kinds == ["text", "image", "text"]
        assert block["content"][1]["source"]["media_type"] == "image/png"
        assert block["content"][0]["text"] == "hello"
        assert "[audio audio/wav, 44 bytes]" in block["content"][2]["text"]
    elif style == "responses":
        (item,) = [i for i in body["input"] if i.get("type") == "function_call_output"]
        assert [piece["type"] for piece in item["output"]] == [
            "input_text",
            "input_image",
            "input_text",
        ]
        assert item["output"][1]["image_url"].startswith(png)
    else:  # chat completions: tool messages are text, so the image is its one-line description
        (message,) = [m for m in body["messages"] if m.get("role") == "tool"]
        assert "[image image/png, 68 bytes]" in message["content"]
        assert png not in json.dumps(body)


def test_handler_auth_and_task_settings_are_checked() -> None:
    with pytest.raises(
        ConfigurationError, match="'x': elicitation_handler must be an async callable"
    ):
        parse_config({"x": {"command": "s", "elicitation_handler": "ask"}})
    with pytest.raises(ConfigurationError, match="'x': roots must be a list of file:// URIs"):
        parse_config({"x": {"command": "s", "roots": ["https://h"]}})
    with pytest.raises(ConfigurationError, match="'x': task_calls must be"):
        parse_config({"x": {"command": "s", "task_calls": "always"}})
    with pytest.raises(ConfigurationError, match="'x': auth needs a url"):
        parse_config({"x": {"command": "s", "auth": {"headless": True}}})
    (server,) = parse_config(
        {
            "x": {
                "url": "http://h/mcp",
                "auth": {"client_secret": "s3cr3t-value"},
                "headers": {"authorization": "Bearer t0ken-value"},
            }
        }
    )
    assert "s3cr3t" not in repr(server) and "t0ken" not in repr(server)


async def test_a_malformed_auth_setting_is_a_named_failure() -> None:
    config = {"x": {"url": "http://127.0.0.1:9/mcp", "auth": {"grant": "password"}}}
    async with mcp_servers(config) as tools:
        assert "auth.grant must be" in tools.failures["x"]
    config = {"x": {"url": "http://127.0.0.1:9/mcp", "auth": {"client_id": "a"}}}
    async with mcp_servers(config) as tools:
        assert "needs a redirect_handler and a callback_handler" in tools.failures["x"]
