"""Hostile input to the HTML report and the trace: results, model text, tool names and arguments
holding markup are shown as text in a real Chromium, never run or parsed; a log holding what
cannot be drawn (absurd times, malformed lines, wrong-typed fields) is refused in one line
naming where; ids and names from the log are never object properties in the page; and the
layout stays linear in the size of the log."""

from __future__ import annotations

import asyncio
import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chromium import Browser, needs_chromium
from toolnexus import Session, ToolCall, ToolHints, create_client, tool
from toolnexus.cli import main
from toolnexus.errors import ViewError
from toolnexus.session import Event
from toolnexus.testing import FunctionModel, ModelReply
from toolnexus.view import _model as model
from toolnexus.view import build, render, trace
from view_run import HOSTILE, demo_run


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    opened = Browser(width=1200, height=600)
    try:
        yield opened
    finally:
        opened.close()


ELEMENTS = "[...new Set([...document.querySelectorAll('*')].map(e => e.tagName))]"


@needs_chromium
def test_hostile_results_leave_no_trace(browser: Browser, tmp_path: Path) -> None:
    result, _ = asyncio.run(demo_run(hostile=True))
    # a hostile tool name and arguments as well (from a log someone else wrote)
    session = Session()
    for event in result.session.events:
        session._append_json(event.type, event.data)
    at = result.session.events[-1].time
    session.log_event(
        "call_timing",
        {"id": HOSTILE, "name": HOSTILE, "lane": 99, "seq": 1, "mode": "parallel",
         "admitted": at, "started": at, "finished": at + 0.01, "ok": False,
         "error": HOSTILE, "resources": {"reads": [HOSTILE], "writes": []}},
    )  # fmt: skip
    page = render(session)
    assert "<script>document.title" not in page and "</svg><svg" not in page
    path = tmp_path / "hostile.html"
    path.write_text(page, encoding="utf-8")
    clean = tmp_path / "clean.html"
    clean.write_text(render(asyncio.run(demo_run())[0].session), encoding="utf-8")
    browser.open(clean)
    expected_elements = browser.evaluate(ELEMENTS)
    browser.open(path)
    assert browser.evaluate("document.body.dataset.readyMs") is not None  # the report ran
    assert browser.evaluate("document.title") == "toolnexus run"
    assert browser.evaluate("document.querySelectorAll('marquee, img, a, iframe').length") == 0
    assert browser.evaluate("document.scripts.length") == 2  # the data and the report's own
    # every bar, opened: the hostile text is shown as text, and adds no element
    shown = browser.evaluate(
        """(() => { const out = [];
        const ids = [...document.querySelectorAll('.bar[data-id]')].map(b => b.dataset.id);
        for (const id of ids) {
          [...document.querySelectorAll('.bar[data-id]')].find(b => b.dataset.id === id).click();
          for (const b of document.querySelectorAll('#details button')) b.click();
          out.push(document.getElementById('details').textContent);
        }
        return out; })()"""
    )
    assert sum(HOSTILE in text for text in shown) >= 4  # results, errors, names, arguments
    assert browser.evaluate("document.title") == "toolnexus run"
    assert browser.evaluate("document.querySelectorAll('marquee, img, a, iframe').length") == 0
    assert browser.evaluate("document.scripts.length") == 2
    assert browser.evaluate("window.location.protocol") == "file:"
    # the same kinds of element as a clean report's (the details pane aside)
    assert set(browser.evaluate(ELEMENTS)) <= set(expected_elements) | {"H3", "PRE", "BUTTON"}


# -- what cannot be drawn is refused in one line, naming where ----------------------------------


def strict_json(text: str) -> Any:
    """``text`` decoded as strict JSON: ``NaN`` and the infinities are not JSON."""

    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def embedded(page: str) -> Any:
    return strict_json(page.split('id="tn-data">')[1].split("</script>")[0])


AT = 1.7e9
TIMING = {"id": "c1", "name": "read", "lane": 1, "seq": 1, "mode": "parallel",
          "admitted": AT, "started": AT, "finished": AT + 0.5, "ok": True}  # fmt: skip


