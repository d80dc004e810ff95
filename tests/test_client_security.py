"""Hostile input from the model's side of the wire: every one is an error result the model reads,
or a clear error, never an exception out of the loop. Both styles, streaming and not, over real
HTTP on 127.0.0.1 (see ``fake_provider.py``)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from fake_provider import FakeProvider, Turn, Verbatim
from frontier_endpoint import TOOL_ID, FrontierEndpoint, lookup, start
from frontier_endpoint import Step as FrontierStep
from frontier_endpoint import client_for as frontier_client
from frontier_endpoint import run as frontier_run
from responses_endpoint import Endpoint as ResponsesEndpoint
from responses_endpoint import Step as ResponsesStep
from test_client import client_for, run, tool_results
from toolnexus import Session, ToolCall, ToolHints, create_client, run_batch, tool
from toolnexus.errors import ConfigurationError, ProviderError
from toolnexus.testing import ScriptedModel
from toolnexus.tools import Tool
from toolnexus.tools.relay import relay_tool

STYLES = ["openai", "anthropic"]
MODES = [False, True]  # streaming


received: list[Any] = []


@tool(hints=ToolHints(read_only=True))
def echo(x: Any = None) -> Any:
    """Return x."""
    received.append(x)
    return x


DEEP = "[" * 5000 + "]" * 5000
HOSTILE_ARGUMENT_TEXT = {
    "nesting of thousands of levels": '{"x": ' + DEEP + "}",
    "a 5000-digit number": '{"x": ' + "9" * 5000 + "}",
    "NaN": '{"x": NaN}',
    "Infinity": '{"x": -Infinity}',
    "nesting past the session log's limit": '{"x": ' + "[" * 300 + "]" * 300 + "}",
    "a lone surrogate": '{"x": "\\ud800"}',
}


@pytest.mark.parametrize("stream", MODES)
@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("case", sorted(HOSTILE_ARGUMENT_TEXT))
async def test_hostile_argument_text_is_an_error_result_and_the_run_goes_on(
    provider: FakeProvider, style: str, stream: bool, case: str
) -> None:
    text = HOSTILE_ARGUMENT_TEXT[case]
    if style == "anthropic" and not stream and case in UNDECODABLE_BODIES:
        pytest.skip("such a whole Anthropic body cannot be decoded: a provider error, see below")
    hostile = Verbatim(text) if style == "anthropic" else text
    provider.script(
        Turn(calls=[("c1", "echo", hostile), ("c2", "echo", {"x": "fine"})]),
        Turn(text="done"),
    )
    received.clear()
    result = await run(client_for(provider, style), "go", tools=[echo], stream=stream)
    assert result.status == "done" and result.text == "done"
    results = dict(tool_results(result, style))
    assert received == ["fine"]  # the hostile call never ran; its sibling did
    assert "invalid arguments for tool 'echo'" in results["c1"]
    assert results["c2"] == "fine"
    assert [r.is_error for r in result.tool_calls] == [True, False]


UNDECODABLE_BODIES = {
    "nesting of thousands of levels": "nested too deeply to decode",
    "a 5000-digit number": "not JSON Python can read",
}


@pytest.mark.parametrize("case", sorted(UNDECODABLE_BODIES))
async def test_an_anthropic_body_python_cannot_decode_is_a_provider_error_naming_why(
    provider: FakeProvider, case: str
) -> None:
    """Non-streaming, the tool input is part of the body the SDK decodes in one go: there is no
    call to fail alone, so the run ends with a clear provider error (streaming fails the call)."""
    provider.script(Turn(calls=[("c1", "echo", Verbatim(HOSTILE_ARGUMENT_TEXT[case]))]))
    with pytest.raises(ProviderError, match=UNDECODABLE_BODIES[case]):
        await run(client_for(provider, "anthropic"), "go", tools=[echo], stream=False)


NOT_OBJECTS = {
    "a list": "[1, 2]",
    "a list of pairs": '[["x", 1]]',
    "a string": '"x"',
    "a number": "7",
    "null": "null",
}


@pytest.mark.parametrize("stream", MODES)
@pytest.mark.parametrize("case", sorted(NOT_OBJECTS))
async def test_anthropic_tool_input_that_is_not_an_object_fails_that_call(
    provider: FakeProvider, stream: bool, case: str
) -> None:
    provider.script(
        Turn(calls=[("c1", "echo", Verbatim(NOT_OBJECTS[case])), ("c2", "echo", {"x": 1})]),
        Turn(text="done"),
    )
    received.clear()
    result = await run(client_for(provider, "anthropic"), "go", tools=[echo], stream=stream)
    results = dict(tool_results(result, "anthropic"))
    assert "arguments must be a JSON object" in results["c1"]
    assert received == [1]  # a list of pairs was not silently made an object
    assert result.status == "done"


class _BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr for you")


def _deep(levels: int) -> Any:
    value: Any = []
    for _ in range(levels):
        value = [value]
    return value


UNRENDERABLE = {
    "an int past the digit limit": lambda: 10**5000,
    "nesting past the stack": lambda: _deep(5000),
    "an object whose repr raises": _BadRepr,
    "a lone surrogate": lambda: "bad \ud800 text",
}


@pytest.mark.parametrize("stream", MODES)
@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("case", sorted(UNRENDERABLE))
async def test_a_result_that_cannot_be_rendered_still_reaches_the_model_as_text(
    provider: FakeProvider, style: str, stream: bool, case: str
) -> None:
    make = UNRENDERABLE[case]

    @tool(hints=ToolHints(read_only=True))
    def produce() -> Any:
        """Produce a hostile value."""
        return make()

    provider.script(Turn(calls=[("c1", "produce", {})]), Turn(text="done"))
    result = await run(client_for(provider, style), "go", tools=[produce], stream=stream)
    assert result.status == "done"
    content = dict(tool_results(result, style))["c1"]
    assert isinstance(content, str) and content
    content.encode("utf-8")  # always sendable
    # and it was sent: the second request carried it
    assert len(provider.requests) == 2


@pytest.mark.parametrize("case", sorted(HOSTILE_ARGUMENT_TEXT))
async def test_run_batch_answers_hostile_argument_text_with_an_error_outcome(case: str) -> None:
    received.clear()
    outcomes = await run_batch(
        [ToolCall("1", "echo", HOSTILE_ARGUMENT_TEXT[case]), ToolCall("2", "echo", {"x": 2})],
        [echo],
    )
    assert outcomes[0].error is not None
    assert "invalid arguments for tool 'echo'" in outcomes[0].error["message"]
    assert outcomes[1].value == 2 and received == [2]


async def test_run_batch_refuses_decoded_arguments_with_non_finite_numbers_or_deep_nesting() -> (
    None
):
    received.clear()
    outcomes = await run_batch(
        [
            ToolCall("1", "echo", {"x": float("nan")}),
            ToolCall("2", "echo", {"x": _deep(100)}),
            ToolCall("3", "echo", {"x": 10**5000}),
        ],
        [echo],
    )
    messages = [o.error["message"] if o.error else None for o in outcomes]
    assert "nan" in str(messages[0]).lower()
    assert "nested deeper than 64 levels" in str(messages[1])
    assert "too large for JSON" in str(messages[2])
    assert received == []


async def test_a_concurrency_predicate_cannot_change_what_the_tool_receives() -> None:
    seen: list[Any] = []

    def meddling(args: dict[str, Any]) -> bool:
        args["path"] = "/etc/passwd"
        args.clear()
        return True

    tampered = Tool(
        "t",
        "",
        {"type": "object", "properties": {"path": {"type": "string"}}},
        execute=lambda args: seen.append(dict(args)) or "ok",
        concurrency_safe=meddling,
    )
    outcomes = await run_batch([ToolCall("1", "t", {"path": "notes.txt"})], [tampered])
    assert outcomes[0].ok
    assert seen == [{"path": "notes.txt"}]


async def test_an_empty_choices_list_is_a_provider_error_naming_the_cause(
    provider: FakeProvider,
) -> None:
    provider.script(Turn(raw='{"id": "x", "object": "chat.completion", "choices": []}'))
    with pytest.raises(ProviderError, match="without any choice"):
        await run(client_for(provider, "openai"), "go", tools=[echo], stream=False)


BAD_ANSWERS = {
    "an int past the digit limit": 10**5000,
    "nesting past the stack": _deep(5000),
    "a lone surrogate": "x\ud800",
}


@pytest.mark.parametrize("case", sorted(BAD_ANSWERS))
async def test_resume_refuses_an_unsendable_answer_and_stays_resumable(
    provider: FakeProvider, case: str
) -> None:
    ask = relay_tool("ask_user", "Ask the user.", {"type": "object", "properties": {}})
    client = client_for(provider, "openai")
    provider.script(Turn(calls=[("c1", "ask_user", {})]), Turn(text="thanks"))
    pending = await client.run("go", tools=[ask])
    assert pending.status == "pending"
    with pytest.raises(ConfigurationError, match="still pending"):
        await client.resume(pending, {"c1": BAD_ANSWERS[case]})
    final = await client.resume(pending, {"c1": "blue"})
    assert final.status == "done" and final.text == "thanks"
    assert dict(tool_results(final, "openai"))["c1"] == "blue"


@pytest.mark.parametrize(
    "value",
    [7 * 10**4999, -(10**5000), float("nan")],
    ids=["a 5000-digit int", "a negative 5001-digit int", "NaN"],
)
def test_an_in_process_model_s_unwritable_arguments_fail_that_call(
    value: Any, tmp_path: Path
) -> None:
    """A `ToolCall` whose decoded arguments JSON cannot write fails as that call's error; the
    run, its usage estimate, its transcript and its session log go on."""
    model = ScriptedModel(
        [[ToolCall("c1", "echo", {"x": value}), ToolCall("c2", "echo", {})], "ok"]
    )
    session = Session()
    result = create_client(model=model, code_mode="native").run_sync(
        "go", tools=[echo], session=session
    )
    assert result.status == "done" and result.text == "ok"
    first, second = result.tool_calls
    assert first.is_error and "send the arguments as plain JSON" in first.output
    assert not second.is_error
    json.dumps(model.requests[-1], allow_nan=False)  # the transcript stays sendable
    assert result.usage.total is not None and result.usage.total > 0
    session.save(tmp_path / "s.jsonl")
    assert Session.load(tmp_path / "s.jsonl").messages() == session.messages()


# -- what goes out on the wire is what the APIs accept ------------------------------------------
# (the frontier endpoints refuse what the real APIs refuse, with their error texts)


def _roles_alternate(messages: list[dict[str, Any]]) -> bool:
    roles = [m["role"] for m in messages]
    return all(a != b for a, b in itertools.pairwise(roles))


def _no_empty_text(messages: list[dict[str, Any]]) -> bool:
    return not any(
        isinstance(m["content"], list)
        and any(b.get("type") == "text" and not b.get("text") for b in m["content"])
        for m in messages
    )


@pytest.mark.parametrize("stream", MODES)
@pytest.mark.parametrize("carry", ["history", "session", "resume"])
async def test_an_empty_anthropic_turn_is_never_sent_back_as_an_empty_text_block(
    endpoints: list[FrontierEndpoint], tmp_path: Path, stream: bool, carry: str
) -> None:
    """Claude's documented empty ``end_turn`` after tool results, carried on by ``history=``
    (what ``toolnexus chat`` does), by a saved session and after a resumed run: the API refuses
    ``[{"type": "text", "text": ""}]`` ("text content blocks must be non-empty")."""
    server = start(endpoints, "anthropic-cache")  # thinking off: an empty turn is empty
    ask = relay_tool("ask_city", "Ask the user for a city.", {"type": "object", "properties": {}})
    first_call = ("ask_city", {}) if carry == "resume" else ("lookup", {"city": "Oslo"})
    server.script(FrontierStep(calls=[first_call]), FrontierStep(), FrontierStep(text="Sunny."))
    client = frontier_client(server, request_params={})
    session = Session()
    first = await frontier_run(
        client, "Weather?", stream=stream, tools=[lookup, ask], session=session
    )
    if carry == "resume":
        assert first.status == "pending"
        first = await client.resume(first, {first.pending[0].id: "Oslo"})
    assert first.status == "done" and first.text == ""
    if carry == "session":
        session.save(tmp_path / "s.jsonl")
        again = await frontier_run(
            client,
            "And?",
            stream=stream,
            tools=[lookup],
            session=Session.load(tmp_path / "s.jsonl"),
        )
    else:
        again = await frontier_run(
            client, "And?", stream=stream, tools=[lookup], history=first.messages
        )
    assert server.rejected == [] and again.text == "Sunny."
    sent = server.requests[-1]["messages"]
    assert _roles_alternate(sent) and _no_empty_text(sent)
    assert sent[-1]["role"] == "user" and sent[-1]["content"][0]["type"] == "tool_result"
    assert sent[-1]["content"][-1]["text"] == "And?"  # the results and the prompt: one turn


@pytest.mark.parametrize("stream", MODES)
async def test_an_empty_anthropic_pause_turn_is_continued_without_an_empty_text_block(
    endpoints: list[FrontierEndpoint], stream: bool
) -> None:
    server = start(endpoints, "anthropic-cache")
    server.script(FrontierStep(stop="pause_turn"), FrontierStep(text="Sunny."))
    result = await frontier_run(
        frontier_client(server, request_params={}), "Weather?", stream=stream
    )
    assert server.rejected == [] and result.status == "done" and result.text == "Sunny."
    continued = server.requests[1]["messages"]
    assert continued[-1] == {"role": "assistant", "content": []}  # sent back as it came


KIMI_HISTORY = [
    {"role": "user", "content": "Weather in Oslo and Bergen?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": "lookup", "arguments": json.dumps({"city": city})},
            }
            for call_id, city in (("functions.lookup:0", "Oslo"), ("functions.lookup.0", "Bergen"))
        ],
    },
    {"role": "tool", "tool_call_id": "functions.lookup:0", "content": "Oslo: sunny"},
    {"role": "tool", "tool_call_id": "functions.lookup.0", "content": "Bergen: rain"},
    {"role": "assistant", "content": "Oslo is sunny, Bergen rainy."},
]


@pytest.mark.parametrize("carry", ["history", "session"])
async def test_tool_call_ids_from_another_style_are_mapped_one_to_one_for_anthropic(
    endpoints: list[FrontierEndpoint], carry: str
) -> None:
    server = start(endpoints, "anthropic-cache")
    server.script(FrontierStep(text="Still sunny."))
    client = frontier_client(server, request_params={})
    if carry == "history":
        result = await client.run("And now?", history=KIMI_HISTORY)
    else:  # a session another style's client recorded, carried on by an Anthropic client
        kimi = ScriptedModel(
            [[ToolCall("functions.lookup:0", "lookup", {"city": "Oslo"})], "Sunny."]
        )
        session = Session()
        await create_client(model=kimi, code_mode="native").run(
            "Weather?", tools=[lookup], session=session
        )
        result = await client.run("And now?", session=session)
    assert server.rejected == [] and result.text == "Still sunny."
    sent = server.requests[-1]["messages"]
    uses = [
        b["id"]
        for m in sent
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_use"
    ]
    answers = [
        b["tool_use_id"]
        for m in sent
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_result"
    ]
    assert uses == answers and len(set(uses)) == len(uses)
    assert all(TOOL_ID.match(i) for i in uses)
    kept = [
        b["id"]
        for m in result.messages
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if b.get("type") == "tool_use"
    ]
    # "functions.lookup:0" and "functions.lookup.0" stay two ids; the transcript keeps them
    # as they were, only the request maps them
    originals = ["functions.lookup:0", "functions.lookup.0"]
    assert kept == (originals if carry == "history" else originals[:1])
    assert len(uses) == len(kept)


async def test_cache_breakpoints_inside_tool_results_count_toward_the_four(
    endpoints: list[FrontierEndpoint],
) -> None:
    server = start(endpoints, "anthropic-cache")
    server.script(FrontierStep(text="ok"))
    mark = {"type": "ephemeral"}
    history = [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [
                        {"type": "text", "text": part, "cache_control": mark} for part in "abc"
                    ],
                }
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Sunny."}]},
    ]
    result = await frontier_client(server, request_params={}).run(
        "And?", tools=[lookup], history=history
    )
    assert server.rejected == [] and result.text == "ok"
    assert repr(server.requests[-1]).count("cache_control") == 4


@pytest.mark.parametrize("style", ["anthropic", "openai", "responses"])
async def test_a_history_system_message_given_as_text_blocks_is_sent_as_its_text(
    endpoints: list[FrontierEndpoint], provider: FakeProvider, style: str
) -> None:
    history = [
        {"role": "system", "content": [{"type": "text", "text": "Answer in French."}]},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Bonjour."},
    ]
    if style == "anthropic":
        server = start(endpoints, "anthropic-cache")
        server.script(FrontierStep(text="Oui."))
        await frontier_client(server, request_params={}, system_prompt=None).run(
            "And?", history=history
        )
        system = server.requests[-1]["system"]
        assert [block["text"] for block in system] == ["Answer in French."]
        return
    if style == "responses":  # the Responses endpoint refuses a "text" part ("Invalid value")
        responses = ResponsesEndpoint().start()
        try:
            responses.script(ResponsesStep(text="Oui."))
            await client_for(responses, style).run("And?", history=history)
        finally:
            responses.stop()
        assert responses.rejections == []
        first = responses.requests[-1]["input"][0]
    else:
        provider.script(Turn(text="Oui."))
        await client_for(provider, style).run("And?", history=history)
        first = provider.requests[-1]["messages"][0]
    assert first == {"role": "system", "content": "Answer in French."}


@pytest.mark.parametrize(
    ("style", "key", "value"),
    [
        ("responses", "include", "message.output_text.logprobs"),
        ("anthropic", "stop_sequences", "\n\nObservation:"),
        ("openai", "modalities", "text"),
    ],
)
async def test_a_string_given_for_a_list_field_is_sent_as_one_item(
    provider: FakeProvider, style: str, key: str, value: str
) -> None:
    server: FakeProvider | ResponsesEndpoint = provider
    if style == "responses":  # the Responses endpoint refuses 'm', 'e', ... ("Invalid value")
        server = ResponsesEndpoint().start()
        server.script(ResponsesStep(text="ok"))
    else:
        provider.script(Turn(text="ok"))
    try:
        result = await client_for(server, style, request_params={key: value}).run("hi")
    finally:
        if isinstance(server, ResponsesEndpoint):
            server.stop()
    assert result.text == "ok"
    sent = server.requests[-1][key]
    assert sent[0] == value and all(len(item) > 1 for item in sent)


async def test_a_replayed_chat_audio_object_is_only_its_id(provider: FakeProvider) -> None:
    audio = {"id": "audio_1", "data": "UklGRg==", "expires_at": 1, "transcript": "Hello."}
    message = {
        "role": "assistant",
        "content": None,
        "audio": audio,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "echo", "arguments": "{}"}}
        ],
    }
    reply = {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "test-model",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
    }
    provider.script(Turn(raw=json.dumps(reply)), Turn(text="done"), Turn(text="again"))
    client = client_for(provider, "openai")
    result = await client.run("speak", tools=[echo])
    replayed_audio = [m["audio"] for m in provider.requests[1]["messages"] if "audio" in m]
    assert replayed_audio == [{"id": "audio_1"}]
    history = [dict(m, audio=audio) if "audio" in m else m for m in result.messages]
    await client.run("more", tools=[echo], history=history)  # a history holding all of it
    replayed_audio = [m["audio"] for m in provider.requests[2]["messages"] if "audio" in m]
    assert replayed_audio == [{"id": "audio_1"}]


async def test_anthropic_citations_are_replayed_without_response_only_fields(
    provider: FakeProvider,
) -> None:
    citation = {
        "type": "char_location",
        "cited_text": "sunny",
        "document_index": 0,
        "document_title": "Forecast",
        "start_char_index": 0,
        "end_char_index": 5,
        "file_id": "file_1",
    }
    reply = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "test-model",
        "content": [
            {"type": "text", "text": "It is sunny.", "citations": [citation]},
            {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {}},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    provider.script(Turn(raw=json.dumps(reply)), Turn(text="done"))
    await client_for(provider, "anthropic").run("weather?", tools=[echo])
    (sent,) = [
        b["citations"]
        for m in provider.requests[1]["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("citations")
    ]
    assert sent == [{k: v for k, v in citation.items() if k != "file_id"}]


# -- a fallback endpoint is sent only its own opaque state ---------------------------------------


def _thinking_blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        block
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") in ("thinking", "redacted_thinking")
    ]


@pytest.mark.parametrize("stream", MODES)
async def test_an_anthropic_fallback_is_never_sent_another_endpoint_s_signatures(
    endpoints: list[FrontierEndpoint], tmp_path: Path, stream: bool
) -> None:
    """The primary's signed thinking never reaches the fallback (another endpoint: another
    key), and the fallback's turn, saved in the session, never reaches the primary."""
    primary = start(endpoints, "anthropic-thinking")
    backup = start(endpoints, "anthropic-thinking")
    primary.script(
        FrontierStep(calls=[("lookup", {"city": "Oslo"})]),
        FrontierStep(text="Oslo is sunny."),
        FrontierStep(status=503),
        FrontierStep(text="Pisa is sunny."),
    )
    backup.script(FrontierStep(text="Rome is sunny."))
    client = frontier_client(primary, fallback=[frontier_client(backup)])
    session = Session()
    first = await frontier_run(client, "Oslo?", stream=stream, tools=[lookup], session=session)
    assert first.text == "Oslo is sunny."
    session.save(tmp_path / "s.jsonl")
    second = await frontier_run(
        client, "Rome?", stream=stream, tools=[lookup], session=Session.load(tmp_path / "s.jsonl")
    )
    assert second.text == "Rome is sunny." and second.models == [backup.model]
    assert backup.rejected == [] and _thinking_blocks(backup.requests[-1]) == []
    sent = repr(backup.requests[-1]["messages"])
    assert "Oslo: sunny" in sent and "Oslo is sunny." in sent  # the neutral transcript
    second.session.save(tmp_path / "s2.jsonl")
    third = await frontier_run(
        client, "Pisa?", stream=stream, tools=[lookup], session=Session.load(tmp_path / "s2.jsonl")
    )
    assert third.text == "Pisa is sunny." and primary.rejected == []
    assert primary.failures == [503]
    # the primary's own thinking came back (and checked out); the fallback's turn as its text
    own = [b for turn in primary.issued[:2] for b in turn if "thinking" in b["type"]]
    assert own and _thinking_blocks(primary.requests[-1]) == own
    assert "Rome is sunny." in repr(primary.requests[-1]["messages"])


