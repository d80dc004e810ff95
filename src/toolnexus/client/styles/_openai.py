"""OpenAI Chat Completions (also OpenRouter, vLLM, Ollama, llama.cpp), through the official SDK."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import openai

from toolnexus.client.styles._base import AssistantTurn, OnCall, OnText, Style, Usage
from toolnexus.errors import ProviderError
from toolnexus.scheduling import Outcome, ToolCall
from toolnexus.scheduling._outcome import outcome_text
from toolnexus.tools import Tool, Toolkit

__all__ = ["OpenAIStyle"]

_AFTER_EVERY_INDEX = 1 << 62


class OpenAIStyle(Style):
    """The ``"openai"`` style: one ``tool`` message per call result."""

    name = "openai"
    key_variables: tuple[str, ...] = ("OPENROUTER_API_KEY", "OPENAI_API_KEY")
    sdk_errors: tuple[type[Exception], ...] = (openai.APIError,)

    def tool_definitions(self, tools: Sequence[Tool]) -> list[dict[str, Any]]:
        return Toolkit(tools).to_openai()

    def opening(self, history: Sequence[dict[str, Any]], prompt: str) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        if self.system_prompt and not any(m.get("role") == "system" for m in history):
            messages.append({"role": "system", "content": self.system_prompt})
        messages.extend(history)
        messages.append({"role": "user", "content": prompt})
        return messages

    def request(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self.model, "messages": messages, **self.request_params}
        if tools:
            params["tools"] = tools
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
        usage = response.usage
        return self._turn(
            text,
            calls,
            Usage(usage.prompt_tokens, usage.completion_tokens) if usage else Usage(),
            choice.finish_reason,
        )

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

        async def complete_before(index: int) -> None:
            for i in sorted(pending):
                if i < index:
                    call_id, name, arguments = pending.pop(i)
                    calls.append(ToolCall(call_id, name, arguments))
                    await on_call(calls[-1])

        async for chunk in chunks:
            if chunk.usage is not None:
                usage = Usage(chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
            for choice in chunk.choices:
                delta = choice.delta
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
        await complete_before(_AFTER_EVERY_INDEX)
        return self._turn("".join(text_parts), calls, usage, finish)

    def _turn(
        self, text: str, calls: list[ToolCall], usage: Usage, finish: str | None
    ) -> AssistantTurn:
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
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
        return [
            {"role": "tool", "tool_call_id": c.id, "content": outcome_text(o)}
            for c, o in zip(calls, outcomes, strict=True)
        ]


def _raw(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)
