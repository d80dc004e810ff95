"""The gateway on both protocol generations: approvals, the relay of what an upstream asks of
the client (sampling, elicitation, roots), progress, the advertised capabilities, unknown
tools, streamable HTTP resumability and what ``mcp serve`` says at start.

Two real clients drive a real gateway subprocess in front of a real upstream
(``tests/mcp_server.py``, the python SDK's MCPServer, whose tools elicit, sample, list roots
and report progress): the python SDK 2.x ``mcp.Client`` in mode ``"auto"`` (it negotiates
2026-07-28: questions come back as ``InputRequiredResult`` rounds) and the official
TypeScript SDK client (2025-11-25: questions are server-initiated requests).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client, StdioServerParameters, types
from mcp.shared.exceptions import MCPError

from conftest import free_port, listening
from npm_tools import cache, node, package
from test_mcp_gateway import UPSTREAM, serve_command

MODERN = "2026-07-28"
TS_CLIENT = str(Path(__file__).parent / "mcp_gateway_ts_client.mjs")
RELAYED = """
asked = await tools.up_ask({})
sampled = await tools.up_sample({"prompt": "hello"})
roots = await tools.up_roots({})
[asked, sampled, roots]
"""
STORE = 'await tools.up_store({"key": "x", "delay": 0})'


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "mcp.json"
    servers = {"up": {"command": sys.executable, "args": [UPSTREAM]}}
    path.write_text(json.dumps({"mcpServers": servers, "toolnexus": {"approval": ["up_store"]}}))
    return path


def audited(audit: Path, kind: str) -> list[dict[str, Any]]:
    events = [json.loads(line) for line in audit.read_text().splitlines()]
    return [e["data"] for e in events if e["type"] == kind]


# -- the python SDK 2.x client: 2026-07-28 -------------------------------------------------


class Answers:
    """The python client's callbacks; records every question the gateway put to it."""

    def __init__(self, approve: str = "accept") -> None:
        self.approve = approve
        self.asked: list[tuple[str, Any]] = []

    async def elicit(self, context: Any, params: Any) -> types.ElicitResult:
        self.asked.append(("elicitation", params))
        if "approve" in json.dumps(params.requested_schema):
            if self.approve == "malformed":
                return types.ElicitResult(action="accept", content={"approve": "yes"})
            if self.approve == "accept":
                return types.ElicitResult(action="accept", content={"approve": True})
            return types.ElicitResult(action=self.approve)  # type: ignore[arg-type]
        return types.ElicitResult(action="accept", content={"dish": "py soup"})

    async def sample(self, context: Any, params: Any) -> types.CreateMessageResult:
        self.asked.append(("sampling", params))
        text = types.TextContent(type="text", text="sampled by py")
        return types.CreateMessageResult(role="assistant", content=text, model="py-model")

    async def roots(self, context: Any) -> types.ListRootsResult:
        self.asked.append(("roots", None))
        return types.ListRootsResult(roots=[types.Root(uri="file:///py/root")])


@asynccontextmanager
async def modern(
    config: Path, *extra: str, answers: Answers | None = None, declare: bool = True
) -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=sys.executable, args=serve_command(config, *extra), env=dict(os.environ)
    )
    callbacks: dict[str, Any] = {}
    if answers is not None and declare:
        callbacks = {
            "elicitation_callback": answers.elicit,
            "sampling_callback": answers.sample,
            "list_roots_callback": answers.roots,
        }
    async with Client(params, mode="auto", **callbacks) as client:
        assert client.protocol_version == MODERN  # negotiated, not assumed
        yield client


@pytest.mark.parametrize(
    ("how", "outcome"),
    [("accept", "approved"), ("decline", "declined"), ("cancel", "cancelled"),
     ("malformed", "malformed")],
)  # fmt: skip
async def test_approvals_on_2026_07_28_are_input_required_rounds(
    config: Path, tmp_path: Path, how: str, outcome: str
) -> None:
    audit = tmp_path / "audit.jsonl"
    answers = Answers(how)
    async with modern(config, "--audit-log", str(audit), answers=answers) as client:
        result = await client.call_tool("run_code", {"code": STORE})
    output = result.structured_content or {}
    assert [kind for kind, _ in answers.asked] == ["elicitation"]
    assert "up_store" in answers.asked[0][1].message
    if outcome == "approved":
        assert output["result"] == "stored x"
    else:  # refused, never run
        assert "error" in output and output["calls"][0]["status"] == "error", output
    assert [e["outcome"] for e in audited(audit, "approval_answer")] == [outcome]


