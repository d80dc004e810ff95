"""The session log under hostile input: what `append` accepts reads back unchanged (or is
refused at `append`), `save` never leaves a damaged file behind, and `load` refuses a damaged or
tampered file with a `SessionError` naming the line."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from frontier_endpoint import FrontierEndpoint, Step, client_for, lookup, run, start, unmarked
from raw_endpoint import RawEndpoint, as_json
from toolnexus import Session
from toolnexus.errors import SessionError
from toolnexus.session import MAX_DEPTH


def _nested(levels: int) -> dict[str, Any]:
    """A dict holding lists ``levels`` deep in all (the dict itself is level 1)."""
    inner: Any = []
    for _ in range(levels - 2):
        inner = [inner]
    return {"v": inner}


HOSTILE: dict[str, dict[str, Any]] = {
    "lone surrogate": {"text": "a\ud800b"},
    "lone surrogate in a key": {"\udfff": 1},
    "5,000-digit int": {"n": 7 * 10**4999},
    "negative 5,000-digit int": {"n": -7 * 10**4999},
    "nested 100 deep": _nested(100),
    "nested at the limit": _nested(MAX_DEPTH),
    "nested past the limit": _nested(MAX_DEPTH + 1),
    "nested 1,000 deep": _nested(1000),
}


@pytest.mark.parametrize("data", HOSTILE.values(), ids=HOSTILE.keys())
def test_what_append_accepts_reads_back_unchanged(tmp_path: Path, data: dict[str, Any]) -> None:
    session = Session()
    session.append("user_message", {"content": "before"})
    try:
        session.append("note", data)
    except SessionError:
        assert len(session) == 1  # refused whole, at append
        return
    session.save(tmp_path / "s.jsonl")
    loaded = Session.load(tmp_path / "s.jsonl")
    assert loaded.events == session.events


def test_unwritable_data_is_refused_at_append_naming_it() -> None:
    session = Session()
    with pytest.raises(SessionError, match=r'data\["text"\] holds a lone surrogate'):
        session.append("note", HOSTILE["lone surrogate"])
    with pytest.raises(SessionError, match=r'data\["n"\] is an integer too large'):
        session.append("note", HOSTILE["5,000-digit int"])
    with pytest.raises(SessionError, match=f"nested deeper than {MAX_DEPTH}"):
        session.append("note", HOSTILE["nested past the limit"])
    assert len(session) == 0
    session.append("note", HOSTILE["nested 100 deep"])  # deep, but it reads back


def test_a_failing_save_leaves_the_previous_file_whole(tmp_path: Path) -> None:
    """A save cut short by the disk (here a file-size limit, in a real subprocess) must leave
    the good file that was there, not a truncated one, and no temporary file."""
    path = tmp_path / "s.jsonl"
    good = Session()
    good.append("user_message", {"content": "the good conversation"})
    good.save(path)
    before = path.read_bytes()
    script = textwrap.dedent(
        f"""
        import resource, signal, sys
        from toolnexus import Session
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, ({len(before) + 200}, {len(before) + 200}))
        big = Session()
        for i in range(200):
            big.append("user_message", {{"content": "x" * 100}})
        try:
            big.save({str(path)!r})
        except OSError as exc:
            print("failed:", exc.strerror)
            sys.exit(0)
        print("saved")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=30, check=True
    )
    assert done.stdout.strip() == "failed: File too large"
    assert path.read_bytes() == before
    assert Session.load(path).events == good.events
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]


def test_save_replaces_the_file_and_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text("old contents that are much longer than the new ones\n" * 10)
    path.chmod(0o640)
    session = Session()
    session.append("user_message", {"content": "new"})
    session.save(path)
    assert Session.load(path).events == session.events
    assert path.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]


def _file(tmp_path: Path, second: bytes) -> Path:
    good = json.dumps({"seq": 1, "type": "user_message", "data": {"content": "a"}, "time": 0})
    path = tmp_path / "s.jsonl"
    path.write_bytes(good.encode() + b"\n" + second + b"\n")
    return path


def test_bad_utf8_is_a_session_error_naming_the_line(tmp_path: Path) -> None:
    line = b'{"seq": 2, "type": "note", "data": {"t": "\xff\xfe"}, "time": 0}'
    with pytest.raises(SessionError, match="session file line 2: not UTF-8") as info:
        Session.load(_file(tmp_path, line))
    assert type(info.value) is SessionError


