"""The gateway's programs and direct calls as MCP tasks, over streamable HTTP, with real
clients: a plain HTTP client on the 2025-11-25 wire (the experimental core form), the python
SDK's ``ClientSession`` on 2026-07-28 (the ``io.modelcontextprotocol/tasks`` extension), and,
with ``toolnexus.durable``, programs as Temporal workflows that outlive ``kill -9`` of the
gateway and of a worker. Overlap is observed inside the upstream servers."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import types
from mcp.client.extension import ClaimContext

from conftest import free_port, listening
from npm_tools import install, node, package
from task_clients import (
    TASKS,
    CancelTask,
    CreatedTask,
    Polling,
    TaskIdParams,
    http_gateway,
    modern_session,
    never_asked,
    task_state,
    wire,
)
from task_clients import serve_command as task_serve_command

HERE = Path(__file__).parent
UPSTREAM = str(HERE / "mcp_server.py")
DURABLE_UPSTREAM = str(HERE / "mcp_durable_upstream.py")

FAN_OUT = """
import asyncio
await tools.up_stats({"reset": True})
values = await asyncio.gather(*[tools.up_lookup({"key": f"k{i}", "delay": 0.4}) for i in range(4)])
peak = (await tools.up_stats({"reset": True}))["peak"]
{"values": values, "peak": peak}
"""


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """One gateway (``--mode both``) for this module's tests: its URL and audit log."""
    folder = tmp_path_factory.mktemp("tasks")
    config = folder / "mcp.json"
    audit = folder / "audit.jsonl"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {"up": {"command": sys.executable, "args": [UPSTREAM]}},
                "toolnexus": {
                    "max_parallel": 4,
                    "mode": "both",
                    "audit_log": str(audit),
                    "approval": ["up_store"],
                },
            }
        )
    )
    with http_gateway(config) as (_, url):
        yield url, audit


def audit_events(audit: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in audit.read_text().splitlines() if line.strip()]


async def test_each_generation_sees_its_own_form_of_the_tasks_capability(
    gateway: tuple[str, Path],
) -> None:
    url, _ = gateway
    async with wire(url) as old:
        capabilities = old.initialized["capabilities"]
        listed = (await old.rpc("tools/list", {}))["result"]["tools"]
    assert capabilities["tasks"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    assert "extensions" not in capabilities  # not a 2026-07-28 client
    supports = {t["name"]: t.get("execution", {}).get("taskSupport") for t in listed}
    assert supports["run_code"] == "optional" and supports["up_lookup"] == "optional"
    async with modern_session(url) as new:
        discovered = new.discover_result
    assert discovered is not None
    assert TASKS in (discovered.capabilities.extensions or {})
    assert discovered.capabilities.model_dump().get("tasks") is None  # the 2025 form is not


async def test_a_program_task_on_2025_11_25_from_call_to_result(
    gateway: tuple[str, Path],
) -> None:
    url, audit = gateway
    async with wire(url) as client:
        marker = f"fan out {uuid.uuid4().hex[:6]}"
        arguments = {"code": FAN_OUT, "description": marker}
        task = await client.call_as_task("run_code", arguments, ttl=120_000)
        assert task["status"] == "working" and task["ttl"] == 120_000
        assert len(task["taskId"]) >= 40  # 256 random bits
        messages = []
        while True:
            got = (await client.task("get", task["taskId"]))["result"]
            messages.append(got.get("statusMessage"))
            if got["status"] != "working":
                break
            await asyncio.sleep(0.05)
        listed = (await client.rpc("tasks/list", {}))["result"]["tasks"]
        result = (await client.task("result", task["taskId"]))["result"]
        again = (await client.task("result", task["taskId"]))["result"]
    print("status messages:", [m for i, m in enumerate(messages) if m != messages[i - 1]])
    assert got["status"] == "completed"
    assert any("calls done" in (m or "") for m in messages)  # progress, as the status
    assert [t["taskId"] for t in listed] == [task["taskId"]]
    assert result == again  # produced once, fetched twice
    assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task["taskId"]}
    assert result["structuredContent"]["result"]["values"] == [f"value of k{i}" for i in range(4)]
    assert result["structuredContent"]["result"]["peak"] == 4  # the rule, as a plain call
    events = audit_events(audit)
    [run] = [e for e in events if e["type"] == "code_run" and e["data"]["description"] == marker]
    sub_calls = [
        e
        for e in events
        if e["type"] == "tool_call" and e["data"]["id"].startswith(run["data"]["id"] + ":")
    ]
    assert len(sub_calls) == 6  # audited once, as a plain call is: the run and each sub-call


