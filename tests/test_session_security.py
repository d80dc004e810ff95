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
