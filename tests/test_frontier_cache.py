"""Prompt caching against endpoints that play the rules: Anthropic breakpoints (at most 4, TTLs
non-increasing, reads from a prefix store on later turns), ``prompt_cache=False``, and the cache
figures of both styles summed in ``RunResult.usage`` (see ``frontier_endpoint.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from frontier_endpoint import (
    ANTHROPIC_PROFILES,
    OPENAI_PROFILES,
    FrontierEndpoint,
    Step,
    client_for,
    humidity,
    lookup,
    run,
    start,
)


def three_turns(server: FrontierEndpoint) -> None:
    server.script(
        Step(calls=[("lookup", {"city": "Oslo"})]),
        Step(calls=[("humidity", {"city": "Oslo"})]),
        Step(text="Sunny, 40%."),
    )


def markers(body: dict[str, Any]) -> list[tuple[str, str]]:
    """``(where, ttl)`` of each breakpoint, in the order the API processes them."""
    found = [("tools", t["cache_control"].get("ttl", "5m")) for t in body.get("tools", [])
             if "cache_control" in t]  # fmt: skip
    system = body.get("system")
    if isinstance(system, list):
        found += [("system", b["cache_control"].get("ttl", "5m")) for b in system
                  if "cache_control" in b]  # fmt: skip
    for message in body["messages"]:
        if isinstance(message["content"], list):
            found += [("messages", b["cache_control"].get("ttl", "5m"))
                      for b in message["content"] if "cache_control" in b]  # fmt: skip
    if "cache_control" in body:
        found.append(("top", body["cache_control"].get("ttl", "5m")))
    return found


@pytest.mark.parametrize("profile", ANTHROPIC_PROFILES)
@pytest.mark.parametrize("stream", [False, True])
async def test_breakpoints_make_later_turns_read_the_cache(
    endpoints: list[FrontierEndpoint], profile: str, stream: bool
) -> None:
    server = start(endpoints, profile)
    three_turns(server)
    result = await run(client_for(server), "Weather?", stream=stream, tools=[lookup, humidity])
    assert result.status == "done" and server.rejected == []
    for body in server.requests:
        where = [w for w, _ in markers(body)]
        assert where[:2] == ["tools", "system"] and "messages" in where  # a rolling one too
        assert len(where) <= 4
        assert "cache_control" in body["tools"][-1]
    reads = [read for read, _ in server.cache_reports]
    writes = [write for _, write in server.cache_reports]
    assert reads[0] == 0 and all(read > 0 for read in reads[1:])
    assert result.usage.cache_read_tokens == sum(reads)
    assert result.usage.cache_write_tokens == sum(w for w in writes if w is not None)


@pytest.mark.parametrize("stream", [False, True])
async def test_prompt_cache_off_sends_no_breakpoint(
    endpoints: list[FrontierEndpoint], stream: bool
) -> None:
    server = start(endpoints, "anthropic-cache")
    three_turns(server)
    client = client_for(server, prompt_cache=False)
    result = await run(client, "Weather?", stream=stream, tools=[lookup, humidity])
    assert result.status == "done" and server.rejected == []
    assert all(b"cache_control" not in raw for raw in server.raw_requests)
    assert server.cache_reports == [(0, 0)] * 3
    assert (result.usage.cache_read_tokens, result.usage.cache_write_tokens) == (0, 0)


@pytest.mark.parametrize("theirs", [1, 2, 4])
@pytest.mark.parametrize("ttl", ["5m", "1h"])
async def test_breakpoints_in_the_history_count_towards_four(
    endpoints: list[FrontierEndpoint], theirs: int, ttl: str
) -> None:
    server = start(endpoints, "anthropic-cache")
    history: list[dict[str, Any]] = []
    for n in range(theirs):
        marked = {
            "type": "text",
            "text": f"Question {n}?",
            "cache_control": {"type": "ephemeral", "ttl": ttl},
        }
        history += [
            {"role": "user", "content": [marked]},
            {"role": "assistant", "content": [{"type": "text", "text": f"Answer {n}."}]},
        ]
    three_turns(server)
    result = await client_for(server).run("Weather?", tools=[lookup, humidity], history=history)
    assert result.status == "done"
    assert server.rejected == []  # never more than 4, never a 1h after a 5m
    for body in server.requests:
        ttls = [t for _, t in markers(body)]
        assert theirs <= len(ttls) <= 4
        assert ttls == sorted(ttls, key=lambda t: t == "5m")  # every 1h before every 5m
    assert result.usage.cache_read_tokens == sum(read for read, _ in server.cache_reports)
    assert all(read > 0 for read, _ in server.cache_reports[1:])


async def test_a_top_level_breakpoint_in_request_params_counts_too(
    endpoints: list[FrontierEndpoint],
) -> None:
    server = start(endpoints, "anthropic-thinking")
    three_turns(server)
    params = {"thinking": {"type": "adaptive"}, "cache_control": {"type": "ephemeral", "ttl": "1h"}}
    client = client_for(server, request_params=params)
    result = await client.run("Weather?", tools=[lookup, humidity])
    assert result.status == "done" and server.rejected == []
    for body in server.requests:
        found = markers(body)
        assert found[-1] == ("top", "1h") and len(found) <= 4
        assert all(ttl == "1h" for _, ttl in found)
    assert all(read > 0 for read, _ in server.cache_reports[1:])


@pytest.mark.parametrize("profile", OPENAI_PROFILES)
@pytest.mark.parametrize("stream", [False, True])
async def test_cached_prompt_tokens_are_summed_over_the_turns(
    endpoints: list[FrontierEndpoint], profile: str, stream: bool
) -> None:
    server = start(endpoints, profile)
    three_turns(server)
    result = await run(client_for(server), "Weather?", stream=stream, tools=[lookup, humidity])
    assert result.status == "done" and server.rejected == []
    cached = [read for read, _ in server.cache_reports]
    assert cached[0] == 0 and all(c > 0 for c in cached[1:])
    assert result.usage.cache_read_tokens == sum(cached)
    assert result.usage.cache_write_tokens is None  # not reported: not known
