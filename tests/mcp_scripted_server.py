"""An MCP server scripted by a JSON file, for the client's security tests: raw JSON-RPC, no
SDK, so a test decides exactly what each listing and call answers.

Run: python tests/mcp_scripted_server.py SCRIPT.json (stdio), or
python tests/mcp_scripted_server.py SCRIPT.json http (streamable HTTP on 127.0.0.1 at a free
port, printed as the first line of stdout; each answer is sent as one SSE event, so the request
headers are seen and the SDK's SSE reader is used).

The script is a JSON object:

* ``tools``: the ``tools/list`` answer's tools, as written (one page);
* ``calls``: tool name -> what ``tools/call`` answers: ``{"result": {...}}`` or
  ``{"error": {...}}``; in its strings, ``{authorization}`` becomes the request's
  ``Authorization`` header, ``{token}`` the credentials after its scheme and ``{headers}``
  every request header as JSON (over HTTP);
  a tool without an entry answers its name as text;
* ``record``: a file each request is appended to (its method, params and headers), optional.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any


def _filled(value: Any, headers: Mapping[str, str]) -> Any:
    authorization = headers.get("authorization", "")
    token = authorization.partition(" ")[2]
    if isinstance(value, str):
        every = json.dumps(dict(headers))
        filled = value.replace("{authorization}", authorization).replace("{token}", token)
        return filled.replace("{headers}", every)
    if isinstance(value, list):
        return [_filled(v, headers) for v in value]
    if isinstance(value, dict):
        return {k: _filled(v, headers) for k, v in value.items()}
    return value


def answer(
    script: Mapping[str, Any], message: Mapping[str, Any], headers: Mapping[str, str]
) -> dict[str, Any] | None:
    """The JSON-RPC answer to ``message`` (``None`` for a notification or an answer)."""
    record = script.get("record")
    if record:
        with open(record, "a") as out:
            seen = {"method": message.get("method"), "params": message.get("params")}
            out.write(json.dumps({**seen, "headers": dict(headers)}) + "\n")
    method, request_id = message.get("method"), message.get("id")
    if method is None or request_id is None:
        return None
    params = message.get("params") or {}
    reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
    if method == "initialize":
        reply["result"] = {
            "protocolVersion": params["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "scripted", "version": "1"},
        }
    elif method == "tools/list":
        reply["result"] = {"tools": script.get("tools", [])}
    elif method == "tools/call":
        name = params["name"]
        scripted = script.get("calls", {}).get(name)
        if scripted is None:
            reply["result"] = {"content": [{"type": "text", "text": f"{name} ran"}]}
        else:
            reply.update(_filled(scripted, headers))
    elif method == "server/discover":
        reply["error"] = {"code": -32601, "message": "Method not found"}
    else:
        reply["result"] = {}
    return reply


def serve_http(script: Mapping[str, Any]) -> None:
    """Streamable HTTP on 127.0.0.1: each POSTed request answered as one SSE event."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, code: int, body: bytes = b"", kind: str = "text/plain") -> None:
            self.send_response(code)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._send(405)

        def do_DELETE(self) -> None:
            self._send(200)

        def do_POST(self) -> None:
            message = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
            headers = {k.lower(): v for k, v in self.headers.items()}
            reply = answer(script, message, headers)
            if reply is None:
                self._send(202)
            else:
                event = f"event: message\ndata: {json.dumps(reply)}\n\n".encode()
                self._send(200, event, "text/event-stream")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    sys.stdout.write(f"{server.server_address[1]}\n")
    sys.stdout.flush()
    server.serve_forever()


def main() -> None:
    with open(sys.argv[1]) as file:
        script = json.load(file)
    if sys.argv[2:] == ["http"]:
        serve_http(script)
        return
    for line in sys.stdin:
        reply = answer(script, json.loads(line), {})
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
