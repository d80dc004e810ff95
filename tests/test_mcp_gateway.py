"""``toolnexus mcp serve``: the gateway, driven by a real MCP client (the SDK's ClientSession)
over stdio and streamable HTTP, in front of a real upstream MCP server (``tests/mcp_server.py``)
in a subprocess. Overlap is observed inside the upstream server (its ``stats`` tool)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from conftest import free_port, listening

HERE = Path(__file__).parent
UPSTREAM = str(HERE / "mcp_server.py")


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {"up": {"command": sys.executable, "args": [UPSTREAM]}},
                "toolnexus": {"approval": ["up_store"], "max_parallel": 4},
            }
        )
    )
    return path


def serve_command(config: Path, *extra: str) -> list[str]:
    return ["-m", "toolnexus.cli", "mcp", "serve", "--config", str(config), *extra]


def gateway_process(config: Path, *extra: str) -> StdioServerParameters:
    """The gateway as a stdio server, with this environment (the SDK passes a child only a
    few variables by default, so a PYTHONPATH naming the sources under test would be lost)."""
    return StdioServerParameters(
        command=sys.executable, args=serve_command(config, *extra), env=dict(os.environ)
    )


@asynccontextmanager
async def gateway(
    config: Path, *extra: str, elicitation: Any = None
) -> AsyncIterator[ClientSession]:
    params = gateway_process(config, *extra)
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, elicitation_callback=elicitation) as session,
    ):
        await session.initialize()
        yield session


async def run_code(session: ClientSession, code: str, **options: Any) -> Any:
    result = await session.call_tool("run_code", {"code": code}, **options)
    assert isinstance(result, types.CallToolResult)
    return result


FAN_OUT = """
import asyncio
await tools.up_stats({"reset": True})
values = await asyncio.gather(*[tools.up_lookup({"key": f"k{i}", "delay": 0.3}) for i in range(4)])
peak = (await tools.up_stats({"reset": True}))["peak"]
{"values": values, "peak": peak}
"""


async def test_run_code_fans_out_reads_and_lists_the_upstream_sdk(config: Path) -> None:
    async with gateway(config) as session:
        listed = (await session.list_tools()).tools
        assert [t.name for t in listed] == ["run_code"]
        description = listed[0].description or ""
        assert "up_lookup" in description and "up_store" in description
        steps: list[tuple[float, float | None, str | None]] = []

        async def progress(done: float, total: float | None, message: str | None) -> None:
            steps.append((done, total, message))

        result = await run_code(session, FAN_OUT, progress_callback=progress)
    assert not result.is_error, result.content
    output = result.structured_content
    assert output is not None
    assert output["result"]["values"] == [f"value of k{i}" for i in range(4)]
    assert output["result"]["peak"] == 4  # observed inside the upstream server
    finished = [m for _, _, m in steps if m and "(up_lookup) finished" in m]
    assert len(finished) == 4  # each message names its sub-call
    done = [d for d, _, _ in steps]
    assert done == sorted(set(done))  # strictly increasing (the spec's MUST)
    assert steps[-1][1] == steps[-1][0]  # the total, once known
    assert "6 of 6 calls done" in (steps[-1][2] or "")  # 1 + 4 + 1 calls


async def test_an_unannotated_write_is_a_barrier_and_results_are_in_order(config: Path) -> None:
    program = """
import asyncio

async def caught(call):
    try:
        return await call
    except Exception as failure:
        return str(failure)

