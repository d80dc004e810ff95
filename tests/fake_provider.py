"""A model endpoint on 127.0.0.1 for tests: OpenAI Chat Completions and Anthropic Messages,
JSON and SSE, replaying scripted turns. The official SDKs talk to it over real HTTP.

A request carrying an image the real API would refuse (`provider_images`: data that is not
base64, bytes not of the stated type, ...) is answered with that API's 400 and its text."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from provider_images import anthropic_image_error, responses_image_error


@dataclass
class Turn:
    """One scripted model response.

    Attributes:
        text: The assistant's text.
        calls: ``(id, name, arguments)`` per tool call; arguments are sent verbatim when a str
            (so a test can send broken JSON), as JSON otherwise.
        status: Answer with this HTTP error status instead (body ``{"error": ...}``).
        raw: Answer 200 with this body verbatim (a malformed response).
        hold_after_first_call: While streaming, wait for this event after the first call's
            arguments are complete and before sending the rest of the response.
        delay: Seconds to wait before answering (a model's latency).
    """

    text: str = ""
    calls: list[tuple[str, str, Any]] = field(default_factory=list)
    status: int | None = None
    raw: str | None = None
    hold_after_first_call: threading.Event | None = None
    delay: float = 0.0
    endless: bool = False  # stream text chunks until the client goes away (at most 60 s)
    cut: bool = False  # stream the content, then stop: no finish reason, no [DONE]
    lost: bool = False  # stream the content, then drop the connection mid-body (chunked)


def _arguments(args: Any) -> str:
    return args if isinstance(args, str) else json.dumps(args)


class Verbatim(str):
    """Call arguments spliced into an Anthropic body as they are: any JSON value, or text that
    Python's own ``json`` could not even build (nesting thousands deep)."""


def _dumps_with_verbatim(reply: dict[str, Any]) -> str:
    """``json.dumps(reply)`` where each :class:`Verbatim` input is written as raw JSON."""
    verbatim: list[str] = []

    def placeholder(value: Any) -> Any:
        if isinstance(value, Verbatim):
            verbatim.append(str(value))
            return f"__verbatim_{len(verbatim) - 1}__"
        if isinstance(value, dict):
            return {k: placeholder(v) for k, v in value.items()}
        if isinstance(value, list):
            return [placeholder(v) for v in value]
        return value

    text = json.dumps(placeholder(reply))
    for n, raw in enumerate(verbatim):
        text = text.replace(f'"__verbatim_{n}__"', raw)
    return text


LLAMA_CPP = frozenset(
    {"null_content_500", "empty_stream_with_tools", "tools_need_choice", "no_usage", "single_slot"}
)
"""The quirks of a llama-cpp-python 0.3 server (chatml-function-calling), each seen for real:

* ``null_content_500``: an assistant message with ``content: null`` in the history is answered
  with a 500 and a long validation dump (it requires a string);
* ``empty_stream_with_tools``: a streamed request with tools and automatic tool choice gets a
  200 with an empty body: no chunk, no ``[DONE]``; the connection stays open for a moment
  (``close_after_empty_stream`` seconds) and is then closed without reading what the client
  sent on it, so a request reusing it fails;
* ``tools_need_choice``: without ``tool_choice`` the model is never shown its tools;
* ``no_usage``: no usage is reported;
* ``single_slot``: one request at a time; a request the client gave up on keeps the slot busy.
"""

VALIDATION_DUMP = "1 validation error for ChatCompletionRequestAssistantMessage\ncontent\n  " + (
    "Input should be a valid string [type=string_type, input_value=None, input_type=NoneType] " * 20
)


class FakeProvider:
    """Scripted endpoint. ``script(*turns)`` queues responses; ``requests`` records bodies.

    ``quirks`` (a set of names, see :data:`LLAMA_CPP`) makes it behave like a real server that
    is less forgiving than OpenAI's.
    """

    def __init__(self, quirks: frozenset[str] = frozenset()) -> None:
        self.quirks = quirks
        self.slot = threading.Lock()
        self.turns: list[Turn] = []
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.headers: list[dict[str, str]] = []
        self.holds: list[bool] = []  # per hold: whether the event came before the 10 s limit
        self.router: Any = None  # body -> Turn: answers by content instead of in script order
        self.close_after_empty_stream = 0.3
        self.in_flight = 0
        self.peak_in_flight = 0
        self.image_refusals: list[str] = []  # the 400s answered for a bad image, in order
        self._lock = threading.Lock()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                provider.requests.append(body)
                provider.paths.append(self.path)
                provider.headers.append(dict(self.headers))
                with provider._lock:
                    provider.in_flight += 1
                    provider.peak_in_flight = max(provider.peak_in_flight, provider.in_flight)
                try:
                    self._answer(body)
                finally:
                    with provider._lock:
                        provider.in_flight -= 1

            def _answer(self, body: dict[str, Any]) -> None:
                if "single_slot" in provider.quirks:
                    with provider.slot:
                        self._answer_now(body)
                else:
                    self._answer_now(body)

            def _answer_now(self, body: dict[str, Any]) -> None:
                quirks = provider.quirks
                if "null_content_500" in quirks and any(
                    m.get("role") == "assistant" and m.get("content") is None
                    for m in body.get("messages", [])
                ):
                    dump = {
                        "error": {"code": 500, "message": VALIDATION_DUMP, "type": "server_error"}
                    }
                    self._send(500, json.dumps(dump))
                    return
                if (
                    "empty_stream_with_tools" in quirks
                    and body.get("stream")
                    and body.get("tools")
                    and body.get("tool_choice", "auto") == "auto"
                ):
                    # an empty chunked body on a connection kept alive, closed a moment
                    # later without reading what the client sent on it meanwhile
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("transfer-encoding", "chunked")
                    self.end_headers()
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                    time.sleep(provider.close_after_empty_stream)
                    self.close_connection = True
                    return
                if self._bad_image(body):
                    return
                if provider.router is not None:
                    turn = provider.router(body)
                else:
                    turn = provider.turns.pop(0) if provider.turns else Turn(text="(no more turns)")
                if "tools_need_choice" in quirks and "tool_choice" not in body:
                    turn = Turn(
                        text=turn.text or "(the model was shown no tools)", delay=turn.delay
                    )
                if turn.delay:
                    time.sleep(turn.delay)
                anthropic = self.path.endswith("/messages")
                if self.path.endswith("/responses"):
                    self._responses(turn, body)
                    return
                if turn.status is not None:
                    error = {"error": {"type": "error", "message": f"scripted {turn.status}"}}
                    if anthropic:
                        error = {
                            "type": "error",
                            "error": {"type": "api_error", "message": f"scripted {turn.status}"},
                        }
                    self._send(turn.status, json.dumps(error))
                elif turn.raw is not None:
                    self._send(200, turn.raw)
                elif body.get("stream"):
                    self._stream(turn, anthropic, body)
                else:
                    reply = _anthropic_json(turn, body) if anthropic else _openai_json(turn, body)
                    if "no_usage" in provider.quirks:
                        reply.pop("usage", None)
                    self._send(200, _dumps_with_verbatim(reply))

            def _bad_image(self, body: dict[str, Any]) -> bool:
                """Answer the real API's 400 for a bad image (`provider_images`), as a real
                provider does before it reads anything else; no turn is used up."""
                if self.path.endswith("/messages"):
                    message = anthropic_image_error(body)
                    error: dict[str, Any] = {"type": "invalid_request_error", "message": message}
                    refusal: dict[str, Any] = {"type": "error", "error": error}
                elif self.path.endswith("/responses"):
                    raw = body.get("input")
                    found = responses_image_error(raw if isinstance(raw, list) else [])
                    message = found[0] if found else None
                    error = {"message": message, "type": "invalid_request_error"}
                    refusal = {"error": {**error, "param": found and found[1], "code": None}}
                else:
                    return False
                if message is None:
                    return False
                provider.image_refusals.append(message)
                self._send(400, json.dumps(refusal))
                return True

            def _responses(self, turn: Turn, body: dict[str, Any]) -> None:
                """The Responses API: the turn as output items, whole or as events."""
                if turn.status is not None:
                    error = {"error": {"message": f"scripted {turn.status}", "type": "error"}}
                    self._send(turn.status, json.dumps(error))
                elif turn.raw is not None:
                    self._send(200, turn.raw)
                elif body.get("stream"):
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("connection", "close")
                    self.end_headers()
                    for event in _responses_events(turn, body):
                        if event is _HOLD:
                            assert turn.hold_after_first_call is not None
                            provider.holds.append(turn.hold_after_first_call.wait(10))
                            continue
                        self.wfile.write(event.encode())
                        self.wfile.flush()
                    self.close_connection = True
                else:
                    self._send(200, json.dumps(_responses_json(turn, body)))

            def _send(self, status: int, text: str) -> None:
                data = text.encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, turn: Turn, anthropic: bool, body: dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                if turn.lost:
                    self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                if turn.endless:
                    self._endless(anthropic)
                    return
                if turn.lost:
                    self._lost(turn, anthropic, body)
                    return
                events = _anthropic_events(turn, body) if anthropic else _openai_events(turn, body)
                if turn.cut:  # the content, then nothing: no finish reason, no end event
                    events = [e for e in events if e is not _HOLD and '"finish_reason": "' not in e]
                    events = [e for e in events if "[DONE]" not in e and "message_delta" not in e]
                    events = [e for e in events if "message_stop" not in e]
                if "no_usage" in provider.quirks:
                    events = [e for e in events if e is _HOLD or '"usage"' not in e]
                for event in events:
                    if event is _HOLD:
                        assert turn.hold_after_first_call is not None
                        provider.holds.append(turn.hold_after_first_call.wait(10))
                        continue
                    self.wfile.write(event.encode())
                    self.wfile.flush()
                self.close_connection = True

            def _lost(self, turn: Turn, anthropic: bool, body: dict[str, Any]) -> None:
                """The text events in chunked framing, then the connection drops without the
                last chunk: the body is incomplete (a server or network failure)."""
                events = _anthropic_events(turn, body) if anthropic else _openai_events(turn, body)
                texts = [
                    e
                    for e in events
                    if e is not _HOLD
                    and (
                        '"content"' in e
                        or "text_delta" in e
                        or "message_start" in e
                        or "content_block_start" in e
                    )
                ]
                for event in texts:
                    data = event.encode()
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    self.wfile.flush()
                self.close_connection = True

            def _endless(self, anthropic: bool) -> None:
                """Text chunks every 10 ms until the client hangs up (a runaway generation)."""
                self.close_connection = True
                piece = {"choices": [{"index": 0, "delta": {"content": "and again "}}]}
                deadline = time.monotonic() + 60
                try:
                    while time.monotonic() < deadline:
                        self.wfile.write(
                            _sse({"object": "chat.completion.chunk", **piece}).encode()
                        )
                        self.wfile.flush()
                        time.sleep(0.01)
                except OSError:
                    return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def script(self, *turns: Turn) -> None:
        self.turns.extend(turns)

    def start(self) -> FakeProvider:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


_HOLD = object()
USAGE_IN, USAGE_OUT = 11, 7


def _openai_json(turn: Turn, body: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
    if turn.calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": _arguments(a)}}
            for cid, name, a in turn.calls
        ]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "m"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if turn.calls else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": USAGE_IN,
            "completion_tokens": USAGE_OUT,
            "total_tokens": USAGE_IN + USAGE_OUT,
        },
    }


