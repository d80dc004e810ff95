"""toolnexus.view without a browser: what is drawn from a real run's session, the Chrome trace
export checked against the Trace Event Format, the sources (saved session, gateway audit log,
durable-run transcript) and the ``toolnexus view`` command."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import subprocess
import sys
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import get_default_environment, stdio_client
from temporalio.client import Client

from fake_provider import FakeProvider, Turn
from helpers import Probe
from test_client import client_for
from test_mcp_gateway import FAN_OUT, UPSTREAM, run_code, serve_command
from test_temporal import FAST, look, scripted, touch
from toolnexus import Resources, Session, ToolCall, create_client
from toolnexus.agents import AgentRuntime, agent
from toolnexus.cli import main
from toolnexus.errors import ViewError
from toolnexus.scheduling import run_batch
from toolnexus.session import SURFACE_TYPES, Event
from toolnexus.temporal import start_run, worker
from toolnexus.testing import FunctionModel
from toolnexus.view import build, read_events, render, trace
from view_run import demo_run

ROOT = Path(__file__).parent.parent


def timings(session: Session) -> list[dict[str, Any]]:
    return [e.data for e in session.events if e.type == "call_timing"]


def waits(session: Session) -> dict[str, str]:
    """waiting call id -> waited-on call id, from the call_timing events' lane and seq."""
    by_place = {(t["lane"], t["seq"]): t["id"] for t in timings(session)}
    return {
        t["id"]: by_place[(t["lane"], t["waited_for"]["seq"])]
        for t in timings(session)
        if "waited_for" in t
    }


def drawn_calls(run: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for g in run["groups"] for row in g["rows"] for c in row["calls"]]


async def test_build_draws_every_call_once_in_slot_rows_with_its_class_and_wait() -> None:
    result, meter = await demo_run()
    run = build(result.session)
    calls = {c["id"]: c for c in drawn_calls(run)}
    assert sorted(calls) == sorted(t["id"] for t in timings(result.session))
    for group in run["groups"]:
        for row in group["rows"]:
            orders = [c["order"] for c in row["calls"]]
            assert orders == sorted(orders)  # a row's bars are in emitted order
            for before, after in zip(row["calls"], row["calls"][1:], strict=False):
                assert before["end"] <= after["start"]  # and never overlap
    assert {i: calls[i]["class"] for i in ("c1", "c2", "c3", "c4", "c5", "c6")} == {
        "c1": "safe", "c2": "safe", "c3": "unsafe", "c4": "failed", "c5": "refused",
        "c6": "timeout",
    }  # fmt: skip
    assert {i: c["waited_for"]["id"] for i, c in calls.items() if c["waited_for"]} == waits(
        result.session
    )
    assert calls["c3"]["waited_for"]["barrier"] is True
    subs = sorted((c for c in calls.values() if c["program"] == "c7"), key=lambda c: c["order"])
    assert [c["name"] for c in subs] == ["read_file"] * 3 + ["write_file", "delete_file"]
    asked = {c["id"]: c["approval"]["approved"] for c in calls.values() if "approval" in c}
    assert asked == {"c5": False, "c7:code:5": True}  # each approval on the call it held
    assert [p["id"] for p in run["groups"][0]["programs"]] == ["c7"]
    assert calls["c7:code:1"]["arguments"]["text"] == json.dumps({"path": "x.txt"}, indent=1)
    assert calls["c1"]["result"]["text"] == "contents of a.txt"
    summary = run["summary"]
    assert summary["peak"] == meter.peak  # what the tools saw in flight at once
    assert summary["calls"] == len(timings(result.session))
    errors = [t for t in timings(result.session) if not t["ok"]]
    assert summary["failures"] == len(errors)
    assert (summary["input_tokens"], summary["output_tokens"]) == (
        result.usage.input_tokens,
        result.usage.output_tokens,
    )
    assert summary["requests"] == result.turns


