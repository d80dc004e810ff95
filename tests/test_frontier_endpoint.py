"""The scripted frontier endpoint itself: raw HTTP requests that keep or break each rule get
the real server's answer (status, exact text, body shape). These pin the endpoint, so the
client tests in ``test_frontier_*.py`` can trust its refusals."""

from __future__ import annotations

import copy
import json
from typing import Any

import httpx
import pytest

from frontier_endpoint import (
    BOUND_ELSEWHERE,
    CHANGED_BLOCKS,
    CHANGED_SYSTEM,
    CHANGED_TOOLS,
    DEEPSEEK_MISSING,
    EMPTY_TEXT,
    EXPECTED_THINKING,
    FORCED_TOOL,
    GEMINI_MISSING,
    INVALID_REDACTED,
    INVALID_SIGNATURE,
    PAUSE_NOT_RESUMED,
    SIGNATURE_REQUIRED,
    THINKING_OFF,
    TOO_MANY_BREAKPOINTS,
    TOOL_CALLS_UNANSWERED,
    TOOL_RESULT_UNEXPECTED,
    TOOL_USE_ID,
    TOOL_USE_UNANSWERED,
    TTL_ORDER,
    FrontierEndpoint,
    Step,
    fixed_parts,
    start,
)

TOOLS = [
    {
        "name": "lookup",
        "description": "Look up the weather.",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]
OPENAI_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look up the weather.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


def post(endpoint: FrontierEndpoint, body: dict[str, Any]) -> httpx.Response:
    path = "/v1/messages" if endpoint.style == "anthropic" else "/chat/completions"
    return httpx.post(endpoint.url + path, json=body, timeout=10)


def anthropic_message(response: httpx.Response) -> str:
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    message: str = body["error"]["message"]
    return message


def sse(response: httpx.Response) -> list[dict[str, Any]]:
    return [
        json.loads(line[6:])
        for line in response.text.splitlines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]


# ---------------------------------------------------------------------------------------------
# Anthropic Messages


def first_turn(endpoint: FrontierEndpoint, **extra: Any) -> tuple[dict[str, Any], list[Any]]:
    """Ask once (the endpoint answers with two calls); the follow-up request as a correct
    client builds it: the assistant content verbatim, then one result per call."""
    endpoint.script(
        Step(text="Checking.", calls=[("lookup", {"city": "Oslo"}), ("lookup", {"city": "Rome"})]),
        Step(text="Sunny."),
    )
    body = {
        "model": endpoint.model,
        "max_tokens": 1024,
        "system": [{"type": "text", "text": "Be brief."}],
        "tools": TOOLS,
        "thinking": {"type": "adaptive"},
        "messages": [{"role": "user", "content": "Weather?"}],
        **extra,
    }
    response = post(endpoint, body)
    assert response.status_code == 200, response.text
    content = response.json()["content"]
    results = [
        {"type": "tool_result", "tool_use_id": b["id"], "content": "sunny"}
        for b in content
        if b["type"] == "tool_use"
    ]
    follow = copy.deepcopy(body)
    follow["messages"] += [
        {"role": "assistant", "content": content},
        {"role": "user", "content": results},
    ]
    return follow, content


def test_a_verbatim_replay_is_accepted_and_the_answer_is_signed_thinking(
    endpoints: list[FrontierEndpoint],
) -> None:
    endpoint = start(endpoints, "anthropic-thinking")
    follow, content = first_turn(endpoint)
    kinds = [b["type"] for b in content]
    # leading thinking, a redacted block, the text, then thinking before each tool_use
    assert kinds == [
        "thinking", "redacted_thinking", "text", "thinking", "tool_use", "thinking", "tool_use",
    ]  # fmt: skip
    assert all(b["signature"] for b in content if b["type"] == "thinking")
    assert all(b["id"].startswith("toolu_") for b in content if b["type"] == "tool_use")
    response = post(endpoint, follow)
    assert response.status_code == 200, response.text
    assert endpoint.rejected == [] and len(endpoint.requests) == 2


def test_a_dropped_thinking_block_is_the_expected_thinking_400(
    endpoints: list[FrontierEndpoint],
) -> None:
    endpoint = start(endpoints, "anthropic-thinking")
    follow, content = first_turn(endpoint)
    kept = [b for b in content if b["type"] in ("text", "tool_use")]  # what text+calls keep
    follow["messages"][1]["content"] = kept
    assert anthropic_message(post(endpoint, follow)) == EXPECTED_THINKING.format(i=1, found="text")
    assert (
        "Expected `thinking` or `redacted_thinking`, but found `text`"
        in EXPECTED_THINKING.format(i=1, found="text")
    )


@pytest.mark.parametrize("change", ["altered", "empty", "text edited", "missing"])
def test_a_signature_that_is_not_the_one_sent_is_refused(
    endpoints: list[FrontierEndpoint], change: str
) -> None:
    endpoint = start(endpoints, "anthropic-thinking")
    follow, _ = first_turn(endpoint)
    block = follow["messages"][1]["content"][0]
    if change == "altered":
        block["signature"] = block["signature"][:-8] + "AAAAAAA="
    elif change == "empty":
        block["signature"] = ""
    elif change == "text edited":
        block["thinking"] += " "
    else:
        del block["signature"]
    expected = SIGNATURE_REQUIRED if change == "missing" else INVALID_SIGNATURE
    assert anthropic_message(post(endpoint, follow)) == expected.format(i=1, k=0)


def test_altered_redacted_thinking_is_refused(endpoints: list[FrontierEndpoint]) -> None:
    endpoint = start(endpoints, "anthropic-thinking")
    follow, _ = first_turn(endpoint)
    follow["messages"][1]["content"][1]["data"] = "b3BhcXVl"
    assert anthropic_message(post(endpoint, follow)) == INVALID_REDACTED.format(i=1, k=1)


@pytest.mark.parametrize(
    ("change", "what"),
    [("system", CHANGED_SYSTEM), ("tools", CHANGED_TOOLS), ("dropped block", CHANGED_BLOCKS)],
)
def test_a_changed_prefix_binds_the_block_to_a_different_conversation(
    endpoints: list[FrontierEndpoint], change: str, what: str
) -> None:
    endpoint = start(endpoints, "anthropic-thinking")
    follow, _ = first_turn(endpoint)
    at = 0
    if change == "system":
        follow["system"] = [{"type": "text", "text": "Be brief. Today is Tuesday."}]
    elif change == "tools":
        follow["tools"] = [*TOOLS, {"name": "extra", "input_schema": {"type": "object"}}]
    else:  # the thinking block before the second call left out: the third one no longer fits
        del follow["messages"][1]["content"][3]
        at = 4
    message = anthropic_message(post(endpoint, follow))
    assert message == BOUND_ELSEWHERE.format(i=1, k=at, what=what)
    assert "The block is bound to a different conversation." in message


def test_cache_markers_and_null_fields_are_not_part_of_the_prefix(
    endpoints: list[FrontierEndpoint],
) -> None:
    endpoint = start(endpoints, "anthropic-thinking")
    follow, _ = first_turn(endpoint)
    follow["tools"][0]["cache_control"] = {"type": "ephemeral"}
    follow["messages"][0]["content"] = [{"type": "text", "text": "Weather?", "citations": None}]
    follow["messages"][2]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    assert post(endpoint, follow).status_code == 200


def test_tool_use_and_tool_result_must_pair(endpoints: list[FrontierEndpoint]) -> None:
    endpoint = start(endpoints, "anthropic-thinking")
    follow, content = first_turn(endpoint)
    ids = [b["id"] for b in content if b["type"] == "tool_use"]
    unanswered = copy.deepcopy(follow)
    unanswered["messages"][2]["content"].pop()
    assert anthropic_message(post(endpoint, unanswered)) == TOOL_USE_UNANSWERED.format(
        i=1, ids=ids[1]
    )
    stray = copy.deepcopy(follow)
    stray["messages"][2]["content"].append(
        {"type": "tool_result", "tool_use_id": "toolu_9999", "content": "x"}
    )
    assert anthropic_message(post(endpoint, stray)) == TOOL_RESULT_UNEXPECTED.format(
        i=2, k=2, id="toolu_9999"
    )


def test_tool_use_ids_and_text_blocks_are_checked(endpoints: list[FrontierEndpoint]) -> None:
    endpoint = start(endpoints, "anthropic-cache")  # thinking off: nothing signed to check
    endpoint.script(Step(text="x"), Step(text="y"))
    history = [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "Bash:12", "name": "lookup", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "Bash:12"}]},
    ]
    body = {"model": endpoint.model, "max_tokens": 10, "messages": history}
    assert anthropic_message(post(endpoint, body)) == TOOL_USE_ID.format(i=1, k=0)
    body["messages"] = [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": [{"type": "text", "text": ""}]},
        {"role": "user", "content": "and?"},
    ]
    assert anthropic_message(post(endpoint, body)) == EMPTY_TEXT


