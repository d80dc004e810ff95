"""The client's provider plumbing: streamed deltas, cache breakpoints, request fields, stop
reasons and conversations carried across styles (the endpoints' own rules are played by
``frontier_endpoint.py`` in ``test_frontier_*.py``)."""

from __future__ import annotations

import itertools
import json
import warnings
from typing import Any

import pytest

from fake_provider import FakeProvider, Turn
from toolnexus import ToolHints, create_client, tool
from toolnexus.client.styles._anthropic_cache import MAX_BREAKPOINTS, place_breakpoints
from toolnexus.client.styles._deltas import merge_delta
from toolnexus.errors import ConfigurationError, ProviderError


@tool(hints=ToolHints(read_only=True))
def lookup(city: str) -> str:
    """Look up the weather."""
    return f"{city}: sunny"


def client_for(provider: FakeProvider, style: str, **options: Any) -> Any:
    base = provider.url + ("/v1" if style == "openai" else "")
    return create_client(base_url=base, style=style, model="m", api_key="none", **options)


def test_streamed_reasoning_details_become_one_entry_per_index() -> None:
    message: dict[str, Any] = {"role": "assistant"}
    pieces = [
        {"reasoning_details": [{"type": "reasoning.text", "text": "Let ", "index": 0}]},
        {
            "content": "Hi",
            "reasoning_details": [{"type": "reasoning.text", "text": "me", "index": 0}],
        },
        {"reasoning_details": [{"type": "reasoning.text", "signature": "sig", "index": 0}]},
        {"reasoning_details": [{"type": "reasoning.encrypted", "data": "x", "index": 1}]},
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "f", "arguments": "{"},
                }
            ]
        },
        {
            "tool_calls": [
                {
                    "index": 0,
                    "function": {"name": "f", "arguments": "}"},
                    "extra_content": {"google": {"thought_signature": "t"}},
                }
            ]
        },
        {"brand_new": "a"},
        {"brand_new": "b"},
    ]
    for piece in pieces:
        merge_delta(message, json.loads(json.dumps(piece)))
    assert message["reasoning_details"] == [
        {"type": "reasoning.text", "text": "Let me", "signature": "sig", "index": 0},
        {"type": "reasoning.encrypted", "data": "x", "index": 1},
    ]
    assert message["tool_calls"] == [
        {
            "index": 0,
            "id": "c1",
            "type": "function",
            "function": {"name": "f", "arguments": "{}"},  # a repeated name is not doubled
            "extra_content": {"google": {"thought_signature": "t"}},
        }
    ]
    assert message["content"] == "Hi" and message["brand_new"] == "ab"


def _count_markers(params: dict[str, Any]) -> list[str]:
    """The TTL of every breakpoint in render order: tools, system, messages, then top level."""
    found = [
        t["cache_control"].get("ttl", "5m") for t in params.get("tools", []) if "cache_control" in t
    ]
    system = params.get("system")
    if isinstance(system, list):
        found += [b["cache_control"].get("ttl", "5m") for b in system if "cache_control" in b]
    for message in params["messages"]:
        if isinstance(message["content"], list):
            found += [
                b["cache_control"].get("ttl", "5m")
                for b in message["content"]
                if "cache_control" in b
            ]
    return found


