"""How a turn ends at a frontier endpoint: refusals (Anthropic ``refusal`` with
``stop_details``, Chat Completions ``content_filter``), ``pause_turn``, a full context window,
OpenRouter's ``error`` finish reason; and the settings the endpoints refuse, refused up front."""

from __future__ import annotations

from typing import Any

import pytest

from frontier_endpoint import (
    OPENAI_PROFILES,
    REFUSAL_DETAILS,
    FrontierEndpoint,
    Step,
    assistant_turns,
    client_for,
    lookup,
    replayed,
    run,
    start,
)
from toolnexus.client import RunResult
from toolnexus.errors import ConfigurationError, ProviderError


def mentions(body: Any, text: str) -> bool:
    return text in repr(body)


REFUSED = "I can't help with that request."


@pytest.mark.parametrize("profile", ["anthropic-thinking", *OPENAI_PROFILES])
@pytest.mark.parametrize("stream", [False, True])
async def test_a_refusal_ends_the_run_refused_and_is_never_sent_again(
    endpoints: list[FrontierEndpoint], profile: str, stream: bool
) -> None:
    server = start(endpoints, profile)
    reason = "refusal" if server.style == "anthropic" else "content_filter"
    server.script(
        Step(calls=[("lookup", {"city": "Oslo"})]),
        Step(text=REFUSED, stop=reason),
        Step(text="Oslo is sunny."),
    )
    client = client_for(server)
    refused = await run(client, "Weather?", stream=stream, tools=[lookup])
    assert refused.status == "refused" and refused.turns == 2
    assert refused.stopped_by is not None and reason in refused.stopped_by
    if reason == "refusal":
        assert REFUSAL_DETAILS["category"] in refused.stopped_by
        assert REFUSAL_DETAILS["explanation"] in refused.stopped_by
    assert len(server.requests) == 2  # no loop after a refusal
    assert not mentions(refused.messages, REFUSED)  # the refused turn is not kept
    assert assistant_turns(refused) == [replayed(server.issued[0], server.style)]
    again = await run(
        client, "Just Oslo, then.", stream=stream, tools=[lookup], history=refused.messages
    )
    assert again.status == "done" and again.text == "Oslo is sunny."
    assert not any(mentions(body, REFUSED) for body in server.requests)
    assert server.rejected == []


@pytest.mark.parametrize("stream", [False, True])
async def test_pause_turn_is_continued_with_the_paused_content_sent_back(
    endpoints: list[FrontierEndpoint], stream: bool
) -> None:
    server = start(endpoints, "anthropic-thinking")
    server.script(
        Step(text="Oslo weather today", stop="pause_turn"),
        Step(calls=[("lookup", {"city": "Oslo"})]),
        Step(text="Oslo is sunny."),
    )
    result = await run(client_for(server), "Weather?", stream=stream, tools=[lookup])
    assert result.status == "done" and result.text == "Oslo is sunny."
    assert server.rejected == [] and len(server.answered) == 3
    paused = server.issued[0]
    continued = server.requests[1]["messages"][-1]
    assert continued["role"] == "assistant"
    assert [b["type"] for b in continued["content"]] == [b["type"] for b in paused]
    sent_later = server.requests[2]["messages"]
    assert any(
        m["role"] == "assistant" and m["content"][: len(paused)] == paused for m in sent_later
    )  # the server tool blocks stay in the conversation
    assert result.tool_calls[0].output == "Oslo: sunny"


@pytest.mark.parametrize("stream", [False, True])
async def test_a_full_context_window_ends_the_run_incomplete(
    endpoints: list[FrontierEndpoint], stream: bool
) -> None:
    server = start(endpoints, "anthropic-thinking")
    server.script(
        Step(calls=[("lookup", {"city": "Oslo"})]),
        Step(text="Oslo is", stop="model_context_window_exceeded"),
        Step(text="(never asked)"),
    )
    result = await run(client_for(server), "Weather?", stream=stream, tools=[lookup])
    assert result.status == "incomplete"
    assert result.stopped_by is not None and "context window" in result.stopped_by
    assert len(server.requests) == 2 and server.rejected == []


