"""Session.save / Session.load, and a run carrying a saved (or interrupted) conversation on."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from fake_provider import FakeProvider, Turn
from test_client import client_for
from toolnexus import Session, ToolCall, ToolHints, create_client, tool
from toolnexus.client._resume import INTERRUPTED
from toolnexus.errors import SessionError
from toolnexus.testing import ScriptedModel


@tool(hints=ToolHints(read_only=True))
def lookup(city: str) -> str:
    """Weather for a city."""
    return f"{city}: sunny"


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    session = Session()
    session.append("user_message", {"content": "hi ünïcode"})
    session.log_event("tool_call", {"id": "x:code:1", "arguments": {"n": [1, 2]}})
    session.save(tmp_path / "s.jsonl")
    loaded = Session.load(tmp_path / "s.jsonl")
    assert loaded.events == session.events  # seq, type, data and time
    assert loaded.messages() == session.messages()


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("{not json", "not valid JSON"),
        ('{"seq": 2, "type": "x"}', "not a saved event"),
        ('{"seq": 3, "type": "x", "data": {}, "time": 0}', "number 3 where 2 was expected"),
        ('{"seq": 2, "type": "", "data": {}, "time": 0}', "needs a type"),
        ('{"seq": 2, "type": "x", "data": [], "time": 0}', "needs a type"),
        ('{"seq": 2, "type": "x", "data": {"v": NaN}, "time": 0}', "not valid JSON"),
        ('{"seq": 2, "type": "x", "data": ' + "[" * 500 + "]" * 500 + ', "time": 0}', "deeper"),
    ],
)
def test_a_damaged_file_is_refused_naming_the_line(tmp_path: Path, line: str, problem: str) -> None:
    good = json.dumps({"seq": 1, "type": "user_message", "data": {"content": "a"}, "time": 0})
    path = tmp_path / "s.jsonl"
    path.write_text(f"{good}\n{line}\n")
    with pytest.raises(SessionError, match=problem) as info:
        Session.load(path)
    assert "session file line 2" in str(info.value)


@pytest.mark.parametrize("style", ["openai", "anthropic"])
async def test_a_run_carries_a_saved_conversation_on(
    provider: FakeProvider, style: str, tmp_path: Path
) -> None:
    provider.script(
        Turn(calls=[("c1", "lookup", {"city": "Oslo"})]),
        Turn(text="Oslo is sunny."),
        Turn(text="Rome too."),
    )
    first = Session()
    await client_for(provider, style).run("Oslo?", tools=[lookup], session=first)
    first.save(tmp_path / "chat.jsonl")

    loaded = Session.load(tmp_path / "chat.jsonl")
    result = await client_for(provider, style).run("And Rome?", tools=[lookup], session=loaded)
    assert result.text == "Rome too."
    sent = provider.requests[-1]["messages"]
    texts = json.dumps(sent)
    assert "Oslo?" in texts and "Oslo: sunny" in texts and "Oslo is sunny." in texts
    latest = {"role": "user", "content": "And Rome?"}
    if style == "anthropic":  # the rolling prompt-cache breakpoint marks the latest turn
        latest["content"] = [  # type: ignore[assignment]
            {"type": "text", "text": "And Rome?", "cache_control": {"type": "ephemeral"}}
        ]
    assert sent[-1] == latest
    assert [m["role"] for m in loaded.messages()][-2:] == ["user", "assistant"]


@pytest.mark.parametrize("style", ["openai", "anthropic"])
async def test_an_interrupted_run_is_carried_on_with_its_calls_answered_honestly(
    provider: FakeProvider, style: str, tmp_path: Path
) -> None:
    started = asyncio.Event()

    @tool(hints=ToolHints(read_only=True))
    async def slow(n: int) -> int:
        """Slow."""
        started.set()
        await asyncio.sleep(60)
        return n

    provider.script(Turn(calls=[("c1", "lookup", {"city": "Oslo"}), ("c2", "slow", {"n": 1})]))
    session = Session()
    run = asyncio.ensure_future(
        client_for(provider, style).run("go", tools=[lookup, slow], session=session)
    )
    await started.wait()
    # the process "dies": the log as it was while c2 ran, without the results written at cancel
    surviving = [e for e in session.events if e.type != "tool_result"]
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    broken = Session()
    for event in surviving:
        broken.append(event.type, event.data)
    broken.save(tmp_path / "crashed.jsonl")

    loaded = Session.load(tmp_path / "crashed.jsonl")
    provider.script(Turn(text="Oslo is sunny; the slow call was interrupted."))
    result = await client_for(provider, style).run(
        "Where were we?", tools=[lookup, slow], session=loaded
    )
    assert result.status == "done"
    sent = json.dumps(provider.requests[-1]["messages"])
    assert sent.count(INTERRUPTED) == 2  # both calls: neither had a recorded result
    answered = [e.data for e in loaded.events if e.type == "tool_result"]
    assert [a["tool_call_id"] for a in answered[:2]] == ["c1", "c2"]
    assert all(a["is_error"] and a["content"] == INTERRUPTED for a in answered[:2])


def test_an_in_process_model_sees_the_loaded_conversation(tmp_path: Path) -> None:
    model = ScriptedModel([[ToolCall("c1", "lookup", {"city": "Oslo"})], "sunny", "still sunny"])
    client = create_client(model=model, code_mode="native")
    session = Session()
    client.run_sync("Oslo?", tools=[lookup], session=session)
    session.save(tmp_path / "s.jsonl")
    client.run_sync("Again?", tools=[lookup], session=Session.load(tmp_path / "s.jsonl"))
    shown: list[dict[str, Any]] = model.requests[-1]
    assert [m["role"] for m in shown] == ["user", "assistant", "tool", "assistant", "user"]