await tools.up_stats({"reset": True})
got = await asyncio.gather(
    caught(tools.up_lookup({"key": "a", "delay": 0.2})),
    caught(tools.up_explode({"message": "no"})),
    caught(tools.up_lookup({"key": "b", "delay": 0.2})),
)
peak = (await tools.up_stats({"reset": True}))["peak"]
[str(g) for g in got] + [peak]
"""
    async with gateway(config) as session:
        result = await run_code(session, program)
    values = result.structured_content["result"]
    assert values[0] == "value of a" and values[2] == "value of b"
    assert "explode" in values[1]  # the failure reached the program as data
    assert values[3] == 1  # explode (no annotations) ran alone, so the reads never overlapped


async def answer(action: str, approve: bool = True) -> Any:
    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert "up_store" in params.message
        return types.ElicitResult(action=action, content={"approve": approve})

    return elicit


@pytest.mark.parametrize(
    ("how", "ran"),
    [
        (("accept", True), True),
        (("accept", False), False),
        (("decline", True), False),
        (None, False),
    ],
)
async def test_approval_goes_to_the_human_through_elicitation(
    config: Path, how: tuple[str, bool] | None, ran: bool
) -> None:
    elicitation = await answer(*how) if how else None
    program = 'await tools.up_store({"key": "x", "delay": 0.0})'
    async with gateway(config, elicitation=elicitation) as session:
        result = await run_code(session, program)
    output = result.structured_content
    if ran:
        assert output["result"] == "stored x"
    else:  # refused, never run (without elicitation there is no one to ask)
        assert "error" in output
        assert output["calls"][0]["status"] == "error"


async def test_a_cancelled_program_is_stopped_and_audited(config: Path, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    program = 'await tools.up_lookup({"key": "slow", "delay": 30})'
    async with gateway(config, "--audit-log", str(audit)) as session:
        call = asyncio.ensure_future(run_code(session, program))
        deadline = time.monotonic() + 20
        while not (audit.exists() and "tool_call" in audit.read_text()):
            assert time.monotonic() < deadline, "the program never started its call"
            await asyncio.sleep(0.05)
            if call.done():
                break
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        deadline = time.monotonic() + 20
        while "code_run_cancelled" not in audit.read_text():
            assert time.monotonic() < deadline, audit.read_text()
            await asyncio.sleep(0.05)
        again = await run_code(session, 'await tools.up_lookup({"key": "after", "delay": 0})')
    assert again.structured_content["result"] == "value of after"  # the gateway goes on
    events = [json.loads(line) for line in audit.read_text().splitlines()]
    events = [e for e in events if e["type"] != "call_timing"]  # (tests/test_view.py's)
    types_seen = [e["type"] for e in events]
    assert types_seen[:3] == ["code_run", "tool_call", "code_run_cancelled"]
    assert events[1]["data"]["id"].endswith(":code:1")


@pytest.fixture
def http_gateway(config: Path) -> Iterator[str]:
    port = free_port()
    command = [sys.executable, *serve_command(config, "--transport", "http", "--port", str(port))]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if not listening(port, process, seconds=30):
        process.kill()
        pytest.fail(f"the HTTP gateway did not start: {process.communicate()[1]!r}")
    yield f"http://127.0.0.1:{port}/mcp"
    process.terminate()
    process.wait(timeout=10)
    if process.stderr is not None:
        process.stderr.close()


async def test_the_gateway_over_streamable_http(http_gateway: str) -> None:
    async with (
        streamable_http_client(http_gateway) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        result = await run_code(session, FAN_OUT)
    assert result.structured_content["result"]["peak"] == 4


async def test_an_upstream_server_that_fails_is_named_and_the_others_serve(
    tmp_path: Path,
) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "up": {"command": sys.executable, "args": [UPSTREAM]},
                    "gone": {"command": str(tmp_path / "no-such-server")},
                }
            }
        )
    )
    async with gateway(path) as session:
        description = (await session.list_tools()).tools[0].description or ""
        result = await run_code(session, 'await tools.up_lookup({"key": "k", "delay": 0})')
    assert "Unavailable servers" in description and "gone" in description
    assert result.structured_content["result"] == "value of k"


async def test_both_mode_offers_the_tools_themselves(config: Path) -> None:
    async with gateway(config, "--mode", "both") as session:
        names = [t.name for t in (await session.list_tools()).tools]
        direct = await session.call_tool("up_lookup", {"key": "d", "delay": 0})
        refused = await session.call_tool("up_store", {"key": "d"})  # needs approval: no one
    assert names[0] == "run_code" and {"up_lookup", "up_store", "up_stats"} <= set(names)
    assert isinstance(direct, types.CallToolResult) and not direct.is_error
    assert "value of d" in direct.content[0].text  # type: ignore[union-attr]
    assert isinstance(refused, types.CallToolResult) and refused.is_error


def test_a_bad_config_is_one_line_on_stderr(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {}, "toolnexus": {"colour": "blue"}}))
    done = subprocess.run(
        [sys.executable, *serve_command(path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2  # a config error is the command line's: exit 2, as documented
    assert "unknown toolnexus option(s) colour" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


async def test_an_upstream_server_that_dies_mid_run_fails_only_its_calls(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    servers = {name: {"command": sys.executable, "args": [UPSTREAM]} for name in ("a", "b")}
    path.write_text(json.dumps({"mcpServers": servers}))
    program = """
