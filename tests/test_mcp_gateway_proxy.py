"""The gateway as a faithful proxy (``toolnexus mcp serve``), against real servers.

The upstream is ``tests/mcp_conformance_server.py`` (the conformance suite's fixtures, plus
tools that record their enter/exit into a file) over streamable HTTP; the gateway runs over
streamable HTTP in front of it. Clients: the python SDK's ``ClientSession``, and the official
TypeScript SDK client (``tests/mcp_lane_client.mjs``) for concurrent ``tools/call`` requests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from conftest import free_port, listening
from npm_tools import install, node, package

HERE = Path(__file__).parent
FIXTURE = str(HERE / "mcp_conformance_server.py")


def start(command: list[str], port: int, env: dict[str, str] | None = None) -> Any:
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env or dict(os.environ)
    )
    if not listening(port, process, seconds=60):
        process.kill()
        pytest.fail(f"{command[1:3]} did not start: {process.communicate()[1][-2000:]!r}")
    return process


def stop(process: Any) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    process.stderr.close()


def upstream_server(*extra: str, record: Path | None = None) -> tuple[Any, str]:
    port = free_port()
    env = dict(os.environ)
    if record is not None:
        env["CONFORMANCE_RECORD"] = str(record)
    process = start([sys.executable, FIXTURE, str(port), *extra], port, env)
    return process, f"http://127.0.0.1:{port}/mcp"


def gateway_server(config: Path, *extra: str) -> tuple[Any, str]:
    port = free_port()
    serve = ["mcp", "serve", "--config", str(config), "--transport", "http", "--port", str(port)]
    process = start([sys.executable, "-m", "toolnexus.cli", *serve, *extra], port)
    return process, f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The fixture upstream (recording its calls, paging its lists 2 at a time) and the
    gateway in --mode both in front of it, its tools named ``fx_<name>``, at most 2 at once."""
    folder = tmp_path_factory.mktemp("proxy")
    record = folder / "record.txt"
    upstream, upstream_url = upstream_server("--page-size", "2", record=record)
    config = folder / "gateway.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {"fx": {"url": upstream_url}},
                "toolnexus": {"max_parallel": 2, "mode": "both"},
            }
        )
    )
    gateway, gateway_url = gateway_server(config)
    try:
        yield {"upstream": upstream_url, "gateway": gateway_url, "record": record}
    finally:
        stop(gateway)
        stop(upstream)


@asynccontextmanager
async def connected(url: str, **callbacks: Any) -> AsyncIterator[ClientSession]:
    async with (
        streamable_http_client(url) as (read, write),
        ClientSession(read, write, **callbacks) as session,
    ):
        await session.initialize()
        yield session


def dump(value: Any) -> Any:
    return value.model_dump(mode="json", by_alias=True, exclude_none=True)


# -- verbatim tools --------------------------------------------------------------------------

VERBATIM_TOOLS = [
    "test_simple_text",
    "test_image_content",
    "test_audio_content",
    "test_embedded_resource",
    "test_multiple_content_types",
    "test_error_handling",
    "test_structured",
    "test_resource_link",
]


async def test_direct_tools_are_listed_and_answered_verbatim(servers: dict[str, Any]) -> None:
    async with (
        connected(servers["upstream"]) as upstream,
        connected(servers["gateway"]) as gateway,
    ):
        from toolnexus.tools._mcp import list_all

        listed_up = {t.name: t for t in await list_all(upstream, "fx")}  # it pages them
        listed_gw = {t.name: t for t in (await gateway.list_tools()).tools}
        for name in VERBATIM_TOOLS:
            theirs = dump(listed_up[name])
            ours = dump(listed_gw[f"fx_{name}"])
            # the gateway can run any direct call as a task, so a tool that does not say it
            # allows tasks is listed as allowing them; everything else is the upstream's
            execution = theirs.get("execution") or {}
            if execution.get("taskSupport") not in ("optional", "required"):
                execution = {**execution, "taskSupport": "optional"}
            assert ours == {**theirs, "name": f"fx_{name}", "execution": execution}
            direct = dump(await upstream.call_tool(name, {}))
            proxied = dump(await gateway.call_tool(f"fx_{name}", {}))
            assert proxied == direct, name
    structured = listed_gw["fx_test_structured"]
    assert structured.output_schema is not None and structured.title == "Structured answer"
    assert structured.icons and structured.meta == {"fixture": "structured"}
    assert listed_gw["fx_json_schema_2020_12_tool"].input_schema["$defs"]  # kept as it was


# -- one lane per client session -------------------------------------------------------------