def test_an_adaptive_only_model_refuses_a_forced_tool_and_thinking_off(
    endpoints: list[FrontierEndpoint],
) -> None:
    endpoint = start(endpoints, "anthropic-thinking")
    body = {
        "model": endpoint.model,
        "max_tokens": 10,
        "tools": TOOLS,
        "messages": [{"role": "user", "content": "hi"}],
    }
    for choice in ({"type": "any"}, {"type": "tool", "name": "lookup"}):
        assert anthropic_message(post(endpoint, {**body, "tool_choice": choice})) == FORCED_TOOL
    off = {**body, "thinking": {"type": "disabled"}}
    assert anthropic_message(post(endpoint, off)) == THINKING_OFF.format(kind="disabled")
    assert post(endpoint, {**body, "tool_choice": {"type": "auto"}}).status_code == 200


def test_more_than_four_breakpoints_and_a_rising_ttl_are_refused(
    endpoints: list[FrontierEndpoint],
) -> None:
    endpoint = start(endpoints, "anthropic-cache")
    mark = {"type": "ephemeral"}
    long = {"type": "ephemeral", "ttl": "1h"}
    body: dict[str, Any] = {
        "model": endpoint.model,
        "max_tokens": 10,
        "tools": [{**TOOLS[0], "cache_control": mark}],
        "system": [{"type": "text", "text": "s", "cache_control": mark}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "a", "cache_control": mark},
                    {"type": "text", "text": "b", "cache_control": mark},
                ],
            }
        ],
        "cache_control": mark,
    }
    assert anthropic_message(post(endpoint, body)) == TOO_MANY_BREAKPOINTS.format(n=5)
    del body["cache_control"]
    body["messages"][0]["content"][1]["cache_control"] = long
    assert anthropic_message(post(endpoint, body)) == TTL_ORDER.format(path="messages.0.content.1")
    assert "must not come after a ttl='5m'" in TTL_ORDER
    body["messages"][0]["content"][1]["cache_control"] = mark
    endpoint.script(Step(text="ok"))
    assert post(endpoint, body).status_code == 200