def line(seq: int, kind: str, data: dict[str, Any], at: Any = AT) -> str:
    return json.dumps({"seq": seq, "type": kind, "data": data, "time": at})


def nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


ABSURD = {  # a saved log's line 2 holds it (line 1 is a plain call)
    "a time of 1e308": line(2, "turn_start", {"turn": 1}, 1e308),
    "a time of -1e308": line(2, "turn_start", {"turn": 1}, -1e308),
    "an integer time of 10**400": line(2, "turn_start", {"turn": 1}, 10**400),
    "a call that finished at 1e308": line(2, "call_timing", TIMING | {"finished": 1e308}),
    "a call that started at 10**400": line(2, "call_timing", TIMING | {"started": 10**400}),
    "a call admitted before the epoch": line(2, "call_timing", TIMING | {"admitted": -1.0}),
    "an approval asked at 1e308": line(
        2, "approval", {"tool": "read", "approved": True, "asked": 1e308, "answered": AT}
    ),
    "10**400 input tokens": line(2, "model_response", {"input_tokens": 10**400}),
    "negative output tokens": line(2, "model_response", {"output_tokens": -5}),
    "tokens as text": line(2, "model_response", {"input_tokens": "12"}),
    "a turn of 2**60": line(2, "turn_start", {"turn": 2**60}),
}
MALFORMED = {
    "a lane that is a list": line(2, "call_timing", TIMING | {"lane": [1]}),
    "a lane seq that is an object": line(2, "call_timing", TIMING | {"seq": {"n": 1}}),
    "a program that is a list": line(2, "call_timing", TIMING | {"program": ["p"]}),
    "a waited-for seq that is a list": line(
        2, "call_timing", TIMING | {"waited_for": {"seq": [1], "resource": "*"}}
    ),
    "a call id that is a number": line(2, "call_timing", TIMING | {"id": 7}),
    "a result id that is an object": line(2, "tool_result", {"tool_call_id": {"x": 1}}),
    "tool calls that are text": line(2, "assistant_message", {"content": "", "tool_calls": "ab"}),
    "a tool call without an id": line(
        2, "assistant_message", {"content": "", "tool_calls": [{"name": "read"}]}
    ),
    "a name that is an object": line(2, "tool_call", {"id": "c2", "name": {"a": 1}}),
    "is_error that is text": line(2, "tool_result", {"tool_call_id": "c1", "is_error": "no"}),
    "nesting past any session's depth": '{"seq": 2, "type": "note", "data": '
    + "[" * 100_000
    + "]" * 100_000
    + "}",
    "nesting past a session's depth": line(2, "note", {"deep": nested(200)}),
}


def log_with(tmp_path: Path, second: str | bytes) -> Path:
    path = tmp_path / "run.jsonl"
    first = line(1, "call_timing", TIMING).encode() + b"\n"
    path.write_bytes(first + (second if isinstance(second, bytes) else second.encode()) + b"\n")
    return path


