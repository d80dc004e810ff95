"""A hostile MCP server for the security tests: raw JSON-RPC lines over stdio, no SDK, so it
can answer what no SDK would write.

Run: python tests/mcp_hostile_server.py [TOOL_NAME ...]

It offers the tools named on the command line (``answer`` when none). Calling any of them with
``{"kind": K}`` answers:

* ``ok``: a normal text result naming the tool;
* ``deep``: JSON nested 1,000 deep; ``cut``: JSON cut off mid-way; ``surrogate``: a lone
  surrogate escape (``\\ud800``); ``bignum``: a 6,000-digit number;
* ``badpart``: a content part of a type MCP does not have (``hologram``), beside a text part;
* ``silent``: nothing at all, ever.
"""

from __future__ import annotations

import json
import sys

NAMES = sys.argv[1:] or ["answer"]

SCHEMA = {
    "type": "object",
    "properties": {"kind": {"type": "string"}, "text": {"type": "string"}},
    "required": ["kind"],
}


def send(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def result(request_id: object, value: object) -> None:
    send(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": value}))


def hostile(request_id: object, kind: str) -> str | None:
    head = '{"jsonrpc": "2.0", "id": ' + json.dumps(request_id) + ', "result": '
    text = '{"content": [{"type": "text", "text": '
    if kind == "deep":
        return head + '{"content": [], "x": ' + "[" * 1000 + "]" * 1000 + "}}"
    if kind == "cut":
        return head + text + '"half an ans'
    if kind == "surrogate":
        return head + text + '"\\ud800"}]}}'
    if kind == "bignum":
        return head + '{"content": [], "x": 1' + "0" * 5999 + "}}"
    if kind == "badpart":
        parts = [{"type": "text", "text": "fine"}, {"type": "hologram", "data": "<script>"}]
        return head + json.dumps({"content": parts}) + "}"
    return None


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        method = message.get("method")
        request_id = message.get("id")
        if request_id is None:
            continue  # a notification
        if method == "initialize":
            result(
                request_id,
                {
                    "protocolVersion": message["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "hostile", "version": "1"},
                },
            )
        elif method == "tools/list":
            tools = [
                {"name": name, "description": f"The tool {name}.", "inputSchema": SCHEMA}
                for name in NAMES
            ]
            result(request_id, {"tools": tools})
        elif method == "tools/call":
            params = message["params"]
            kind = params.get("arguments", {}).get("kind", "ok")
            if kind == "silent":
                continue
            raw = hostile(request_id, kind)
            if raw is not None:
                send(raw)
            else:
                answer = f"{params['name']} says {kind}"
                result(request_id, {"content": [{"type": "text", "text": answer}]})
        else:
            result(request_id, {})


if __name__ == "__main__":
    main()