async def test_a_program_task_with_the_python_sdk_on_2026_07_28(gateway: tuple[str, Path]) -> None:
    url, _ = gateway
    polling = Polling()
    async with modern_session(url, polling) as session:
        created = await session.call_tool("run_code", {"code": FAN_OUT}, allow_claimed=True)
        assert isinstance(created, CreatedTask)  # the SDK parsed resultType "task" by the claim
        result = await polling.resolve(
            created, ClaimContext(session=session, tool_name="run_code", read_timeout_seconds=None)
        )
    assert isinstance(result, types.CallToolResult) and not result.is_error
    assert result.structured_content is not None
    assert result.structured_content["result"]["peak"] == 4
    [created] = polling.created
    assert created.status == "working" and created.ttl_ms is not None
    assert polling.seen[-1].status == "completed"
    assert any("calls done" in (t.status_message or "") for t in polling.seen)


@pytest.mark.parametrize(
    ("answer", "approved"),
    [({"action": "accept", "content": {"approve": True}}, True),
     ({"action": "decline"}, False),
     ({"action": "accept", "content": {"approve": "yes"}}, False)],  # malformed
    ids=["accept", "decline", "malformed"],
)  # fmt: skip
async def test_an_approval_inside_a_task_on_2026_07_28_is_answered_by_tasks_update(
    gateway: tuple[str, Path], answer: dict[str, Any], approved: bool
) -> None:
    url, audit = gateway
    key = f"modern-{uuid.uuid4().hex[:6]}"
    polling = Polling(answer=lambda request: answer)
    program = f'await tools.up_store({{"key": "{key}", "delay": 0}})'
    async with modern_session(url, polling, elicitation_callback=never_asked) as session:
        created = await session.call_tool("run_code", {"code": program}, allow_claimed=True)
        assert isinstance(created, CreatedTask)
        claim = ClaimContext(session=session, tool_name="run_code", read_timeout_seconds=None)
        result = await polling.resolve(created, claim)
    [asked] = polling.asked  # asked once; the key it did not ask for was ignored
    assert asked["method"] == "elicitation/create" and key in asked["params"]["message"]
    waiting = [t for t in polling.seen if t.status == "input_required"]
    assert waiting and all(
        "waiting for the client's answer" in (t.status_message or "") for t in waiting
    )
    assert polling.seen[-1].status == "completed"
    output = result.structured_content or {}
    if approved:
        assert output["result"] == f"stored {key}", output
    else:  # refused, never run
        assert "error" in output and output["calls"][0]["status"] == "error", output
    answers = [e for e in audit_events(audit) if e["type"] == "approval_answer"]
    assert answers[-1]["data"]["outcome"] == (
        "approved" if approved else "declined" if answer["action"] == "decline" else "malformed"
    )


