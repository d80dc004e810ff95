"""The OpenAI Responses API (also vLLM and gateways that speak it), through the official SDK.

Why the transcript is a list of items replayed as they came: OpenAI's reasoning models keep
their reasoning across tool turns only through the Responses API's ``reasoning`` items. Run
stateless (``store: false``, the default here), the next request must carry every output item
of every earlier turn — ``reasoning`` (with ``encrypted_content`` and ``summary``, even empty),
``function_call`` (with its ``fc_`` id), ``message``, a hosted ``program`` with its
``fingerprint`` — unchanged and in order, or the API answers "… provided without its required
'reasoning' item", "… without its required following item" or "Item with id … not found". So a
turn's items are the response's output items as sent (``exclude_unset``), a streamed one's taken
from ``response.output_item.done`` (the ``output_item.added`` copy of a reasoning item may lack
its encrypted content), and the loop never rebuilds them. With ``store=True`` the server keeps
them instead: each request names ``previous_response_id`` and carries only the new items.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

try:
    import openai

    _SDK_ERRORS: tuple[type[Exception], ...] = (openai.APIError,)
except ImportError:  # pragma: no cover - create_client checks the SDK before using the style
    _SDK_ERRORS = ()

from toolnexus.client.styles._base import (
    CHOICE_WORDS,
    AssistantTurn,
    Ending,
    OnCall,
    OnText,
    Style,
    Usage,
)
from toolnexus.client.styles._errors import EmptyStream, undecodable_body
from toolnexus.client.styles._openai import FAILURE_MARK
from toolnexus.client.styles._sdk import post_response
from toolnexus.errors import ProviderError
from toolnexus.scheduling import Outcome, ToolCall
from toolnexus.tools import Tool, Toolkit
from toolnexus.tools._mcp_content import ContentParts

__all__ = ["ResponsesStyle"]

_ENDINGS: dict[str, Ending] = {
    "completed": "answered",
    "max_output_tokens": "answered",
    "content_filter": "refused",
    "refusal": "refused",
}
_ENCRYPTED_REASONING = "reasoning.encrypted_content"


class ResponsesStyle(Style):
    """The ``"responses"`` style: output items replayed verbatim, one ``function_call_output``
    item per call result."""

    name = "responses"
    family = "responses"
    key_variables: tuple[str, ...] = ("OPENAI_API_KEY",)
    sdk_errors: tuple[type[Exception], ...] = _SDK_ERRORS
    endings: Mapping[str, Ending] = _ENDINGS
    owned_params: Mapping[str, str] = {
        **Style.owned_params,
        "input": "history= or session= on run()",
        "instructions": "create_client(system_prompt=...)",
        "store": "create_client(store=...)",
        "previous_response_id": "create_client(store=True), which threads it itself",
    }
    store = False
    """Whether the server keeps each response (``previous_response_id``) instead of the client
    replaying every item (set by ``create_client(store=...)``)."""

    def tool_definitions(self, tools: Sequence[Tool]) -> list[dict[str, Any]]:
        """Function tools; with hosted code, ``programmatic_tool_calling`` first and each
        tool's ``allowed_callers`` (``"direct"``, ``"programmatic"``)."""
        definitions = [_function(definition) for definition in Toolkit(tools).to_openai()]
        if not self.hosted_code:
            return definitions
        callers = {offered.name: offered.callers for offered in tools}
        for definition in definitions:
            definition["allowed_callers"] = [
                "direct" if caller == "direct" else "programmatic"
                for caller in callers[definition["name"]]
            ]
        return [{"type": "programmatic_tool_calling"}, *definitions]

    def opening(self, history: Sequence[dict[str, Any]], prompt: str) -> list[dict[str, Any]]:
        return [*history, {"role": "user", "content": prompt}]

    def history(self, transcript: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for message in transcript:
            role = message["role"]
            if role == "assistant":
                recorded = self.recorded(message)
                items = recorded.get("items") if recorded is not None else None
                out.extend(items if isinstance(items, list) else _rebuilt(message))
            elif role == "tool":
                content = str(message.get("content", ""))
                out.append(
                    {
                        "type": "function_call_output",
                        "call_id": message.get("tool_call_id"),
                        "output": FAILURE_MARK + content if message.get("is_error") else content,
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
        """The body: the items (stateless: all of them; ``store=True``: those the server has
        not seen, after ``previous_response_id``), ``request_params`` as ``extra_body``."""
        params: dict[str, Any] = {"model": self.model, "store": self.store}
        items = messages
        known = _known(messages, state or {}) if self.store else 0
        if known:
            params["previous_response_id"] = (state or {})["previous_response_id"]
            items = messages[known:]
        params["input"] = items
        include = list(self.request_params.get("include") or [])
        if not self.store and _ENCRYPTED_REASONING not in include:
            include.append(_ENCRYPTED_REASONING)
        if include:
            params["include"] = include
        if self.system_prompt and not any(m.get("role") == "system" for m in messages):
            params["instructions"] = self.system_prompt
        extra = {k: v for k, v in self.request_params.items() if k != "include"}
        if extra:
            params["extra_body"] = extra
        if tools:
            params["tools"] = tools
            params["tool_choice"] = _choice(tool_choice or "auto")
        return params

    async def complete(self, sdk: Any, params: dict[str, Any]) -> AssistantTurn:
        response = await post_response(sdk, params, stream=False)
        try:
            items = [_as_sent(item) for item in response.output or []]
        except (ValueError, RecursionError) as exc:  # an item nested past what can be read
            raise undecodable_body(self.base_url, exc) from None
        return self._finished(response, items, None, params)

    async def stream(
        self, sdk: Any, params: dict[str, Any], on_text: OnText, on_call: OnCall
    ) -> AssistantTurn:
        """Stream the events; a call starts at ``response.function_call_arguments.done`` (or at
        its ``output_item.done`` when no argument events came), and each item is taken whole
        from its ``response.output_item.done``."""
        events = await post_response(sdk, params, stream=True)
        done: dict[int, dict[str, Any]] = {}
        started: dict[int, dict[str, Any]] = {}  # output index -> the call's item so far
        calls: list[ToolCall] = []
        announced: set[int] = set()
        final: Any = None
        received = 0

        async def announce(index: int, item: Mapping[str, Any]) -> None:
            if index in announced or item.get("type") != "function_call":
                return
            announced.add(index)
            calls.append(_call(item))
            await on_call(calls[-1])

        async for event in events:
            received += 1
            kind = event.type
            if kind == "response.output_text.delta":
                await on_text(event.delta)
            elif kind == "response.output_item.added":
                started[event.output_index] = _as_sent(event.item)
            elif kind == "response.function_call_arguments.done":
                item = {**started.get(event.output_index, {}), "arguments": event.arguments}
                started[event.output_index] = item
                await announce(event.output_index, item)
            elif kind == "response.output_item.done":
                done[event.output_index] = _as_sent(event.item)
                await announce(event.output_index, done[event.output_index])
            elif kind in ("response.completed", "response.incomplete", "response.failed"):
                final = event.response
            elif kind == "error":
                raise ProviderError(
                    None,
                    f"the model at {self.base_url} failed its response: "
                    f"{getattr(event, 'message', '') or 'no reason given'}",
                )
        if not received:
            raise EmptyStream
        if final is None:
            raise ProviderError(
                200,
                f"the model at {self.base_url} ended its stream without completing the "
                "response: it was cut off (the server stopped or crashed mid-answer)",
            )
        sent = [_as_sent(item) for item in final.output or []]
        for index, item in enumerate(sent):  # whole items from output_item.done win
            sent[index] = done.get(index, item)
        turn = self._finished(final, sent, calls, params)
        turn.streamed = True
        return turn

    def _finished(
        self,
        response: Any,
        items: list[dict[str, Any]],
        calls: list[ToolCall] | None,
        params: Mapping[str, Any],
    ) -> AssistantTurn:
        """The turn of a finished response (``calls``: those a stream already announced)."""
        status = getattr(response, "status", None)
        if status == "failed":
            error = getattr(response, "error", None)
            raise ProviderError(
                200,
                f"the model at {self.base_url} failed its response: "
                f"{getattr(error, 'message', None) or 'no reason given'}",
            )
        if calls is None:
            calls = [_call(item) for item in items if item.get("type") == "function_call"]
        text, refusal = _text(items)
        reason = "completed"
        if status == "incomplete":
            details = getattr(response, "incomplete_details", None)
            reason = str(getattr(details, "reason", None) or "incomplete")
        elif refusal is not None:
            reason = "refusal"
        turn = AssistantTurn(
            refusal if refusal is not None and not text else text,
            calls,
            _usage(getattr(response, "usage", None)),
            reason,
            {"role": "assistant", "content": text},
            items=items,
        )
        if refusal is not None:
            turn.stop_details = {"explanation": refusal}
        if self.store and getattr(response, "id", None):
            turn.state = {"previous_response_id": response.id, "last_item": _last(items)}
        return turn

    def results(
        self, calls: Sequence[ToolCall], outcomes: Sequence[Outcome]
    ) -> list[dict[str, Any]]:
        """One ``function_call_output`` per call (with the call's ``caller`` when a hosted
        program made it). A failure's text starts with ``Error:``: the item has no error
        flag."""
        items: list[dict[str, Any]] = []
        for call, outcome in zip(calls, outcomes, strict=True):
            item: dict[str, Any] = {
                "type": "function_call_output",
                "call_id": call.id,
                "output": _output(outcome),
            }
            if call.caller is not None:
                item["caller"] = dict(call.caller)
            items.append(item)
        return items


def _output(outcome: Outcome) -> str | list[dict[str, Any]]:
    """A ``function_call_output``'s output: the outcome's text, or ``input_text`` and
    ``input_image`` parts when it holds MCP image parts a model may see."""
    if not outcome.ok:
        return FAILURE_MARK + outcome.text
    pieces = outcome.value.model_blocks() if type(outcome.value) is ContentParts else None
    if pieces is None:
        return outcome.text
    return [
        {"type": "input_text", "text": text}
        if kind == "text"
        else {"type": "input_image", "image_url": f"data:{text};base64,{data}"}
        for kind, text, data in pieces
    ]


def _as_sent(model: Any) -> dict[str, Any]:
    """An output item as the server sent it: only the fields it set, by their wire names."""
    data: dict[str, Any] = model.model_dump(
        mode="json", by_alias=True, exclude_unset=True, warnings=False
    )
    return data


def _function(definition: Mapping[str, Any]) -> dict[str, Any]:
    """A Chat Completions tool definition as a Responses function tool. ``strict`` is sent
    as false: the Responses API enforces strict schemas by default, and a tool's optional
    parameters are not strict-compatible."""
    function = definition["function"]
    return {
        "type": "function",
        "name": function["name"],
        "description": function.get("description", ""),
        "parameters": function.get("parameters", {"type": "object", "properties": {}}),
        "strict": False,
    }


def _call(item: Mapping[str, Any]) -> ToolCall:
    caller = item.get("caller")
    hosted = isinstance(caller, Mapping) and caller.get("type") not in (None, "direct")
    arguments = item.get("arguments")
    return ToolCall(
        str(item.get("call_id") or ""),
        str(item.get("name") or ""),
        arguments if isinstance(arguments, str) else "",
        caller=dict(caller) if hosted and isinstance(caller, Mapping) else None,
    )


def _text(items: list[dict[str, Any]]) -> tuple[str, str | None]:
    """The assistant text of the message items, and a refusal's text if the model refused."""
    text: list[str] = []
    refusal: list[str] = []
    for item in items:
        if item.get("type") != "message":
            continue
        for part in item.get("content") or []:
            if part.get("type") == "output_text":
                text.append(str(part.get("text", "")))
            elif part.get("type") == "refusal":
                refusal.append(str(part.get("refusal", "")))
    return "".join(text), "".join(refusal) if refusal else None


def _usage(reported: Any) -> Usage:
    if reported is None:
        return Usage()
    details = getattr(reported, "input_tokens_details", None)
    return Usage(
        getattr(reported, "input_tokens", None),
        getattr(reported, "output_tokens", None),
        getattr(details, "cached_tokens", None),
        getattr(details, "cache_write_tokens", None),
    )


def _last(items: list[dict[str, Any]]) -> int | None:
    return id(items[-1]) if items else None


def _known(messages: list[dict[str, Any]], state: Mapping[str, Any]) -> int:
    """How many leading items the server already has (through ``previous_response_id``): up
    to the last output item of the previous response, found by identity in this run's
    transcript; 0 when it is not there (a new run on a history: everything is sent)."""
    last = state.get("last_item")
    if last is None or "previous_response_id" not in state:
        return 0
    for position in range(len(messages) - 1, -1, -1):
        if id(messages[position]) == last:
            return position + 1
    return 0


def _rebuilt(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """An assistant message of a neutral transcript as input items (its text and calls)."""
    items: list[dict[str, Any]] = []
    if message.get("content"):
        items.append({"role": "assistant", "content": message["content"]})
    for call in message.get("tool_calls") or []:
        arguments = call.get("arguments", {})
        items.append(
            {
                "type": "function_call",
                "call_id": str(call.get("id", "")),
                "name": str(call.get("name", "")),
                "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
            }
        )
    return items


def _choice(choice: str) -> Any:
    if choice in CHOICE_WORDS:
        return choice
    return {"type": "function", "name": choice}
