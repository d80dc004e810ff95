"""An MCP server offering exactly what its command line says, for the gateway's hostile-upstream
tests: raw JSON-RPC lines over stdio, no SDK, so it can send what no SDK would.

Run: python tests/mcp_offer_server.py NAME [--tool T]... [--template T]... [--prompt P]...

It declares only the capabilities it has something for (``tools`` for ``--tool``,
``resources`` with ``listChanged`` for ``--template``, ``prompts`` with ``listChanged`` for
``--prompt``) and answers a method it does not serve with -32601, as the spec says. A read of
any URI answers ``"NAME read URI"``. Calling a tool with ``{"kind": K}`` answers:

* ``backwards``: progress 1, 3, 2, 2, 5 (of 5) on the call's ``progressToken``, then a result;
* ``changed``: ``notifications/resources/list_changed`` and
  ``notifications/prompts/list_changed``, then a result;
* anything else: ``"T says K"``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from mcp_hostile_server import SCHEMA, result, send

parser = argparse.ArgumentParser()
parser.add_argument("name")
parser.add_argument("--tool", action="append", default=[])
parser.add_argument("--template", action="append", default=[])
parser.add_argument("--prompt", action="append", default=[])
OFFER = parser.parse_args()


def capabilities() -> dict[str, Any]:
    offered: dict[str, Any] = {}
    if OFFER.tool:
        offered["tools"] = {}
    if OFFER.template:
        offered["resources"] = {"listChanged": True}
    if OFFER.prompt:
        offered["prompts"] = {"listChanged": True}
    return offered


def notify(method: str, params: dict[str, Any] | None = None) -> None:
    send(json.dumps({"jsonrpc": "2.0", "method": method, "params": params or {}}))


def call(request_id: object, params: dict[str, Any]) -> None:
    kind = (params.get("arguments") or {}).get("kind", "ok")
    token = (params.get("_meta") or {}).get("progressToken")
    if kind == "backwards" and token is not None:
        for progress in (1, 3, 2, 2, 5):
            step = {"progressToken": token, "progress": progress, "total": 5}
            notify("notifications/progress", {**step, "message": f"at {progress}"})
    if kind == "changed":
        notify("notifications/resources/list_changed")
        notify("notifications/prompts/list_changed")
    result(request_id, {"content": [{"type": "text", "text": f"{params['name']} says {kind}"}]})


def answer(request_id: object, method: str, params: dict[str, Any]) -> None:
    served = set(capabilities())
    if method == "initialize":
        result(request_id, {
            "protocolVersion": params["protocolVersion"],
            "capabilities": capabilities(),
            "serverInfo": {"name": OFFER.name, "version": "1"},
        })  # fmt: skip
    elif method == "ping":
        result(request_id, {})
    elif method == "tools/list" and "tools" in served:
        tools = [
            {"name": t, "description": f"The tool {t}.", "inputSchema": SCHEMA} for t in OFFER.tool
        ]
        result(request_id, {"tools": tools})
    elif method == "tools/call" and "tools" in served:
        call(request_id, params)
    elif method == "resources/list" and "resources" in served:
        result(request_id, {"resources": []})
    elif method == "resources/templates/list" and "resources" in served:
        listed = [{"uriTemplate": t, "name": f"template {t}"} for t in OFFER.template]
        result(request_id, {"resourceTemplates": listed})
    elif method == "resources/read" and "resources" in served:
        uri = params["uri"]
        text = f"{OFFER.name} read {uri}"
        result(request_id, {"contents": [{"uri": uri, "mimeType": "text/plain", "text": text}]})
    elif method == "prompts/list" and "prompts" in served:
        result(
            request_id, {"prompts": [{"name": p, "description": "A prompt."} for p in OFFER.prompt]}
        )
    else:
        error = {"code": -32601, "message": f"{OFFER.name} does not serve {method}"}
        send(json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}))


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        if "method" in message and "id" in message:
            answer(message["id"], message["method"], message.get("params") or {})


if __name__ == "__main__":
    main()