@pytest.mark.parametrize("stream", [False, True])
def test_cache_reads_are_reported_from_the_prefix_store(
    endpoints: list[FrontierEndpoint], stream: bool
) -> None:
    endpoint = start(endpoints, "anthropic-cache")
    endpoint.script(Step(text="one"), Step(text="two"), Step(text="three"))
    mark = {"type": "ephemeral"}
    body: dict[str, Any] = {
        "model": endpoint.model,
        "max_tokens": 10,
        "stream": stream,
        "tools": [{**TOOLS[0], "cache_control": mark}],
        "system": [{"type": "text", "text": "A long system prompt. " * 40, "cache_control": mark}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    }

    def usage() -> dict[str, Any]:
        response = post(endpoint, body)
        assert response.status_code == 200, response.text
        if stream:
            found: dict[str, Any] = sse(response)[0]["message"]["usage"]  # message_start
            return found
        reported: dict[str, Any] = response.json()["usage"]
        return reported

    first = usage()
    assert first["cache_read_input_tokens"] == 0 and first["cache_creation_input_tokens"] > 0
    body["messages"] += [
        {"role": "assistant", "content": [{"type": "text", "text": "one"}]},
        {"role": "user", "content": [{"type": "text", "text": "more", "cache_control": mark}]},
    ]
    second = usage()
    assert second["cache_read_input_tokens"] == first["cache_creation_input_tokens"]
    body["system"][0]["text"] += "changed"  # a new prefix: nothing after the tools is read
    third = usage()
    assert 0 < third["cache_read_input_tokens"] < second["cache_read_input_tokens"]
    assert [r for r, _ in endpoint.cache_reports] == [
        u["cache_read_input_tokens"] for u in (first, second, third)
    ]


def test_a_streamed_thinking_block_ends_with_its_signature(
    endpoints: list[FrontierEndpoint],
) -> None:
    endpoint = start(endpoints, "anthropic-thinking")
    endpoint.script(Step(calls=[("lookup", {"city": "Oslo"})], thinking="x" * 40))
    body = {
        "model": endpoint.model,
        "max_tokens": 1024,
        "stream": True,
        "tools": TOOLS,
        "messages": [{"role": "user", "content": "Weather?"}],
    }
    events = sse(post(endpoint, body))
    first = [e for e in events if e.get("index") == 0]
    kinds = [e["delta"]["type"] if "delta" in e else e["type"] for e in first]
    assert kinds[0] == "content_block_start" and kinds[-2:] == [
        "signature_delta",
        "content_block_stop",
    ]
    assert kinds.count("thinking_delta") > 1
    text = "".join(
        e["delta"]["thinking"] for e in first if e.get("delta", {}).get("type") == "thinking_delta"
    )
    assert text == "x" * 40
    assert endpoint.issued[0][0]["signature"] == first[-2]["delta"]["signature"]


def test_pause_turn_needs_its_content_back_and_then_continues(
    endpoints: list[FrontierEndpoint],
) -> None:
    endpoint = start(endpoints, "anthropic-thinking")
    endpoint.script(Step(text="Oslo weather", stop="pause_turn"), Step(text="Sunny."))
    body: dict[str, Any] = {
        "model": endpoint.model,
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": "Weather?"}],
    }
    paused = post(endpoint, body).json()
    assert paused["stop_reason"] == "pause_turn"
    assert [b["type"] for b in paused["content"]] == [
        "thinking", "server_tool_use", "web_search_tool_result",
    ]  # fmt: skip
    assert anthropic_message(post(endpoint, body)) == PAUSE_NOT_RESUMED.format(i=0)
    body["messages"].append({"role": "assistant", "content": paused["content"]})
    going_on = post(endpoint, body)
    assert going_on.status_code == 200 and going_on.json()["content"][-1]["text"] == "Sunny."


@pytest.mark.parametrize("stream", [False, True])
def test_refusal_carries_its_stop_details(endpoints: list[FrontierEndpoint], stream: bool) -> None:
    endpoint = start(endpoints, "anthropic-thinking")
    endpoint.script(Step(text="I can't help with that.", stop="refusal"))
    body = {
        "model": endpoint.model,
        "max_tokens": 10,
        "stream": stream,
        "messages": [{"role": "user", "content": "hi"}],
    }
    response = post(endpoint, body)
    if stream:
        ending = next(e for e in sse(response) if e["type"] == "message_delta")["delta"]
    else:
        ending = response.json()
    assert ending["stop_reason"] == "refusal" and ending["stop_details"]["category"] == "cyber"


# ---------------------------------------------------------------------------------------------
# Chat Completions


def openai_turn(
    endpoint: FrontierEndpoint, *, stream: bool = False
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The endpoint's first answer (two calls) and the follow-up request a correct client
    sends: the message as received, then one tool message per call."""
    endpoint.script(
        Step(text="", calls=[("lookup", {"city": "Oslo"}), ("lookup", {"city": "Rome"})]),
        Step(text="Sunny."),
    )
    body: dict[str, Any] = {
        "model": endpoint.model,
        "tools": OPENAI_TOOLS,
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "?"}],
    }
    response = post(endpoint, {**body, "stream": stream})
    assert response.status_code == 200, response.text
    message = endpoint.issued[-1]
    follow = copy.deepcopy(body)
    follow["messages"].append(copy.deepcopy(message))
    follow["messages"] += [
        {"role": "tool", "tool_call_id": c["id"], "content": "sunny"} for c in message["tool_calls"]
    ]
    return response.json() if not stream else {"events": sse(response)}, follow


@pytest.mark.parametrize("profile", ["gemini-openai", "openrouter-reasoning", "deepseek", "vllm"])
def test_chat_completions_pairing_and_cached_tokens(
    endpoints: list[FrontierEndpoint], profile: str
) -> None:
    endpoint = start(endpoints, profile)
    first, follow = openai_turn(endpoint)
    assert first["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    unanswered = copy.deepcopy(follow)
    unanswered["messages"].pop()
    response = post(endpoint, unanswered)
    assert response.status_code == 400
    missing = endpoint.issued[0]["tool_calls"][1]["id"]
    error = response.json()["error"]
    assert error["message"] == TOOL_CALLS_UNANSWERED.format(ids=missing)
    assert (error["type"], error["param"]) == ("invalid_request_error", "messages.[4].role")
    response = post(endpoint, follow)
    assert response.status_code == 200, response.text
    assert response.json()["usage"]["prompt_tokens_details"]["cached_tokens"] > 0


@pytest.mark.parametrize("stream", [False, True])
def test_gemini_signs_the_first_call_and_wants_it_back(
    endpoints: list[FrontierEndpoint], stream: bool
) -> None:
    endpoint = start(endpoints, "gemini-openai")
    first, follow = openai_turn(endpoint, stream=stream)
    calls = endpoint.issued[0]["tool_calls"]
    signature = calls[0]["extra_content"]["google"]["thought_signature"]
    assert "extra_content" not in calls[1]  # only the first call of a step carries it
    if stream:
        deltas = [c["choices"][0]["delta"] for c in first["events"] if c["choices"]]
        opening = next(d for d in deltas if "tool_calls" in d)["tool_calls"][0]
        assert opening["extra_content"]["google"]["thought_signature"] == signature
    for change in ("missing", "altered"):
        broken = copy.deepcopy(follow)
        call = broken["messages"][2]["tool_calls"][0]
        if change == "missing":
            del call["extra_content"]
        else:
            call["extra_content"]["google"]["thought_signature"] = signature[:-6] + "AAAA=="
        response = post(endpoint, broken)
        assert response.status_code == 400
        body = response.json()
        assert isinstance(body, list)  # the compat endpoint's error body is a JSON array
        assert body[0]["error"]["message"] == GEMINI_MISSING.format(name="lookup", position=2)
        assert body[0]["error"]["status"] == "INVALID_ARGUMENT"
    assert post(endpoint, follow).status_code == 200


def test_openrouter_streams_reasoning_details_in_fragments_sharing_an_index(
    endpoints: list[FrontierEndpoint],
) -> None:
    endpoint = start(endpoints, "openrouter-reasoning")
    first, follow = openai_turn(endpoint, stream=True)
    deltas = [c["choices"][0]["delta"] for c in first["events"] if c["choices"]]
    pieces = [d for delta in deltas for d in delta.get("reasoning_details", [])]
    assert len(pieces) > 2 and {p["index"] for p in pieces} == {0}
    assert "signature" in pieces[-1] and "text" not in pieces[-1]
    assert all("signature" not in p for p in pieces[:-1])
    # concatenated as a list, not merged by index: Claude's signature error, wrapped
    fragmented = copy.deepcopy(follow)
    fragmented["messages"][2]["reasoning_details"] = pieces
    response = post(endpoint, fragmented)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["message"] == "Provider returned error"
    assert error["metadata"]["provider_name"] == "Anthropic"
    raw = json.loads(error["metadata"]["raw"])
    assert raw["error"]["message"] == INVALID_SIGNATURE.format(i=2, k=0)
    dropped = copy.deepcopy(follow)
    del dropped["messages"][2]["reasoning_details"]
    raw = json.loads(post(endpoint, dropped).json()["error"]["metadata"]["raw"])
    assert raw["error"]["message"] == THINKING_OFF.format(kind="disabled")
    assert post(endpoint, follow).status_code == 200


def test_openrouter_gemini_wants_its_encrypted_details_back(
    endpoints: list[FrontierEndpoint],
) -> None:
    endpoint = start(endpoints, "openrouter-reasoning", model="google/gemini-3.5-pro")
    _, follow = openai_turn(endpoint)
    details = endpoint.issued[0]["reasoning_details"]
    assert [d["type"] for d in details] == ["reasoning.text", "reasoning.encrypted"]
    dropped = copy.deepcopy(follow)
    del dropped["messages"][2]["reasoning_details"]
    error = post(endpoint, dropped).json()["error"]
    assert error["metadata"]["provider_name"] == "Google AI Studio"
    raw = error["metadata"]["raw"]
    assert raw.startswith("Gemini models require OpenRouter reasoning details to be preserved")
    assert GEMINI_MISSING.format(name="lookup", position=2) in raw
    assert post(endpoint, follow).status_code == 200


def test_openrouter_error_finish_reason_is_scriptable(endpoints: list[FrontierEndpoint]) -> None:
    endpoint = start(endpoints, "openrouter-reasoning")
    endpoint.script(Step(text="half", stop="error"))
    choice = post(
        endpoint, {"model": endpoint.model, "messages": [{"role": "user", "content": "?"}]}
    ).json()["choices"][0]
    assert choice["finish_reason"] == "error"
    assert choice["native_finish_reason"] == "MALFORMED_FUNCTION_CALL"


@pytest.mark.parametrize("stream", [False, True])
def test_deepseek_wants_reasoning_content_back(
    endpoints: list[FrontierEndpoint], stream: bool
) -> None:
    endpoint = start(endpoints, "deepseek")
    first, follow = openai_turn(endpoint, stream=stream)
    if stream:
        deltas = [c["choices"][0]["delta"] for c in first["events"] if c["choices"]]
        streamed = "".join(d.get("reasoning_content", "") for d in deltas)
        assert streamed == endpoint.issued[0]["reasoning_content"] != ""
    dropped = copy.deepcopy(follow)
    del dropped["messages"][2]["reasoning_content"]
    response = post(endpoint, dropped)
    assert response.status_code == 400
    assert response.json()["error"]["message"] == DEEPSEEK_MISSING
    assert post(endpoint, follow).status_code == 200


def test_vllm_accepts_either_way_and_records_what_came_back(
    endpoints: list[FrontierEndpoint],
) -> None:
    endpoint = start(endpoints, "vllm")
    _, follow = openai_turn(endpoint)
    endpoint.script(Step(text="again"))
    renamed = copy.deepcopy(follow)
    renamed["messages"][2]["reasoning_content"] = renamed["messages"][2].pop("reasoning")
    assert post(endpoint, renamed).status_code == 200
    assert post(endpoint, follow).status_code == 200
    assert endpoint.reasoning_returned == [[], [False], [True]]


def test_content_filter_is_scriptable_and_requests_are_recorded_in_order(
    endpoints: list[FrontierEndpoint],
) -> None:
    endpoint = start(endpoints, "deepseek")
    endpoint.script(Step(text="", stop="content_filter"))
    bodies = [
        {"model": endpoint.model, "messages": [{"role": "user", "content": "first"}]},
        {"model": endpoint.model, "messages": [{"role": "user", "content": "second"}]},
    ]
    choice = post(endpoint, bodies[0]).json()["choices"][0]
    assert choice["finish_reason"] == "content_filter"
    post(endpoint, bodies[1])
    assert endpoint.requests == bodies
    assert [json.loads(raw) for raw in endpoint.raw_requests] == bodies


def test_fixed_parts_are_the_bytes_as_sent() -> None:
    tools = [{"name": "a", "input_schema": {"type": "object"}}]
    same = {"model": "m", "system": "s", "tools": tools, "messages": []}
    reordered = {"model": "m", "system": "s", "tools": [dict(reversed(tools[0].items()))]}
    first = fixed_parts(json.dumps(same).encode(), "anthropic")
    assert first == ('"s"', json.dumps(tools))
    assert fixed_parts(json.dumps({**same, "messages": [1]}).encode(), "anthropic") == first
    assert fixed_parts(json.dumps(reordered).encode(), "anthropic")[1] != first[1]
    chat = {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]}
    assert fixed_parts(json.dumps(chat).encode(), "openai") == (
        json.dumps(chat["messages"][0]),
        "",
    )
