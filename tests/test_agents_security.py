"""Sub-agents, relay tools and tool tiers under hostile conditions: a failing child still ends
its wake and frees its slot, budgets hold while runs are still going (recursive delegation
included), posts and prompts are data, and search works in every script."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from fake_provider import FakeProvider, Turn
from test_agents import RESEARCH, TOKENS_PER_TURN, last, runtime_for, system
from toolnexus import Tool, ToolHints, tool
from toolnexus.agents import AgentError, AgentRuntime, Budget, agent
from toolnexus.client import Client, create_client
from toolnexus.errors import ConfigurationError
from toolnexus.tools.relay import relay_tool
from toolnexus.tools.tiers import tool_tiers


async def test_a_child_whose_run_raises_ends_its_wake_and_frees_its_slot(
    provider: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider.router = lambda body: Turn(text=f"answer to {last(body)['content']}")
    runtime = runtime_for(provider, max_children=1)
    real_run = Client.run

    async def run(self: Client, prompt: str, **kwargs: Any) -> Any:
        if "explode" in prompt:
            raise ValueError("something no provider error describes")
        return await real_run(self, prompt, **kwargs)

    monkeypatch.setattr(Client, "run", run)
    first = runtime.spawn(runtime.root, "researcher")
    second = runtime.spawn(runtime.root, "researcher")
    runtime.wake(first, "explode")
    runtime.wake(second, "calm")  # queued behind the first (max_children=1)
    failed = await runtime.wait(first, timeout=10)
    assert failed.status == "error"
    assert "ValueError: something no provider error describes" in (failed.error or "")
    calm = await runtime.wait(second, timeout=10)
    assert calm.status == "done" and calm.text == "answer to calm"
    assert first.parent is not None and first.parent.running_children == 0


def _self_delegating(provider: FakeProvider) -> AgentRuntime:
    """An agent whose model always delegates to itself again: unbounded recursion."""

    def route(body: dict[str, Any]) -> Turn:
        if system(body) == RESEARCH and last(body).get("role") == "user":
            return Turn(
                calls=[
                    (f"t{len(provider.requests)}", "task", {"agent": "looper", "prompt": "again"})
                ]
            )
        return Turn(text="done")

    provider.router = route
    client = create_client(
        base_url=provider.url + "/v1", model="m", api_key="k", code_mode="native"
    )
    looper = agent("looper", instructions=RESEARCH, team=["looper"])
    return AgentRuntime([looper], client=client, max_children=4)


@pytest.mark.parametrize(
    ("budget", "reason"),
    [
        (Budget(max_tokens=40), "token budget of root/looper.1 (40)"),
        (Budget(max_tool_calls=1), "tool-call budget of root/looper.1 (1)"),
    ],
)
async def test_budgets_stop_recursive_delegation_while_it_runs(
    provider: FakeProvider, budget: Budget, reason: str
) -> None:
    runtime = _self_delegating(provider)
    top = runtime.spawn(runtime.root, "looper", budget)
    runtime.wake(top, "start")
    result = await runtime.wait(top, timeout=30)
    await runtime.close(runtime.root)
    # each request costs TOKENS_PER_TURN (18): the tree may make the requests its budget
    # allowed when they were asked, and no more (it made 81 before budgets were metered live)
    assert len(provider.requests) <= 40 // TOKENS_PER_TURN + 1
    assert result.status == "incomplete"
    assert reason in (result.error or "")


def test_a_budget_of_zero_turns_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="max_turns must be None or an int >= 1"):
        Budget(max_turns=0)


@pytest.mark.parametrize(
    "item", [pytest.param("cycle", id="self-reference"), pytest.param(10**5000, id="huge int")]
)
async def test_post_refuses_what_cannot_become_text(provider: FakeProvider, item: Any) -> None:
    runtime = runtime_for(provider)
    handle = runtime.spawn(runtime.root, "researcher")
    if item == "cycle":
        item = {"a": 1}
        item["self"] = item
    with pytest.raises(AgentError, match="post text or JSON data"):
        runtime.post(handle, item)
    assert list(handle.inbox) == []
    runtime.post(handle, "text with a lone \ud800 surrogate")  # text is mended, not fatal
    assert list(handle.inbox) == ["text with a lone \ufffd surrogate"]


async def test_two_identical_task_calls_get_one_child_each_and_one_prompt_each(
    provider: FakeProvider,
) -> None:
    coordinator_turns: list[int] = []

    def route(body: dict[str, Any]) -> Turn:
        if system(body) == RESEARCH:
            return Turn(text="findings")
        coordinator_turns.append(1)
        if len(coordinator_turns) == 1:
            same = {"agent": "researcher", "prompt": "dig"}
            return Turn(calls=[("a", "task", same), ("b", "task", same)])
        return Turn(text="summary")

    provider.router = route
    runtime = runtime_for(provider)
    coordinator = runtime.spawn(runtime.root, "coordinator")
    runtime.wake(coordinator, "go")
    assert (await runtime.wait(coordinator, timeout=20)).status == "done"
    researcher_requests = [r for r in provider.requests if system(r) == RESEARCH]
    assert len(researcher_requests) == 2  # two children, one request each
    for request in researcher_requests:
        prompts = [m["content"] for m in request["messages"] if m["role"] == "user"]
        assert prompts == ["dig"]  # the prompt once, not twice


def _tool(name: str, description: str) -> Tool:
    return Tool(name, description, execute=lambda args: name, hints=ToolHints(read_only=True))


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("天气预报", "weather_zh"),
        ("天气", "weather_zh"),
        ("株価", "stocks_ja"),
        ("날씨 예보", "weather_ko"),
        ("Wetterbericht", "weather_de"),
        ("ÜBERSETZUNG", "translate_de"),
        ("weather", "weather_en"),
    ],
)
async def test_tool_search_finds_tools_by_words_of_any_script(query: str, expected: str) -> None:
    tools = [
        _tool("weather_zh", "查询天气预报"),
        _tool("stocks_ja", "今日の株価を調べる"),
        _tool("weather_ko", "오늘의 날씨 예보"),
        _tool("weather_de", "Den Wetterbericht abrufen"),
        _tool("translate_de", "Übersetzung eines Textes"),
        _tool("weather_en", "Get the weather forecast"),
    ]
    search = tool_tiers(tools, enabled=True)[0]
    found = await search.invoke({"query": query, "limit": 1})
    assert [t["name"] for t in found] == [expected]


@tool(hints=ToolHints(read_only=True))
def nothing() -> str:
    """Nothing."""
    return ""


# -- ergonomics: definitions in teams, one-call runs, streamed team events ------------------------


async def test_a_team_of_definitions_and_a_one_call_run(provider: FakeProvider) -> None:
    from test_agents import COORDINATE, router

    provider.router = router(delay=0)
    client = create_client(
        base_url=provider.url + "/v1", model="m", api_key="k", code_mode="native"
    )
    researcher = agent("researcher", instructions=RESEARCH)
    coordinator = agent("coordinator", instructions=COORDINATE, team=[researcher])
    runtime = AgentRuntime([coordinator], client=client)
    assert set(runtime.definitions) == {"coordinator", "researcher"}
    seen: list[tuple[str, str]] = []

    async def watch() -> None:
        async for event in runtime.events():
            seen.append(event)

    watching = asyncio.ensure_future(watch())
    await asyncio.sleep(0)
    result = await runtime.run("coordinator", "research two topics")
    await asyncio.sleep(0)
    watching.cancel()
    assert result.status == "done"
    assert seen[0] == ("spawned", "root/coordinator.1") and seen[-1][0] == "closed"
    assert any(event == "started" and "researcher" in who for event, who in seen)
    assert seen == list(runtime.trace)


def test_team_members_must_be_names_or_definitions() -> None:
    with pytest.raises(ConfigurationError, match="a team member must be an agent name"):
        agent("a", instructions="", team=[3])  # type: ignore[list-item]
    clash = agent("researcher", instructions="other")
    lead = agent("lead", instructions="", team=[clash])
    with pytest.raises(ConfigurationError, match="two different agents are named 'researcher'"):
        AgentRuntime([agent("researcher", instructions="one"), lead], client=None)  # type: ignore[arg-type]


async def test_interrupt_gives_back_the_prompt_and_inbox_items_the_turn_had_taken(
    provider: FakeProvider,
) -> None:
    """`post` promises nothing is dropped: a turn cut short by `interrupt` had drained the
    inbox and the wake prompt; they go back, in order, and the next wake sends them."""
    asked = threading.Event()

    def slow(body: dict[str, Any]) -> Turn:
        asked.set()
        return Turn(text=f"read: {last(body)['content']}", delay=5)

    provider.router = slow
    runtime = runtime_for(provider)
    child = runtime.spawn(runtime.root, "researcher")
    runtime.post(child, "first note")
    runtime.post(child, {"second": "note"})
    runtime.wake(child, "the wake prompt")
    assert await asyncio.to_thread(asked.wait, 30)  # the turn took them; its request is out
    assert not child.prompts and not child.inbox
    runtime.post(child, "posted during the turn")
    runtime.interrupt(child)
    assert (await runtime.wait(child)).status == "interrupted"
    assert list(child.prompts) == ["the wake prompt"]
    assert list(child.inbox) == ["first note", '{"second": "note"}', "posted during the turn"]
    provider.router = lambda body: Turn(text=f"read: {last(body)['content']}")
    runtime.wake(child)
    result = await runtime.wait(child)
    assert result.status == "done"
    sent = last(provider.requests[-1])["content"]
    assert sent.startswith("the wake prompt\n\nMessages received:\n- first note\n")
    assert sent.endswith('- {"second": "note"}\n- posted during the turn')
    assert not child.prompts and not child.inbox


PICK = relay_tool(
    "pick_color",
    "Ask the user for a color.",
    {"type": "object", "properties": {"why": {"type": "string"}}},
)


@pytest.mark.parametrize("route", ["direct", "task"])
async def test_a_sub_agent_waiting_on_a_relay_call_is_pending_and_resumable(
    provider: FakeProvider, route: str
) -> None:
    """A turn that ends on a relay call is not a spent turn budget: the wake is ``pending``
    with the calls, and `resume` carries it on with the host's answers."""

    def route_turn(body: dict[str, Any]) -> Turn:
        message = last(body)
        if system(body) == "You pick.":
            if message["role"] == "tool":
                return Turn(text=f"the user chose {message['content']}")
            return Turn(calls=[("r1", "pick_color", {"why": "style"})])
        if message["role"] == "tool":  # the coordinator, told its delegate waits
            return Turn(text="delegate waits")
        return Turn(calls=[("t1", "task", {"agent": "picker", "prompt": "pick"})])

    provider.router = route_turn
    client = create_client(base_url=provider.url + "/v1", model="m", api_key="k")
    picker = agent("picker", instructions="You pick.", tools=[PICK], budget=Budget(max_turns=10))
    runtime = AgentRuntime(
        [agent("lead", instructions="You lead.", team=[picker]), picker], client=client
    )
    if route == "direct":
        child = runtime.spawn(runtime.root, "picker")
        runtime.wake(child, "pick")
    else:
        lead = runtime.spawn(runtime.root, "lead")
        runtime.wake(lead, "go")
        told = await runtime.wait(lead)
        assert told.status == "done"
        [task] = [m for m in provider.requests[-1]["messages"] if m["role"] == "tool"]
        assert "is waiting for the host's answers to its calls pick_color (r1)" in task["content"]
        [child] = lead.children
    waiting = await runtime.wait(child)
    assert waiting.status == "pending" and waiting.error is None
    assert [(c.id, c.name) for c in waiting.pending] == [("r1", "pick_color")]
    assert waiting.turns == 1
    with pytest.raises(AgentError, match=r"waiting for answers to its relay calls pick_color"):
        runtime.wake(child, "something else")
    with pytest.raises(AgentError, match=r"no answer for the pending calls \['r1'\]"):
        runtime.resume(child, {})
    runtime.resume(child, {"r1": "teal"})
    done = await runtime.wait(child)
    assert done.status == "done" and done.text == "the user chose teal"
    assert [m["role"] for m in child.history][-3:] == ["assistant", "tool", "assistant"]
    with pytest.raises(AgentError, match="is not waiting for answers"):
        runtime.resume(child, {"r1": "teal"})


async def test_a_turn_that_fails_before_its_transcript_keeps_what_it_took(
    provider: FakeProvider,
) -> None:
    """A turn whose request fails never delivered its prompt and inbox items: they stay queued
    for the next wake instead of vanishing with the failed turn."""
    provider.router = lambda body: Turn(status=500)
    runtime = runtime_for(provider)
    child = runtime.spawn(runtime.root, "researcher")
    runtime.post(child, "the note")
    runtime.wake(child, "the prompt")
    failed = await runtime.wait(child)
    assert failed.status == "error"
    assert list(child.prompts) == ["the prompt"] and list(child.inbox) == ["the note"]
    provider.router = lambda body: Turn(text=f"read: {last(body)['content']}")
    runtime.wake(child)
    done = await runtime.wait(child)
    assert done.text == "read: the prompt\n\nMessages received:\n- the note"