@pytest.mark.parametrize("profile", ["gemini-openai", "openrouter-reasoning"])
async def test_a_chat_fallback_is_never_sent_another_endpoint_s_signed_reasoning(
    endpoints: list[FrontierEndpoint], profile: str
) -> None:
    primary = start(endpoints, profile)
    backup = start(endpoints, "vllm")  # accepts anything, and records what it got
    primary.script(FrontierStep(calls=[("lookup", {"city": "Oslo"})]), FrontierStep(status=503))
    backup.script(FrontierStep(text="Oslo is sunny."))
    client = frontier_client(primary, fallback=[frontier_client(backup)])
    result = await client.run("Oslo?", tools=[lookup])
    assert result.text == "Oslo is sunny." and result.models == [primary.model, backup.model]
    (turn,) = [m for m in backup.requests[-1]["messages"] if m["role"] == "assistant"]
    assert "reasoning_details" not in turn and "extra_content" not in repr(turn)
    issued = primary.issued[0]["tool_calls"][0]
    (call,) = turn["tool_calls"]
    assert call["id"] == issued["id"] and call["function"]["name"] == "lookup"
    assert json.loads(call["function"]["arguments"]) == {"city": "Oslo"}


async def test_a_chat_fallback_keeps_plain_text_reasoning(
    endpoints: list[FrontierEndpoint],
) -> None:
    """DeepSeek refuses a tool-call turn sent back without its ``reasoning_content``: plain
    text, no endpoint's secret, so a fallback gets it."""
    primary = start(endpoints, "deepseek")
    backup = start(endpoints, "deepseek")
    primary.script(FrontierStep(calls=[("lookup", {"city": "Oslo"})]), FrontierStep(status=503))
    backup.script(FrontierStep(text="Oslo is sunny."))
    client = frontier_client(primary, fallback=[frontier_client(backup)])
    result = await client.run("Oslo?", tools=[lookup])
    assert result.text == "Oslo is sunny." and backup.rejected == []