@pytest.mark.parametrize("seq", ["true", "2.0", '"2"'])
def test_an_event_number_must_be_an_integer(tmp_path: Path, seq: str) -> None:
    first = json.dumps({"seq": True, "type": "user_message", "data": {"content": "a"}})
    path = tmp_path / "s.jsonl"
    path.write_text(first.replace("true", seq.replace("2", "1")) + "\n")
    with pytest.raises(SessionError, match="session file line 1: event number"):
        Session.load(path)


TAMPERED = {
    "tool_calls a string": {"content": "", "tool_calls": "rm -rf"},
    "a call a string": {"content": "", "tool_calls": ["rm -rf"]},
    "a call without id": {"content": "", "tool_calls": [{"name": "lookup", "arguments": {}}]},
    "a numeric id": {"content": "", "tool_calls": [{"id": 1, "name": "lookup"}]},
    "a name object": {"content": "", "tool_calls": [{"id": "c1", "name": {"x": 1}}]},
    "content a list": {"content": ["a"], "tool_calls": []},
    "provider a string": {"content": "", "provider": "openai"},
    "provider without style": {"content": "", "provider": {"message": {}}},
    "provider message a string": {"content": "", "provider": {"style": "o", "message": "m"}},
}


@pytest.mark.parametrize("data", TAMPERED.values(), ids=TAMPERED.keys())
def test_a_tampered_assistant_message_is_refused_at_load_and_append(
    tmp_path: Path, data: dict[str, Any]
) -> None:
    line = json.dumps({"seq": 2, "type": "assistant_message", "data": data, "time": 0})
    with pytest.raises(SessionError, match="session file line 2: assistant_message"):
        Session.load(_file(tmp_path, line.encode()))
    with pytest.raises(SessionError, match="assistant_message"):
        Session().append("assistant_message", data)


def test_an_assistant_message_the_library_writes_loads(tmp_path: Path) -> None:
    data = {
        "content": None,
        "tool_calls": [{"id": "c1", "name": "lookup", "arguments": "not json {"}],
        "provider": {"style": "openai", "message": {"role": "assistant", "extra": [1]}},
        "anything": "else is the caller's",
    }
    session = Session()
    session.append("assistant_message", data)
    session.save(tmp_path / "s.jsonl")
    assert Session.load(tmp_path / "s.jsonl").events == session.events


def test_a_run_s_own_records_of_hostile_text_save_and_load(tmp_path: Path) -> None:
    """Lone surrogates from the prompt, the model's reply, its call ids and arguments and a
    program's description never make a run's log unsavable: they are recorded (or written) as
    U+FFFD, which is what the model was sent."""
    from toolnexus import ToolCall, ToolHints, create_client, tool
    from toolnexus.testing import ScriptedModel

    @tool(hints=ToolHints(read_only=True))
    def echo(x: str) -> str:
        """Echo."""
        return x

    model = ScriptedModel(
        [
            [
                ToolCall("c1\udc00", "echo", {"x": "q\udc00"}),
                ToolCall("c2", "run_code", {"code": "1 + 1", "description": "add \ud800 up"}),
            ],
            "done \ud800",
        ]
    )
    session = Session()
    result = create_client(model=model, code_mode="both").run_sync(
        "go \ud801", tools=[echo], session=session
    )
    assert result.status == "done"
    session.save(tmp_path / "s.jsonl")
    loaded = Session.load(tmp_path / "s.jsonl")
    assert len(loaded) == len(session)
    text = (tmp_path / "s.jsonl").read_text(encoding="utf-8")
    assert "go \ufffd" in text and "done \ufffd" in text and "add \ufffd up" in text
    assert "q\ufffd" in text and "c1\ufffd" in text
    assert [m["role"] for m in loaded.messages()] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]


# -- reasoning state is saved whole, whatever its text or depth ------------------------------

SPLIT_EMOJI = "x" + "😀" * 20 + " then I call lookup."
"""Reasoning that the endpoints stream in UTF-16 pieces: some piece ends halfway through an
emoji, so the streamed text holds surrogates that no UTF-8 encoder writes as they are."""


def _signed(issued: Any, style: str) -> Any:
    """The opaque state of an issued turn that must come back verbatim."""
    if style == "anthropic":
        return [b for b in issued if b["type"] in ("thinking", "redacted_thinking")]
    return {k: v for k, v in issued.items() if k.startswith("reasoning")}


def _sent_back(request: dict[str, Any], style: str) -> list[Any]:
    return [
        _signed(unmarked(m["content"]) if style == "anthropic" else m, style)
        for m in request["messages"]
        if m.get("role") == "assistant"
    ]