async def test_trace_export_follows_the_trace_event_format_and_holds_the_calls() -> None:
    result, _ = await demo_run()
    exported = json.loads(json.dumps(trace(result.session)))  # JSON as written to a file
    events = exported["traceEvents"]
    assert exported["displayTimeUnit"] == "ms"
    open_slices: dict[tuple[int, int], list[str]] = defaultdict(list)
    flows: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for event in events:
        assert {"ph", "ts", "pid", "tid"} <= event.keys(), event
        assert isinstance(event["ts"], (int, float)) and event["ts"] >= 0
        if event["ph"] == "X":
            assert event["dur"] >= 0
        elif event["ph"] == "B":
            open_slices[(event["pid"], event["tid"])].append(event["name"])
        elif event["ph"] == "E":
            assert open_slices[(event["pid"], event["tid"])].pop() == event["name"]
        elif event["ph"] in ("s", "f"):
            flows[event["id"]].append(event)
        else:
            assert event["ph"] == "M"
    assert all(not stack for stack in open_slices.values())  # every B has its E
    tracks: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)
    for event in events:
        if event["ph"] == "X":
            tracks[(event["pid"], event["tid"])].append((event["ts"], event["ts"] + event["dur"]))
    for spans in tracks.values():  # complete events on one track never partly overlap
        spans.sort()
        assert all(a[1] <= b[0] + 1e-6 for a, b in itertools.pairwise(spans)), spans
    slices = sorted(
        (e["args"]["id"], e["name"]) for e in events if e["ph"] == "X" and "tool" in e["cat"]
    )
    assert slices == sorted((t["id"], t["name"]) for t in timings(result.session))
    program_slices = [e["name"] for e in events if e["ph"] == "B"]
    assert program_slices == ["program c7"]
    # one flow per wait, from the call waited on to the call that waited
    call_at = {
        (e["pid"], e["tid"], e["ts"]): e["args"]["id"] for e in events if "tool" in e.get("cat", "")
    }
    linked = {}
    for pair in flows.values():
        start, finish = sorted(pair, key=lambda e: e["ph"] != "s")
        assert (start["ph"], finish["ph"], finish["bp"]) == ("s", "f", "e")
        linked[call_at[(finish["pid"], finish["tid"], finish["ts"])]] = call_at[
            (start["pid"], start["tid"], start["ts"])
        ]
    assert linked == waits(result.session)


async def test_a_saved_session_and_sub_agent_groups(tmp_path: Path) -> None:
    result, _ = await demo_run()
    path = tmp_path / "run.jsonl"
    result.session.save(path)
    assert build(path) == build(result.session)
    other, _ = await demo_run()
    grouped = build({"researcher": result.session, "writer": other.session})
    assert [g["name"] for g in grouped["groups"]] == ["researcher", "writer"]
    assert grouped["summary"]["calls"] == 2 * len(timings(result.session))
    exported = trace({"researcher": result.session, "writer": other.session})
    agents = [e["name"] for e in exported["traceEvents"] if e["ph"] == "B" and e["cat"] == "agent"]
    assert agents == ["agent researcher", "agent writer"]


async def test_a_transcript_alone_is_drawn_in_order_and_says_it_has_no_times() -> None:
    result, _ = await demo_run()
    # a session holding the transcript only (an old log; durable runs' sessions have times:
    # tests/test_temporal.py)
    durable = Session()
    for event in result.session.events:
        if event.type in SURFACE_TYPES:
            durable._append_json(event.type, event.data)
    run = build(durable)
    assert not run["summary"]["timed"] and any("no call times" in n for n in run["notes"])
    calls = drawn_calls(run)
    assert [c["id"] for c in sorted(calls, key=lambda c: c["start"])] == [
        "c1", "c2", "c3", "c4", "c5", "c6", "c7",
    ]  # fmt: skip
    assert {c["id"]: c["class"] for c in calls}["c5"] == "refused"
    assert "no call times" in render(durable)