async def test_upstream_requests_are_relayed_on_2026_07_28(config: Path) -> None:
    answers = Answers()
    async with modern(config, answers=answers) as client:
        result = await client.call_tool("run_code", {"code": RELAYED})
    asked, sampled, roots = (result.structured_content or {})["result"]
    assert asked == {"action": "accept", "data": {"dish": "py soup", "size": "large", "count": 2}}
    assert sampled == "sampled by py" and roots == ["file:///py/root"]
    kinds = [kind for kind, _ in answers.asked]
    assert kinds == ["elicitation", "sampling", "roots"]
    assert answers.asked[0][1].message.startswith("[MCP server 'up'] ")  # the upstream named


async def test_a_client_without_the_capability_fails_the_call_as_data(config: Path) -> None:
    program = """
try:
    outcome = await tools.up_sample({"prompt": "hello"})
except ToolError as failure:
    outcome = "failed: " + str(failure)
outcome
"""
    async with modern(config, answers=Answers(), declare=False) as client:
        result = await client.call_tool("run_code", {"code": program})
        refused = await client.call_tool("run_code", {"code": STORE})
    outcome = (result.structured_content or {})["result"]
    assert outcome.startswith("failed:") and "sampling capability" in outcome, outcome
    assert "error" in (refused.structured_content or {})  # no elicitation: approval refused