@pytest.mark.parametrize("store", [False, True])
async def test_a_responses_fallback_starts_from_the_full_neutral_transcript(store: bool) -> None:
    """Stateless, the primary's encrypted reasoning never reaches the fallback; with
    ``store=True``, neither does its ``previous_response_id``: the fallback is sent the whole
    conversation. Back at the primary, its own items (and its response id) carry on."""
    primary, backup = ResponsesEndpoint().start(), ResponsesEndpoint().start()
    try:
        primary.script(
            ResponsesStep(reasoning=True, calls=[("lookup", {"city": "Oslo"})]),
            ResponsesStep(status=503),
            ResponsesStep(reasoning=True, text="Both sunny."),
        )
        backup.script(ResponsesStep(reasoning=True, calls=[("lookup", {"city": "Rome"})]))

        def make(server: ResponsesEndpoint, **options: Any) -> Any:
            return create_client(
                style="responses",
                base_url=server.url + "/v1",
                model="gpt-test",
                api_key="none",
                retries=0,
                store=store,
                code_mode="native",
                **options,
            )

        client = make(primary, fallback=[make(backup)])
        result = await client.run("Oslo and Rome?", tools=[lookup])
        assert primary.rejections == [] and backup.rejections == []
        assert result.text == "Both sunny." and result.models == ["gpt-test"] * 3
        asked = backup.requests[-1]
        assert "previous_response_id" not in asked
        assert not any(item.get("type") == "reasoning" for item in asked["input"])
        assert [i["type"] for i in asked["input"] if "type" in i] == [
            "function_call",
            "function_call_output",
        ]
        last = primary.requests[-1]
        if store:
            assert last["previous_response_id"] == primary.replies[0]["id"]
    finally:
        primary.stop()
        backup.stop()