@pytest.mark.parametrize("stream", [False, True])
async def test_openrouters_error_finish_is_never_success(
    endpoints: list[FrontierEndpoint], stream: bool
) -> None:
    server = start(endpoints, "openrouter-reasoning")
    server.script(
        Step(calls=[("lookup", {"city": "Oslo"})]),
        Step(text="Oslo", stop="error"),
        Step(text="(never asked)"),
    )
    outcome: RunResult | ProviderError
    try:
        outcome = await run(client_for(server), "Weather?", stream=stream, tools=[lookup])
    except ProviderError as exc:
        outcome = exc
    if isinstance(outcome, ProviderError):
        assert "'error'" in str(outcome)
        assert outcome.partial is not None and outcome.partial.status != "done"
    else:
        assert outcome.status != "done"
        assert outcome.stopped_by is not None and "error" in outcome.stopped_by
    assert len(server.requests) == 2 and server.rejected == []


async def test_structured_output_under_thinking_is_asked_for_not_forced(
    endpoints: list[FrontierEndpoint],
) -> None:
    server = start(endpoints, "anthropic-thinking")
    server.script(
        Step(calls=[("lookup", {"city": "Oslo"})]),
        Step(text="It is sunny."),  # plain text: asked again for final_result, not forced
        Step(calls=[("final_result", {"result": "sunny"})]),
    )
    result = await client_for(server).run("Oslo in a word?", tools=[lookup], output_type=str)
    assert result.output == "sunny" and len(server.answered) == 3
    assert server.rejected == []  # a forced tool_choice is the endpoint's 400 on this model
    for body in server.requests:
        assert body.get("tool_choice") in (None, {"type": "auto"})
    assert any(t["name"] == "final_result" for t in server.requests[-1]["tools"])


@pytest.mark.parametrize("choice", ["required", "lookup"])
def test_a_forced_tool_under_thinking_is_refused_at_create_client(
    endpoints: list[FrontierEndpoint], choice: str
) -> None:
    server = start(endpoints, "anthropic-thinking")
    with pytest.raises(ConfigurationError, match="thinking"):
        client_for(server, tool_choice=choice)
    assert server.requests == []


@pytest.mark.parametrize("profile", ["anthropic-thinking", "deepseek"])
@pytest.mark.parametrize("key", ["messages", "tools", "stream", "model", "tool_choice"])
def test_request_params_naming_a_key_the_loop_owns_are_refused(
    endpoints: list[FrontierEndpoint], profile: str, key: str
) -> None:
    server = start(endpoints, profile)
    with pytest.raises(ConfigurationError, match=key):
        client_for(server, request_params={key: None})


def test_the_anthropic_system_is_the_loops_own(endpoints: list[FrontierEndpoint]) -> None:
    server = start(endpoints, "anthropic-thinking")
    with pytest.raises(ConfigurationError, match="system_prompt="):
        client_for(server, request_params={"system": "Be brief."})


async def test_thinking_reaches_the_wire_through_request_params(
    endpoints: list[FrontierEndpoint],
) -> None:
    server = start(endpoints, "anthropic-cache")  # a model that thinks only when asked
    server.script(Step(calls=[("lookup", {"city": "Oslo"})]), Step(text="Sunny."))
    params = {"thinking": {"type": "adaptive", "display": "summarized"}, "top_k": 5}
    result = await client_for(server, request_params=params).run("Weather?", tools=[lookup])
    assert result.status == "done" and server.rejected == []
    assert all(body["thinking"] == params["thinking"] for body in server.requests)
    assert all(body["top_k"] == 5 for body in server.requests)
    assert server.issued[0][0]["type"] == "thinking"