async def caught(call):
    try:
        return await call
    except Exception as failure:
        return "failed: " + str(failure)

first = await caught(tools.a_die({}))
second = await caught(tools.a_lookup({"key": "x", "delay": 0}))
third = await tools.b_lookup({"key": "y", "delay": 0})
[first, second, third]
"""
    async with gateway(path) as session:
        result = await run_code(session, program)
        later = await run_code(session, 'await tools.b_lookup({"key": "z", "delay": 0})')
    first, second, third = result.structured_content["result"]
    assert first.startswith("failed:") and second.startswith("failed:")
    assert third == "value of y"
    assert later.structured_content["result"] == "value of z"  # the gateway keeps serving


async def test_hundreds_of_tools_are_found_with_tool_search(tmp_path: Path) -> None:
    many = tmp_path / "many.py"
    many.write_text(
        "from toolnexus import Tool, ToolHints\n\n"
        "def make(i):\n"
        "    topic = ['weather', 'stocks', 'sports', 'news'][i % 4]\n"
        "    def report(args):\n"
        "        return f'report {i} for {args.get(\"city\")}'\n"
        "    return Tool(f'{topic}_{i}', f'The {topic} report number {i}.',\n"
        "                {'type': 'object', 'properties': {'city': {'type': 'string'}}},\n"
        "                execute=report, hints=ToolHints(read_only=True))\n\n"
        "TOOLS = [make(i) for i in range(200)]\n"
    )
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {}}))
    async with gateway(path, "--tools", f"{many}:TOOLS") as session:
        listed = {t.name: t for t in (await session.list_tools()).tools}
        found = await session.call_tool("tool_search", {"query": "weather report", "limit": 3})
        result = await run_code(session, 'await tools.weather_8({"city": "Oslo"})')
    assert set(listed) == {"run_code", "tool_search"}
    description = listed["run_code"].description or ""
    assert len(description.encode()) < 10 * 1024 and "async def weather_8" not in description
    assert "200 tools; too many to declare here" in description and "search_tools(" in description
    assert isinstance(found, types.CallToolResult) and not found.is_error
    declarations = found.content[0].text  # type: ignore[union-attr]
    assert declarations.count("async def weather_") == 3 and "stocks_" not in declarations
    assert result.structured_content["result"] == "report 8 for Oslo"


FILESYSTEM_PACKAGE = "@modelcontextprotocol/server-filesystem@2026.8.31"


@pytest.fixture(scope="session")
def filesystem_server() -> str:
    """The official npm filesystem MCP server, installed from the npm registry once."""
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed, so the official filesystem MCP server cannot be")
    prefix = Path(tempfile.gettempdir()) / "toolnexus-tests-npm" / "server-filesystem-2026.8.31"
    binary = prefix / "node_modules" / ".bin" / "mcp-server-filesystem"
    if not binary.exists():
        subprocess.run(
            [npm, "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(prefix),
             FILESYSTEM_PACKAGE],
            check=True, timeout=300, capture_output=True,
        )  # fmt: skip
    return str(binary)


async def test_the_official_filesystem_server_behind_the_gateway(
    filesystem_server: str, tmp_path: Path
) -> None:
    root = tmp_path / "notes"
    root.mkdir()
    for i in range(6):
        (root / f"n{i}.txt").write_text(f"note {i}\n")
    path = tmp_path / "mcp.json"
    servers = {"fs": {"command": filesystem_server, "args": [str(root)]}}
    # the 14 tools' SDK is past the threshold: an index, with one tool declared in full
    options = {"always_loaded": ["fs_read_text_file"]}
    path.write_text(json.dumps({"mcpServers": servers, "toolnexus": options}))
    program = f"""