def test_a_file_that_is_not_a_session_log_is_refused_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    path.write_text('{"seq": 1, "type": "user_message", "data": {"content": "hi"}}\nhello\n')
    with pytest.raises(ViewError, match="line 2: not JSON"):
        read_events(path)
    path.write_text('{"seq": 1, "kind": "x"}\n')
    with pytest.raises(ViewError, match="line 1: not a session event"):
        build(path)
    with pytest.raises(ViewError, match="expected session events"):
        build([Event(1, "user_message", {}, 0.0), "not an event"])  # type: ignore[list-item]


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    """A real run's session, saved."""
    result, _ = asyncio.run(demo_run())
    path = tmp_path / "run.jsonl"
    result.session.save(path)
    return path


def test_view_command_writes_the_report_and_the_trace(saved: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "toolnexus.cli", "view", str(saved), "-o", str(tmp_path / "r.html"),
         "--trace", str(tmp_path / "t.json")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "r.html").read_text(encoding="utf-8") == render(saved)
    assert json.loads((tmp_path / "t.json").read_text(encoding="utf-8")) == trace(saved)
    assert "r.html" in done.stdout and "t.json" in done.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "toolnexus.cli", "view", str(tmp_path / "missing.jsonl")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert bad.returncode != 0 and "missing.jsonl" in bad.stderr


def test_run_code_html_writes_the_programs_report(tmp_path: Path) -> None:
    program = tmp_path / "fan.py"
    program.write_text(
        "import asyncio\n"
        "await asyncio.gather(*[tools.glob({'pattern': '*.py'}) for _ in range(3)])\n"
    )
    report = tmp_path / "run.html"
    done = subprocess.run(
        [sys.executable, "-m", "toolnexus.cli", "run-code", str(program), "--html", str(report)],
        capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr + done.stdout
    page = report.read_text(encoding="utf-8")
    data = page.split('<script type="application/json" id="tn-data">')[1].split("</script>")[0]
    run = json.loads(data)
    # the program's own run_code call (its band) and its three sub-calls, each with its result
    assert sorted(c["name"] for c in drawn_calls(run)) == ["glob"] * 3 + ["run_code"]
    assert all(c["result"] is not None for c in drawn_calls(run))
    assert run["summary"]["programs"] == 1
    (drawn,) = run["groups"][0]["programs"]
    assert drawn["source"]["text"] == program.read_text()
    # the page's "what ran together" is the terminal's (which calls overlapped depends on load)
    (line,) = [ln for ln in done.stdout.splitlines() if "what ran together:" in ln]
    assert line.split("what ran together:")[1].strip() == drawn["together"]
    assert sorted(re.findall(r"\d+", drawn["together"])) == ["1", "2", "3"]
    assert str(report) in done.stdout


@pytest.fixture
def gateway_config(tmp_path: Path) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {"up": {"command": sys.executable, "args": [UPSTREAM]}},
                "toolnexus": {"max_parallel": 4},
            }
        )
    )
    return path


