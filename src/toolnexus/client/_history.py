"""A conversation carried from one style to another.

``history=`` takes messages in the provider's own shape, as ``RunResult.messages`` holds them.
Given to a client of the same style they are sent as they are (the provider's opaque state
included). Given to a client of another style they are first read into the neutral transcript
(text, tool calls, tool results: what every style can carry) and rebuilt in the new style's
shape; what only the old provider could read — thinking blocks, signatures, reasoning — stays
behind, and so do content blocks the neutral transcript has no place for (images, documents).

A fallback endpoint (``create_client(fallback=...)``) is a switch of the same kind within one
style: `own_state_only` sends it its own turns as they came and every other endpoint's turns
in their neutral form, since opaque state is only ever readable by the endpoint that made it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from toolnexus.client.styles import Style
from toolnexus.client.styles._openai import FAILURE_MARK
from toolnexus.scheduling import parse_arguments

__all__ = ["carried", "own_state_only", "shape_of"]

_RESPONSES_ITEMS = frozenset(
    {"function_call", "function_call_output", "reasoning", "program", "program_output"}
)
_ANTHROPIC_BLOCKS = frozenset(
    {"tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use"}
)


def shape_of(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The style family whose shape ``messages`` have, or ``None`` when they hold nothing
    but plain text (which every style takes as it is)."""
    for message in messages:
        if message.get("type") in _RESPONSES_ITEMS:
            return "responses"
        if message.get("role") == "tool" or "tool_calls" in message:
            return "openai"
        content = message.get("content")
        if isinstance(content, list) and any(
            isinstance(block, Mapping) and block.get("type") in _ANTHROPIC_BLOCKS
            for block in content
        ):
            return "anthropic"
    return None


