"""A scriptable MCP server for the client's tests: raw JSON-RPC lines over stdio, no SDK, so it
can page, answer and misbehave exactly as a test needs.

Run: python tests/mcp_raw_server.py MODE [RECORD_FILE]

MODE picks what ``tools/list`` does:

* ``paged``: 15 tools (``t00`` .. ``t14``) in pages of 5;
* ``endless``: a new cursor on every page, forever;
* ``cyclic``: pages whose cursors go a -> b -> a;
* ``emptycursor``: 15 tools in pages of 5, the last page with a ``nextCursor`` of ``""``
  (the end of the list, as some servers say it);
* ``plain``: one page;
* ``changing``: the tools ``v<version>`` (the list's version, from 0), ``bump`` and ``ping``;
  calling ``bump`` announces a change (``notifications/tools/list_changed``), and the next
  ``tools/list`` is answered late (after 0.5 s, or as soon as another ``tools/list`` has been
  answered), announcing another change meanwhile: an older answer comes after a newer one
  to a client that lists again at each announcement;
* ``changed_early``: as ``changing``, with a change announced as the first ``tools/list``
  (the client's, while it connects) is answered;
* ``storm``: 500 tools (``s000`` .. ``s499``) and ``storm``, which announces 200 changes, each
  of them of ``s000``'s description alone (``version <n>``);
* ``notasks``: one page, from a server that declares no ``tasks`` capability: it ignores a
  call's ``task`` field and answers every call plainly (``<name> ran``), as the 2025-11-25
  spec has such a server do.

Every mode offers, beside the listed tools, these calls (by tool name):

* ``parts``: one result with every kind of content part, annotations and ``_meta``;
* ``resources``: only embedded resources (text and blob);
* ``huge_image``: one 50 MB image part;
* ``passwd_link``: a ``resource_link`` to ``file:///etc/passwd``;
* ``structured``: ``structuredContent`` beside an image part;
* ``bad_images``: images a provider refuses (data that is valid base64 for its first 8,000
  characters only, zero bytes typed PNG, a BMP) between a text part and one real PNG;
* ``structured_note``: ``structuredContent`` beside its JSON mirror and a text that is not one;
* ``structured_mirrors``: ``structuredContent`` beside only mirrors of it (its JSON indented, a
  list's items one text part each, as the SDK's ``MCPServer`` writes them);
* ``task``: task-augmented (``taskSupport: required``), completes after two polls;
* ``task_forever``: a task that stays ``working``;
* ``task_no_result``: a task that reports ``completed`` and whose ``tasks/result`` is empty;
* ``task_optional``: ``taskSupport: optional``: as a task it completes after two polls
  (``task_optional done``), called plainly it answers at once (``task_optional ran``);
* ``task_plain``: ``taskSupport: optional``, answered plainly (``task_plain ran``) even when
  called as a task;
* ``task_progress``: a task (``taskSupport: required``) that sends a progress notification on
  the create request's ``progressToken`` before each ``tasks/get`` answer (1 of 2, 2 of 2);
* ``ask_password``: asks the client, by ``elicitation/create``, for a password field;
* ``ask_defaults``: asks for a form with defaults and returns what the client answered.

Each request the server receives is appended to RECORD_FILE (its method and params), when
given.
"""

from __future__ import annotations

import base64
import json
import sys
import threading

MODE = sys.argv[1] if len(sys.argv) > 1 else "plain"
RECORD = sys.argv[2] if len(sys.argv) > 2 else None
SCHEMA = {"type": "object", "properties": {}}
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 60).decode()

EXTRA = [
    "parts", "resources", "huge_image", "passwd_link", "structured", "ask_password",
    "ask_defaults", "bad_images", "structured_note", "structured_mirrors",
]  # fmt: skip
TASKS = ["task", "task_forever", "task_no_result"]
OPTIONAL_TASKS = ["task_optional", "task_plain"]
LATE_TASKS = ["task_progress"]  # in the one-page listings only


WRITING = threading.Lock()  # a late answer is written from a timer's thread


def send(message: dict[str, object]) -> None:
    with WRITING:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def result(request_id: object, value: object) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "result": value})


def record(message: dict[str, object]) -> None:
    if RECORD:
        with open(RECORD, "a") as out:
            out.write(
                json.dumps({"method": message.get("method"), "params": message.get("params")})
                + "\n"
            )


def tool(name: str) -> dict[str, object]:
    spec: dict[str, object] = {
        "name": name,
        "description": f"The tool {name}.",
        "inputSchema": SCHEMA,
    }
    if name in TASKS or name in LATE_TASKS:
        spec["execution"] = {"taskSupport": "required"}
    if name in OPTIONAL_TASKS:
        spec["execution"] = {"taskSupport": "optional"}
    return spec


