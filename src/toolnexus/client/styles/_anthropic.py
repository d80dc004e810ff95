"""Anthropic Messages, through the official SDK."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import anthropic
from anthropic import AsyncAnthropic

from toolnexus.client.styles._base import AssistantTurn, OnCall, OnText, Usage, provider_error
from toolnexus.scheduling import Outcome, ToolCall
from toolnexus.scheduling._outcome import outcome_text
from toolnexus.tools import Tool

__all__ = ["DEFAULT_MAX_TOKENS", "AnthropicStyle"]

DEFAULT_MAX_TOKENS = 4096
"""Messages requires ``max_tokens``; override it with ``request_params={"max_tokens": ...}``."""


class AnthropicStyle:
    """The ``"anthropic"`` style: one user message of ``tool_result`` blocks per turn."""

    name: str = "anthropic"
    key_variables: tuple[str, ...] = ("OPENROUTER_API_KEY", "ANTHROPIC_API_KEY")

    def __init__(
        self,
        connect: Callable[[], AsyncAnthropic],
        model: str,
        system_prompt: str | None,
        request_params: dict[str, Any],
        base_url: str,
    ) -> None:
        self._connect = connect
        self._base_url = base_url
        self._model = model
        self._system = system_prompt
        self._params = request_params

    def tool_definitions(self, tools: Sequence[Tool]) -> list[dict[str, Any]]:
        return [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in tools
        ]

    def opening(self, history: Sequence[dict[str, Any]], prompt: str) -> list[dict[str, Any]]:
        return [*history, {"role": "user", "content": prompt}]

    def connect(self) -> AsyncAnthropic:
        """A new SDK client for one run (closed by the run: no connection outlives its loop)."""
        return self._connect()

    async def respond(
        self,
        sdk: AsyncAnthropic,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        *,
        stream: bool,
        on_text: OnText,
        on_call: OnCall,
    ) -> AssistantTurn:
        try:
            return await self._respond(
                sdk, messages, tools, stream=stream, on_text=on_text, on_call=on_call
            )
        except (anthropic.APIError, json.JSONDecodeError) as exc:  # the one translation boundary
            raise provider_error(exc, self._base_url, self.key_variables) from exc

    async def _respond(
        self,
        sdk: AsyncAnthropic,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        *,
        stream: bool,
        on_text: OnText,
        on_call: OnCall,
    ) -> AssistantTurn:
        params: dict[str, Any] = {
            "model": self._model,
            "max_tokens": DEFAULT_MAX_TOKENS,
            "messages": messages,
            **self._params,
        }
        if self._system:
            params.setdefault("system", self._system)
        if tools:
            params["tools"] = tools
        if not stream:
            message = await sdk.messages.create(**params)
            for block in message.content:
                if block.type == "text" and block.text:
                    await on_text(block.text)
                elif block.type == "tool_use":
                    await on_call(ToolCall(block.id, block.name, dict(block.input)))
            return self._turn(message)
        async with sdk.messages.stream(**params) as events:
            async for event in events:
                if event.type == "text":
                    await on_text(event.text)
                elif event.type == "content_block_stop":
                    block = event.content_block
                    if block.type == "tool_use":  # its arguments are complete: start it now
                        await on_call(ToolCall(block.id, block.name, dict(block.input)))
            return self._turn(await events.get_final_message())

    def _turn(self, message: Any) -> AssistantTurn:
        content: list[dict[str, Any]] = []
        calls: list[ToolCall] = []
        text_parts: list[str] = []
        for block in message.content:
            if block.type == "text":
                text_parts.append(block.text)
                content.append({"type": "text", "text": block.text})
            elif block.type == "tool_use":
                arguments = dict(block.input)
                calls.append(ToolCall(block.id, block.name, arguments))
                content.append(
                    {"type": "tool_use", "id": block.id, "name": block.name, "input": arguments}
                )
        usage = Usage(message.usage.input_tokens, message.usage.output_tokens)
        return AssistantTurn(
            "".join(text_parts),
            calls,
            usage,
            message.stop_reason,
            {"role": "assistant", "content": content},
        )

    def results(
        self, calls: Sequence[ToolCall], outcomes: Sequence[Outcome]
    ) -> list[dict[str, Any]]:
        blocks = [
            {
                "type": "tool_result",
                "tool_use_id": c.id,
                "content": outcome_text(o),
                "is_error": not o.ok,
            }
            for c, o in zip(calls, outcomes, strict=True)
        ]
        return [{"role": "user", "content": blocks}]