async def test_a_2026_07_28_task_no_one_answers_ends_with_its_budget_or_its_cancel(
    tmp_path: Path,
) -> None:
    # Unanswered, the approval is refused when the call's budget (3 s) ends and the task
    # completes with the refusal; cancelled while it waits, the program stops with it.
    config = tmp_path / "mcp.json"
    audit = tmp_path / "audit.jsonl"
    options = {"mode": "both", "audit_log": str(audit), "approval": ["up_store"],
               "budgets": {"timeout": 3}}  # fmt: skip
    servers = {"up": {"command": sys.executable, "args": [UPSTREAM]}}
    config.write_text(json.dumps({"mcpServers": servers, "toolnexus": options}))
    program = 'await tools.up_store({"key": "never", "delay": 0})'
    with http_gateway(config) as (_, url):
        async with modern_session(url, Polling(), elicitation_callback=never_asked) as session:
            waited = await session.call_tool("run_code", {"code": program}, allow_claimed=True)
            cancelled = await session.call_tool("run_code", {"code": program}, allow_claimed=True)
            assert isinstance(waited, CreatedTask) and isinstance(cancelled, CreatedTask)
            await task_state(session, cancelled.task_id, {"input_required"})
            await session.send_request(
                CancelTask(params=TaskIdParams(taskId=cancelled.task_id)), types.EmptyResult
            )
            first = await task_state(session, waited.task_id, {"input_required"})
            ended = await task_state(session, waited.task_id, {"completed", "failed", "cancelled"})
    assert first.input_requests
    assert ended.status == "completed" and ended.result is not None, ended
    output = ended.result["structuredContent"]
    assert "error" in output and output["calls"][0]["status"] == "error", output
    events = audit_events(audit)
    assert [e["data"]["outcome"] for e in events if e["type"] == "approval_answer"] == ["timeout"]
    timings = [e["data"] for e in events if e["type"] == "call_timing"]
    assert sorted(t["error"] for t in timings) == [  # neither call ran upstream
        "call to 'up_store' was not approved",  # the answer's time ran out
        "code run is over; tool call abandoned",  # its task was cancelled
    ]
    assert not any(t["ok"] for t in timings)
    assert any(e["type"] == "code_run_cancelled" for e in events)


async def test_a_direct_upstream_call_as_a_task(gateway: tuple[str, Path]) -> None:
    url, audit = gateway
    key = f"direct-{uuid.uuid4().hex[:6]}"
    async with wire(url) as client:
        task = await client.call_as_task("up_lookup", {"key": key, "delay": 0.2})
        result = (await client.task("result", task["taskId"]))["result"]
    assert result["content"][0]["text"] == f"value of {key}"
    calls = [e for e in audit_events(audit) if e["type"] == "tool_call"]
    direct = [c for c in calls if c["data"].get("source") == "mcp_direct"]
    assert [c["data"]["arguments"].get("key") for c in direct].count(key) == 1  # the direct path


async def test_a_working_task_is_cancelled(gateway: tuple[str, Path]) -> None:
    url, audit = gateway
    program = 'await tools.up_lookup({"key": "slow", "delay": 30})'
    async with wire(url) as client:
        task = await client.call_as_task("run_code", {"code": program})
        deadline = time.monotonic() + 20
        while "calls done" not in (
            (await client.task("get", task["taskId"]))["result"].get("statusMessage") or ""
        ):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        cancelled = (await client.task("cancel", task["taskId"]))["result"]
        result = await client.task("result", task["taskId"])
    assert cancelled["status"] == "cancelled"
    assert result["error"]["code"] == -32000
    assert any(e["type"] == "code_run_cancelled" for e in audit_events(audit))


async def test_an_approval_inside_a_task_is_asked_on_the_tasks_result_stream(
    gateway: tuple[str, Path],
) -> None:
    url, _ = gateway
    key = f"approved-{uuid.uuid4().hex[:6]}"

    def approve(request: dict[str, Any]) -> dict[str, Any]:
        return {"action": "accept", "content": {"approve": True}}

    def decline(request: dict[str, Any]) -> dict[str, Any]:
        return {"action": "decline"}

    program = f'await tools.up_store({{"key": "{key}-p", "delay": 0}})'

    async def asking(task: dict[str, Any]) -> dict[str, Any]:
        deadline = time.monotonic() + 30
        while True:
            state = (await client.task("get", task["taskId"]))["result"]
            if state["status"] == "input_required":
                return state
            assert time.monotonic() < deadline, state
            await asyncio.sleep(0.05)

    async with wire(url, capabilities={"elicitation": {"form": {}}}) as client:
        # both tasks are calls of this session's lane: the direct write runs alone (its
        # approval included), so the program's call waits for it to commit before it asks
        direct = await client.call_as_task("up_store", {"key": key, "delay": 0})
        in_program = await client.call_as_task("run_code", {"code": program})
        states = [await asking(direct)]
        approved, asked = await client.rpc_answering(
            "tasks/result", {"taskId": direct["taskId"]}, approve
        )
        states.append(await asking(in_program))
        declined, asked_again = await client.rpc_answering(
            "tasks/result", {"taskId": in_program["taskId"]}, decline
        )
    assert all("waiting for the client's answer" in s["statusMessage"] for s in states)
    assert [a["method"] for a in asked + asked_again] == ["elicitation/create"] * 2
    assert "up_store" in asked[0]["params"]["message"] and key in asked[0]["params"]["message"]
    assert approved["result"]["content"][0]["text"] == f"stored {key}"
    output = declined["result"]["structuredContent"]
    assert "error" in output and output["calls"][0]["status"] == "error"  # refused, never run
    assert "not approved" in output["calls"][0]["message"]


