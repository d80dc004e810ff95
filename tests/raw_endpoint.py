"""A model endpoint on 127.0.0.1 that answers 200 with whatever body a test scripts, byte for
byte: the answers no real server should send (a list, ``null``, SSE to a whole request, events
of the wrong shape), which the scripted endpoints of ``fake_provider``, ``frontier_endpoint`` and
``responses_endpoint`` are built never to send. The official SDKs talk to it over real HTTP."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from toolnexus import create_client


class RawEndpoint:
    """A model endpoint on 127.0.0.1 that answers each request with the next scripted body,
    byte for byte, with status 200 (``(content type, body)``; an SSE body is sent as it is to a
    streamed request), and records every request body. For answers no real server should
    send, which the scripted endpoints cannot be made to."""

    def __init__(self) -> None:
        self.answers: list[tuple[str, str]] = []
        self.requests: list[dict[str, Any]] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                endpoint.requests.append(json.loads(body or b"{}"))
                kind, text = endpoint.answers.pop(0) if endpoint.answers else JSON_NULL
                data = text.encode("utf-8", "surrogatepass")
                self.send_response(200)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def url(self, style: str) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}" + ("" if style == "anthropic" else "/v1")

    def answer(self, *answers: tuple[str, str]) -> None:
        self.answers.extend(answers)

    def client(self, style: str, **options: Any) -> Any:
        options.setdefault("code_mode", "native")
        return create_client(
            base_url=self.url(style), style=style, model="m", api_key="none", retries=0, **options
        )

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


JSON_NULL = ("application/json", "null")


def as_json(value: Any) -> tuple[str, str]:
    return ("application/json", value if isinstance(value, str) else json.dumps(value))


def as_sse(*events: Any) -> tuple[str, str]:
    """An event stream: each event a JSON value (or text sent as it is), named by its
    ``type`` when it has one (Anthropic's SDK reads only named events), or a ``(name, value)``
    pair."""
    lines = []
    for event in events:
        kind = event.get("type") if isinstance(event, dict) else None
        if isinstance(event, tuple):  # (the event's name, its data)
            kind, event = event
        data = event if isinstance(event, str) else json.dumps(event)
        lines.append((f"event: {kind}\n" if isinstance(kind, str) else "") + f"data: {data}\n\n")
    return ("text/event-stream", "".join(lines))
