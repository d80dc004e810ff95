"""Sending a request body through the official OpenAI SDK exactly as built.

Why not ``create()``: before it sends anything, the SDK's ``chat.completions.create`` and
``responses.create`` walk the whole body against their ``TypedDict`` annotations (their
"transform", which renames aliased keys and encodes files). Our bodies are JSON data already,
and for them that walk changes nothing (a test pins this against the installed SDK), yet on a
turn that hands back 100 tool results it took longer than everything else the client does per
call together (about 40 ms a request on a 2-core machine). The SDK's public ``post`` sends the
body as it is, with everything else of ``create``: its retries, headers, authentication,
error types and streams.
"""

from __future__ import annotations

from typing import Any

__all__ = ["body_of", "post_chat_completion", "post_response"]


def body_of(params: dict[str, Any], *, stream: bool = False) -> dict[str, Any]:
    """The JSON body ``create(**params, stream=stream)`` would send: ``extra_body`` merged
    over the rest, as the SDK merges it."""
    body = {key: value for key, value in params.items() if key != "extra_body"}
    if stream:
        body["stream"] = True
    return {**body, **(params.get("extra_body") or {})}


async def post_chat_completion(sdk: Any, params: dict[str, Any], *, stream: bool) -> Any:
    """``chat.completions.create(**params, stream=stream)`` without the body walk."""
    from openai import AsyncStream
    from openai.types.chat import ChatCompletion, ChatCompletionChunk

    return await sdk.post(
        "/chat/completions",
        body=body_of(params, stream=stream),
        cast_to=ChatCompletion,
        stream=stream,
        stream_cls=AsyncStream[ChatCompletionChunk],
    )


async def post_response(sdk: Any, params: dict[str, Any], *, stream: bool) -> Any:
    """``responses.create(**params, stream=stream)`` without the body walk."""
    from openai import AsyncStream
    from openai.types.responses import Response, ResponseStreamEvent

    return await sdk.post(
        "/responses",
        body=body_of(params, stream=stream),
        cast_to=Response,
        stream=stream,
        stream_cls=AsyncStream[ResponseStreamEvent],
    )