@tool(hints=ToolHints(read_only=True), callers=("direct", "hosted"))
def forecast(city: str) -> str:
    """The forecast for a city."""
    return f"{city}: sunny"


async def test_an_anthropic_container_is_named_only_to_the_endpoint_that_opened_it() -> None:
    """A hosted program's ``container`` (and its ``server_tool_use`` block) is the primary's:
    a fallback is sent neither, only the program's calls as plain tool calls, answered."""
    primary, backup = ResponsesEndpoint().start(), ResponsesEndpoint().start()
    try:
        primary.script(
            ResponsesStep(hosted=[("forecast", {"city": "Oslo"})]), ResponsesStep(status=503)
        )
        backup.script(ResponsesStep(text="Oslo is sunny."))

        def make(server: ResponsesEndpoint, **options: Any) -> Any:
            return create_client(
                style="anthropic",
                base_url=server.url,
                model="m",
                api_key="none",
                retries=0,
                hosted_code=True,
                code_mode="native",
                **options,
            )

        result = await make(primary, fallback=[make(backup)]).run("Oslo?", tools=[forecast])
        assert result.text == "Oslo is sunny." and primary.rejections == []
        assert primary.requests[1]["container"] == primary.issued_containers[0]
        asked = backup.requests[-1]
        assert "container" not in asked and "srvtoolu_" not in repr(asked["messages"])
        (use,) = [b for b in asked["messages"][1]["content"] if b["type"] == "tool_use"]
        assert "caller" not in use and use["input"] == {"city": "Oslo"}
    finally:
        primary.stop()
        backup.stop()