def carried(style: Style, history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``history`` ready for ``style``: as it is in its own shape, else rebuilt from the
    neutral transcript."""
    shape = shape_of(history)
    if shape is None or shape == style.family:
        return history
    neutral: list[dict[str, Any]] = []
    if shape == "responses":
        neutral = _from_responses(history)
    else:
        reader = _from_openai if shape == "openai" else _from_anthropic
        for message in history:
            neutral.extend(reader(message))
    return style.history(neutral)


def own_state_only(
    style: Style,
    messages: Sequence[dict[str, Any]],
    foreign: Callable[[dict[str, Any]], bool],
) -> list[dict[str, Any]]:
    """``messages`` (a transcript in ``style``'s shape) as ``style`` may be sent them: every
    assistant turn for which ``foreign`` is true rebuilt from its neutral form (its text and
    tool calls, what a switch of style carries), everything else the same objects.

    Why: a turn's opaque state (Anthropic thinking signatures and server tool blocks, Responses
    reasoning items with their encrypted content and item ids, Gemini thought signatures,
    OpenRouter ``reasoning_details``) is signed or encrypted by the endpoint that made it;
    another endpoint refuses it ("Invalid `signature`", "could not be verified") or, at best,
    reads what was never its own. Plain-text reasoning on a Chat Completions message
    (``reasoning_content``, ``reasoning``) is no secret and stays. Tool results and the
    user's messages are neutral already.
    """
    family = style.family
    out: list[dict[str, Any]] = []
    turn: list[dict[str, Any]] = []  # the entries of a foreign turn, not yet rebuilt

    def rebuild() -> None:
        if not turn:
            return
        if family == "responses":
            out.extend(style.history(_from_responses(turn)))
        elif family == "anthropic":
            out.extend(style.history([m for message in turn for m in _from_anthropic(message)]))
        else:
            for message in turn:
                (rebuilt,) = style.history(_from_openai(message))
                # plain-text reasoning is no endpoint's secret, and DeepSeek refuses a
                # tool-call turn sent back without its reasoning_content
                for key in _TEXT_REASONING:
                    if isinstance(message.get(key), str):
                        rebuilt[key] = message[key]
                out.append(rebuilt)
        turn.clear()

    for message in messages:
        if _said_by_the_model(family, message) and foreign(message):
            turn.append(message)
            continue
        rebuild()
        out.append(message)
    rebuild()
    return out


_TEXT_REASONING = ("reasoning_content", "reasoning")
"""Chat Completions reasoning fields that are plain text (DeepSeek and Kimi, vLLM and Ollama):
kept when a turn is rebuilt for another endpoint, unlike signed or encrypted state."""


def _said_by_the_model(family: str, message: Mapping[str, Any]) -> bool:
    """Whether a transcript entry is (part of) an assistant turn: an assistant message, or a
    Responses output item (anything but the user's, system's and tools' entries)."""
    if family != "responses":
        return message.get("role") == "assistant"
    if message.get("type") == "function_call_output":
        return False
    return not (
        message.get("role") in ("user", "system", "developer")
        and message.get("type") in (None, "message")
    )


def _from_responses(items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Responses API items as neutral messages: the output items of one turn (messages,
    function calls, reasoning) become one assistant message."""
    out: list[dict[str, Any]] = []
    turn: dict[str, Any] | None = None
    for item in items:
        kind = item.get("type")
        role = item.get("role")
        if kind == "function_call_output":
            turn = None
            output = _text(item.get("output"))
            failed = output.startswith(FAILURE_MARK)
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": item.get("call_id"),
                    "content": output[len(FAILURE_MARK) :] if failed else output,
                    "is_error": failed,
                }
            )
            continue
        if role in ("user", "system", "developer") and kind in (None, "message"):
            turn = None
            out.append(
                {
                    "role": "system" if role == "developer" else role,
                    "content": _text(item.get("content")),
                }
            )
            continue
        if turn is None:
            turn = {"role": "assistant", "content": "", "tool_calls": []}
            out.append(turn)
        if kind == "function_call":
            turn["tool_calls"].append(
                {
                    "id": item.get("call_id", ""),
                    "name": item.get("name", ""),
                    "arguments": parse_arguments(item.get("arguments") or ""),
                }
            )
        elif role == "assistant":
            turn["content"] += _text(item.get("content"))
    return out


def _from_openai(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    role = message.get("role")
    if role == "assistant":
        calls = [
            {
                "id": call.get("id", ""),
                "name": (call.get("function") or {}).get("name", ""),
                "arguments": parse_arguments((call.get("function") or {}).get("arguments", "")),
            }
            for call in message.get("tool_calls") or []
            if isinstance(call, Mapping)
        ]
        return [
            {"role": "assistant", "content": _text(message.get("content")), "tool_calls": calls}
        ]
    if role == "tool":
        content = _text(message.get("content"))
        failed = content.startswith(FAILURE_MARK)
        return [
            {
                "role": "tool",
                "tool_call_id": message.get("tool_call_id"),
                "content": content[len(FAILURE_MARK) :] if failed else content,
                "is_error": failed,
            }
        ]
    return [{"role": str(role), "content": _text(message.get("content"))}]


def _from_anthropic(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    role = message.get("role")
    content = message.get("content")
    blocks = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
    if role == "assistant":
        calls = [
            {"id": b.get("id", ""), "name": b.get("name", ""), "arguments": b.get("input", {})}
            for b in blocks
            if isinstance(b, Mapping) and b.get("type") == "tool_use"
        ]
        return [{"role": "assistant", "content": _text(blocks), "tool_calls": calls}]
    out: list[dict[str, Any]] = [
        {
            "role": "tool",
            "tool_call_id": b.get("tool_use_id"),
            "content": _text(b.get("content")),
            "is_error": bool(b.get("is_error")),
        }
        for b in blocks
        if isinstance(b, Mapping) and b.get("type") == "tool_result"
    ]
    text = _text([b for b in blocks if isinstance(b, Mapping) and b.get("type") == "text"])
    if text or not out:
        out.append({"role": str(role), "content": text})
    return out


def _text(content: Any) -> str:
    """The text of a message's content: a string, or the text of its text blocks/parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, Mapping)
            and part.get("type") in ("text", "output_text", "input_text", None)
        )
    return ""