def _sse(data: dict[str, Any], event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n"


def _openai_events(turn: Turn, body: dict[str, Any]) -> list[Any]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        return _sse(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": body.get("model", "m"),
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
        )

    def start(index: int) -> str:
        cid, name, _ = turn.calls[index]
        return chunk(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": cid,
                        "type": "function",
                        "function": {"name": name, "arguments": ""},
                    }
                ]
            }
        )

    events: list[Any] = [chunk({"role": "assistant", "content": ""})]
    for piece in (turn.text[i : i + 5] for i in range(0, len(turn.text), 5)):
        events.append(chunk({"content": piece}))
    started: set[int] = set()
    for index, (_, _, args) in enumerate(turn.calls):
        if index not in started:
            events.append(start(index))
        text = _arguments(args)
        for piece in (text[i : i + 7] for i in range(0, len(text), 7)):
            events.append(
                chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            )
        if index == 0 and turn.hold_after_first_call is not None and len(turn.calls) > 1:
            # a call's arguments are complete once the next call starts: send that, then hold
            events.append(start(1))
            started.add(1)
            events.append(_HOLD)
    events.append(chunk({}, "tool_calls" if turn.calls else "stop"))
    events.append(
        _sse(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": body.get("model", "m"),
                "choices": [],
                "usage": {
                    "prompt_tokens": USAGE_IN,
                    "completion_tokens": USAGE_OUT,
                    "total_tokens": USAGE_IN + USAGE_OUT,
                },
            }
        )
    )
    events.append("data: [DONE]\n\n")
    return events


