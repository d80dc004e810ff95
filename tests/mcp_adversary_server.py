"""A hostile MCP server scripted by a JSON file, for the adversary probes: raw JSON-RPC, no SDK,
over stdio, streamable HTTP or the older SSE transport, so a probe decides exactly what each
listing and call answers, what it sends first and how the transport misbehaves.

Run: python tests/mcp_adversary_server.py SCRIPT.json [stdio | http PORT | sse PORT]

The script is a JSON object:

* ``capabilities``: the ``initialize`` answer's capabilities (default ``{"tools": {}}``);
* ``pages``: the ``tools/list`` pages, each ``{"tools": [...], "nextCursor": ...}``, the first
  answered to a request without a cursor, page ``i`` to the cursor ``"p<i>"`` unless the page
  says its own ``cursor``; or ``tools``: one page;
* ``calls``: tool name -> a list of steps, run in order for each ``tools/call``:
  ``{"notify": {"method", "params"}}`` (in params, the string ``"{progressToken}"`` becomes the
  call's progress token), ``{"request": {"method", "params"}}`` (a request of the server's own;
  its answer is recorded, and becomes ``{answer}`` in a later step's strings, as JSON text),
  ``{"sleep": seconds}``, ``{"result": {...}}``, ``{"error": {...}}``, ``{"silent": true}``
  (nothing more, ever), ``{"status": 500}`` (HTTP only: that status, no body),
  ``{"redirect": URL}`` (HTTP only: a 307 to URL), ``{"forever": true}`` (HTTP only: an event
  stream of comments that never ends);
  a tool without an entry answers its name as text; in the strings of a result or error,
  ``{header:NAME}`` becomes that request header (over HTTP);
* ``methods``: method -> a list of answers (``{"result"}`` or ``{"error"}``), one per request
  of that method, the last repeated (``tasks/get``, ``tasks/result``, ...);
* ``silent``: methods never answered (``initialize``, say);
* ``record``: a file each message received is appended to (its method, id, params, result,
  error and headers), optional;
* ``sse_endpoint``: over SSE, the endpoint URL announced instead of this server's own.
"""

from __future__ import annotations

import json
import queue
import sys
import threading
import time
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SCRIPT: dict[str, Any] = {}
LOCK = threading.Lock()
ANSWERS: dict[Any, Any] = {}  # the client's answers to the server's own requests, by id
ANSWERED = threading.Condition(LOCK)
SERVED: dict[str, int] = {}  # how many requests of each method were answered
NEXT_ID = [1000]


def record(message: Mapping[str, Any], headers: Mapping[str, str]) -> None:
    path = SCRIPT.get("record")
    if not path:
        return
    seen = {k: message.get(k) for k in ("method", "id", "params", "result", "error")}
    with LOCK, open(path, "a") as out:
        out.write(json.dumps({**seen, "headers": dict(headers)}) + "\n")