def calls_from_typescript(url: str, calls: list[dict[str, Any]]) -> dict[str, Any]:
    folder, why = install()
    if why is not None:
        pytest.skip(f"the npm packages could not be installed: {why}")
    sdk = package(folder, "@modelcontextprotocol/sdk")
    if not sdk.exists():
        pytest.skip("the TypeScript SDK is not in the npm cache")
    done = subprocess.run(
        [str(node(folder)), str(HERE / "mcp_lane_client.mjs"), url, json.dumps(calls)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "MCP_SDK": str(sdk)},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


def spans(record: Path, since: int) -> list[tuple[str, str]]:
    """The recorded ``(enter|exit, tag)`` events after line ``since``, in order."""
    lines = record.read_text().splitlines()[since:] if record.exists() else []
    return [(line.split()[0], line.split()[2]) for line in lines]


def peak_in_flight(events: list[tuple[str, str]]) -> int:
    running = peak = 0
    for what, _ in events:
        running += 1 if what == "enter" else -1
        peak = max(peak, running)
    return peak


def lines_in(record: Path) -> int:
    return len(record.read_text().splitlines()) if record.exists() else 0


def call(kind: str, tag: str, delay: float) -> dict[str, Any]:
    return {"name": f"fx_record_{kind}", "arguments": {"tag": tag, "delay": delay}}


def test_concurrent_calls_of_one_session_keep_the_rule(servers: dict[str, Any]) -> None:
    """Six concurrent tools/call from the TypeScript client: three reads overlap two at a time
    (the cap), the write waits for them all, runs alone and finishes before the reads after
    it start; the answers arrive in the order the calls were sent."""
    record = servers["record"]
    before = lines_in(record)
    calls = [
        call("read", "r1", 0.4),
        call("read", "r2", 0.4),
        call("read", "r3", 0.4),
        call("write", "w", 0.2),
        call("read", "r4", 0.3),
        call("read", "r5", 0.3),
    ]
    answer = calls_from_typescript(servers["gateway"], calls)
    assert [r["content"][0]["text"] for r in answer["results"]] == [
        "read r1",
        "read r2",
        "read r3",
        "write w",
        "read r4",
        "read r5",
    ]
    assert answer["arrived"] == [0, 1, 2, 3, 4, 5]
    events = spans(record, before)
    write_in, write_out = events.index(("enter", "w")), events.index(("exit", "w"))
    assert write_out == write_in + 1  # nothing entered or left while the write ran
    assert {tag for what, tag in events[:write_in] if what == "exit"} == {"r1", "r2", "r3"}
    assert {tag for _, tag in events[write_out + 1 :]} == {"r4", "r5"}
    assert peak_in_flight(events[:write_in]) == 2  # reads overlap, up to max_parallel
    assert peak_in_flight(events[write_out + 1 :]) == 2


def test_run_code_is_a_call_of_the_sessions_lane(servers: dict[str, Any]) -> None:
    """run_code (no hints: unsafe, as in-process) waits for the read before it and holds the
    lane until it has finished; the read after it starts only then."""
    record = servers["record"]
    before = lines_in(record)
    program = 'await tools.fx_record_read({"tag": "inside", "delay": 0.1})'
    calls = [
        call("read", "before", 0.4),
        {"name": "run_code", "arguments": {"code": program}},
        call("read", "after", 0.1),
    ]
    answer = calls_from_typescript(servers["gateway"], calls)
    assert answer["results"][1]["structuredContent"]["result"] == "read inside"
    assert answer["arrived"] == [0, 1, 2]
    assert spans(record, before) == [
        ("enter", "before"),
        ("exit", "before"),
        ("enter", "inside"),
        ("exit", "inside"),
        ("enter", "after"),
        ("exit", "after"),
    ]


def test_two_sessions_have_a_lane_each(servers: dict[str, Any], tmp_path: Path) -> None:
    """A write of one client does not hold another client's read: each session is a lane.
    (The write lasts until the test says so: were the lanes one, the read would wait for it
    and the write for the read, until the fixture's bound of 60 s.)"""
    import threading
    import time

    record = servers["record"]
    before = lines_in(record)
    flag = tmp_path / "end-the-write"
    write = {
        "name": "fx_record_write",
        "arguments": {"tag": "held", "delay": 0, "until": str(flag)},
    }
    writer = threading.Thread(target=calls_from_typescript, args=(servers["gateway"], [write]))
    writer.start()
    try:
        deadline = time.monotonic() + 30
        while ("enter", "held") not in spans(record, before):
            assert time.monotonic() < deadline, "the write never started"
            time.sleep(0.05)
        calls_from_typescript(servers["gateway"], [call("read", "other", 0)])
    finally:
        flag.touch()
        writer.join(timeout=90)
    assert spans(record, before) == [
        ("enter", "held"),
        ("enter", "other"),
        ("exit", "other"),
        ("exit", "held"),
    ]


# -- run_code's output schema ----------------------------------------------------------------


async def test_run_code_answers_match_its_output_schema(servers: dict[str, Any]) -> None:
    async with connected(servers["gateway"]) as gateway:
        run_code = next(t for t in (await gateway.list_tools()).tools if t.name == "run_code")
        schema = run_code.output_schema
        assert schema is not None
        programs = {
            "finished": "1 + 1",
            "raised": "raise ValueError('no')",
            "blank": "   ",
            "printed": "print('hi')\n'done'",
        }
        for what, code in programs.items():
            result = await gateway.call_tool("run_code", {"code": code})
            assert result.structured_content is not None, what
            jsonschema.validate(result.structured_content, schema)
            assert result.is_error == ("error" in result.structured_content), what
    assert json.loads(result.content[0].text) == result.structured_content


# -- resources, prompts, completion, logging -------------------------------------------------


async def test_resources_are_aggregated_with_their_uris_as_given(servers: dict[str, Any]) -> None:
    async with (
        connected(servers["upstream"]) as upstream,
        connected(servers["gateway"]) as gateway,
    ):
        from toolnexus.tools._mcp import list_all

        theirs = [dump(r) for r in await list_all(upstream, "fx", "resources")]
        assert len(theirs) > 2  # the upstream pages them: the gateway followed its cursors
        ours = await gateway.list_resources()
        assert [dump(r) for r in ours.resources] == theirs
        templates = await gateway.list_resource_templates()
        assert [t.uri_template for t in templates.resource_templates] == [
            "test://template/{id}/data"
        ]
        for uri in ("test://static-text", "test://static-binary", "test://template/7/data"):
            assert dump(await gateway.read_resource(uri)) == dump(await upstream.read_resource(uri))
        with pytest.raises(MCPError) as missing:
            await gateway.read_resource("test://nobody-lists-this")
        assert "nobody-lists-this" in str(missing.value)
        await gateway.send_request(
            types.SubscribeRequest(
                params=types.SubscribeRequestParams(uri="test://watched-resource")
            ),
            types.EmptyResult,
        )
        await gateway.send_request(
            types.UnsubscribeRequest(
                params=types.UnsubscribeRequestParams(uri="test://watched-resource")
            ),
            types.EmptyResult,
        )


async def test_prompts_get_the_server_prefix_and_completion_is_routed(
    servers: dict[str, Any],
) -> None:
    async with (
        connected(servers["upstream"]) as upstream,
        connected(servers["gateway"]) as gateway,
    ):
        from toolnexus.tools._mcp import list_all

        theirs = await list_all(upstream, "fx", "prompts")
        ours = (await gateway.list_prompts()).prompts
        assert [p.name for p in ours] == [f"fx_{p.name}" for p in theirs]
        args = {"arg1": "hello", "arg2": "world"}
        proxied = await gateway.get_prompt("fx_test_prompt_with_arguments", args)
        direct = await upstream.get_prompt("test_prompt_with_arguments", args)
        assert dump(proxied) == dump(direct)
        image = await gateway.get_prompt("fx_test_prompt_with_image")
        assert image.messages[0].content.type == "image"
        with pytest.raises(MCPError):
            await gateway.get_prompt("test_prompt_with_arguments", args)  # not its name here
        completed = await gateway.complete(
            types.PromptReference(name="fx_test_prompt_with_arguments"),
            {"name": "arg1", "value": "par"},
        )
        assert completed.completion.values == ["paris", "park", "party"]
        by_template = await gateway.complete(
            types.ResourceTemplateReference(uri="test://template/{id}/data"),
            {"name": "id", "value": "pari"},
        )
        assert by_template.completion.values == ["paris"]


async def set_level(session: ClientSession, level: types.LoggingLevel) -> None:
    """``logging/setLevel`` (the SDK's wrapper warns that 2026-07-28 deprecates logging)."""
    request = types.SetLevelRequest(params=types.SetLevelRequestParams(level=level))
    await session.send_request(request, types.EmptyResult)


async def test_upstream_log_messages_reach_the_client_with_the_server_named(
    servers: dict[str, Any],
) -> None:
    received: list[types.LoggingMessageNotificationParams] = []

    async def logged(params: types.LoggingMessageNotificationParams) -> None:
        received.append(params)

    async with connected(servers["gateway"], logging_callback=logged) as gateway:
        assert gateway.server_capabilities is not None
        assert gateway.server_capabilities.logging is not None
        await set_level(gateway, "info")
        await gateway.call_tool("fx_test_tool_with_logging", {})
        seen = [(p.logger, p.data) for p in received]
        assert seen == [
            ("fx", "Tool execution started"),
            ("fx", "Tool processing data"),
            ("fx", "Tool execution completed"),
        ]
        received.clear()
        await set_level(gateway, "error")  # info is below it: not passed on
        await gateway.call_tool("fx_test_tool_with_logging", {})
        assert received == []


async def test_the_gateways_own_listings_are_paged(tmp_path: Path) -> None:
    upstream, url = upstream_server("--many", "250")
    config = tmp_path / "gateway.json"
    config.write_text(json.dumps({"mcpServers": {"fx": {"url": url}}}))
    gateway, gateway_url = gateway_server(config)
    try:
        async with connected(gateway_url) as session:
            first = await session.list_resources()
            assert len(first.resources) == 100 and first.next_cursor is not None
            from toolnexus.tools._mcp import list_all

            every = await list_all(session, "gateway", "resources")
            assert len(every) == 253
            assert len({r.uri for r in every}) == 253
            with pytest.raises(MCPError) as forged:
                await session.list_resources(params=types.PaginatedRequestParams(cursor="page:9x"))
            assert forged.value.error.code == types.INVALID_PARAMS
    finally:
        stop(gateway)
        stop(upstream)