@pytest.mark.parametrize("theirs", [0, 1, 2, 3, 4, 5])
@pytest.mark.parametrize("ttl", ["5m", "1h"])
def test_breakpoints_stay_within_four_and_never_increase_their_ttl(theirs: int, ttl: str) -> None:
    marker = {"type": "ephemeral", "ttl": ttl}
    history = [
        {"role": "user", "content": [{"type": "text", "text": f"q{i}", "cache_control": marker}]}
        for i in range(theirs)
    ]
    messages = [*history, {"role": "user", "content": "latest"}]
    before = json.dumps(messages)
    params = {"messages": messages, "system": "sys", "tools": [{"name": "a"}, {"name": "b"}]}
    place_breakpoints(params, {})
    assert json.dumps(messages) == before  # the transcript itself is never marked
    ttls = _count_markers(params)
    assert len(ttls) == max(theirs, min(MAX_BREAKPOINTS, theirs + 3))
    order = {"1h": 1, "5m": 0}
    assert all(order[a] >= order[b] for a, b in itertools.pairwise(ttls))
    if theirs == 0:
        assert params["tools"][-1]["cache_control"] == {"type": "ephemeral"}
        assert params["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}


def test_a_top_level_breakpoint_takes_the_rolling_ones_place() -> None:
    params = {
        "messages": [{"role": "user", "content": "hi"}],
        "system": "s",
        "tools": [{"name": "a"}],
    }
    place_breakpoints(params, {"cache_control": {"type": "ephemeral", "ttl": "1h"}})
    assert params["messages"] == [{"role": "user", "content": "hi"}]
    assert params["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert params["tools"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


async def test_request_params_reach_the_wire_whatever_the_sdk_knows(provider: FakeProvider) -> None:
    provider.script(Turn(text="a"), Turn(text="b"))
    fields = {"top_k": 5, "chat_template_kwargs": {"preserve_thinking": True}, "temperature": 0}
    await client_for(provider, "anthropic", request_params=fields).run("hi")
    await client_for(provider, "openai", request_params=fields).run("hi")
    for body in provider.requests:
        assert {k: body[k] for k in fields} == fields


@pytest.mark.parametrize("style", ["openai", "anthropic"])
@pytest.mark.parametrize(
    ("field", "instead"),
    [
        ("messages", "history= or session="),
        ("tools", "tools="),
        ("stream", "client.stream()"),
        ("model", "model="),
        ("tool_choice", "tool_choice="),
    ],
)
def test_fields_the_loop_owns_are_refused_naming_the_option(
    provider: FakeProvider, style: str, field: str, instead: str
) -> None:
    with pytest.raises(ConfigurationError, match=f"may not set '{field}'.*{instead}"):
        client_for(provider, style, request_params={field: None})


def test_system_is_owned_in_the_anthropic_style(provider: FakeProvider) -> None:
    with pytest.raises(ConfigurationError, match="system_prompt="):
        client_for(provider, "anthropic", request_params={"system": "x"})
    client_for(provider, "openai", request_params={"system": "x"})  # a body field there


@pytest.mark.parametrize("choice", ["required", "lookup"])
def test_a_forced_tool_under_thinking_is_refused_up_front(
    provider: FakeProvider, choice: str
) -> None:
    with pytest.raises(ConfigurationError, match="forces a tool"):
        client_for(
            provider,
            "anthropic",
            tool_choice=choice,
            request_params={"thinking": {"type": "adaptive"}},
        )
    client_for(
        provider, "anthropic", tool_choice="auto", request_params={"thinking": {"type": "adaptive"}}
    )


@pytest.mark.parametrize("stream", [False, True])
async def test_an_unknown_finish_reason_is_a_provider_error_naming_it(
    provider: FakeProvider, stream: bool
) -> None:
    chunk = {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "half"},
                "finish_reason": "error",
            }
        ],
    }
    if stream:
        chunk["object"] = "chat.completion.chunk"
        chunk["choices"][0]["delta"] = chunk["choices"][0].pop("message")
        body = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n"
        provider.router = lambda _: Turn(raw=body)
    else:
        provider.script(Turn(raw=json.dumps(chunk)))
    client = client_for(provider, "openai")

    async def run() -> None:
        if stream:
            async for _ in client.stream("hi"):
                pass
        else:
            await client.run("hi")

    with pytest.raises(ProviderError, match="stop reason 'error'") as info:
        await run()
    assert info.value.partial is not None and info.value.partial.status == "error"