def filled(value: Any, names: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        for key, text in names.items():
            value = value.replace("{" + key + "}", text)
        return value
    if isinstance(value, list):
        return [filled(v, names) for v in value]
    if isinstance(value, dict):
        return {k: filled(v, names) for k, v in value.items()}
    return value


def token_filled(value: Any, token: Any) -> Any:
    if value == "{progressToken}":
        return token
    if isinstance(value, list):
        return [token_filled(v, token) for v in value]
    if isinstance(value, dict):
        return {k: token_filled(v, token) for k, v in value.items()}
    return value


def listing(params: Mapping[str, Any]) -> dict[str, Any]:
    pages = SCRIPT.get("pages") or [{"tools": SCRIPT.get("tools", [])}]
    cursor = params.get("cursor")
    if cursor is None:
        page = pages[0]
    else:
        found = [p for i, p in enumerate(pages) if p.get("cursor", f"p{i}") == cursor]
        page = found[0] if found else {"tools": []}
    return {k: v for k, v in page.items() if k != "cursor"}


def await_answer(request_id: Any, seconds: float = 30) -> Any:
    deadline = time.monotonic() + seconds
    with ANSWERED:
        while request_id not in ANSWERS:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ANSWERED.wait(left)
        return ANSWERS.pop(request_id)


class Exchange:
    """One request's way back to the client: ``send`` a message on its stream."""

    def __init__(self, send: Callable[[dict[str, Any]], None]) -> None:
        self.send = send
        self.http: dict[str, Any] | None = None  # an HTTP-only step, for the transport


def serve_request(message: Mapping[str, Any], headers: Mapping[str, str], out: Exchange) -> None:
    """Answer one request of the client, on ``out``."""
    method, request_id = message.get("method"), message.get("id")
    params = message.get("params") or {}
    reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
    names = {f"header:{k.lower()}": v for k, v in headers.items()}
    if method in SCRIPT.get("silent", []):
        return  # never answered
    with LOCK:
        count = SERVED.get(str(method), 0)
        SERVED[str(method)] = count + 1
    if method in SCRIPT.get("methods", {}):
        answers = SCRIPT["methods"][method]
        reply.update(filled(answers[min(count, len(answers) - 1)], names))
    elif method == "initialize":
        reply["result"] = {
            "protocolVersion": params.get("protocolVersion", "2025-11-25"),
            "capabilities": SCRIPT.get("capabilities", {"tools": {}}),
            "serverInfo": {"name": "adversary", "version": "1"},
        }
    elif method == "tools/list":
        reply["result"] = listing(params)
    elif method == "tools/call":
        name = params.get("name")
        token = (params.get("_meta") or {}).get("progressToken")
        steps = SCRIPT.get("calls", {}).get(name)
        if steps is None:
            reply["result"] = {"content": [{"type": "text", "text": f"{name} ran"}]}
        for step in steps or []:
            if "notify" in step:
                note = token_filled(step["notify"], token)
                out.send({"jsonrpc": "2.0", **filled(note, names)})
            elif "request" in step:
                with LOCK:
                    NEXT_ID[0] += 1
                    own = NEXT_ID[0]
                out.send({"jsonrpc": "2.0", "id": own, **step["request"]})
                answer = await_answer(own)
                names = {**names, "answer": json.dumps(answer)}
            elif "sleep" in step:
                time.sleep(step["sleep"])
            elif "silent" in step:
                return
            elif "result" in step or "error" in step:
                reply.update(filled(step, names))
            else:
                out.http = step
                return
    elif method == "server/discover":
        reply["error"] = {"code": -32601, "message": "Method not found"}
    else:
        reply["result"] = {}
    out.send(reply)


def take_answer(message: Mapping[str, Any]) -> bool:
    """Keep the client's answer to a request of ours; whether ``message`` was one."""
    if "method" in message or "id" not in message:
        return False
    with ANSWERED:
        ANSWERS[message["id"]] = {k: message[k] for k in ("result", "error") if k in message}
        ANSWERED.notify_all()
    return True


# -- stdio -------------------------------------------------------------------------------------


def stdio() -> None:
    write_lock = threading.Lock()

    def send(message: dict[str, Any]) -> None:
        with write_lock:
            sys.stdout.write(json.dumps(message) + "\n")
            sys.stdout.flush()

    for line in sys.stdin:
        message = json.loads(line)
        record(message, {})
        if take_answer(message) or message.get("id") is None:
            continue
        threading.Thread(
            target=serve_request, args=(message, {}, Exchange(send)), daemon=True
        ).start()


# -- streamable HTTP and SSE -------------------------------------------------------------------

SESSIONS: dict[str, queue.Queue[dict[str, Any] | None]] = {}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _headers(self) -> dict[str, str]:
        return {k.lower(): v for k, v in self.headers.items()}

    def _empty(self, status: int, extra: Mapping[str, str] | None = None) -> None:
        self.send_response(status)
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_DELETE(self) -> None:
        self._empty(200)

    def do_GET(self) -> None:
        if not self.path.startswith("/sse"):
            self._empty(405)  # no stream of the server's own over streamable HTTP
            return
        session = f"s{len(SESSIONS) + 1}"
        stream: queue.Queue[dict[str, Any] | None] = queue.Queue()
        SESSIONS[session] = stream
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        host = self.headers.get("host", "127.0.0.1")
        endpoint = SCRIPT.get("sse_endpoint") or f"http://{host}/messages?session_id={session}"
        try:
            self.wfile.write(f"event: endpoint\ndata: {endpoint}\n\n".encode())
            self.wfile.flush()
            while True:
                try:
                    message = stream.get(timeout=15)
                except queue.Empty:
                    self.wfile.write(b": ping\n\n")
                    self.wfile.flush()
                    continue
                if message is None:
                    return
                self.wfile.write(f"event: message\ndata: {json.dumps(message)}\n\n".encode())
                self.wfile.flush()
        except OSError:
            return

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        message = json.loads(self.rfile.read(length))
        headers = self._headers()
        record(message, headers)
        if self.path.startswith("/messages"):
            self._sse_post(message, headers)
            return
        if take_answer(message) or message.get("id") is None:
            self._empty(202)
            return
        self._streamed(message, headers)

    def _sse_post(self, message: dict[str, Any], headers: dict[str, str]) -> None:
        session = self.path.partition("session_id=")[2]
        stream = SESSIONS.get(session)
        if stream is None:
            self._empty(404)
            return
        if take_answer(message) or message.get("id") is None:
            self._empty(202)
            return
        steps = SCRIPT.get("calls", {}).get((message.get("params") or {}).get("name")) or []
        refused = [s["status"] for s in steps if "status" in s]
        if message.get("method") == "tools/call" and refused:
            self._empty(int(refused[0]))  # the POST itself is refused; nothing on the stream
            return
        self._empty(202)
        out = Exchange(stream.put)
        threading.Thread(target=serve_request, args=(message, headers, out), daemon=True).start()

    def _streamed(self, message: dict[str, Any], headers: dict[str, str]) -> None:
        """Answer a request on an event stream of its own (notifications and requests of the
        server first, then the answer), unless a step decides the HTTP answer itself."""
        events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        out = Exchange(events.put)

        def run() -> None:
            serve_request(message, headers, out)
            events.put(None)

        threading.Thread(target=run, daemon=True).start()
        first = events.get()
        if first is None and out.http is not None:
            self._http_step(out.http)
            return
        if first is None:  # silent: hold the request open, answer nothing
            time.sleep(3600)
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("mcp-session-id", "adversary-session")
        self.end_headers()
        try:
            message_out: dict[str, Any] | None = first
            while message_out is not None:
                self.wfile.write(f"event: message\ndata: {json.dumps(message_out)}\n\n".encode())
                self.wfile.flush()
                message_out = events.get()
            if out.http is not None:
                self._http_step(out.http, streaming=True)
        except OSError:
            return
        self.close_connection = True

    def _http_step(self, step: Mapping[str, Any], streaming: bool = False) -> None:
        if "status" in step and not streaming:
            self._empty(int(step["status"]))
        elif "redirect" in step and not streaming:
            self._empty(307, {"location": step["redirect"]})
        elif "forever" in step:
            if not streaming:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
            try:
                while True:
                    self.wfile.write(b": still thinking\n\n")
                    self.wfile.flush()
                    time.sleep(0.05)
            except OSError:
                return


def main() -> None:
    with open(sys.argv[1]) as file:
        SCRIPT.update(json.load(file))
    transport = sys.argv[2] if len(sys.argv) > 2 else "stdio"
    if transport == "stdio":
        stdio()
        return
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[3])), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
