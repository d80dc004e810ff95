"""Anthropic Messages, through the official SDK."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anthropic

from toolnexus.client.styles._base import AssistantTurn, OnCall, OnText, Style, Usage
from toolnexus.scheduling import Outcome, ToolCall
from toolnexus.scheduling._outcome import outcome_text
from toolnexus.tools import Tool, Toolkit

__all__ = ["DEFAULT_MAX_TOKENS", "AnthropicStyle"]

DEFAULT_MAX_TOKENS = 4096
"""Messages requires ``max_tokens``; override it with ``request_params={"max_tokens": ...}``."""


class AnthropicStyle(Style):
    """The ``"anthropic"`` style: one user message of ``tool_result`` blocks per turn."""

    name = "anthropic"
    key_variables: tuple[str, ...] = ("OPENROUTER_API_KEY", "ANTHROPIC_API_KEY")
    sdk_errors: tuple[type[Exception], ...] = (anthropic.APIError,)

    def tool_definitions(self, tools: Sequence[Tool]) -> list[dict[str, Any]]:
        return Toolkit(tools).to_anthropic()

    def opening(self, history: Sequence[dict[str, Any]], prompt: str) -> list[dict[str, Any]]:
        return [*history, {"role": "user", "content": prompt}]

    def request(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": DEFAULT_MAX_TOKENS,
            "messages": messages,
            **self.request_params,
        }
        if self.system_prompt:
            params.setdefault("system", self.system_prompt)
        if tools:
            params["tools"] = tools
        return params

    async def complete(self, sdk: Any, params: dict[str, Any]) -> AssistantTurn:
        return self._turn(await sdk.messages.create(**params))

    async def stream(
        self, sdk: Any, params: dict[str, Any], on_text: OnText, on_call: OnCall
    ) -> AssistantTurn:
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