def _anthropic_json(turn: Turn, body: dict[str, Any]) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if turn.text:
        content.append({"type": "text", "text": turn.text})
    for cid, name, args in turn.calls:
        content.append(
            {
                "type": "tool_use",
                "id": cid,
                "name": name,
                "input": args if isinstance(args, (dict, Verbatim)) else json.loads(args),
            }
        )
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "m"),
        "content": content,
        "stop_reason": "tool_use" if turn.calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": USAGE_IN, "output_tokens": USAGE_OUT},
    }


def _anthropic_events(turn: Turn, body: dict[str, Any]) -> list[Any]:
    events: list[Any] = [
        _sse(
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": body.get("model", "m"),
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": USAGE_IN, "output_tokens": 0},
                },
            },
            "message_start",
        )
    ]
    index = 0
    if turn.text:
        events.append(
            _sse(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                },
                "content_block_start",
            )
        )
        for piece in (turn.text[i : i + 5] for i in range(0, len(turn.text), 5)):
            events.append(
                _sse(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "text_delta", "text": piece},
                    },
                    "content_block_delta",
                )
            )
        events.append(_sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
        index += 1
    for n, (cid, name, args) in enumerate(turn.calls):
        events.append(
            _sse(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "tool_use", "id": cid, "name": name, "input": {}},
                },
                "content_block_start",
            )
        )
        text = _arguments(args)
        for piece in (text[i : i + 7] for i in range(0, len(text), 7)):
            events.append(
                _sse(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": piece},
                    },
                    "content_block_delta",
                )
            )
        events.append(_sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
        if n == 0 and turn.hold_after_first_call is not None:
            events.append(_HOLD)
        index += 1
    events.append(
        _sse(
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": "tool_use" if turn.calls else "end_turn",
                    "stop_sequence": None,
                },
                "usage": {"output_tokens": USAGE_OUT},
            },
            "message_delta",
        )
    )
    events.append(_sse({"type": "message_stop"}, "message_stop"))
    return events