class Relisting:
    """The tool list of the ``changing``, ``changed_early`` and ``storm`` modes, and its
    announced changes."""

    def __init__(self) -> None:
        self.version = 0
        self.lists = 0  # tools/list requests answered or held
        self.hold_next = False
        self.held: tuple[object, dict[str, object]] | None = None
        self.holding = threading.Lock()

    def page(self) -> dict[str, object]:
        if MODE == "storm":
            tools = [tool(f"s{i:03}") for i in range(500)] + [tool("storm")]
            tools[0]["description"] = f"version {self.version}"
        else:
            tools = [tool(f"v{self.version}"), tool("bump"), tool("ping")]
        return {"tools": tools}

    def change(self) -> None:
        self.version += 1
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})

    def answer(self, request_id: object) -> None:
        self.lists += 1
        page = self.page()
        if MODE == "changed_early" and self.lists == 1:
            self.change()  # before the first answer: the client is still connecting
        elif self.hold_next:
            self.hold_next = False
            self.held = (request_id, page)
            self.change()
            threading.Timer(0.5, self.release).start()
            return
        result(request_id, page)
        self.release()  # an older answer, after this newer one

    def release(self) -> None:
        with self.holding:
            held, self.held = self.held, None
        if held is not None:
            result(*held)

    def call(self, request_id: object, name: str) -> None:
        if name == "bump":
            self.hold_next = True
            self.change()
        elif name == "storm":
            for _ in range(200):
                self.change()
        result(request_id, {"content": [{"type": "text", "text": f"{name} ran"}]})


RELISTING = Relisting() if MODE in ("changing", "changed_early", "storm") else None


def listing(cursor: str | None) -> dict[str, object]:
    if MODE in ("paged", "emptycursor"):
        start = int(cursor or 0)
        names = [f"t{i:02}" for i in range(start, min(start + 5, 15))]
        page: dict[str, object] = {"tools": [tool(n) for n in names]}
        if start + 5 < 15:
            page["nextCursor"] = str(start + 5)
        elif MODE == "emptycursor":
            page["nextCursor"] = ""
        if start == 0:
            page["tools"] = [*page["tools"], *(tool(n) for n in [*EXTRA, *TASKS])]  # type: ignore[misc]
        return page
    if MODE == "endless":
        n = int(cursor or 0)
        return {"tools": [tool(f"e{n}")], "nextCursor": str(n + 1)}
    if MODE == "cyclic":
        return {
            "tools": [tool(f"c{cursor or 'start'}")],
            "nextCursor": "b" if cursor == "a" else "a",
        }
    names = ["t00", *EXTRA, *TASKS, *OPTIONAL_TASKS, *LATE_TASKS]
    return {"tools": [tool(n) for n in names]}


ANNOTATIONS = {"audience": ["user"], "priority": 0.5}


