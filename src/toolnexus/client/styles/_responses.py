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
from toolnexus.client.styles._errors import EmptyStream, described, malformed, undecodable_body
from toolnexus.client.styles._openai import FAILURE_MARK, SDK_ERRORS
from toolnexus.client.styles._sdk import post_response
from toolnexus.errors import ProviderError, ProviderProtocolError
from toolnexus.scheduling import Outcome, ToolCall
from toolnexus.tools import ContentParts, Tool, Toolkit

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
    errors = SDK_ERRORS
    endings: Mapping[str, Ending] = _ENDINGS
    owned_params: Mapping[str, str] = {
        **Style.owned_params,
        "input": "history= or session= on run()",
        "instructions": "create_client(system_prompt=...)",
        "store": "create_client(store=...)",
        "previous_response_id": "create_client(store=True), which threads it itself",
    }
    list_params = frozenset({"include"})
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
        """The history (a system message given as text blocks sent as its text: the API's
        message parts are ``input_text``, never ``text``), then the prompt."""
        return [*map(_with_system_text, history), {"role": "user", "content": prompt}]

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
        body_params = self.body_params()
        include = list(body_params.pop("include", None) or [])
        if not self.store and _ENCRYPTED_REASONING not in include:
            include.append(_ENCRYPTED_REASONING)
        if include:
            params["include"] = include
        if self.system_prompt and not any(m.get("role") == "system" for m in messages):
            params["instructions"] = self.system_prompt
        extra = body_params
        if extra:
            params["extra_body"] = extra
        if tools:
            params["tools"] = tools
            params["tool_choice"] = _choice(tool_choice or "auto")
        return params

    async def complete(self, sdk: Any, params: dict[str, Any]) -> AssistantTurn:
        """One whole response.

        Raises:
            ProviderError: the body is not a response (a list, a string, ``null``, an event
                stream, an error object, an object without ``output``) or its output is not
                a list of items.
        """
        response = await post_response(sdk, params, stream=False)
        if not hasattr(response, "model_dump"):
            raise malformed(self.base_url, f"the body is {described(response)}, not a response")
        output = getattr(response, "output", None)
        if output is None:
            error = getattr(response, "error", None)
            said = getattr(error, "message", None) if error is not None else None
            if isinstance(said, str) and said:
                raise ProviderError(
                    200, f"the model at {self.base_url} answered 200 with an error: {said}"
                )
            raise malformed(self.base_url, "the response has no output (no list of items)")
        return self._finished(response, self._items(output, "the response"), None, params)

    async def stream(
        self, sdk: Any, params: dict[str, Any], on_text: OnText, on_call: OnCall
    ) -> AssistantTurn:
        """Stream the events; a call starts at ``response.function_call_arguments.done`` (or at
        its ``output_item.done`` when no argument events came), and each item is taken whole
        from its ``response.output_item.done``.

        The transcript is every output position of the response, in order: the item that
        streamed whole there, else the final response's, else (a call already started, which
        the transcript must hold to be answered) the call as it streamed. A final response with
        an empty ``output`` loses nothing that arrived.

        Raises:
            ProviderError: an event of the wrong shape (not an object with a ``type``, an
                ``output_item`` event without its item or position), the stream cut off, or
                the response failed.
        """
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
            kind = getattr(event, "type", None)
            if not isinstance(kind, str):
                shape = "has no type" if hasattr(event, "model_dump") else f"is {described(event)}"
                raise malformed(self.base_url, f"a stream event {shape}")
            if kind == "response.output_text.delta":
                delta = getattr(event, "delta", None)
                if isinstance(delta, str) and delta:
                    await on_text(delta)
            elif kind == "response.output_item.added":
                started[self._position(event)] = self._event_item(event)
            elif kind == "response.function_call_arguments.done":
                index = self._position(event)
                arguments = getattr(event, "arguments", None)
                item = {
                    **started.get(index, {}),
                    "arguments": arguments if isinstance(arguments, str) else "",
                }
                started[index] = item
                await announce(index, item)
            elif kind == "response.output_item.done":
                index = self._position(event)
                done[index] = self._event_item(event)
                await announce(index, done[index])
            elif kind in ("response.completed", "response.incomplete", "response.failed"):
                final = getattr(event, "response", None)
                if final is None or not hasattr(final, "model_dump"):
                    raise malformed(self.base_url, f"{kind} carries {described(final)}")
            elif kind == "error":
                raise ProviderError(
                    None,
                    f"the model at {self.base_url} failed its response: "
                    f"{getattr(event, 'message', '') or 'no reason given'}",
                )
        if not received:
            raise EmptyStream
        if final is None:
            raise ProviderProtocolError(
                200,
                f"the model at {self.base_url} ended its stream without completing the "
                "response: it was cut off (the server stopped or crashed mid-answer)",
            )
        output = getattr(final, "output", None)
        if output is None and not done and not started:
            raise malformed(self.base_url, "the response has no output (no list of items)")
        whole = dict(enumerate(self._items(output, "the response")))
        calls_so_far = {index: started[index] for index in announced if index in started}
        positions = sorted({*whole, *done, *calls_so_far})
        sent = [done.get(i) or whole.get(i) or calls_so_far[i] for i in positions]
        turn = self._finished(final, sent, calls, params)
        turn.streamed = True
        return turn

    def _position(self, event: Any) -> int:
        """An ``output_item`` event's ``output_index``, checked."""
        index = getattr(event, "output_index", None)
        if type(index) is not int or index < 0:
            raise malformed(
                self.base_url, f"a {event.type} event has the output_index {described(index)}"
            )
        return index

    def _event_item(self, event: Any) -> dict[str, Any]:
        """An ``output_item`` event's item as sent, checked."""
        item = getattr(event, "item", None)
        if item is None or not hasattr(item, "model_dump"):
            what = f"a {event.type} event carries {described(item)} as its item"
            raise malformed(self.base_url, what)
        try:
            sent = _as_sent(item)
        except (ValueError, RecursionError) as exc:
            raise undecodable_body(self.base_url, exc) from None
        if not isinstance(sent.get("type"), str):
            raise malformed(self.base_url, f"a {event.type} event carries an item without a type")
        return sent

    def _items(self, output: Any, where: str) -> list[dict[str, Any]]:
        """A response's output items as sent; ``None`` (left out) is no items.

        Raises:
            ProviderError: ``output`` is not a list of items, each an object with a ``type``.
        """
        if output is None:
            return []
        if not isinstance(output, list):
            raise malformed(self.base_url, f"the output of {where} is {described(output)}")
        items = []
        for number, item in enumerate(output):
            if not hasattr(item, "model_dump"):
                raise malformed(
                    self.base_url, f"output item {number} of {where} is {described(item)}"
                )
            try:
                sent = _as_sent(item)
            except (ValueError, RecursionError) as exc:  # nested past what can be read
                raise undecodable_body(self.base_url, exc) from None
            if not isinstance(sent.get("type"), str):
                raise malformed(self.base_url, f"output item {number} of {where} has no type")
            items.append(sent)
        return items

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
                "output": _output(call.name, outcome),
            }
            if call.caller is not None:
                item["caller"] = dict(call.caller)
            items.append(item)
        return items


def _output(tool: str, outcome: Outcome) -> str | list[dict[str, Any]]:
    """A ``function_call_output``'s output: the outcome's text, or ``input_text`` and
    ``input_image`` parts when it holds MCP image parts (``ContentParts.model_blocks``: an
    image the API would refuse is a line saying why)."""
    if not outcome.ok:
        return FAILURE_MARK + outcome.text
    value = outcome.value
    pieces = value.model_blocks(tool) if type(value) is ContentParts else None
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
        content = item.get("content")
        for part in content if isinstance(content, list) else []:
            if not isinstance(part, dict):
                continue
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


def _with_system_text(message: dict[str, Any]) -> dict[str, Any]:
    if message.get("role") in ("system", "developer") and isinstance(message.get("content"), list):
        return {**message, "content": system_text(message["content"])}
    return message