import asyncio
texts = await asyncio.gather(*[
    tools.fs_read_text_file({{"path": "{root}/n" + str(i) + ".txt"}}) for i in range(6)
])
summary = " | ".join(t["content"].strip() for t in texts)
await tools.fs_write_file({{"path": "{root}/summary.txt", "content": summary}})
summary
"""
    async with gateway(path) as session:
        description = (await session.list_tools()).tools[0].description or ""
        result = await run_code(session, program)
    assert "async def fs_read_text_file(" in description
    assert "-> FsReadTextFileResult" in description  # typed from the server's outputSchema
    assert "fs_write_file(content: str, path: str): Create a new file" in description
    assert "async def fs_write_file(" not in description and "search_tools" in description
    expected = " | ".join(f"note {i}" for i in range(6))
    assert result.structured_content["result"] == expected, result.content
    assert (root / "summary.txt").read_text() == expected


async def test_an_upstream_tool_list_change_reaches_the_client(config: Path) -> None:
    changed = asyncio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    params = gateway_process(config)
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, message_handler=on_message) as session,
    ):
        await session.initialize()
        before = (await session.list_tools()).tools[0].description or ""
        grown = await run_code(session, 'await tools.up_grow({"name": "fresh"})')
        await asyncio.wait_for(changed.wait(), 20)
        after = (await session.list_tools()).tools[0].description or ""
        fresh = await run_code(session, "await tools.up_fresh({})")
    assert grown.structured_content["result"] == "grew fresh"
    assert "up_fresh" not in before and "up_fresh" in after  # the SDK was rendered again
    assert fresh.structured_content["result"] == "I am fresh"


async def test_the_config_sets_a_permission_policy_and_budgets(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {"up": {"command": sys.executable, "args": [UPSTREAM]}},
                "toolnexus": {"policy": {"deny": ["up_store"]}, "budgets": {"timeout": 2}},
            }
        )
    )
    denied = """
try:
    await tools["up_store"]({"key": "k", "delay": 0})
    outcome = "ran"
except ToolError as failure:
    outcome = str(failure)
outcome
"""
    async with gateway(path) as session:
        description = (await session.list_tools()).tools[0].description or ""
        refused = await run_code(session, denied)
        slow = await run_code(session, 'await tools.up_lookup({"key": "k", "delay": 10})')
    assert "up_lookup" in description and "up_store" not in description
    assert refused.structured_content["result"] != "ran"
    assert slow.structured_content["error"]["kind"] == "timeout"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"policy": {"dney": ["x"]}}, "toolnexus.policy"),
        ({"policy": ["x"]}, "toolnexus.policy must be an object"),
        ({"budgets": 5}, "toolnexus.budgets must be an object"),
        ({"approval": "x"}, "toolnexus.approval must be a list"),
    ],
)
def test_bad_gateway_options_are_named(options: dict[str, Any], message: str) -> None:
    from toolnexus.errors import ConfigurationError
    from toolnexus.mcp import gateway_options

    with pytest.raises(ConfigurationError, match=message):
        gateway_options({"mcpServers": {}, "toolnexus": options})


async def test_a_programs_upstream_calls_get_the_one_by_one_results(tmp_path: Path) -> None:
    # An upstream whose tools share state (see tests/test_result_snapshot.py): each
    # sub-call's result, as the program reads it, is what the upstream answered when it
    # finished, in the gateway as in process.
    from test_result_snapshot import one_by_one, program, random_sequences

    stateful = str(HERE / "mcp_stateful_server.py")
    for number, ops in enumerate(random_sequences(3, seed=3)):
        path = tmp_path / f"stateful{number}.json"
        servers = {"st": {"command": sys.executable, "args": [stateful]}}
        path.write_text(json.dumps({"mcpServers": servers, "toolnexus": {"max_parallel": 4}}))
        code = program(ops, "python").replace("tools.read(", "tools.st_read(")
        code = code.replace("tools.write(", "tools.st_write(")
        async with gateway(path) as session:
            result = await run_code(session, code)
        assert not result.is_error, result.content
        assert result.structured_content == {"result": one_by_one(ops), "logs": []}
