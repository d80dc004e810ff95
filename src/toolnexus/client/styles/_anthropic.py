"""Anthropic Messages, through the official SDK."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import anthropic

from toolnexus.client.styles._base import AssistantTurn, OnCall, OnText, Style, Usage
from toolnexus.client.styles._errors import EmptyStream, undecodable_body
from toolnexus.errors import ProviderError
from toolnexus.scheduling import Outcome, ToolCall
from toolnexus.scheduling._batch import parse_arguments
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

    def history(self, transcript: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for message in transcript:
            role = message["role"]
            if role == "assistant":
                blocks: list[dict[str, Any]] = []
                if message.get("content"):
                    blocks.append({"type": "text", "text": message["content"]})
                for call in message.get("tool_calls") or []:
                    tool_call = ToolCall(
                        str(call.get("id")), str(call.get("name")), call.get("arguments", {})
                    )
                    blocks.append(
                        {
                            "type": "tool_use",
                            "id": tool_call.id,
                            "name": tool_call.name,
                            "input": _echo(tool_call),
                        }
                    )
                out.append(
                    {"role": "assistant", "content": blocks or [{"type": "text", "text": ""}]}
                )
            elif role == "tool":
                block = {
                    "type": "tool_result",
                    "tool_use_id": message.get("tool_call_id"),
                    "content": str(message.get("content", "")),
                    "is_error": bool(message.get("is_error")),
                }
                previous = out[-1] if out else None
                if (
                    previous
                    and previous["role"] == "user"
                    and isinstance(previous["content"], list)
                ):
                    previous["content"].append(block)  # one user message per turn's results
                else:
                    out.append({"role": "user", "content": [block]})
            elif role == "user":
                out.append({"role": "user", "content": message.get("content", "")})
        return out  # system messages: Messages takes the system prompt apart

    def request(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        tool_choice: str | None = None,
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
            if tool_choice is not None:
                params.setdefault("tool_choice", _choice(tool_choice))
        return params

    async def complete(self, sdk: Any, params: dict[str, Any]) -> AssistantTurn:
        try:
            message = await sdk.messages.create(**params)
        except (ValueError, RecursionError) as exc:  # the SDK could not decode the body
            raise undecodable_body(self.base_url, exc) from None
        content = [block.model_dump(mode="python", warnings=False) for block in message.content]
        usage = Usage(message.usage.input_tokens, message.usage.output_tokens)
        return _turn(content, usage, message.stop_reason)

    async def stream(
        self, sdk: Any, params: dict[str, Any], on_text: OnText, on_call: OnCall
    ) -> AssistantTurn:
        """Stream the raw events; a ``tool_use`` block is announced at its ``content_block_stop``.

        Why not the SDK's accumulating stream helper: it decodes each call's ``partial_json``
        itself and fails the whole response on one call's broken input. Here the input text is
        kept as text, so [`run_batch`][toolnexus.scheduling.run_batch]'s strict parser fails that
        one call, with a message the model reads.
        """
        blocks: dict[int, dict[str, Any]] = {}
        usage = Usage()
        stop_reason: str | None = None
        events = await sdk.messages.create(**params, stream=True)
        received = 0
        async for event in events:
            received += 1
            if event.type == "message_start":
                usage.input_tokens = event.message.usage.input_tokens or 0
            elif event.type == "content_block_start":
                blocks[event.index] = event.content_block.model_dump(mode="python", warnings=False)
            elif event.type == "content_block_delta":
                block = blocks.get(event.index)
                if block is None:
                    continue
                if event.delta.type == "text_delta":
                    block["text"] = block.get("text", "") + event.delta.text
                    await on_text(event.delta.text)
                elif event.delta.type == "input_json_delta":
                    block["input_text"] = block.get("input_text", "") + event.delta.partial_json
            elif event.type == "content_block_stop":
                block = blocks.get(event.index, {})
                if block.get("type") == "tool_use":  # its arguments are complete: start it now
                    await on_call(ToolCall(block["id"], block["name"], _arguments(block)))
            elif event.type == "message_delta":
                stop_reason = event.delta.stop_reason or stop_reason
                usage.output_tokens = event.usage.output_tokens or 0
        if not received:
            raise EmptyStream
        if stop_reason is None:
            raise ProviderError(
                200,
                f"the model at {self.base_url} ended its stream without a stop reason: the "
                "response was cut off (the server stopped or crashed mid-answer)",
            )
        content = [blocks[i] for i in sorted(blocks)]
        turn = _turn(content, usage, stop_reason)
        turn.streamed = True
        return turn

    def results(
        self, calls: Sequence[ToolCall], outcomes: Sequence[Outcome]
    ) -> list[dict[str, Any]]:
        blocks = [
            {
                "type": "tool_result",
                "tool_use_id": c.id,
                "content": o.text,
                "is_error": not o.ok,
            }
            for c, o in zip(calls, outcomes, strict=True)
        ]
        return [{"role": "user", "content": blocks}]


def _turn(blocks: list[dict[str, Any]], usage: Usage, stop_reason: str | None) -> AssistantTurn:
    """The assistant turn of a response's content blocks (plain dicts)."""
    content: list[dict[str, Any]] = []
    calls: list[ToolCall] = []
    text_parts: list[str] = []
    for block in blocks:
        if block.get("type") == "text":
            text_parts.append(block.get("text", ""))
            content.append({"type": "text", "text": block.get("text", "")})
        elif block.get("type") == "tool_use":
            call = ToolCall(block["id"], block["name"], _arguments(block))
            calls.append(call)
            content.append(
                {"type": "tool_use", "id": call.id, "name": call.name, "input": _echo(call)}
            )
    message = {"role": "assistant", "content": content}
    return AssistantTurn("".join(text_parts), calls, usage, stop_reason, message)


def _echo(call: ToolCall) -> dict[str, Any]:
    """The input as the transcript sends it back: always an object of plain JSON (Messages
    requires an object, and one ``NaN`` would make every later request unsendable)."""
    args = parse_arguments(call.arguments)
    return args if isinstance(args, dict) else {}


def _arguments(block: dict[str, Any]) -> dict[str, Any] | str:
    """A ``tool_use`` block's input as call arguments.

    Streamed input text stays text (parsed strictly when the call is checked), and a decoded
    object is taken as it is. Any other decoded input (a list, a string, a number, null: a
    server's bug) is passed on as its JSON text, so the call fails with "arguments must be a
    JSON object" instead of being turned into an object (``dict()`` makes a list of pairs one).
    """
    if "input_text" in block:
        return str(block["input_text"])
    tool_input = block.get("input")
    if isinstance(tool_input, dict):
        return dict(tool_input)
    try:
        return json.dumps(tool_input)
    except (TypeError, ValueError, RecursionError):
        return repr(type(tool_input))


def _choice(choice: str) -> dict[str, Any]:
    words = {"auto": "auto", "none": "none", "required": "any"}
    if choice in words:
        return {"type": words[choice]}
    return {"type": "tool", "name": choice}
