"""OpenAI Chat Completions (also OpenRouter, vLLM, Ollama, llama.cpp), through the official SDK."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

try:
    import openai

    _SDK_ERRORS: tuple[type[Exception], ...] = (openai.APIError,)
except ImportError:  # the in-process test models reuse this style's shapes without the SDK
    _SDK_ERRORS = ()

from toolnexus._snapshot import snapshot
from toolnexus.client.styles._base import (
    CHOICE_WORDS,
    AssistantTurn,
    OnCall,
    OnText,
    Style,
    Usage,
)
from toolnexus.client.styles._errors import EmptyStream
from toolnexus.errors import ProviderError
from toolnexus.scheduling import Outcome, ToolCall
from toolnexus.tools import Tool, Toolkit

__all__ = ["FAILURE_MARK", "OpenAIStyle"]

_AFTER_EVERY_INDEX = 1 << 62


class OpenAIStyle(Style):
    """The ``"openai"`` style: one ``tool`` message per call result."""

    name = "openai"
    key_variables: tuple[str, ...] = ("OPENROUTER_API_KEY", "OPENAI_API_KEY")
    sdk_errors: tuple[type[Exception], ...] = _SDK_ERRORS

    def tool_definitions(self, tools: Sequence[Tool]) -> list[dict[str, Any]]:
        return Toolkit(tools).to_openai()

    def opening(self, history: Sequence[dict[str, Any]], prompt: str) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        if self.system_prompt and not any(m.get("role") == "system" for m in history):
            messages.append({"role": "system", "content": self.system_prompt})
        messages.extend(_with_text_content(m) for m in history)
        messages.append({"role": "user", "content": prompt})
        return messages

    def history(self, transcript: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for message in transcript:
            role = message["role"]
            if role == "assistant":
                calls = [
                    ToolCall(str(c.get("id", "")), str(c.get("name", "")), c.get("arguments", {}))
                    for c in message.get("tool_calls") or []
                ]
                out.append(
                    self._turn(str(message.get("content") or ""), calls, Usage(), None).message
                )
            elif role == "tool":
                content = str(message.get("content", ""))
                if message.get("is_error"):
                    content = FAILURE_MARK + content
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": message.get("tool_call_id"),
                        "content": content,
                    }
                )
            else:
                out.append({"role": role, "content": message.get("content", "")})
        return out

    def request(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        tool_choice: str | None = None,
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self.model, "messages": messages, **self.request_params}
        if tools:
            params["tools"] = tools
            # Sent even as "auto" (OpenAI's own default): some servers (llama.cpp) treat a
            # missing tool_choice as "none" and never show the model its tools.
            params.setdefault("tool_choice", _choice(tool_choice or "auto"))
        return params

    async def complete(self, sdk: Any, params: dict[str, Any]) -> AssistantTurn:
        response = await sdk.chat.completions.create(**params)
        if not getattr(response, "choices", None):
            raise ProviderError(
                200,
                f"the model at {self.base_url} answered without any choice (an empty "
                '"choices" list): the server produced no reply; check its logs',
            )
        choice = response.choices[0]
        text = choice.message.content or ""
        calls = [
            ToolCall(c.id, c.function.name, c.function.arguments)
            for c in choice.message.tool_calls or []
            if getattr(c, "function", None) is not None
        ]
        return self._turn(text, calls, _usage(response.usage), choice.finish_reason)

    async def stream(
        self, sdk: Any, params: dict[str, Any], on_text: OnText, on_call: OnCall
    ) -> AssistantTurn:
        """Stream the response; a call is announced once a later one starts or the stream ends.

        Why then: Chat Completions streams each call's arguments in pieces under its index, and
        calls come in index order, so the start of call ``n + 1`` means call ``n`` is complete.
        """
        chunks = await sdk.chat.completions.create(
            **params, stream=True, stream_options={"include_usage": True}
        )
        text_parts: list[str] = []
        pending: dict[int, list[str]] = {}  # index -> [id, name, arguments]
        calls: list[ToolCall] = []
        usage = Usage()
        finish: str | None = None
        received = 0

        async def complete_before(index: int) -> None:
            for i in sorted(pending):
                if i < index:
                    call_id, name, arguments = pending.pop(i)
                    calls.append(ToolCall(call_id, name, arguments))
                    await on_call(calls[-1])

        async for chunk in chunks:
            received += 1
            if chunk.usage is not None:
                usage = _usage(chunk.usage)
            for choice in chunk.choices or []:
                delta = choice.delta
                if delta is None:
                    continue
                if delta.content:
                    text_parts.append(delta.content)
                    await on_text(delta.content)
                for position, piece in enumerate(delta.tool_calls or []):
                    # some compatible servers leave out the index: fall back to the position
                    index = piece.index if isinstance(piece.index, int) else position
                    if index not in pending:
                        await complete_before(index)
                        pending[index] = ["", "", ""]
                    entry = pending[index]
                    entry[0] = piece.id or entry[0]
                    if piece.function is not None:
                        entry[1] = piece.function.name or entry[1]
                        entry[2] += piece.function.arguments or ""
                finish = choice.finish_reason or finish
        if not received:
            raise EmptyStream
        if finish is None:
            raise ProviderError(
                200,
                f"the model at {self.base_url} ended its stream without a finish reason: the "
                "response was cut off (the server stopped or crashed mid-answer)",
            )
        await complete_before(_AFTER_EVERY_INDEX)
        turn = self._turn("".join(text_parts), calls, usage, finish)
        turn.streamed = True
        return turn

    def _turn(
        self, text: str, calls: list[ToolCall], usage: Usage, finish: str | None
    ) -> AssistantTurn:
        # "" rather than null: servers that validate strictly (llama.cpp) answer 500 to a
        # null content in the history, and every server accepts an empty string
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if calls:
            message["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": _raw(c.arguments)},
                }
                for c in calls
            ]
        return AssistantTurn(text, calls, usage, finish, message)

    def results(
        self, calls: Sequence[ToolCall], outcomes: Sequence[Outcome]
    ) -> list[dict[str, Any]]:
        """One ``tool`` message per call. A failure's text starts with ``Error:`` (Chat
        Completions has no error flag; this is the marker models read reliably)."""
        return [
            {
                "role": "tool",
                "tool_call_id": c.id,
                "content": o.text if o.ok else f"{FAILURE_MARK}{o.text}",
            }
            for c, o in zip(calls, outcomes, strict=True)
        ]


def _raw(arguments: Any) -> str:
    """The arguments as the JSON text a server sends: text as it is; decoded arguments that
    JSON cannot write (an in-process model's huge integer, ``NaN``, an object) as their
    snapshot, so the transcript stays sendable while the call itself fails as data."""
    if isinstance(arguments, str):
        return arguments
    try:
        return json.dumps(arguments, allow_nan=False)
    except (ValueError, TypeError, RecursionError):
        return json.dumps(snapshot(arguments), allow_nan=False)


FAILURE_MARK = "Error: "


def _usage(reported: Any) -> Usage:
    """Usage as the server reported it; unknown (``None``) where it did not."""
    if reported is None:
        return Usage()
    return Usage(
        getattr(reported, "prompt_tokens", None), getattr(reported, "completion_tokens", None)
    )


def _choice(choice: str) -> Any:
    if choice in CHOICE_WORDS:
        return choice
    return {"type": "function", "function": {"name": choice}}


def _with_text_content(message: dict[str, Any]) -> dict[str, Any]:
    """An assistant message of the history with ``content: null`` made ``""`` (see ``_turn``)."""
    if message.get("role") == "assistant" and message.get("content") is None:
        return {**message, "content": ""}
    return message
