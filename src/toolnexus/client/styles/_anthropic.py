"""Anthropic Messages, through the official SDK.

Why every content block is kept as the API sent it: a reasoning model's turn carries opaque
state — ``thinking`` and ``redacted_thinking`` blocks with their signatures, ``server_tool_use``
and ``*_tool_result`` blocks of server tools — which must come back unchanged and in place on
the next request of a tool loop. The API checks it: a dropped thinking block is a 400
("Expected `thinking` or `redacted_thinking`, but found `tool_use`"), an altered one an
"Invalid `signature`". So the assistant message of a turn is the response's content blocks as
they arrived (``exclude_unset``: no field the server did not send), streamed ones assembled
from their deltas (``signature_delta`` included), and the loop never rebuilds it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from toolnexus._json import json_problem
from toolnexus.client.styles._anthropic_cache import place_breakpoints
from toolnexus.client.styles._anthropic_wire import wire_messages
from toolnexus.client.styles._base import (
    AssistantTurn,
    Ending,
    OnCall,
    OnText,
    Style,
    Usage,
    system_text,
)
from toolnexus.client.styles._deltas import merge_delta
from toolnexus.client.styles._errors import (
    EmptyStream,
    ErrorsOf,
    described,
    malformed,
    undecodable_body,
)
from toolnexus.errors import ProviderError, ProviderProtocolError
from toolnexus.scheduling import Outcome, ToolCall, parse_arguments
from toolnexus.tools import ContentParts, Tool, Toolkit

__all__ = ["CODE_EXECUTION", "DEFAULT_MAX_TOKENS", "AnthropicStyle"]

DEFAULT_MAX_TOKENS = 4096
"""Messages requires ``max_tokens``; override it with ``request_params={"max_tokens": ...}``."""

CODE_EXECUTION = "code_execution_20260120"
"""The code execution tool that runs provider-hosted programs calling our tools (the first
version that supports programmatic tool calling)."""

_ENDINGS: dict[str, Ending] = {
    "end_turn": "answered",
    "tool_use": "answered",
    "max_tokens": "answered",
    "stop_sequence": "answered",
    "pause_turn": "paused",
    "refusal": "refused",
    "model_context_window_exceeded": "context_window",
}


class AnthropicStyle(Style):
    """The ``"anthropic"`` style: one user message of ``tool_result`` blocks per turn."""

    name = "anthropic"
    family = "anthropic"
    key_variables: tuple[str, ...] = ("OPENROUTER_API_KEY", "ANTHROPIC_API_KEY")
    errors = ErrorsOf("anthropic")
    endings: Mapping[str, Ending] = _ENDINGS
    owned_params: Mapping[str, str] = {
        **Style.owned_params,
        "system": "create_client(system_prompt=...)",
    }
    list_params = frozenset({"stop_sequences"})

    def tool_definitions(self, tools: Sequence[Tool]) -> list[dict[str, Any]]:
        """The tools as Messages declares them; with hosted code, the code execution tool
        first and each tool's ``allowed_callers`` (``"direct"``, the code execution tool)."""
        definitions = Toolkit(tools).to_anthropic()
        if not self.hosted_code:
            return definitions
        callers = {offered.name: offered.callers for offered in tools}
        for definition in definitions:
            definition["allowed_callers"] = [
                "direct" if caller == "direct" else CODE_EXECUTION
                for caller in callers[definition["name"]]
            ]
        return [{"type": CODE_EXECUTION, "name": "code_execution"}, *definitions]

    def opening(self, history: Sequence[dict[str, Any]], prompt: str) -> list[dict[str, Any]]:
        return [*history, {"role": "user", "content": prompt}]

    def history(self, transcript: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for message in transcript:
            role = message["role"]
            if role == "assistant":
                out.append(self.recorded(message) or _rebuilt(message))
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
            elif role in ("user", "system"):  # request() takes system messages apart
                out.append({"role": role, "content": message.get("content", "")})
        return out

    def request(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        tool_choice: str | None = None,
        state: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The body: ``request_params`` travel as ``extra_body``, so every field reaches the
        server whatever the installed SDK knows; a conversation's system messages become
        ``system`` (their text, given as a string or as text blocks); what the API refuses on
        input is mended (`wire_messages`) and prompt-cache breakpoints are placed, both on
        copies (the transcript keeps the messages as they were)."""
        system: Any = self.system_prompt
        if any(m.get("role") == "system" for m in messages):
            system = "\n\n".join(
                system_text(m.get("content")) for m in messages if m.get("role") == "system"
            )
            messages = [m for m in messages if m.get("role") != "system"]
        body_params = self.body_params()
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": body_params.get("max_tokens", DEFAULT_MAX_TOKENS),
            "messages": wire_messages(messages),
        }
        if body_params:
            params["extra_body"] = body_params
        if system:
            params["system"] = system
        if tools:
            params["tools"] = tools
            if tool_choice is not None:
                params["tool_choice"] = _choice(tool_choice)
        if state and state.get("container"):  # a program on the provider's side waits in it
            params["container"] = state["container"]
        if self.prompt_cache:
            place_breakpoints(params, self.request_params)
        return params

    async def complete(self, sdk: Any, params: dict[str, Any]) -> AssistantTurn:
        """One whole response.

        Raises:
            ProviderError: the body is not a message (a list, a string, ``null``, an event
                stream, an error object, an object without ``content``), or a block of it is
                not one (not an object with a ``type``; a ``tool_use`` without its id or name).
        """
        try:
            message = await sdk.messages.create(**params)
            if not hasattr(message, "model_dump"):
                raise malformed(self.base_url, f"the body is {described(message)}, not a message")
            blocks = getattr(message, "content", None)
            if blocks is None:
                raise self._no_content(message)
            if not isinstance(blocks, list):
                raise malformed(self.base_url, f"the message's content is {described(blocks)}")
            content = [self._block(block, f"content block {n}") for n, block in enumerate(blocks)]
        except (ValueError, RecursionError) as exc:  # the body could not be decoded
            raise undecodable_body(self.base_url, exc) from None
        turn = _turn(content, _usage(getattr(message, "usage", None)), _stop(message))
        turn.stop_details = _details(getattr(message, "stop_details", None))
        turn.state = _container(message)
        return turn

    async def stream(
        self, sdk: Any, params: dict[str, Any], on_text: OnText, on_call: OnCall
    ) -> AssistantTurn:
        """Stream the raw events; a ``tool_use`` block is announced at its ``content_block_stop``.

        Why not the SDK's accumulating stream helper: it decodes each call's ``partial_json``
        itself and fails the whole response on one call's broken input. Here the input text is
        kept as text, so [`run_batch`][toolnexus.scheduling.run_batch]'s strict parser fails that
        one call, with a message the model reads. Every other delta is merged into its block as
        it came (``thinking_delta``, ``signature_delta``, ``citations_delta``, and any kind a
        newer API adds), so the block is sent back as the server built it.
        """
        blocks: dict[int, dict[str, Any]] = {}
        usage = Usage()
        stop_reason: str | None = None
        details: dict[str, Any] | None = None
        state: dict[str, Any] = {}
        events = await sdk.messages.create(**params, stream=True)
        received = 0
        async for event in events:
            received += 1
            kind = getattr(event, "type", None)
            if not isinstance(kind, str):
                shape = "has no type" if hasattr(event, "model_dump") else f"is {described(event)}"
                raise malformed(self.base_url, f"a stream event {shape}")
            if kind == "message_start":
                started = self._part(event, "message")
                usage = _usage(getattr(started, "usage", None))
                state = _container(started) or state
            elif kind == "content_block_start":
                where = f"the content_block_start of block {self._index(event)}"
                blocks[self._index(event)] = self._block(self._part(event, "content_block"), where)
            elif kind == "content_block_delta":
                block = blocks.get(self._index(event))
                if block is not None:
                    await self._apply_delta(block, self._part(event, "delta"), on_text)
            elif kind == "content_block_stop":
                block = blocks.get(self._index(event), {})
                if block.get("type") == "tool_use":  # its arguments are complete: start it now
                    await on_call(_call(block))
            elif kind == "message_delta":
                delta = self._part(event, "delta")
                state = _container(delta) or state
                stop_reason = _stop(delta) or stop_reason
                details = _details(getattr(delta, "stop_details", None)) or details
                _update_usage(usage, getattr(event, "usage", None))
        if not received:
            raise EmptyStream
        if stop_reason is None:
            raise ProviderProtocolError(
                200,
                f"the model at {self.base_url} ended its stream without a stop reason: the "
                "response was cut off (the server stopped or crashed mid-answer)",
            )
        turn = _turn([blocks[i] for i in sorted(blocks)], usage, stop_reason)
        turn.stop_details = details
        turn.state = state
        turn.streamed = True
        return turn

    def _no_content(self, message: Any) -> ProviderError:
        """The error for a body without ``content``: an error object sent with status 200
        (its message quoted), or an object that is no message."""
        error = getattr(message, "error", None)
        said = error.get("message") if isinstance(error, dict) else getattr(error, "message", None)
        if isinstance(said, str) and said:
            return ProviderError(
                200, f"the model at {self.base_url} answered 200 with an error: {said}"
            )
        return malformed(self.base_url, "the message has no content (no list of blocks)")

    def _block(self, block: Any, where: str) -> dict[str, Any]:
        """A content block as sent, checked: an object with a ``type``, and a ``tool_use``
        with the id and name its result must name."""
        if not hasattr(block, "model_dump"):
            raise malformed(self.base_url, f"{where} is {described(block)}")
        sent = _as_sent(block)
        kind = sent.get("type")
        if not isinstance(kind, str):
            raise malformed(self.base_url, f"{where} has no type")
        if kind == "tool_use" and not (
            isinstance(sent.get("id"), str) and isinstance(sent.get("name"), str)
        ):
            raise malformed(self.base_url, f"{where} is a tool_use without a string id and name")
        return sent

    def _part(self, event: Any, name: str) -> Any:
        """The ``name`` object of a stream event, checked."""
        part = getattr(event, name, None)
        if not hasattr(part, "model_dump"):
            raise malformed(
                self.base_url, f"a {event.type} event carries {described(part)} as {name}"
            )
        return part

    def _index(self, event: Any) -> int:
        """A content block event's ``index``, checked."""
        index = getattr(event, "index", None)
        if type(index) is not int:
            raise malformed(self.base_url, f"a {event.type} event has the index {described(index)}")
        return index

    async def _apply_delta(self, block: dict[str, Any], delta: Any, on_text: OnText) -> None:
        """Merge one ``content_block_delta`` into its block (its pieces checked)."""
        kind = getattr(delta, "type", None)
        if not isinstance(kind, str):
            raise malformed(self.base_url, "a content_block_delta's delta has no type")
        piece = {"text_delta": "text", "input_json_delta": "partial_json"}.get(kind)
        if piece is not None and not isinstance(getattr(delta, piece, None), str):
            raise malformed(self.base_url, f"a {kind} carries no {piece} text")
        citation = getattr(delta, "citation", None)
        if kind == "citations_delta" and not hasattr(citation, "model_dump"):
            raise malformed(self.base_url, "a citations_delta carries no citation")
        await _apply_delta(block, delta, on_text)

    def results(
        self, calls: Sequence[ToolCall], outcomes: Sequence[Outcome]
    ) -> list[dict[str, Any]]:
        blocks = [
            {
                "type": "tool_result",
                "tool_use_id": c.id,
                "content": _result_content(c.name, o),
                "is_error": not o.ok,
            }
            for c, o in zip(calls, outcomes, strict=True)
        ]
        return [{"role": "user", "content": blocks}]


def _stop(message: Any) -> str | None:
    """A message's (or ``message_delta``'s) stop reason: text as sent; any other value as its
    JSON text, which `Style.ending` then reports as a reason it does not know."""
    reason = getattr(message, "stop_reason", None)
    if reason is None or isinstance(reason, str):
        return reason
    return json.dumps(reason, default=repr)


def _result_content(tool: str, outcome: Outcome) -> str | list[dict[str, Any]]:
    """A tool result's content: its text, or text and image blocks when it holds MCP image
    parts (``ContentParts.model_blocks``: an image the API would refuse is a line saying why)."""
    value = outcome.value
    pieces = value.model_blocks(tool) if type(value) is ContentParts else None
    if pieces is None:
        return outcome.text
    return [
        {"type": "text", "text": text}
        if kind == "text"
        else {"type": "image", "source": {"type": "base64", "media_type": text, "data": data}}
        for kind, text, data in pieces
    ]


def _as_sent(model: Any) -> dict[str, Any]:
    """An SDK object as the server sent it: only the fields it set, unknown ones included.

    A ``tool_use`` block's input is taken as it was decoded, not re-serialised: JSON mode
    would turn a ``NaN`` into ``null`` (a call the model did not make) and refuses nesting
    that the call's own check reports as that call's failure.
    """
    raw_input = getattr(model, "type", None) == "tool_use"
    data: dict[str, Any] = model.model_dump(
        mode="json",
        by_alias=True,
        exclude_unset=True,
        warnings=False,
        exclude={"input"} if raw_input else None,
    )
    if raw_input:
        data["input"] = model.input
    return data


async def _apply_delta(block: dict[str, Any], delta: Any, on_text: OnText) -> None:
    """Merge one ``content_block_delta`` into its block."""
    kind = delta.type
    if kind == "text_delta":
        block["text"] = block.get("text", "") + delta.text
        await on_text(delta.text)
    elif kind == "input_json_delta":
        block["input_text"] = block.get("input_text", "") + delta.partial_json
    elif kind == "citations_delta":
        block.setdefault("citations", []).append(_as_sent(delta.citation))
    else:  # thinking_delta, signature_delta, and kinds a newer API adds
        piece = _as_sent(delta)
        piece.pop("type", None)
        merge_delta(block, piece)


def _container(message: Any) -> dict[str, Any]:
    """The container a response ran server tools in: later requests must name it while a
    program in it waits for tool results (else "container_id is required …")."""
    container = getattr(message, "container", None)
    container_id = getattr(container, "id", None)
    return {"container": container_id} if isinstance(container_id, str) else {}


def _usage(reported: Any) -> Usage:
    return Usage(
        getattr(reported, "input_tokens", None),
        getattr(reported, "output_tokens", None),
        getattr(reported, "cache_read_input_tokens", None),
        getattr(reported, "cache_creation_input_tokens", None),
    )


def _update_usage(usage: Usage, reported: Any) -> None:
    """A ``message_delta``'s usage: cumulative counts, each present only when it changed."""
    update = _usage(reported)
    usage.output_tokens = update.output_tokens or usage.output_tokens or 0
    usage.input_tokens = update.input_tokens or usage.input_tokens
    usage.cache_read_tokens = update.cache_read_tokens or usage.cache_read_tokens
    usage.cache_write_tokens = update.cache_write_tokens or usage.cache_write_tokens


def _details(stop_details: Any) -> dict[str, Any] | None:
    if stop_details is None:
        return None
    return {k: v for k, v in _as_sent(stop_details).items() if v is not None}


def _turn(blocks: list[dict[str, Any]], usage: Usage, stop_reason: str | None) -> AssistantTurn:
    """The assistant turn of a response's content blocks (plain dicts, as sent).

    Every block stays as it came, in order, with two mends the API itself requires of what is
    sent back: a ``tool_use`` input is always a plain JSON object (a streamed one is assembled
    from its text; one ``NaN`` or a non-object would make every later request unsendable),
    and an empty text block, which the API refuses on input, is left out.
    """
    content: list[dict[str, Any]] = []
    calls: list[ToolCall] = []
    text_parts: list[str] = []
    for block in blocks:
        kind = block.get("type")
        if kind != "tool_use" and "input_text" in block:  # a server tool's streamed input
            block = _with_input(block)
        if kind == "text":
            if not block.get("text"):
                continue
            text_parts.append(block["text"])
        elif kind == "tool_use":
            call = _call(block)
            calls.append(call)
            tool_input = block.get("input")
            if (
                "input_text" in block
                or not isinstance(tool_input, dict)
                or json_problem(tool_input) is not None
            ):
                block = {k: v for k, v in block.items() if k != "input_text"}
                block["input"] = _echo(call)
        content.append(block)
    # an empty turn (Claude's empty end_turn after tool results) stays empty: a request leaves
    # it out (wire_messages), as the API refuses an empty text block
    message = {"role": "assistant", "content": content}
    return AssistantTurn("".join(text_parts), calls, usage, stop_reason, message)


def _with_input(block: dict[str, Any]) -> dict[str, Any]:
    """A block whose input streamed as JSON text (``server_tool_use``, ``mcp_tool_use``) with
    that input decoded in its place, as the whole response would have carried it."""
    decoded = parse_arguments(str(block["input_text"]))
    rest = {key: value for key, value in block.items() if key != "input_text"}
    return {**rest, "input": decoded if isinstance(decoded, dict) else {}}


def _call(block: Mapping[str, Any]) -> ToolCall:
    """A ``tool_use`` block as a call; a hosted program's call keeps its ``caller``."""
    caller = block.get("caller")
    hosted = isinstance(caller, Mapping) and caller.get("type") not in (None, "direct")
    return ToolCall(
        block["id"],
        block["name"],
        _arguments(dict(block)),
        caller=dict(caller) if hosted and isinstance(caller, Mapping) else None,
    )


def _rebuilt(message: Mapping[str, Any]) -> dict[str, Any]:
    """An assistant message of a neutral transcript in this style's shape (text and tool
    calls: what any style can carry)."""
    blocks: list[dict[str, Any]] = []
    if message.get("content"):
        blocks.append({"type": "text", "text": message["content"]})
    for call in message.get("tool_calls") or []:
        tool_call = ToolCall(str(call.get("id")), str(call.get("name")), call.get("arguments", {}))
        blocks.append(
            {
                "type": "tool_use",
                "id": tool_call.id,
                "name": tool_call.name,
                "input": _echo(tool_call),
            }
        )
    return {"role": "assistant", "content": blocks}


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