async def test_a_gateway_audit_log_is_drawn(gateway_config: Path, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    peaks = []
    # the server gets this process's import path (an MCP client passes few variables on)
    env = get_default_environment() | {"PYTHONPATH": os.pathsep.join(sys.path)}
    command = serve_command(gateway_config, "--audit-log", str(audit))
    params = StdioServerParameters(command=sys.executable, args=command, env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        for _ in range(2):
            done = await run_code(client, FAN_OUT)
            peaks.append(done.structured_content["result"]["peak"])  # seen by the upstream
    run = build(audit)
    programs = run["groups"][0]["programs"]
    assert len(programs) == 2
    for program in programs:
        rows = [r for r in run["groups"][0]["rows"] if r["program"] == program["id"]]
        names = sorted((c for r in rows for c in r["calls"]), key=lambda c: c["order"])
        assert [c["name"] for c in names] == ["up_stats"] + ["up_lookup"] * 4 + ["up_stats"]
        assert all(c["start"] is not None and c["end"] >= c["start"] for c in names)
    assert run["summary"]["timed"]
    assert run["summary"]["peak"] == max(peaks)  # what the upstream server saw at once
    assert len(timings_in(audit)) == 12


def timings_in(path: Path) -> list[dict[str, Any]]:
    return [e.data for e in read_events(path) if e.type == "call_timing"]


@pytest.mark.temporal
async def test_a_durable_runs_session_is_drawn_from_a_real_temporal_run(
    temporal_address: str, provider: FakeProvider
) -> None:
    calls = [("c1", "look", {"n": 1}), ("c2", "touch", {"n": 2}), ("c3", "look", {"n": 3})]
    scripted(provider, calls)
    client = client_for(provider, "openai")
    temporal = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4()}"
    async with worker(temporal, task_queue=queue, tools=[look, touch], client=client):
        handle = await start_run(temporal, "go", task_queue=queue, timings=FAST)
        durable = await handle.result()
    run = build(durable.session)
    drawn = sorted(drawn_calls(run), key=lambda c: c["start"])
    assert [(c["id"], c["name"]) for c in drawn] == [(i, n) for i, n, _ in calls]
    assert [c["result"]["text"] for c in drawn] == [r.output for r in durable.tool_calls]
    assert run["summary"]["timed"] and not run["notes"]  # its times come from the histories
    assert [c["class"] for c in drawn] == ["safe", "unsafe", "safe"]
    assert all(c["end"] >= c["start"] for c in drawn)
    assert drawn[1]["start"] >= drawn[0]["end"]  # the unsafe call ran after the read before it
    assert drawn[2]["start"] >= drawn[1]["end"]  # ... and alone
    assert [(c["waited_for"] or {}).get("id") for c in drawn] == [None, "c1", "c2"]
    assert drawn[1]["waited_for"]["barrier"] and drawn[1]["admitted"] <= drawn[1]["start"]
    assert run["summary"]["calls"] == 3 and run["summary"]["requests"] == durable.turns


async def test_a_wait_for_a_resource_key_names_the_key_and_the_call(probe: Probe) -> None:
    def touches(args: dict[str, Any]) -> Resources:
        key = f"/repo/{args['file']}"
        return Resources(writes=[key]) if args.get("write") else Resources(reads=[key])

    edit = probe.tool("edit", read_only=False, resources=touches)
    session = Session()
    calls = [
        ToolCall("w1", "edit", {"id": "w1", "file": "a.py", "write": True, "steps": 3}),
        ToolCall("r1", "edit", {"id": "r1", "file": "b.py"}),  # no conflict: runs at once
        ToolCall("r2", "edit", {"id": "r2", "file": "a.py"}),  # waits for w1's write of a.py
    ]
    await run_batch(calls, [edit], session=session)
    run = build(session)
    drawn = {c["id"]: c for c in drawn_calls(run)}
    assert drawn["r2"]["waited_for"] == {
        "id": "w1", "key": drawn["w1"]["key"], "name": "edit", "resource": "/repo/a.py",
        "barrier": False,
    }  # fmt: skip
    assert drawn["r1"]["waited_for"] is None
    assert drawn["r2"]["resources"] == {"reads": ["/repo/a.py"], "writes": []}
    assert run["summary"]["peak"] == probe.peak == 2
    flows = [e for e in trace(session)["traceEvents"] if e["ph"] in ("s", "f")]
    assert [e["name"] for e in flows] == ["waited for (resource /repo/a.py)"] * 2


def test_chat_html_writes_the_report_of_every_exchange(
    provider: FakeProvider,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    provider.script(
        Turn(text="Looking.", calls=[("c1", "search_docs", {"query": "sandbox"})]),
        Turn(text="In Monty."),
        Turn(text="Again.", calls=[("c2", "search_docs", {"query": "<b>audit</b>"})]),
        Turn(text="In the session log."),
    )
    lines = ["where do programs run?", "and the audit?"]

    def answer(prompt: str = "") -> str:
        if not lines:
            raise EOFError
        return lines.pop(0)

    monkeypatch.setattr("builtins.input", answer)
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    report = tmp_path / "chat.html"
    code = main(
        ["chat", "--base-url", provider.url + "/v1", "--model", "m", "--code-mode", "native",
         "--no-builtins", "--tools", f"{ROOT / 'examples' / 'tools.py'}:TOOLS",
         "--html", str(report)]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"report: {report}" in out
    page = report.read_text(encoding="utf-8")
    data = page.split('<script type="application/json" id="tn-data">')[1].split("</script>")[0]
    run = json.loads(data)
    assert sorted(c["id"] for c in drawn_calls(run)) == ["c1", "c2"]
    assert run["summary"]["requests"] == 4


async def test_sub_agents_are_drawn_as_their_own_groups(probe: Probe) -> None:
    read = probe.tool("read")

    def model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "user":  # each agent reads twice at once, then answers
            topic = messages[-1]["content"]
            return [ToolCall(f"{topic}-1", "read", {"id": f"{topic}-1", "steps": 3}),
                    ToolCall(f"{topic}-2", "read", {"id": f"{topic}-2", "steps": 3})]  # fmt: skip
        return "done"

    team = [
        agent("researcher", instructions="Research.", tools=[read]),
        agent("writer", instructions="Write.", tools=[read]),
    ]
    runtime = AgentRuntime(team, client=create_client(model=FunctionModel(model)))
    await asyncio.gather(runtime.run("researcher", "r"), runtime.run("writer", "w"))
    sessions = runtime.sessions()
    assert sorted(sessions) == ["root/researcher.1", "root/writer.2"]
    run = build(sessions)
    assert [g["name"] for g in run["groups"]] == list(sessions)
    for group, topic in zip(run["groups"], ("r", "w"), strict=True):
        ids = sorted(c["id"] for row in group["rows"] for c in row["calls"])
        assert ids == [f"{topic}-1", f"{topic}-2"]
    assert run["summary"]["peak"] == probe.peak  # the two agents' reads overlapped too
    exported = trace(sessions)["traceEvents"]
    agents = [e["name"] for e in exported if e["ph"] == "B" and e["cat"] == "agent"]
    assert agents == ["agent root/researcher.1", "agent root/writer.2"]


@pytest.mark.parametrize(
    "value",
    [
        {"path": "x.txt"},
        {"n": 1, "x": 2.5, "none": None, "ok": True, "é": 'ü"\\\n'},
        {},
        {"nested": [1, {"a": 2}]},
        [1, "two"],
        5,
        {"big": 1e100, "zero": -0.0},
    ],
)
def test_arguments_are_shown_as_json_indented_by_one(value: Any) -> None:
    session = Session()
    session.log_event("tool_call", {"id": "c1", "name": "t", "arguments": value})
    [call] = drawn_calls(build(session))
    assert call["arguments"]["text"] == json.dumps(value, ensure_ascii=False, indent=1)


def test_a_program_logged_before_its_run_code_call_is_its_band_not_a_call() -> None:
    """A program's code_run may come before any event of the call that ran it (a hosted
    program, an audit log): the call answered with its output is still its owner, drawn as the
    band and not counted beside the sub-calls."""
    at = 1.7e9
    session = Session()
    session.log_event("code_run", {"id": "p1", "language": "python", "description": "fan"})
    for n in (1, 2):
        session.log_event("call_timing", {"id": f"p1:code:{n}", "name": "read", "lane": 2,
                          "seq": n, "mode": "parallel", "admitted": at, "started": at,
                          "finished": at + 1.0, "ok": True, "program": "p1"})  # fmt: skip
    session.log_event("call_timing", {"id": "p1", "name": "run_code", "lane": 1, "seq": 1,
                      "mode": "exclusive", "admitted": at, "started": at,
                      "finished": at + 1.5, "ok": True})  # fmt: skip
    session.append("tool_result", {"tool_call_id": "p1", "name": "run_code", "content": "{}"})
    run = build(session)
    [program] = run["groups"][0]["programs"]
    owner = next(c for c in drawn_calls(run) if c["id"] == "p1")
    assert program["owner"] == owner["key"] and program["calls"] == 2
    assert run["summary"]["sum_ms"] == 2000.0  # the two sub-calls, not the program's call
    assert run["summary"]["peak"] == 2
