"""A frontier endpoint's conversation carried on: ``history=``, ``Session.save``/``load`` (in one
process and across a process restart) and ``client.resume`` after a relay call; each later
request must still satisfy the endpoint's rules (see ``frontier_endpoint.py``)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import toolnexus
from frontier_endpoint import (
    PROFILES,
    FrontierEndpoint,
    Step,
    assistant_turns,
    client_for,
    lookup,
    replayed,
    run,
    unmarked,
)
from toolnexus import Session
from toolnexus.tools.relay import relay_tool

TESTS = Path(__file__).parent
SRC = Path(toolnexus.__file__).parents[1]  # the sources under test, wherever they are


@pytest.fixture(params=PROFILES)
def server(request: pytest.FixtureRequest) -> Iterator[FrontierEndpoint]:
    endpoint = FrontierEndpoint(request.param).start()
    yield endpoint
    endpoint.stop()


def first_conversation(server: FrontierEndpoint) -> None:
    server.script(
        Step(calls=[("lookup", {"city": "Oslo"})]),
        Step(calls=[("lookup", {"city": "Rome"})]),
        Step(text="Oslo and Rome are sunny."),
    )


def second_conversation(server: FrontierEndpoint) -> None:
    server.script(Step(calls=[("lookup", {"city": "Pisa"})]), Step(text="Pisa is sunny too."))


def assert_every_turn_came_back(server: FrontierEndpoint) -> None:
    """No request was refused, and the last one carried every earlier turn as it was sent."""
    assert server.rejected == []
    last = server.requests[-1]["messages"]
    sent = [m for m in last if m.get("role") == "assistant"]
    expected = [replayed(t, server.style) for t in server.issued[:-1]]
    assert [unmarked(m) for m in sent] == expected  # a cache breakpoint is not content
    if server.profile == "vllm":
        assert server.reasoning_returned[-1] == [True] * sum(
            1 for t in server.issued[:-1] if t.get("tool_calls")
        )


@pytest.mark.parametrize("stream", [False, True])
async def test_history_carries_the_provider_state_on(
    server: FrontierEndpoint, stream: bool
) -> None:
    first_conversation(server)
    second_conversation(server)
    client = client_for(server)
    first = await run(client, "Oslo and Rome?", stream=stream, tools=[lookup])
    assert first.status == "done"
    second = await run(client, "And Pisa?", stream=stream, tools=[lookup], history=first.messages)
    assert second.status == "done" and second.text == "Pisa is sunny too."
    assert len(server.answered) == 5
    assert_every_turn_came_back(server)
    assert assistant_turns(second) == [replayed(t, server.style) for t in server.issued]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_saved_and_loaded_session_carries_the_provider_state_on(
    server: FrontierEndpoint, tmp_path: Path, stream: bool
) -> None:
    first_conversation(server)
    second_conversation(server)
    first = await run(client_for(server), "Oslo and Rome?", stream=stream, tools=[lookup])
    assert first.status == "done"
    recorded = [e.data for e in first.session.events if e.type == "assistant_message"]
    assert [r["provider"] for r in recorded] == [
        {"style": server.style, "message": replayed(t, server.style), "endpoint": server.url}
        for t in server.issued
    ]
    first.session.save(tmp_path / "session.jsonl")
    loaded = Session.load(tmp_path / "session.jsonl")
    second = await run(
        client_for(server), "And Pisa?", stream=stream, tools=[lookup], session=loaded
    )
    assert second.status == "done" and second.text == "Pisa is sunny too."
    assert len(server.answered) == 5
    assert_every_turn_came_back(server)


async def test_a_sessions_system_message_is_the_anthropic_system(tmp_path: Path) -> None:
    with FrontierEndpoint("anthropic-thinking") as server:
        server.script(
            Step(calls=[("lookup", {"city": "Oslo"})]),
            Step(text="Oslo is sunny."),
            Step(calls=[("lookup", {"city": "Rome"})]),
            Step(text="Rome is sunny."),
        )
        session = Session()
        session.append("system_message", {"content": "Answer in five words."})
        client = client_for(server, system_prompt=None)
        await client.run("Oslo?", tools=[lookup], session=session)
        session.save(tmp_path / "session.jsonl")
        loaded = Session.load(tmp_path / "session.jsonl")
        result = await client.run("Rome?", tools=[lookup], session=loaded)
    assert result.status == "done" and server.rejected == []  # the blocks' prefix held
    for body in server.requests:
        system = body["system"]
        texts = [system] if isinstance(system, str) else [b["text"] for b in system]
        assert texts == ["Answer in five words."]


async def test_resume_after_a_relay_call_carries_the_provider_state_on(
    server: FrontierEndpoint,
) -> None:
    pick = relay_tool("pick_city", "Ask the user which city to check next.")
    server.script(
        Step(calls=[("lookup", {"city": "Oslo"})]),
        Step(calls=[("pick_city", {})]),
        Step(calls=[("lookup", {"city": "Rome"})]),
        Step(text="Rome is sunny."),
    )
    client = client_for(server)
    pending = await client.run("Weather?", tools=[lookup, pick])
    assert pending.status == "pending" and len(server.answered) == 2
    done = await client.resume(pending, {pending.pending[0].id: "Rome"})
    assert done.status == "done" and done.text == "Rome is sunny."
    assert len(server.answered) == 4
    assert_every_turn_came_back(server)
    assert assistant_turns(done) == [replayed(t, server.style) for t in server.issued]


PROCESS = textwrap.dedent(
    """
    import asyncio, json, sys
    from frontier_endpoint import client_for, lookup
    from toolnexus import Session

    phase, style, url, model, path = sys.argv[1:]

    class Remote:  # where the endpoint is, as client_for reads it
        pass

    Remote.style, Remote.url, Remote.model = style, url, model

    async def main():
        client = client_for(Remote)
        if phase == "first":
            result = await client.run("Oslo and Rome?", tools=[lookup])
            result.session.save(path)
        else:
            result = await client.run("And Pisa?", tools=[lookup], session=Session.load(path))
        print(json.dumps({"status": result.status, "text": result.text}))

    asyncio.run(main())
    """
)


def in_a_new_process(tmp_path: Path, *args: str) -> dict[str, str]:
    script = tmp_path / "conversation.py"
    script.write_text(PROCESS)
    env_path = f"{SRC}:{TESTS}"
    done = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=25,
        env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, str] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_a_saved_session_resumed_after_a_process_restart_completes(
    server: FrontierEndpoint, tmp_path: Path
) -> None:
    first_conversation(server)
    second_conversation(server)
    path = str(tmp_path / "session.jsonl")
    args = (server.style, server.url, server.model, path)
    first = in_a_new_process(tmp_path, "first", *args)
    assert first == {"status": "done", "text": "Oslo and Rome are sunny."}
    second = in_a_new_process(tmp_path, "second", *args)
    assert second == {"status": "done", "text": "Pisa is sunny too."}
    assert len(server.answered) == 5
    assert_every_turn_came_back(server)
