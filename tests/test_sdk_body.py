"""OpenAI-style requests go out through the official SDK's ``post``, the body exactly as built.

The SDK's ``create()`` first walks a body against its ``TypedDict`` annotations (its
"transform"); for our JSON bodies that changes nothing, and on a turn handing back 100 results
it cost more than the rest of the client per call. Pinned here, against the installed SDK and
real HTTP servers on 127.0.0.1: every body the servers received is one the transform leaves
unchanged (so it is what ``create()`` would have sent), and no request runs the transform.
"""

from __future__ import annotations

import copy
from typing import Any

import openai.resources.chat.completions.completions as chat_resource
import openai.resources.responses.responses as responses_resource
import pytest
from openai._utils import async_maybe_transform
from openai.types.chat import completion_create_params
from openai.types.responses import response_create_params

from fake_provider import FakeProvider, Turn
from helpers import Probe
from responses_endpoint import Endpoint, Step
from test_client import client_for, run
from toolnexus import create_client

REQUEST_PARAMS = {"parallel_tool_calls": True, "metadata": {"run": "sdk-body"}, "user": "u-1"}


@pytest.fixture
def transforms(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every body the SDK's transform is asked to walk while the test runs."""
    seen: list[Any] = []

    async def counting(data: Any, expected_type: Any) -> Any:
        seen.append(data)
        return await async_maybe_transform(data, expected_type)

    monkeypatch.setattr(chat_resource, "async_maybe_transform", counting)
    monkeypatch.setattr(responses_resource, "async_maybe_transform", counting)
    return seen


def chat_loop(provider: FakeProvider) -> None:
    calls = [
        ("c1", "read", {"id": "r1", "note": "été ✓ \u2028"}),
        ("c2", "write", {"id": "w1"}),
        ("c3", "read", {"id": "r2", "nested": {"list": [1, 2.5, None, True]}}),
    ]

    def route(body: dict[str, Any]) -> Turn:
        answered = any(m.get("role") == "tool" for m in body["messages"])
        return Turn(text="all done") if answered else Turn(calls=calls)

    provider.router = route


@pytest.mark.parametrize("stream", [False, True])
async def test_chat_completions_bodies_are_sent_as_the_sdk_would_send_them(
    provider: FakeProvider, probe: Probe, transforms: list[Any], stream: bool
) -> None:
    chat_loop(provider)
    client = client_for(provider, "openai", request_params=REQUEST_PARAMS)
    tools = [probe.tool("read"), probe.tool("write", read_only=False)]
    result = await run(client, "go", tools=tools, stream=stream)
    assert result.text == "all done"
    assert len(provider.requests) == 2
    for body in provider.requests:
        assert body["user"] == "u-1"  # request_params are body fields, as extra_body made them
        assert body.get("stream", False) is stream
        kind = (
            completion_create_params.CompletionCreateParamsStreaming
            if stream
            else completion_create_params.CompletionCreateParamsNonStreaming
        )
        assert await async_maybe_transform(copy.deepcopy(body), kind) == body
    assert transforms == []  # no request walked its body


@pytest.mark.parametrize("stream", [False, True])
async def test_responses_bodies_are_sent_as_the_sdk_would_send_them(
    probe: Probe, transforms: list[Any], stream: bool
) -> None:
    endpoint = Endpoint().start()
    try:
        endpoint.script(
            Step(reasoning=True, summary=["Two reads."], calls=[("read", {"id": "r1"})]),
            Step(reasoning=True, summary=[], text="all done"),
        )
        client = create_client(
            style="responses",
            base_url=endpoint.url + "/v1",
            model="gpt-test",
            api_key="none",
            code_mode="native",
            request_params={"metadata": {"run": "sdk-body"}},
        )
        result = await run(client, "go", tools=[probe.tool("read")], stream=stream)
    finally:
        endpoint.stop()
    assert result.text == "all done"
    assert len(endpoint.requests) == 2
    kind = (
        response_create_params.ResponseCreateParamsStreaming
        if stream
        else response_create_params.ResponseCreateParamsNonStreaming
    )
    for body in endpoint.requests:
        assert body["metadata"] == {"run": "sdk-body"}
        assert await async_maybe_transform(copy.deepcopy(body), kind) == body
    assert transforms == []