async def test_an_anthropic_conversation_continues_with_an_openai_client(
    provider: FakeProvider,
) -> None:
    provider.script(
        Turn(calls=[("toolu_1", "lookup", {"city": "Oslo"})]),
        Turn(text="Oslo is sunny."),
        Turn(text="Rome too."),
    )
    first = await client_for(provider, "anthropic").run("Oslo?", tools=[lookup])
    await client_for(provider, "openai").run("And Rome?", tools=[lookup], history=first.messages)
    sent = provider.requests[-1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant", "user"]
    assert sent[1]["tool_calls"][0]["function"] == {
        "name": "lookup",
        "arguments": '{"city": "Oslo"}',
    }
    assert sent[2] == {"role": "tool", "tool_call_id": "toolu_1", "content": "Oslo: sunny"}
    assert sent[3]["content"] == "Oslo is sunny."


def test_the_cap_is_max_tool_concurrency_and_max_parallel_is_its_synonym(
    provider: FakeProvider,
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the documented spelling warns of nothing
        documented = client_for(provider, "openai", max_tool_concurrency=2)
        both = client_for(provider, "openai", max_tool_concurrency=4, max_parallel=4)
    assert documented._config.max_concurrency == 2
    assert both._config.max_concurrency == 4
    assert client_for(provider, "openai", max_parallel=3)._config.max_concurrency == 3
    assert documented.derive(model="other")._config.max_concurrency == 2
    with pytest.raises(ConfigurationError, match=r"max_tool_concurrency=2 and max_parallel=1"):
        client_for(provider, "openai", max_parallel=1, max_tool_concurrency=2)


async def test_a_responses_conversation_continues_in_another_style_and_back(
    provider: FakeProvider,
) -> None:
    provider.script(
        Turn(text="checking", calls=[("call_1", "lookup", {"city": "Oslo"})]),
        Turn(text="Oslo is sunny."),
        Turn(text="Rome too."),
        Turn(text="Paris as well."),
    )
    first = await client_for(provider, "responses").run("Oslo?", tools=[lookup])
    second = await client_for(provider, "anthropic").run(
        "And Rome?", tools=[lookup], history=first.messages
    )
    sent = provider.requests[2]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user", "assistant", "user"]
    assert sent[1]["content"] == [
        {"type": "text", "text": "checking"},
        {"type": "tool_use", "id": "call_1", "name": "lookup", "input": {"city": "Oslo"}},
    ]
    assert sent[2]["content"][0]["tool_use_id"] == "call_1"
    await client_for(provider, "responses").run("Paris?", tools=[lookup], history=second.messages)
    items = provider.requests[3]["input"]
    assert [i.get("type", i.get("role")) for i in items] == [
        "user", "assistant", "function_call", "function_call_output", "assistant", "user",
        "assistant", "user",
    ]  # fmt: skip
    assert items[3] == {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": "Oslo: sunny",
    }


def _hosted_step(calls: list[tuple[str, str, dict[str, Any]]]) -> str:
    """An Anthropic response pausing a hosted program on ``calls`` (raw JSON)."""
    caller = {"type": "code_execution_20260120", "tool_id": "srvtoolu_1"}
    content: list[dict[str, Any]] = [
        {
            "type": "server_tool_use",
            "id": "srvtoolu_1",
            "name": "code_execution",
            "input": {"code": "..."},
        }
    ]
    content += [
        {"type": "tool_use", "id": cid, "name": name, "input": args, "caller": caller}
        for cid, name, args in calls
    ]
    return json.dumps(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": content,
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "container": {"id": "container_1", "expires_at": "2026-12-01T12:00:00Z"},
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    )


async def test_a_hosted_programs_calls_run_in_the_lane_and_reply_as_the_provider_requires(
    provider: FakeProvider,
) -> None:
    @tool(hints=ToolHints(read_only=True), callers=("direct", "hosted"))
    def hosted_lookup(city: str) -> str:
        """Look up the weather."""
        return f"{city}: sunny"

    provider.script(
        Turn(
            raw=_hosted_step(
                [
                    ("toolu_a", "hosted_lookup", {"city": "Oslo"}),
                    ("toolu_b", "hosted_lookup", {"city": "Rome"}),
                ]
            )
        ),
        Turn(text="both sunny"),
    )
    client = client_for(provider, "anthropic", hosted_code=True)
    result = await client.run("weather?", tools=[hosted_lookup])
    assert result.status == "done" and result.text == "both sunny"
    first, second = provider.requests
    assert first["tools"][0] == {"type": "code_execution_20260120", "name": "code_execution"}
    assert first["tools"][1]["allowed_callers"] == ["direct", "code_execution_20260120"]
    assert second["container"] == "container_1"
    assert second["messages"][1]["content"][0]["type"] == "server_tool_use"  # replayed
    assert second["messages"][1]["content"][1]["caller"]["tool_id"] == "srvtoolu_1"
    results = second["messages"][2]["content"]
    assert [(b["type"], b["tool_use_id"], b["content"]) for b in results] == [
        ("tool_result", "toolu_a", "Oslo: sunny"),
        ("tool_result", "toolu_b", "Rome: sunny"),
    ]
    logged = next(e.data for e in result.session.events if e.type == "assistant_message")
    assert [c["caller"]["tool_id"] for c in logged["tool_calls"]] == ["srvtoolu_1"] * 2


async def test_a_hosted_call_past_the_deadline_fails_as_data(provider: FakeProvider) -> None:
    import asyncio

    @tool(hints=ToolHints(read_only=True), callers=("hosted",))
    async def slow(city: str) -> str:
        """Slow."""
        await asyncio.sleep(30)
        return city

    provider.script(
        Turn(raw=_hosted_step([("toolu_a", "slow", {"city": "Oslo"})])), Turn(text="ok")
    )
    client = client_for(provider, "anthropic", hosted_code=True, hosted_call_timeout=0.2)
    result = await client.run("go", tools=[slow])
    assert result.tool_calls[0].is_error
    assert "hosted_call_timeout" in result.tool_calls[0].output
    assert provider.requests[0]["tools"][1]["allowed_callers"] == ["code_execution_20260120"]


def test_hosting_is_refused_where_it_cannot_work(provider: FakeProvider) -> None:
    with pytest.raises(ConfigurationError, match="hosted_code=True needs a provider"):
        client_for(provider, "openai", hosted_code=True)
    with pytest.raises(ConfigurationError, match="callers must be"):

        @tool(callers=("model",))
        def odd(city: str) -> str:
            """Odd."""
            return city


async def test_a_streamed_server_tool_block_comes_back_whole(provider: FakeProvider) -> None:
    def sse(kind: str, data: dict[str, Any]) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"

    start = {"id": "m", "type": "message", "role": "assistant", "model": "m", "content": []}
    start |= {
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 0},
    }
    events = [
        sse("message_start", {"message": start}),
        sse(
            "content_block_start",
            {"index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
        ),
        sse(
            "content_block_delta",
            {"index": 0, "delta": {"type": "thinking_delta", "thinking": "Let me "}},
        ),
        sse(
            "content_block_delta",
            {"index": 0, "delta": {"type": "thinking_delta", "thinking": "search."}},
        ),
        sse(
            "content_block_delta",
            {"index": 0, "delta": {"type": "signature_delta", "signature": "SIG"}},
        ),
        sse("content_block_stop", {"index": 0}),
        sse(
            "content_block_start",
            {
                "index": 1,
                "content_block": {
                    "type": "server_tool_use",
                    "id": "srvtoolu_1",
                    "name": "web_search",
                    "input": {},
                },
            },
        ),
        sse(
            "content_block_delta",
            {"index": 1, "delta": {"type": "input_json_delta", "partial_json": '{"query": '}},
        ),
        sse(
            "content_block_delta",
            {"index": 1, "delta": {"type": "input_json_delta", "partial_json": '"oslo"}'}},
        ),
        sse("content_block_stop", {"index": 1}),
        sse("content_block_start", {"index": 2, "content_block": {"type": "text", "text": ""}}),
        sse("content_block_delta", {"index": 2, "delta": {"type": "text_delta", "text": "Sunny."}}),
        sse("content_block_stop", {"index": 2}),
        sse(
            "message_delta",
            {
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
        ),
        sse("message_stop", {}),
    ]
    provider.router = lambda body: (
        Turn(raw="".join(events)) if body.get("stream") else Turn(text="x")
    )
    client = client_for(provider, "anthropic")
    async for event in client.stream("weather?"):
        if event.type == "done":
            result = event.result
    assert result.messages[-1]["content"] == [
        {"type": "thinking", "thinking": "Let me search.", "signature": "SIG"},
        {
            "type": "server_tool_use",
            "id": "srvtoolu_1",
            "name": "web_search",
            "input": {"query": "oslo"},
        },
        {"type": "text", "text": "Sunny."},
    ]


@pytest.mark.parametrize(
    ("profile", "model", "said"),
    [
        ("gemini-openai", None, "Function call is missing a thought_signature"),
        ("openrouter-reasoning", "google/gemini-3.5-pro", "Provider returned error: Gemini models"),
    ],
)
async def test_an_error_body_in_a_gateways_wrapping_keeps_the_upstreams_words(
    profile: str, model: str | None, said: str
) -> None:
    """Gemini's compatible endpoint answers errors as a JSON array, OpenRouter wraps the
    upstream's text in ``metadata.raw``: the one-line message keeps what the server said."""
    from frontier_endpoint import FrontierEndpoint
    from frontier_endpoint import client_for as frontier_client

    server = FrontierEndpoint(profile, model=model).start()
    try:
        unsigned = [
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "lookup", "arguments": '{"city": "Oslo"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "Oslo: sunny"},
        ]
        with pytest.raises(ProviderError, match=said):
            await frontier_client(server).run("and now?", tools=[lookup], history=unsigned)
    finally:
        server.stop()
