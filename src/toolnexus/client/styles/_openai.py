"""OpenAI Chat Completions (also OpenRouter, Gemini, DeepSeek, vLLM, Ollama, llama.cpp), through
the official SDK.

Why the assistant message is kept as the server sent it: compatible servers put a reasoning
model's state on the message and its tool calls — OpenRouter ``reasoning_details`` (and
``reasoning``), DeepSeek and Kimi ``reasoning_content``, vLLM and Ollama ``reasoning``, Gemini
``tool_calls[i].extra_content.google.thought_signature`` — and answer 400 when a tool-call turn
comes back without it. The message is the response's (``exclude_unset``: the fields the server
sent, unknown ones included), a streamed one merged from its deltas (``reasoning_details``
pieces by their ``index``), and it goes back unchanged but for what Chat Completions refuses on
input: ``content: null`` (sent as ``""``), response-only ``annotations`` and null fields.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from toolnexus._snapshot import snapshot
from toolnexus.client.styles._base import (
    CHOICE_WORDS,
    AssistantTurn,
    Ending,
    OnCall,
    OnText,
    Style,
    Usage,
    system_text,
)
from toolnexus.client.styles._deltas import merge_delta, without_indexes
from toolnexus.client.styles._errors import (
    EmptyStream,
    ErrorsOf,
    described,
    malformed,
    undecodable_body,
)
from toolnexus.client.styles._sdk import post_chat_completion
from toolnexus.errors import ProviderError, ProviderProtocolError
from toolnexus.scheduling import Outcome, ToolCall
from toolnexus.tools import Tool, Toolkit

SDK_ERRORS = ErrorsOf("openai")
"""The ``openai`` SDK's errors (the Chat Completions and Responses styles'), read when first
needed."""

__all__ = ["FAILURE_MARK", "SDK_ERRORS", "OpenAIStyle"]

_AFTER_EVERY_INDEX = 1 << 62

_ENDINGS: dict[str, Ending] = {
    "stop": "answered",
    "tool_calls": "answered",
    "length": "answered",
    "function_call": "answered",
    "content_filter": "refused",
}
_RESPONSE_ONLY = frozenset({"annotations"})
"""Assistant message fields a response carries that a request may not."""
_AUDIO_RESPONSE_ONLY = frozenset({"data", "expires_at", "transcript"})
"""What a response's ``audio`` object has that the request's does not: it takes ``{"id"}``."""


class OpenAIStyle(Style):
    """The ``"openai"`` style: one ``tool`` message per call result."""

    name = "openai"
    family = "openai"
    key_variables: tuple[str, ...] = ("OPENROUTER_API_KEY", "OPENAI_API_KEY")
    errors = SDK_ERRORS
    endings: Mapping[str, Ending] = _ENDINGS
    owned_params: Mapping[str, str] = {
        **Style.owned_params,
        "stream_options": "nothing: the client asks for usage in every stream itself",
    }
    list_params = frozenset({"modalities"})

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
                recorded = self.recorded(message)
                if recorded is not None:
                    out.append(_with_text_content(recorded))
                    continue
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
        state: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self.model, "messages": messages}
        if self.request_params:  # as body fields: any field reaches the server
            params["extra_body"] = self.body_params()
        if tools:
            params["tools"] = tools
            # Sent even as "auto" (OpenAI's own default): some servers (llama.cpp) treat a
            # missing tool_choice as "none" and never show the model its tools.
            params["tool_choice"] = _choice(tool_choice or "auto")
        return params

    async def complete(self, sdk: Any, params: dict[str, Any]) -> AssistantTurn:
        """One whole response.

        Raises:
            ProviderError: the body is not a chat completion (a list, a string, ``null``, an
                event stream, an error object), or has no choice with a message.
        """
        response = await post_chat_completion(sdk, params, stream=False)
        if not hasattr(response, "model_dump"):
            raise malformed(
                self.base_url, f"the body is {described(response)}, not a chat completion"
            )
        choices = getattr(response, "choices", None)
        if not choices:
            said = _error_message(response)
            if said is not None:
                raise ProviderError(
                    200, f"the model at {self.base_url} answered 200 with an error: {said}"
                )
            raise ProviderProtocolError(
                200,
                f"the model at {self.base_url} answered without any choice (an empty "
                '"choices" list): the server produced no reply; check its logs',
            )
        if not isinstance(choices, list):
            raise malformed(self.base_url, f"its choices are {described(choices)}")
        choice = choices[0]
        if not hasattr(choice, "model_dump"):
            raise malformed(self.base_url, f"its first choice is {described(choice)}")
        message: Any = getattr(choice, "message", None)
        if not hasattr(message, "model_dump"):
            raise malformed(self.base_url, f"its first choice's message is {described(message)}")
        try:
            sent = message.model_dump(
                mode="json", by_alias=True, exclude_unset=True, warnings=False
            )
        except (ValueError, RecursionError) as exc:  # a field nested past what can be read
            raise undecodable_body(self.base_url, exc) from None
        calls = sent.get("tool_calls")
        if calls is not None and not isinstance(calls, list):
            raise malformed(self.base_url, f"the message's tool_calls are {described(calls)}")
        return _sent_turn(sent, _usage(getattr(response, "usage", None)), _finish(choice))

    async def stream(
        self, sdk: Any, params: dict[str, Any], on_text: OnText, on_call: OnCall
    ) -> AssistantTurn:
        """Stream the response; a call is announced once a later one starts or the stream ends.

        Why then: Chat Completions streams each call's arguments in pieces under its index, and
        calls come in index order, so the start of call ``n + 1`` means call ``n`` is complete.
        """
        params = {**params, "stream_options": {"include_usage": True}}
        chunks = await post_chat_completion(sdk, params, stream=True)
        message: dict[str, Any] = {"role": "assistant"}
        calls: list[ToolCall] = []
        announced: set[Any] = set()
        usage = Usage()
        finish: str | None = None
        received = 0

        async def complete_before(index: int) -> None:
            for entry in message.get("tool_calls") or []:
                number = entry.get("index")
                if number not in announced and number < index:
                    announced.add(number)
                    call = _call(entry)
                    if call is not None:
                        calls.append(call)
                        await on_call(call)

        async for chunk in chunks:
            received += 1
            if not hasattr(chunk, "model_dump"):
                raise malformed(self.base_url, f"a stream chunk is {described(chunk)}")
            said = _error_message(chunk)
            if said is not None:  # a gateway's failure mid-stream (OpenRouter sends these)
                raise ProviderError(
                    200, f"the model at {self.base_url} failed mid-stream with an error: {said}"
                )
            if getattr(chunk, "usage", None) is not None:
                usage = _usage(chunk.usage)
            for choice in self._choices(chunk):
                delta = getattr(choice, "delta", None)
                if delta is not None:
                    piece = self._delta(delta)
                    for position, call_piece in enumerate(piece.get("tool_calls") or []):
                        # some compatible servers leave out the index: fall back to the position
                        if not isinstance(call_piece.get("index"), int):
                            call_piece["index"] = position
                        await complete_before(call_piece["index"])
                    merge_delta(message, piece)
                    if isinstance(piece.get("content"), str) and piece["content"]:
                        await on_text(piece["content"])
                finish = _finish(choice) or finish
        if not received:
            raise EmptyStream
        if finish is None:
            raise ProviderProtocolError(
                200,
                f"the model at {self.base_url} ended its stream without a finish reason: the "
                "response was cut off (the server stopped or crashed mid-answer)",
            )
        await complete_before(_AFTER_EVERY_INDEX)
        turn = _sent_turn(message, usage, finish, calls)
        turn.streamed = True
        return turn

    def _choices(self, chunk: Any) -> list[Any]:
        """A stream chunk's choices (none when left out), each checked to be an object."""
        choices = getattr(chunk, "choices", None)
        if choices is None:
            return []
        if not isinstance(choices, list):
            raise malformed(self.base_url, f"a stream chunk's choices are {described(choices)}")
        for choice in choices:
            if not hasattr(choice, "model_dump"):
                raise malformed(self.base_url, f"a stream chunk's choice is {described(choice)}")
        return choices

    def _delta(self, delta: Any) -> dict[str, Any]:
        """A choice's delta as sent, checked: an object whose ``tool_calls`` (when present)
        is a list of objects."""
        if not hasattr(delta, "model_dump"):
            raise malformed(self.base_url, f"a stream chunk's delta is {described(delta)}")
        piece: dict[str, Any] = delta.model_dump(
            mode="json", by_alias=True, exclude_unset=True, warnings=False
        )
        calls = piece.get("tool_calls")
        if calls is not None and not (
            isinstance(calls, list) and all(isinstance(c, dict) for c in calls)
        ):
            raise malformed(self.base_url, "a stream chunk's tool_calls are not a list of objects")
        return piece

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
                "content": o.text if o.error is None else f"{FAILURE_MARK}{o.text}",
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