async def test_progress_on_2026_07_28(config: Path) -> None:
    steps: list[tuple[float, float | None, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        steps.append((done, total, message))

    async with modern(config, "--mode", "both") as client:
        direct = await client.call_tool("up_progress", {"steps": 3}, progress_callback=progress)
        forwarded = list(steps)
        steps.clear()
        program = 'await tools.up_lookup({"key": "a", "delay": 0})\nawait tools.up_stats({})'
        await client.call_tool("run_code", {"code": program}, progress_callback=progress)
    assert not direct.is_error
    assert forwarded == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]  # upstream's own
    done = [d for d, _, _ in steps]
    assert done == sorted(set(done)) and len(done) == 5  # two sub-calls: 4 steps, then the end
    assert "(up_lookup)" in (steps[0][2] or "") and "(up_stats)" in (steps[2][2] or "")
    assert steps[-1][1] == steps[-1][0]  # the total, once known


async def test_capabilities_and_unknown_tools_on_2026_07_28(config: Path) -> None:
    async with modern(config) as client:
        tools = client.server_capabilities.tools
        with pytest.raises(MCPError) as raised:
            await client.call_tool("no_such_tool", {})
    assert tools is not None and tools.list_changed is True
    assert raised.value.error.code == types.INVALID_PARAMS
    assert "no_such_tool" in raised.value.error.message
    assert "run_code" in raised.value.error.message  # the tools there are


# -- the TypeScript SDK client: 2025-11-25 -------------------------------------------------


@pytest.fixture(scope="session")
def ts_client() -> tuple[Path, Path]:
    folder = cache()
    sdk = package(folder, "@modelcontextprotocol/sdk")
    if not node(folder).exists() or not sdk.exists():
        pytest.skip("Node 22 and @modelcontextprotocol/sdk are not in the npm cache")
    return node(folder), sdk


def ts_run(
    ts_client: tuple[Path, Path], config: Path, *extra: str, **scenario: Any
) -> dict[str, Any]:
    """Run the TypeScript client against a gateway it starts; what it printed."""
    binary, sdk = ts_client
    scenario |= {
        "command": sys.executable,
        "args": serve_command(config, *extra),
        "env": dict(os.environ),
    }
    done = subprocess.run(
        [str(binary), TS_CLIENT, str(sdk), json.dumps(scenario)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out: dict[str, Any] = json.loads(done.stdout)
    assert out["version"] == "2025-11-25"  # negotiated, not assumed
    return out


@pytest.mark.parametrize(
    ("how", "outcome"),
    [("accept", "approved"), ("decline", "declined"), ("cancel", "cancelled"),
     ("malformed", "malformed")],
)  # fmt: skip
def test_approvals_on_2025_11_25_are_elicitation_requests(
    ts_client: tuple[Path, Path], config: Path, tmp_path: Path, how: str, outcome: str
) -> None:
    audit = tmp_path / "audit.jsonl"
    calls = [{"name": "run_code", "arguments": {"code": STORE}}]
    out = ts_run(ts_client, config, "--audit-log", str(audit), approve=how, calls=calls)
    output = out["calls"][0]["result"]["structuredContent"]
    assert [a["method"] for a in out["asked"]] == ["elicitation/create"]
    if outcome == "approved":
        assert output["result"] == "stored x"
    else:
        assert "error" in output and output["calls"][0]["status"] == "error", output
    assert [e["outcome"] for e in audited(audit, "approval_answer")] == [outcome]


def test_upstream_requests_are_relayed_to_the_typescript_client(
    ts_client: tuple[Path, Path], config: Path
) -> None:
    calls = [{"name": "run_code", "arguments": {"code": RELAYED}}]
    out = ts_run(ts_client, config, calls=calls)
    asked, sampled, roots = out["calls"][0]["result"]["structuredContent"]["result"]
    assert asked["data"]["dish"] == "ts soup" and sampled == "sampled by ts"
    assert roots == ["file:///ts/root"]
    methods = [a["method"] for a in out["asked"]]
    assert methods == ["elicitation/create", "sampling/createMessage", "roots/list"]
    for request in out["asked"]:  # each names the upstream that asked
        assert request["params"]["_meta"]["io.toolnexus/upstream"] == "up"


def test_url_elicitation_is_relayed_on_2025_11_25_naming_the_upstream(
    ts_client: tuple[Path, Path], config: Path
) -> None:
    calls = [{"name": "up_sign_in", "arguments": {}}]
    out = ts_run(ts_client, config, "--mode", "both", calls=calls)
    [request] = out["asked"]
    assert request["method"] == "elicitation/create"
    params = request["params"]
    assert params["mode"] == "url" and params["url"] == "https://example.com/sign-in"
    assert params["elicitationId"] == "in-1"
    assert params["message"] == "[MCP server 'up'] Sign in to continue"
    assert params["_meta"]["io.toolnexus/upstream"] == "up"
    assert out["calls"][0]["result"]["content"][0]["text"] == "accept"
    declined = ts_run(ts_client, config, "--mode", "both", declare=[], calls=calls)
    assert declined["asked"] == []  # no capability: the upstream is answered with an error
    assert declined["calls"][0]["result"]["isError"] is True


def test_progress_capabilities_and_unknown_tools_on_2025_11_25(
    ts_client: tuple[Path, Path], config: Path
) -> None:
    calls = [
        {"name": "up_progress", "arguments": {"steps": 3}},
        {"name": "run_code", "arguments": {"code": 'await tools.up_lookup({"key": "a"})'}},
        {"name": "no_such_tool", "arguments": {}},
    ]
    out = ts_run(ts_client, config, "--mode", "both", declare=[], calls=calls)
    direct, program, unknown = out["calls"]
    # Every notification is on the wire before the answer, in order. What the SDK hands to
    # `onprogress` is a prefix of it: notifications read together with the answer are
    # dropped by the TypeScript SDK itself (see mcp_gateway_ts_client.mjs).
    for call in (direct, program):
        assert [p["progress"] for p in call["wire"]] == [1, 2, 3], call
        assert call["progress"] == [
            {k: v for k, v in p.items() if k != "progressToken"}
            for p in call["wire"][: len(call["progress"])]
        ]
    assert all(p["total"] == 3 for p in direct["wire"])
    assert program["wire"][-1]["total"] == 3
    assert "(up_lookup)" in program["wire"][0]["message"]
    assert out["capabilities"]["tools"]["listChanged"] is True
    assert unknown["error"]["code"] == -32602 and "run_code" in unknown["error"]["message"]


# -- streamable HTTP resumability ------------------------------------------------------------


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
    process.communicate(timeout=10)


HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def sse_events(lines: Iterator[str]) -> Iterator[dict[str, str]]:
    event: dict[str, str] = {}
    for line in lines:
        if not line:
            if event:
                yield event
            event = {}
            continue
        key, _, value = line.partition(":")
        event[key] = value.lstrip()


def open_session(http: httpx.Client, url: str) -> dict[str, str]:
    """Initialise a 2025-11-25 session; the headers its requests carry."""
    hello = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    }
    answer = http.post(
        url, headers=HEADERS, json={"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                    "params": hello}
    )  # fmt: skip
    headers = {
        **HEADERS,
        "mcp-session-id": answer.headers["mcp-session-id"],
        "mcp-protocol-version": "2025-11-25",
    }
    http.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    return headers


SLOW = 'for i in range(3):\n    await tools.up_lookup({"key": str(i), "delay": 0.5})\n"end"'


def start_slow_call(http: httpx.Client, url: str, headers: dict[str, str]) -> list[dict[str, str]]:
    """Start a slow program, read its stream up to its first progress, then drop it."""
    call = {"name": "run_code", "arguments": {"code": SLOW}, "_meta": {"progressToken": "p"}}
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}
    seen: list[dict[str, str]] = []
    with http.stream("POST", url, headers=headers, json=body) as stream:
        for event in sse_events(stream.iter_lines()):
            seen.append(event)
            if "notifications/progress" in event.get("data", ""):
                break  # the stream drops here
    return seen


def test_a_dropped_stream_resumes_with_last_event_id(http_gateway: str) -> None:
    with httpx.Client(timeout=30) as http:
        headers = open_session(http, http_gateway)
        seen = start_slow_call(http, http_gateway, headers)
        time.sleep(2)  # the program goes on meanwhile
        replayed: list[dict[str, str]] = []
        resume = {**headers, "last-event-id": seen[-1]["id"]}
        with http.stream("GET", http_gateway, headers=resume) as stream:
            for event in sse_events(stream.iter_lines()):
                replayed.append(event)
                if '"id":2' in event.get("data", ""):
                    break
    priming = seen[0]
    assert priming["data"] == "" and priming["retry"] == "1000" and priming["id"]
    messages = [json.loads(e["data"]) for e in [*seen[1:], *replayed] if e.get("data")]
    progress = [m["params"]["progress"] for m in messages if m.get("method")]
    assert progress == list(range(1, 8))  # none lost, none twice
    assert messages[-1]["result"]["structuredContent"]["result"] == "end"


# -- operations ------------------------------------------------------------------------------


def serve(config: Path, *extra: str, seconds: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *serve_command(config, *extra)],
        capture_output=True,
        text=True,
        timeout=seconds,
        stdin=subprocess.DEVNULL,
    )


def test_the_start_line_names_the_address_and_the_upstreams(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    servers = {
        "up": {"command": sys.executable, "args": [UPSTREAM]},
        "gone": {"command": str(tmp_path / "no-such-server")},
    }
    path.write_text(json.dumps({"mcpServers": servers}))
    port = free_port()
    command = [sys.executable, *serve_command(path, "--transport", "http", "--port", str(port))]
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
    finally:
        process.terminate()
        process.communicate(timeout=10)
    assert f"streamable HTTP at http://127.0.0.1:{port}/mcp" in line
    assert "up (13 tools)" in line
    assert "failed: gone:" in line and "No such file" in line, line


@pytest.mark.parametrize("port", ["0", "70000", "in use"])
def test_a_bad_port_is_one_line_and_exit_2(config: Path, port: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        number = str(taken.getsockname()[1]) if port == "in use" else port
        done = serve(config, "--transport", "http", "--port", number)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert number in lines[0]
    if port == "in use":
        assert "in use" in lines[0]


def test_a_non_loopback_host_warns(config: Path) -> None:
    port = free_port()
    extra = ("--transport", "http", "--host", "0.0.0.0", "--port", str(port))
    command = [sys.executable, *serve_command(config, *extra)]
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stderr is not None
        lines = [process.stderr.readline(), process.stderr.readline()]
    finally:
        process.terminate()
        process.communicate(timeout=10)
    assert "serving MCP over streamable HTTP" in lines[0]
    assert "warning" in lines[1] and "0.0.0.0" in lines[1] and "authentication" in lines[1]