@pytest.mark.parametrize("profile", ["anthropic-thinking", "openrouter-reasoning", "deepseek"])
async def test_reasoning_with_a_split_emoji_is_saved_loaded_and_sent_back_verbatim(
    endpoints: list[FrontierEndpoint], profile: str, tmp_path: Path
) -> None:
    server = start(endpoints, profile)
    server.script(
        Step(calls=[("lookup", {"city": "Oslo"})], thinking=SPLIT_EMOJI),
        Step(text="Sunny.", thinking=SPLIT_EMOJI),
        Step(text="Still sunny."),
    )
    client = client_for(server)
    session = Session()
    first = await run(client, "Weather?", stream=True, tools=[lookup], session=session)
    assert first.status == "done" and server.rejected == []
    kept = [e.data.get("provider") for e in session.events if e.type == "assistant_message"]
    assert all(kept) and len(kept) == 2  # neither turn's own message was dropped
    session.save(tmp_path / "s.jsonl")
    loaded = Session.load(tmp_path / "s.jsonl")
    again = await run(client, "And now?", stream=True, tools=[lookup], session=loaded)
    assert again.status == "done" and again.text == "Still sunny."
    assert server.rejected == []  # every signature and reasoning field checked out
    issued = [_signed(turn, server.style) for turn in server.issued[:2]]
    assert _sent_back(server.requests[-1], server.style) == issued
    assert "😀" * 20 in json.dumps(server.requests[-1], ensure_ascii=False)


def _deep_value(levels: int) -> Any:
    value: Any = {"leaf": True}
    for _ in range(levels - 1):
        value = {"next": value}
    return value


DEEP_STATE = _deep_value(90)  # past the 64 levels taken in tool arguments; within a saved line


def _deep_turns(style: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """A turn carrying signed thinking beside deep provider state and a call, then two answers."""
    usage = {"input_tokens": 3, "output_tokens": 2}
    if style == "anthropic":

        def message(content: list[Any], stop: str) -> dict[str, Any]:
            return {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "m",
                "content": content,
                "stop_reason": stop,
                "usage": usage,
            }

        first = message(
            [
                {"type": "thinking", "thinking": "Look it up. 😀", "signature": "U2lnbmVkLTE="},
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_1",
                    "name": "web_search",
                    "input": {"query": DEEP_STATE},
                },
                {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"city": "Oslo"}},
            ],
            "tool_use",
        )
        return (
            first,
            message([{"type": "text", "text": "Sunny."}], "end_turn"),
            message([{"type": "text", "text": "Still."}], "end_turn"),
        )

    def response(output: list[Any]) -> dict[str, Any]:
        return {
            "id": "resp_1",
            "object": "response",
            "created_at": 0,
            "model": "m",
            "status": "completed",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }

    def said(text: str) -> dict[str, Any]:
        part = {"type": "output_text", "text": text, "annotations": []}
        return {"type": "message", "id": "msg_1", "role": "assistant", "content": [part]}

    first = response(
        [
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [],
                "encrypted_content": "ZW5jcnlwdGVk",
                "trace": DEEP_STATE,
            },
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "lookup",
                "arguments": '{"city": "Oslo"}',
            },
        ]
    )
    return first, response([said("Sunny.")]), response([said("Still.")])


@pytest.mark.parametrize("style", ["anthropic", "responses"])
async def test_deep_provider_state_is_saved_with_its_turn_and_sent_back_verbatim(
    raw: RawEndpoint, style: str, tmp_path: Path
) -> None:
    first, second, third = _deep_turns(style)
    raw.answer(as_json(first), as_json(second), as_json(third))
    client = raw.client(style)
    session = Session()
    result = await client.run("Weather?", tools=[lookup], session=session)
    assert result.status == "done" and result.text == "Sunny."
    session.save(tmp_path / "s.jsonl")
    again = await client.run("And now?", tools=[lookup], session=Session.load(tmp_path / "s.jsonl"))
    assert again.text == "Still."
    sent = raw.requests[-1]
    if style == "anthropic":
        [turn, _] = [m for m in sent["messages"] if m["role"] == "assistant"]
        assert unmarked(turn["content"]) == first["content"]  # signature and depth intact
    else:
        assert [i for i in sent["input"] if i.get("type") in ("reasoning", "function_call")] == [
            {k: v for k, v in item.items() if k != "status"} for item in first["output"]
        ]