def _finish(choice: Any) -> str | None:
    """A choice's finish reason: text as sent; any other value as its JSON text, which
    `Style.ending` then reports as a reason it does not know."""
    reason = getattr(choice, "finish_reason", None)
    if reason is None or isinstance(reason, str):
        return reason
    return json.dumps(reason, default=repr)


def _error_message(body: Any) -> str | None:
    """The message of an ``error`` object a body carries instead of an answer (servers and
    gateways send these with status 200), or ``None``."""
    error = getattr(body, "error", None)
    if isinstance(error, dict):
        said = error.get("message") or error.get("type") or json.dumps(error, default=repr)
    elif isinstance(error, str):
        said = error
    else:
        return None
    return " ".join(str(said).split())[:300] or "no reason given"


def _usage(reported: Any) -> Usage:
    """Usage as the server reported it; unknown (``None``) where it did not."""
    if reported is None:
        return Usage()
    details = getattr(reported, "prompt_tokens_details", None)
    written = _count(details, "cache_write_tokens")
    return Usage(
        _count(reported, "prompt_tokens"),
        _count(reported, "completion_tokens"),
        _count(details, "cached_tokens"),
        written if written is not None else _count(reported, "cache_write_tokens"),
    )


def _count(reported: Any, name: str) -> int | None:
    value = getattr(reported, name, None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _sent_turn(
    message: dict[str, Any],
    usage: Usage,
    finish: str | None,
    calls: list[ToolCall] | None = None,
) -> AssistantTurn:
    """The turn of an assistant message as the server sent it (``calls``: the ones a stream
    already announced, kept as the same objects)."""
    sent = _as_request(message)
    if calls is None:
        calls = [c for c in map(_call, sent.get("tool_calls") or []) if c is not None]
    return AssistantTurn(_text(sent.get("content")), calls, usage, finish, sent)


def _as_request(message: dict[str, Any]) -> dict[str, Any]:
    """A response's assistant message as a request takes it back: every field kept but
    ``content: null`` (sent as ``""``: llama.cpp answers 500 to null, every server takes
    ``""``), null fields, response-only ones, an empty ``tool_calls`` list and the stream's
    ``index`` on each call."""
    sent = {
        key: value
        for key, value in message.items()
        if value is not None and key not in _RESPONSE_ONLY
    }
    sent["role"] = "assistant"
    sent.setdefault("content", "")
    _without_audio_data(sent)
    if sent.get("tool_calls"):
        sent["tool_calls"] = without_indexes(sent["tool_calls"])
    else:
        sent.pop("tool_calls", None)
    return sent


def _call(entry: Any) -> ToolCall | None:
    """A message's tool call entry as a call (``None`` for an entry that is no function call)."""
    function = entry.get("function") if isinstance(entry, dict) else None
    if not isinstance(function, dict):
        return None
    arguments = function.get("arguments")
    return ToolCall(
        str(entry.get("id") or ""),
        str(function.get("name") or ""),
        arguments if isinstance(arguments, (str, dict)) else "",
    )


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _choice(choice: str) -> Any:
    if choice in CHOICE_WORDS:
        return choice
    return {"type": "function", "function": {"name": choice}}


def _with_text_content(message: dict[str, Any]) -> dict[str, Any]:
    """A message of the history as a request takes it: an assistant message's ``content:
    null`` (or ``[]``) made ``""`` (see ``_turn``) and its ``audio`` only its ``id``; a system
    message given as text blocks sent as their text (the one form every compatible server
    reads)."""
    role = message.get("role")
    content = message.get("content")
    if role == "assistant":
        audio = message.get("audio")
        if content not in (None, []) and not (
            isinstance(audio, dict) and _AUDIO_RESPONSE_ONLY & audio.keys()
        ):
            return message
        # an empty list: another style's empty turn (an Anthropic one) carried as plain text
        sent = {**message, "content": content if content not in (None, []) else ""}
        _without_audio_data(sent)
        return sent
    if role in ("system", "developer") and isinstance(content, list):
        return {**message, "content": system_text(content)}
    return message


def _without_audio_data(message: dict[str, Any]) -> None:
    """An assistant message's ``audio`` as a request takes it back (``{"id"}``; the response's
    ``data``, ``expires_at`` and ``transcript`` are refused), in place."""
    audio = message.get("audio")
    if isinstance(audio, dict) and _AUDIO_RESPONSE_ONLY & audio.keys():
        message["audio"] = {k: v for k, v in audio.items() if k not in _AUDIO_RESPONSE_ONLY}