def _responses_json(turn: Turn, body: dict[str, Any]) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if turn.text:
        output.append(
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": turn.text, "annotations": []}],
            }
        )
    for n, (cid, name, args) in enumerate(turn.calls):
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{n}",
                "call_id": cid,
                "name": name,
                "arguments": _arguments(args),
                "status": "completed",
            }
        )
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 0,
        "model": body.get("model", "m"),
        "status": "completed",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools", []),
        "usage": {
            "input_tokens": USAGE_IN,
            "output_tokens": USAGE_OUT,
            "total_tokens": USAGE_IN + USAGE_OUT,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


def _responses_events(turn: Turn, body: dict[str, Any]) -> list[Any]:
    """The events of a streamed response: each item added, its deltas, done; completed."""
    whole = _responses_json(turn, body)
    events = [
        _sse(
            {
                "type": "response.created",
                "sequence_number": 0,
                "response": {**whole, "status": "in_progress", "output": []},
            }
        )
    ]
    for index, item in enumerate(whole["output"]):
        partial = (
            {**item, "arguments": ""}
            if item["type"] == "function_call"
            else {**item, "content": []}
        )
        events.append(
            _sse(
                {
                    "type": "response.output_item.added",
                    "sequence_number": 0,
                    "output_index": index,
                    "item": partial,
                }
            )
        )
        if item["type"] == "message":
            text = item["content"][0]["text"]
            for piece in (text[i : i + 5] for i in range(0, len(text), 5)):
                events.append(
                    _sse(
                        {
                            "type": "response.output_text.delta",
                            "sequence_number": 0,
                            "item_id": item["id"],
                            "output_index": index,
                            "content_index": 0,
                            "delta": piece,
                            "logprobs": [],
                        }
                    )
                )
        else:
            arguments = item["arguments"]
            for piece in (arguments[i : i + 7] for i in range(0, len(arguments), 7)):
                events.append(
                    _sse(
                        {
                            "type": "response.function_call_arguments.delta",
                            "sequence_number": 0,
                            "item_id": item["id"],
                            "output_index": index,
                            "delta": piece,
                        }
                    )
                )
            events.append(
                _sse(
                    {
                        "type": "response.function_call_arguments.done",
                        "sequence_number": 0,
                        "item_id": item["id"],
                        "output_index": index,
                        "name": item["name"],
                        "arguments": arguments,
                    }
                )
            )
        events.append(
            _sse(
                {
                    "type": "response.output_item.done",
                    "sequence_number": 0,
                    "output_index": index,
                    "item": item,
                }
            )
        )
        holding = turn.hold_after_first_call is not None and _HOLD not in events
        if item["type"] == "function_call" and holding and len(turn.calls) > 1:
            events.append(_HOLD)  # the first call is complete: hold the rest
    events.append(_sse({"type": "response.completed", "sequence_number": 0, "response": whole}))
    return events