async def test_the_typescript_sdk_client_runs_tasks_on_2025_11_25(
    gateway: tuple[str, Path],
) -> None:
    """The official TypeScript SDK (its experimental tasks client, in the npm cache) streams a
    run_code task to its result, gets and lists it, is refused the cancel of the finished
    task, and cancels a working one."""
    folder, why = install()
    if why is not None:
        pytest.skip(f"the npm packages could not be installed: {why}")
    sdk = package(folder, "@modelcontextprotocol/sdk")
    url, _ = gateway
    done = await asyncio.to_thread(
        subprocess.run,
        [str(node(folder)), str(HERE / "mcp_ts_tasks.mjs"), str(sdk), url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout)
    print("TypeScript client:", json.dumps(out["stream"]))
    assert out["protocol"] == "2025-11-25"
    assert out["capabilities"]["tasks"]["requests"] == {"tools": {"call": {}}}
    assert out["taskSupport"]["run_code"] == "optional"
    kinds = [m["type"] for m in out["stream"]]
    assert kinds[0] == "taskCreated" and kinds[-1] == "result" and "taskStatus" in kinds
    assert out["stream"][-1]["structuredContent"]["result"] == [f"value of t{i}" for i in range(4)]
    task_id = out["stream"][0]["taskId"]
    assert out["got"]["taskId"] == task_id and out["got"]["status"] == "completed"
    assert task_id in out["listed"]
    assert out["cancelFinished"]["code"] == -32602
    assert out["cancelled"] == "cancelled" and out["afterCancel"] == "cancelled"


# -- durable tasks -------------------------------------------------------------------------------


def durable_config(folder: Path, upstream_port: int, address: str, queue: str) -> Path:
    config = folder / "durable.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {"up": {"url": f"http://127.0.0.1:{upstream_port}/mcp"}},
                "toolnexus": {
                    "max_parallel": 3,
                    "audit_log": str(folder / "audit.jsonl"),
                    "durable": {"address": address, "task_queue": queue},
                },
            }
        )
    )
    return config