def content(name: str) -> dict[str, object]:
    if name == "parts":
        return {
            "content": [
                {"type": "text", "text": "hello", "annotations": ANNOTATIONS},
                {"type": "image", "data": PNG, "mimeType": "image/png", "_meta": {"k": 1}},
                {
                    "type": "audio",
                    "data": base64.b64encode(b"RIFF" + b"\0" * 40).decode(),
                    "mimeType": "audio/wav",
                },
                {
                    "type": "resource_link",
                    "uri": "https://example.com/r/1",
                    "name": "r1",
                    "mimeType": "text/plain",
                },
                {
                    "type": "resource",
                    "resource": {"uri": "mem://t", "mimeType": "text/plain", "text": "inner text"},
                },
                {
                    "type": "resource",
                    "resource": {
                        "uri": "mem://b",
                        "mimeType": "application/octet-stream",
                        "blob": base64.b64encode(b"\x01\x02").decode(),
                    },
                },
            ],
            "_meta": {"trace": "abc"},
        }
    if name == "resources":
        return {
            "content": [
                {
                    "type": "resource",
                    "resource": {"uri": "mem://t", "mimeType": "text/plain", "text": "only"},
                },
            ]
        }
    if name == "huge_image":
        data = "A" * (50 * 1024 * 1024 // 3 * 4)
        return {"content": [{"type": "image", "data": data, "mimeType": "image/png"}]}
    if name == "passwd_link":
        return {
            "content": [{"type": "resource_link", "uri": "file:///etc/passwd", "name": "passwd"}]
        }
    if name == "structured":
        return {
            "content": [{"type": "image", "data": PNG, "mimeType": "image/png"}],
            "structuredContent": {"answer": 42},
        }
    if name in CONTENT_PROBES:
        return CONTENT_PROBES[name]
    return {"content": [{"type": "text", "text": f"{name} ran"}]}


def _image(data: str, mime_type: str = "image/png") -> dict[str, object]:
    return {"type": "image", "data": data, "mimeType": mime_type}


CONTENT_PROBES: dict[str, dict[str, object]] = {
    "bad_images": {
        "content": [
            {"type": "text", "text": "four images:"},
            _image("A" * 8000 + "*AAA"),
            _image(base64.b64encode(bytes(64)).decode()),
            _image(base64.b64encode(b"BM" + bytes(62)).decode(), "image/bmp"),
            _image(PNG),
        ]
    },
    "structured_note": {
        "content": [
            {"type": "text", "text": json.dumps({"answer": 42}, indent=2)},
            {"type": "text", "text": "Note: 3 results were left out."},
        ],
        "structuredContent": {"answer": 42},
    },
    "structured_mirrors": {
        "content": [
            {"type": "text", "text": "a"},
            {"type": "text", "text": json.dumps({"b": 1.0}, indent=2)},
        ],
        "structuredContent": {"result": ["a", {"b": 1}]},
    },
}


def task(task_id: str, status: str) -> dict[str, object]:
    return {
        "taskId": task_id, "status": status, "createdAt": "2026-01-01T00:00:00Z",
        "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttl": 60000, "pollInterval": 10,
    }  # fmt: skip


def capabilities() -> dict[str, object]:
    declared: dict[str, object] = {"tools": {"listChanged": True}}
    if MODE != "notasks":
        declared["tasks"] = {"requests": {"tools": {"call": {}}}, "cancel": {}}
    return declared


def main() -> None:
    polls: dict[str, int] = {}
    tokens: dict[str, object] = {}  # a task's id -> the progressToken of the call creating it
    waiting: dict[str, object] = {}  # id of our elicitation request -> the call waiting on it
    for line in sys.stdin:
        message = json.loads(line)
        record(message)
        method = message.get("method")
        request_id = message.get("id")
        if method is None and request_id in waiting:  # the client's answer to our request
            call_id = waiting.pop(request_id)
            answer = message.get("result") or {"error": message.get("error")}
            result(call_id, {"content": [{"type": "text", "text": json.dumps(answer)}]})
            continue
        if request_id is None:
            continue  # a notification
        params = message.get("params") or {}
        if method == "initialize":
            result(request_id, {
                "protocolVersion": params["protocolVersion"],
                "capabilities": capabilities(),
                "serverInfo": {"name": "raw", "version": "1"},
            })  # fmt: skip
        elif method == "tools/list" and RELISTING is not None:
            RELISTING.answer(request_id)
        elif method == "tools/call" and RELISTING is not None:
            RELISTING.call(request_id, params["name"])
        elif method == "tools/list":
            result(request_id, listing(params.get("cursor")))
        elif method == "tools/call":
            name = params["name"]
            if MODE == "notasks" or name == "task_plain":
                result(request_id, content(name))
            elif name in OPTIONAL_TASKS and "task" in params:
                polls[name] = 0
                result(request_id, {"task": task(name, "working")})
            elif name in TASKS or name in LATE_TASKS:
                if "task" not in params:
                    send(
                        {
                            "jsonrpc": "2.0",
                            "id": request_id,
                            "error": {"code": -32601, "message": "requires task augmentation"},
                        }
                    )
                    continue
                polls[name] = 0
                tokens[name] = (params.get("_meta") or {}).get("progressToken")
                result(request_id, {"task": task(name, "working")})
            elif name in ("ask_password", "ask_defaults"):
                ours = f"ask-{request_id}"
                waiting[ours] = request_id
                schema: dict[str, object]
                if name == "ask_password":
                    schema = {
                        "type": "object",
                        "properties": {"password": {"type": "string", "format": "password"}},
                    }
                else:
                    schema = {"type": "object", "properties": {
                        "name": {"type": "string", "default": "Ada"},
                        "count": {"type": "integer", "default": 3},
                        "color": {"type": "string"},
                    }}  # fmt: skip
                send(
                    {
                        "jsonrpc": "2.0",
                        "id": ours,
                        "method": "elicitation/create",
                        "params": {"message": "Please answer", "requestedSchema": schema},
                    }
                )
            else:
                result(request_id, content(name))
        elif method == "tasks/get":
            task_id = params["taskId"]
            polls[task_id] = polls.get(task_id, 0) + 1
            done = task_id != "task_forever" and polls[task_id] >= 2
            if task_id == "task_progress" and tokens.get(task_id) is not None:
                progress = {
                    "progressToken": tokens[task_id],
                    "progress": polls[task_id],
                    "total": 2,
                }
                send({"jsonrpc": "2.0", "method": "notifications/progress", "params": progress})
            result(request_id, task(task_id, "completed" if done else "working"))
        elif method == "tasks/result":
            task_id = params["taskId"]
            result(
                request_id,
                {}
                if task_id == "task_no_result"
                else {"content": [{"type": "text", "text": f"{task_id} done"}]},
            )
        elif method == "tasks/cancel":
            result(request_id, task(params["taskId"], "cancelled"))
        else:
            result(request_id, {})


if __name__ == "__main__":
    main()
