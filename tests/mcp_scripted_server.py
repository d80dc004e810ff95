"""An MCP server scripted by a JSON file, for the client's security tests: raw JSON-RPC, no
SDK, so a test decides exactly what each listing and call answers.

Run: python tests/mcp_scripted_server.py SCRIPT.json (stdio), or import `answer` and serve it
over HTTP (the test does, to see the request headers).

The script is a JSON object:

* ``tools``: the ``tools/list`` answer's tools, as written (one page);
* ``calls``: tool name -> what ``tools/call`` answers: ``{"result": {...}}`` or
  ``{"error": {...}}``; in its strings, ``{authorization}`` becomes the request's
  ``Authorization`` header and ``{token}`` the credentials after its scheme (over HTTP);
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
        return value.replace("{authorization}", authorization).replace("{token}", token)
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


def main() -> None:
    with open(sys.argv[1]) as file:
        script = json.load(file)
    for line in sys.stdin:
        reply = answer(script, json.loads(line), {})
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