@pytest.mark.parametrize("case", sorted(ABSURD) + sorted(MALFORMED) + ["text that is not UTF-8"])
def test_a_line_that_cannot_be_drawn_is_one_view_error_naming_it(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    second = (ABSURD | MALFORMED).get(case, b'{"seq": 2, "type": "note", "data": {"t": "\xff"}}')
    path = log_with(tmp_path, second)
    for draw in (build, render, trace):
        with pytest.raises(ViewError) as raised:
            draw(path)
        message = str(raised.value)
        assert f"{path} line 2" in message and "\n" not in message, message
    # the command prints that one line, writes nothing, and exits non-zero
    report, exported = tmp_path / "r.html", tmp_path / "t.json"
    code = main(["view", str(path), "-o", str(report), "--trace", str(exported)])
    err = capsys.readouterr().err.strip()
    assert code == 1 and err == f"toolnexus: {message}", err
    assert not report.exists() and not exported.exists()


IN_MEMORY = {
    "a time of NaN": Event(1, "turn_start", {"turn": 1}, math.nan),
    "a time of infinity": Event(1, "turn_start", {"turn": 1}, math.inf),
    "a start of NaN": Event(1, "call_timing", TIMING | {"started": math.nan}, AT),
    "an end of -infinity": Event(1, "call_timing", TIMING | {"finished": -math.inf}, AT),
    "10**400 tokens": Event(1, "model_response", {"input_tokens": 10**400}, AT),
    "tokens that are a bool": Event(1, "model_response", {"output_tokens": True}, AT),
    "a lone surrogate": Event(1, "note", {"text": "a lone \ud800 surrogate"}, AT),
    "nesting 100,000 deep": Event(1, "note", {"deep": nested(100_000)}, AT),
    "a NaN in the data": Event(1, "note", {"value": math.nan}, AT),
    "a number that is text": Event("1", "note", {}, AT),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("case", sorted(IN_MEMORY))
def test_events_in_memory_that_cannot_be_drawn_are_refused_naming_the_event(case: str) -> None:
    events = [Event(0, "call_timing", TIMING, AT), IN_MEMORY[case]]
    for draw in (build, render, trace):
        with pytest.raises(ViewError, match=r"^event .*the report cannot draw it$"):
            draw(events)


def test_the_edges_of_what_is_drawn_give_strict_json(tmp_path: Path) -> None:
    """Times as integers, at the epoch and at the last time allowed; the largest counts; data
    nested as deeply as a saved session may be: the page's data and the trace are strict JSON."""
    deep = nested(120)
    session = Session()
    session.log_event("note", {"deep": deep})  # as deep as Session.save writes
    session._append_json("turn_start", {"turn": model.MAX_COUNT}, at=1_700_000_000)
    session._append_json(
        "model_response",
        {"input_tokens": model.MAX_COUNT, "output_tokens": 0, "turn": model.MAX_COUNT},
        at=1_700_000_001,
    )
    session._append_json("call_timing", TIMING | {"admitted": 0, "started": 1_700_000_000,
                                                  "finished": int(model.MAX_TIME)})  # fmt: skip
    path = tmp_path / "edge.jsonl"
    session.save(path)
    assert Session.load(path).events == session.events
    for source in (session, path):
        run = embedded(render(source))
        assert run["summary"]["input_tokens"] == model.MAX_COUNT
        [call] = [c for g in run["groups"] for r in g["rows"] for c in r["calls"]]
        assert math.isfinite(call["end"]) and call["end"] > call["start"]
        strict_json(json.dumps(trace(source)))


def test_a_program_output_nested_past_the_limit_is_drawn_without_its_sub_results() -> None:
    session = Session()
    session.log_event("code_run", {"id": "p", "language": "python", "description": "deep"})
    session.log_event("call_timing", TIMING | {"id": "p:code:1", "program": "p"})
    deep = "[" * 100_000 + "]" * 100_000  # a program's output text, as the tool returned it
    session.append("tool_result", {"tool_call_id": "p", "name": "run_code", "content": deep})
    run = embedded(render(session))
    assert [p["id"] for p in run["groups"][0]["programs"]] == ["p"]


# -- every call is its own, whatever its id; any name gets its band -------------------------------

PROGRAM = 'await tools.read_file({"path": "%s"})'


async def reusing_ids(paths: tuple[str, str]) -> Session:
    """A real run whose model reuses ids: ``call_0`` in two turns, and programs (run_code
    calls) named ``constructor`` (twice), ``__proto__`` and ``toString``."""

    @tool(hints=ToolHints(read_only=True))
    async def read_file(path: str) -> str:
        """Read a file."""
        await asyncio.sleep(0.005)
        return f"contents of {path}"

    programs = [("constructor", "p.txt"), ("constructor", "q.txt"), ("__proto__", "r.txt"),
                ("toString", "s.txt")]  # fmt: skip
    turns: list[Any] = [
        ModelReply("one", [ToolCall("call_0", "read_file", {"path": paths[0]})]),
        ModelReply("two", [ToolCall("call_0", "read_file", {"path": paths[1]})]),
        *[
            ModelReply(
                name,
                [
                    ToolCall(
                        name, "run_code", {"code": PROGRAM % file, "description": f"reads {file}"}
                    )
                ],
            )
            for name, file in programs
        ],
        "done",
    ]

    def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        return turns[sum(m["role"] == "assistant" for m in messages)]

    client = create_client(model=FunctionModel(reply), code_mode="both")
    result = await client.run("go", tools=[read_file], session=Session())
    return result.session


def test_calls_sharing_an_id_are_each_drawn_with_their_own_details() -> None:
    first = asyncio.run(reusing_ids(("a.txt", "b.txt")))
    second = asyncio.run(reusing_ids(("x.txt", "y.txt")))
    run = build({"first": first, "second": second})
    for group, paths in zip(run["groups"], (("a.txt", "b.txt"), ("x.txt", "y.txt")), strict=True):
        calls = [c for r in group["rows"] for c in r["calls"]]
        reused = sorted((c for c in calls if c["id"] == "call_0"), key=lambda c: c["order"])
        assert [json.loads(c["arguments"]["text"])["path"] for c in reused] == list(paths)
        assert [c["result"]["text"] for c in reused] == [f"contents of {p}" for p in paths]
        assert reused[0]["end"] <= reused[1]["start"]  # each at its own time
        programs = group["programs"]
        assert [p["id"] for p in programs] == [
            "constructor",
            "constructor",
            "__proto__",
            "toString",
        ]
        subs = [[c for c in calls if c["program_key"] == p["key"]] for p in programs]
        assert [json.loads(s["arguments"]["text"])["path"] for [s] in subs] == [
            "p.txt", "q.txt", "r.txt", "s.txt",
        ]  # fmt: skip
        assert all(p["calls"] == 1 and p["owner"] is not None for p in programs)
    keys = [c["key"] for g in run["groups"] for r in g["rows"] for c in r["calls"]]
    assert len(keys) == len(set(keys)) == 2 * 10  # 2 reads, 4 programs and their 4 sub-calls
    assert run["summary"]["programs"] == 8
    exported = trace({"first": first, "second": second})["traceEvents"]
    reads = [e for e in exported if e["ph"] == "X" and e["args"].get("id") == "call_0"]
    assert len(reads) == 4
    assert sum(e["ph"] == "B" and e["cat"] == "program" for e in exported) == 8


OPEN_EACH = """(() => {
  const keys = [...document.querySelectorAll('.bar%s')].map(b => b.dataset.key);
  return keys.map(key => {  /* a click redraws the rows: find each bar again */
    document.querySelector(`.bar[data-key="${key}"]`).click();
    return document.getElementById('details').textContent; }); })()"""


@needs_chromium
def test_each_call_of_a_shared_id_and_every_program_name_is_drawn_in_chromium(
    browser: Browser, tmp_path: Path
) -> None:
    first = asyncio.run(reusing_ids(("a.txt", "b.txt")))
    second = asyncio.run(reusing_ids(("x.txt", "y.txt")))
    path = tmp_path / "ids.html"
    path.write_text(render({"first": first, "second": second}), encoding="utf-8")
    browser.open(path)
    assert browser.evaluate("document.body.dataset.readyMs") is not None  # the report ran
    details = browser.evaluate(OPEN_EACH % '[data-id="call_0"]')
    paths = [next(p for p in ("a.txt", "b.txt", "x.txt", "y.txt") if p in d) for d in details]
    assert sorted(paths) == ["a.txt", "b.txt", "x.txt", "y.txt"]  # four bars, each its own
    bands = browser.evaluate(
        "[...document.querySelectorAll('.row.program .label')].map(l => l.textContent)"
    )
    assert sorted(bands) == sorted(
        2 * ["program constructor: reads p.txt", "program constructor: reads q.txt",
             "program __proto__: reads r.txt", "program toString: reads s.txt"]
    )  # fmt: skip
    # every program's sub-call row has its band
    rows = browser.evaluate(
        """[...document.querySelectorAll('.row.calls')].filter(r =>
          r.querySelector('.label').textContent.startsWith('program ')).map(r =>
          [r.querySelector('.label').textContent, r.querySelectorAll('.band').length])"""
    )
    assert len(rows) == 8 and all(count == 1 for _, count in rows), rows
    # and each sub-call opens its own details
    texts = browser.evaluate(OPEN_EACH % '[data-id$=":code:1"]')
    assert sorted(t for t in "pqrs" for d in texts if f"{t}.txt" in d) == sorted(2 * "pqrs")


# -- the layout is linear in the log --------------------------------------------------------------


def audit_log(programs: int) -> Session:
    """A gateway-style audit log: ``programs`` programs of five sub-calls each (the last a write
    that asked for approval), and beside them as many native calls, all running at once (one
    slot each), with the events the scheduler and the gateway write."""
    session = Session()
    at = AT
    for p in range(programs):
        program = f"p{p}"
        session.log_event("code_run", {"id": program, "language": "python", "description": "x"})
        for n in range(1, 6):
            name = "write" if n == 5 else "read"
            call = f"{program}:code:{n}"
            session.log_event("tool_call", {"id": call, "name": name, "arguments": {"n": n},
                                            "mode": "parallel", "seq": n})  # fmt: skip
            if name == "write":
                session.log_event(
                    "approval", {"tool": "write", "approved": True, "asked": at, "answered": at}
                )
            session.log_event("call_timing", TIMING | {"id": call, "name": name, "lane": p,
                              "seq": n, "admitted": at, "started": at, "finished": at + 0.001,
                              "program": program})  # fmt: skip
            at += 0.0005
        session.log_event("call_timing", TIMING | {"id": program, "name": "run_code",
                          "lane": -1, "seq": p, "admitted": at - 0.003, "started": at - 0.003,
                          "finished": at})  # fmt: skip
        output = json.dumps({"result": 1, "calls": [{"name": "read", "ok": True}] * 5})
        session.append(
            "tool_result", {"tool_call_id": program, "name": "run_code", "content": output}
        )
        session.log_event("call_timing", TIMING | {"id": f"n{p}", "lane": -2, "seq": p,
                          "admitted": AT, "started": AT + p * 1e-6, "finished": AT + 3600.0})  # fmt: skip
    return session


def lines_run(session: Session) -> int:
    """How many lines of toolnexus/view/_model.py run to build ``session`` (an operation count:
    a loop's body counts once per turn, a comprehension's once per item)."""
    count = 0
    source = model.__file__

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename != source:
            return None

        def local(frame: Any, event: str, arg: Any) -> Any:
            nonlocal count
            count += event == "line"
            return local

        return local

    sys.settrace(tracer)
    try:
        build(session)
    finally:
        sys.settrace(None)
    return count


def test_laying_out_programs_approvals_and_slots_is_linear_in_the_log() -> None:
    small, large = lines_run(audit_log(60)), lines_run(audit_log(240))
    assert large < 5 * small, (small, large)  # four times the log: about four times the work


def test_an_audit_log_of_two_runs_draws_each_runs_calls_and_waits_apart(tmp_path: Path) -> None:
    """Two runs appended to one log (event numbers restart; ids, programs and lanes repeat):
    every call is drawn, and a wait points to the call it waited for in its own run."""
    runs = [asyncio.run(demo_run())[0].session for _ in range(2)]
    log = tmp_path / "audit.jsonl"
    log.write_text("".join(e.json_line() for run in runs for e in run.events), encoding="utf-8")
    run = build(log)
    calls = sorted(
        (c for r in run["groups"][0]["rows"] for c in r["calls"]), key=lambda c: c["order"]
    )
    per_run = len([e for e in runs[0].events if e.type == "call_timing"])
    assert len(calls) == 2 * per_run
    first_keys = {c["key"] for c in calls[:per_run]}
    by_key = {c["key"]: c for c in calls}
    waits = [(c, c["waited_for"]) for c in calls if c["waited_for"]]
    assert len(waits) == 2 * sum("waited_for" in e.data for e in runs[0].events)
    for call, waited in waits:
        assert (call["key"] in first_keys) == (waited["key"] in first_keys)  # its own run's
        assert by_key[waited["key"]]["id"] == waited["id"]
    assert [p["id"] for p in run["groups"][0]["programs"]] == ["c7", "c7"]
    flows = [e for e in trace(log)["traceEvents"] if e["ph"] == "s"]
    assert len(flows) == len(waits)