@pytest.fixture
def durable_upstream(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """The upstream every gateway of a durable test shares (over HTTP): its port and the log
    of what it ran."""
    port = free_port()
    effects = tmp_path / "effects.jsonl"
    process = subprocess.Popen(
        [sys.executable, DURABLE_UPSTREAM, str(port), str(effects)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    if not listening(port, process, seconds=30):
        process.kill()
        pytest.fail("the durable upstream did not start")
    yield port, effects
    process.terminate()
    process.wait(timeout=10)


def effects_of(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


DURABLE_PROGRAM = """
import asyncio
first = await asyncio.gather(*[tools.up_read({"key": f"a{i}", "seconds": 1.0}) for i in range(6)])
wrote = await tools.up_write({"key": "w1", "seconds": 0.5})
second = await asyncio.gather(*[tools.up_read({"key": f"b{i}", "seconds": 1.0}) for i in range(6)])
{"first": first, "wrote": wrote, "second": second}
"""


async def worker_identities(address: str, task_id: str) -> dict[str, int]:
    """Which worker processes ran the task's sub-calls (from its Temporal history)."""
    from temporalio.api.enums.v1 import EventType
    from temporalio.client import Client

    from toolnexus.mcp._durable import workflow_id

    temporal = await Client.connect(address)
    handle = temporal.get_workflow_handle(workflow_id(task_id))
    by_worker: dict[str, int] = {}
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            identity = event.activity_task_started_event_attributes.identity
            by_worker[identity] = by_worker.get(identity, 0) + 1
    return by_worker


async def in_flight_on(address: str, task_id: str, pid: int) -> list[str]:
    """The task's sub-calls running on the worker process ``pid`` now (activity ids), from
    Temporal's description of the workflow."""
    from temporalio.client import Client

    from toolnexus.mcp._durable import workflow_id

    temporal = await Client.connect(address)
    described = await temporal.get_workflow_handle(workflow_id(task_id)).describe()
    return [
        pending.activity_id
        for pending in described.raw_description.pending_activities
        if pending.activity_type.name == "toolnexus.call_tool"
        and pending.last_worker_identity.startswith(f"{pid}@")
    ]


async def kill_while_running_a_sub_call(
    address: str, task_id: str, process: subprocess.Popen[bytes]
) -> list[str]:
    """SIGKILL ``process`` once it runs one of the task's sub-calls (within 60 s, else
    anyway); the sub-calls it was running (their activity ids)."""
    deadline = time.monotonic() + 60
    running: list[str] = []
    while time.monotonic() < deadline:
        running = await in_flight_on(address, task_id, process.pid)
        if running:
            break
        await asyncio.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    return running


@pytest.mark.timeout(400)  # gateways started and killed, lost workers noticed by heartbeat
async def test_a_durable_task_survives_kill_9_of_its_gateway_and_of_a_worker(
    tmp_path: Path, temporal_address: str, durable_upstream: tuple[int, Path]
) -> None:
    port, effects = durable_upstream
    queue = f"gateway-{uuid.uuid4().hex[:8]}"
    config = durable_config(tmp_path, port, temporal_address, queue)
    audit = tmp_path / "audit.jsonl"
    front_port = free_port()
    figures: dict[str, Any] = {}
    with http_gateway(config, port=front_port) as (front, url):  # the only worker, at first
        async with wire(url) as client:
            started = time.time()
            program = {"code": DURABLE_PROGRAM}
            task = await client.call_as_task("run_code", program, ttl=3_600_000)
            task_id = task["taskId"]
            # kill -9 the gateway the client talks to, while it runs a sub-call
            lost = await kill_while_running_a_sub_call(temporal_address, task_id, front)
            figures["gateway killed after s"] = round(time.time() - started, 2)
            figures["sub-calls running on it when killed"] = len(lost)
            figures["sub-calls ended before the kill"] = sum(
                e["event"] == "end" for e in effects_of(effects)
            )
    with http_gateway(config) as (helper, _):  # another worker takes the workflow over
        deadline = time.monotonic() + 120
        while not any(e["key"] == "w1" and e["event"] == "end" for e in effects_of(effects)):
            assert time.monotonic() < deadline, "the write never ran"
            await asyncio.sleep(0.1)
        lost_too = await kill_while_running_a_sub_call(temporal_address, task_id, helper)
        figures["worker killed after s"] = round(time.time() - started, 2)
        figures["sub-calls running on the worker when killed"] = len(lost_too)
    with http_gateway(config, port=front_port) as (_, url):  # started again, a new process
        restarted = time.time()
        async with wire(url) as client:  # a new session: the id is what it holds
            answer = await client.task("get", task_id)
            assert "result" in answer, answer
            found = answer["result"]
            result = (await client.task("result", task_id))["result"]
            again = (await client.task("result", task_id))["result"]
            forged = await client.task("get", ("y" if task_id[0] != "y" else "z") + task_id[1:])
        figures["restart to result s"] = round(time.time() - restarted, 2)
    output = result["structuredContent"]
    done = effects_of(effects)
    writes = [e for e in done if e["tool"] == "write"]
    by_worker = await worker_identities(temporal_address, task_id)
    deadline = time.monotonic() + 30
    while sum(e["type"] == "task_result" for e in audit_events(audit)) < 1:
        assert time.monotonic() < deadline, "the task's end was never audited"
        await asyncio.sleep(0.1)
    events = audit_events(audit)
    figures |= {
        "task id": task_id[:12] + "...",
        "status when found again": found["status"],
        "sub-call starts / ends upstream": (
            sum(e["event"] == "start" for e in done),
            sum(e["event"] == "end" for e in done),
        ),
        "peak in flight upstream": max(e["active"] for e in done),
        "reads run again (idempotent, their worker lost)": sorted(
            {
                e["key"]
                for e in done
                if e["event"] == "start"
                and sum(d["key"] == e["key"] and d["event"] == "start" for d in done) > 1
            }
        ),
        "activities by worker": by_worker,
        "audit code_run / task_result": (
            sum(e["type"] == "code_run" for e in events),
            sum(e["type"] == "task_result" for e in events),
        ),
    }
    print("durable kill test:", json.dumps(figures, indent=1))
    assert found["taskId"] == task_id and found["status"] in ("working", "completed")
    assert "result" in output, output
    assert output["result"]["first"] == [f"read a{i}" for i in range(6)]
    assert output["result"]["wrote"] == "wrote w1"
    assert output["result"]["second"] == [f"read b{i}" for i in range(6)]
    assert result == again  # never produced twice
    assert forged["error"]["code"] == -32602  # a forged id names no workflow
    assert [w["event"] for w in writes] == ["start", "end"]  # the write ran once
    assert writes[0]["active"] == 1  # ... alone: nothing else was running upstream
    during = [e for e in done if writes[0]["t"] < e["t"] < writes[1]["t"] and e["tool"] != "write"]
    assert during == []  # and nothing started while it ran
    assert max(e["active"] for e in done) <= 3  # the cap, across the worker processes
    assert len(by_worker) == 3  # one program's sub-calls ran on three worker processes
    assert lost and lost_too  # each kill hit a running sub-call (run again elsewhere)
    assert figures["audit code_run / task_result"] == (1, 1)  # audited once


@pytest.mark.parametrize(
    ("durable", "message"),
    [
        (
            {"address": "localhost", "task_queue": "q"},
            'durable.address must be the Temporal frontend as "host:port"',
        ),
        ({"address": "127.0.0.1:7233"}, "durable.task_queue is missing"),
        (
            {"address": "127.0.0.1:7233", "task_queue": ""},
            "durable.task_queue must be a non-empty string",
        ),
        (
            {"address": "127.0.0.1:7233", "task_queue": 5},
            "durable.task_queue must be a non-empty string",
        ),
        (
            {"address": "127.0.0.1:7233", "task_queue": "q", "tls": True},
            "unknown key(s) tls in toolnexus.durable",
        ),
        ("127.0.0.1:7233", "toolnexus.durable must be an object"),
    ],
)
def test_a_bad_durable_setting_is_named(durable: Any, message: str) -> None:
    from toolnexus.errors import ConfigurationError
    from toolnexus.mcp import gateway_options

    with pytest.raises(ConfigurationError) as refused:
        gateway_options({"toolnexus": {"durable": durable}})
    assert message in str(refused.value)


def test_an_unreachable_temporal_stops_the_gateway_with_one_line(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {"up": {"command": sys.executable, "args": [UPSTREAM]}},
                "toolnexus": {
                    "durable": {"address": f"127.0.0.1:{free_port()}", "task_queue": "q"}
                },
            }
        )
    )
    done = subprocess.run(
        [*task_serve_command(config)], capture_output=True, text=True, timeout=120, check=False
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "toolnexus.durable: cannot reach Temporal at 127.0.0.1:" in lines[0]


def test_durable_without_a_durable_key_is_the_local_temporal_default(tmp_path: Path) -> None:
    # --durable with no toolnexus.durable key: Temporal's own default address on this machine
    # (nothing listens there in the tests, so the gateway stops saying where it looked).
    from toolnexus.mcp._config import LOCAL_DURABLE

    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", 7233)) == 0:
            pytest.skip("a Temporal server (or something else) listens on 127.0.0.1:7233")
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps({"mcpServers": {"up": {"command": sys.executable, "args": [UPSTREAM]}}})
    )
    done = subprocess.run(
        [*task_serve_command(config), "--durable"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert f"cannot reach Temporal at {LOCAL_DURABLE['address']}" in lines[0], lines
