"""The agent runtime and the task tool against a scripted endpoint on 127.0.0.1 (real HTTP).

The endpoint answers by content (``FakeProvider.router``): each agent is recognised by its
system prompt, so concurrent agents get the right scripted turns whatever order they ask in.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from fake_provider import USAGE_IN, USAGE_OUT, FakeProvider, Turn
from toolnexus import ToolHints, create_client, tool
from toolnexus.agents import AgentError, AgentRuntime, Budget, agent

COORDINATE = "You coordinate research."
RESEARCH = "You research one topic."
TOKENS_PER_TURN = USAGE_IN + USAGE_OUT


def last(body: dict[str, Any]) -> dict[str, Any]:
    return body["messages"][-1]


def system(body: dict[str, Any]) -> str:
    first = body["messages"][0]
    return first["content"] if first["role"] == "system" else ""


def router(delay: float = 0.3, code_mode: bool = False) -> Any:
    def route(body: dict[str, Any]) -> Turn:
        message = last(body)
        if system(body) == RESEARCH:
            if message["role"] == "tool":
                return Turn(text="done with tools")
            return Turn(text=f"findings on {message['content']}", delay=delay)
        # the coordinator
        if message["role"] == "tool":
            results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
            return Turn(text="summary: " + " | ".join(results))
        if "Messages received" in message["content"]:
            return Turn(text="noted: " + message["content"].split("Messages received:\n")[1])
        if code_mode:
            program = (
                "import asyncio\n"
                "r = await asyncio.gather(*[tools.task({'agent': 'researcher', 'prompt': t}) "
                "for t in ['A', 'B']])\nr"
            )
            return Turn(calls=[("c1", "run_code", {"code": program, "description": "Fan out."})])
        calls = [
            (f"t{i}", "task", {"agent": "researcher", "prompt": t}) for i, t in enumerate("ABC")
        ]
        return Turn(calls=calls)

    return route


def runtime_for(
    provider: FakeProvider, *, code_mode: str = "native", **limits: Any
) -> AgentRuntime:
    client = create_client(
        base_url=provider.url + "/v1", model="m", api_key="k", code_mode=code_mode
    )
    team = [
        agent("coordinator", instructions=COORDINATE, team=["researcher"]),
        agent("researcher", instructions=RESEARCH),
    ]
    return AgentRuntime(team, client=client, **limits)


async def test_fan_out_runs_children_at_once_and_keeps_call_order(provider: FakeProvider) -> None:
    provider.router = router()
    runtime = runtime_for(provider)
    coordinator = runtime.spawn(runtime.root, "coordinator")
    assert coordinator.id == "root/coordinator.1"
    runtime.wake(coordinator, "research A, B and C")
    result = await runtime.wait(coordinator)
    assert result.status == "done"
    assert result.text == "summary: findings on A | findings on B | findings on C"
    assert provider.peak_in_flight >= 2  # the three researchers' requests overlapped
    spawned = [hid for event, hid in runtime.trace if event == "spawned"]
    assert spawned[1:] == [f"root/coordinator.1/researcher.{n}" for n in (2, 3, 4)]
    assert coordinator.usage.input_tokens == 5 * USAGE_IN  # 2 own turns + 3 children, rolled up
    assert runtime.root.usage.output_tokens == 5 * USAGE_OUT


async def test_the_background_agents_recipe(provider: FakeProvider) -> None:
    provider.router = router(delay=0.2)
    runtime = runtime_for(provider)
    parent = runtime.spawn(runtime.root, "coordinator")
    seen: list[tuple[str, str]] = []

    h = runtime.spawn(parent, "researcher")  # the id is available at once
    assert h.id == "root/coordinator.1/researcher.2" and h.status == "idle"
    runtime.wake(h, "topic X")  # returns at once
    assert h.status == "running"

    def on_done(handle_id: str, text: str) -> None:
        seen.append((handle_id, text))

    async def background() -> None:
        r = await runtime.wait(h)
        on_done(h.id, r.text)
        runtime.post(parent, f"{h.id} says: {r.text}")
        runtime.wake(parent)

    waiter = asyncio.ensure_future(background())
    await waiter
    told = await runtime.wait(parent)
    assert seen == [("root/coordinator.1/researcher.2", "findings on topic X")]
    assert told.text == "noted: - root/coordinator.1/researcher.2 says: findings on topic X"


async def test_the_children_gate_queues_extra_wakes_in_order(provider: FakeProvider) -> None:
    provider.router = router(delay=0.2)
    runtime = runtime_for(provider, max_children=1)
    first = runtime.spawn(runtime.root, "researcher")
    second = runtime.spawn(runtime.root, "researcher")
    runtime.wake(first, "one")
    runtime.wake(second, "two")
    assert second.status == "queued"
    results = await asyncio.gather(runtime.wait(first), runtime.wait(second))
    assert [r.text for r in results] == ["findings on one", "findings on two"]
    events = [(e, h) for e, h in runtime.trace if e in ("queued", "started", "finished")]
    assert events == [
        ("started", first.id),
        ("queued", second.id),
        ("finished", first.id),
        ("started", second.id),
        ("finished", second.id),
    ]
    assert provider.peak_in_flight == 1


async def test_interrupt_and_wait_timeout(provider: FakeProvider) -> None:
    provider.router = router(delay=0.6)
    runtime = runtime_for(provider)
    slow = runtime.spawn(runtime.root, "researcher")
    runtime.wake(slow, "deep topic")
    assert (await runtime.wait(slow, timeout=0.1)).status == "timeout"
    later = await runtime.wait(slow)  # the timeout left it running
    assert later.status == "done" and later.text == "findings on deep topic"
    runtime.wake(slow, "another")
    await asyncio.sleep(0.1)
    runtime.interrupt(slow)
    interrupted = await runtime.wait(slow)
    assert interrupted.status == "interrupted"
    assert len(slow.history) == 3  # system, user, assistant of the finished turn only: balanced


async def test_close_cascades_leaves_first(provider: FakeProvider) -> None:
    provider.router = router(delay=1.0)
    runtime = runtime_for(provider)
    coordinator = runtime.spawn(runtime.root, "coordinator")
    child = runtime.spawn(coordinator, "researcher")
    runtime.wake(child, "long")
    await runtime.close(coordinator)
    closed = [h for e, h in runtime.trace if e == "closed"]
    assert closed == [child.id, coordinator.id]
    assert (await runtime.wait(child)).status == "closed"
    with pytest.raises(AgentError, match="is closed"):
        runtime.post(coordinator, "hello")


async def test_budgets(provider: FakeProvider) -> None:
    @tool(hints=ToolHints(read_only=True))
    def noop() -> str:
        """Does nothing."""
        return "ok"

    def looping(body: dict[str, Any]) -> Turn:  # a researcher that never stops calling tools
        if system(body) == RESEARCH:
            return Turn(calls=[(f"n{len(body['messages'])}", "noop", {})])
        return Turn(text="?")

    provider.router = looping
    client = create_client(
        base_url=provider.url + "/v1", model="m", api_key="k", code_mode="native"
    )
    runtime = AgentRuntime(
        [agent("researcher", instructions=RESEARCH, tools=[noop], budget=Budget(max_turns=2))],
        client=client,
    )
    h = runtime.spawn(runtime.root, "researcher")
    runtime.wake(h, "go")
    capped = await runtime.wait(h)
    assert (
        capped.status == "incomplete" and capped.turns == 2 and "max_turns" in (capped.error or "")
    )

    provider.router = router(delay=0)
    shared = runtime_for(provider)
    parent = (
        runtime.spawn
        if False
        else shared.spawn(shared.root, "coordinator", Budget(max_tokens=TOKENS_PER_TURN + 1))
    )
    results = []
    for topic in ("one", "two", "three"):
        child = shared.spawn(parent, "researcher")
        shared.wake(child, topic)
        results.append(await shared.wait(child))
    # the budget is checked before each request: the second may still ask (T < T + 1 spent),
    # its answer is kept; by the third the tree has spent 2 T, so it never asks
    assert [r.status for r in results] == ["done", "done", "incomplete"]
    assert "token budget of root/coordinator.1" in (results[2].error or "")
    asked = [
        json.dumps(b["messages"]) for b in provider.requests if "three" in json.dumps(b["messages"])
    ]
    assert asked == []  # the exhausted budget stopped the third before any request


async def test_the_inbox_is_capped(provider: FakeProvider) -> None:
    runtime = runtime_for(provider, inbox_cap=2)
    h = runtime.spawn(runtime.root, "researcher")
    runtime.post(h, "a")
    runtime.post(h, {"b": 1})
    with pytest.raises(AgentError, match=r"inbox of root/researcher\.1 is full"):
        runtime.post(h, "c")
    assert list(h.inbox) == ["a", '{"b": 1}']


async def test_spawn_errors_are_clear(provider: FakeProvider) -> None:
    runtime = runtime_for(provider)
    researcher = runtime.spawn(runtime.root, "researcher")
    with pytest.raises(AgentError, match="its team is: none"):
        runtime.spawn(researcher, "coordinator")
    with pytest.raises(AgentError, match="cannot spawn 'ghost'"):
        runtime.spawn(runtime.root, "ghost")
    limited = runtime.spawn(runtime.root, "coordinator", Budget(max_children=1, max_depth=1))
    runtime.spawn(limited, "researcher")
    with pytest.raises(AgentError, match="may have 1 children"):
        runtime.spawn(limited, "researcher")


async def test_sub_agents_from_a_code_mode_program(provider: FakeProvider) -> None:
    provider.router = router(delay=0.2, code_mode=True)
    runtime = runtime_for(provider, code_mode="code")
    coordinator = runtime.spawn(runtime.root, "coordinator")
    runtime.wake(coordinator, "research A and B")
    result = await runtime.wait(coordinator)
    assert result.status == "done"
    assert '"result": ["findings on A", "findings on B"]' in result.text
    assert provider.peak_in_flight >= 2


async def test_task_refuses_agents_outside_the_team(provider: FakeProvider) -> None:
    from toolnexus.agents import task_tool

    runtime = runtime_for(provider)
    coordinator = runtime.spawn(runtime.root, "coordinator")
    task = task_tool(runtime, coordinator)
    from toolnexus.errors import ToolArgumentsError

    with pytest.raises(ToolArgumentsError, match="'researcher'"):
        await task.invoke({"agent": "writer", "prompt": "x"})
    from toolnexus.scheduling import concurrency_mode

    assert concurrency_mode(task, {"agent": "anything"}) == "parallel"


def test_the_research_team_example_runs_end_to_end(provider: FakeProvider) -> None:
    import subprocess
    import sys
    from pathlib import Path

    def route(body: dict[str, Any]) -> Turn:
        role = system(body)
        tools_seen = [m["content"] for m in body["messages"] if m["role"] == "tool"]
        if role.startswith("Research one angle"):
            return Turn(text=f"bullets about {last(body)['content']}", delay=0.2)
        if role.startswith("Write a clear"):
            return Turn(text="the answer: " + last(body)["content"])
        if not tools_seen:
            return Turn(
                calls=[
                    ("a", "task", {"agent": "researcher", "prompt": "speed"}),
                    ("b", "task", {"agent": "researcher", "prompt": "safety"}),
                ]
            )
        if len(tools_seen) == 2:
            return Turn(
                calls=[("c", "task", {"agent": "writer", "prompt": " / ".join(tools_seen)})]
            )
        return Turn(text=f"FINAL {tools_seen[-1]}")

    provider.router = route
    example = Path(__file__).parent.parent / "examples" / "research_team.py"
    done = subprocess.run(
        [
            sys.executable,
            str(example),
            "--base-url",
            provider.url + "/v1",
            "--model",
            "m",
            "--api-key",
            "k",
            "How?",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "FINAL the answer: bullets about speed / bullets about safety" in done.stdout
    assert "[done;" in done.stdout and "root/coordinator.1/writer.4" in done.stdout
    assert provider.peak_in_flight >= 2
