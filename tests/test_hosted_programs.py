"""Provider-hosted programs (``create_client(hosted_code=True)``): Anthropic's code execution
with ``allowed_callers`` and OpenAI's programmatic tool calling, against a scripted endpoint on
127.0.0.1 (``responses_endpoint.Endpoint``) that runs a program pausing on N calls per step.

The endpoint enforces each protocol: the container id on every later request (Anthropic), the
assistant turn replayed verbatim with its ``server_tool_use`` block, a reply of only text
``tool_result`` blocks; the ``program`` item replayed with its fingerprint and each output
carrying its call's ``caller`` (OpenAI). A run that ends ``done`` with
``endpoint.rejections == []`` spoke the protocol as the provider requires.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import dataclasses
import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from responses_endpoint import CODE_EXECUTION, CONTAINER_REQUIRED, Endpoint, Step, hosted_program
from toolnexus import Tool, ToolHints, tool
from toolnexus.client import RunResult, create_client
from toolnexus.errors import ConfigurationError
from toolnexus.tools import ToolHooks
from toolnexus.tools.relay import relay_tool

PROVIDERS = ["anthropic", "responses"]
CAP = 4


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    """The scripted endpoint on 127.0.0.1 (Messages and Responses)."""
    server = Endpoint().start()
    yield server
    server.stop()


def client_for(endpoint: Endpoint, provider: str, **options: Any) -> Any:
    options.setdefault("code_mode", "native")
    options.setdefault("hosted_code", True)
    base = endpoint.url + ("/v1" if provider == "responses" else "")
    return create_client(style=provider, base_url=base, model="m", api_key="none", **options)


async def run(
    client: Any, prompt: str, *, stream: bool, calls: list[Any] | None = None, **kwargs: Any
) -> RunResult:
    """A run, or a stream to its end (``calls`` then collects each announced ``ToolCall``)."""
    if not stream:
        result: RunResult = await client.run(prompt, **kwargs)
        return result
    async for event in client.stream(prompt, **kwargs):
        if event.type == "tool_call" and calls is not None:
            calls.append(event.call)
        if event.type == "done":
            done: RunResult = event.result
    return done


class Lane:
    """Hosted read and write tools that record what ran together.

    The reads of a group (``args["group"]``, of ``args["size"]`` reads) wait until
    ``min(cap, size)`` of them are in flight before the first finishes, so the peak reaches the
    cap whenever the lane admits that many, streamed or not, and exceeds it if the lane lets
    more in; a lane that admits fewer stalls (a 5 s guard) and the read fails.
    """

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.active: set[str] = set()
        self.peak = 0
        self.log: list[tuple[str, str]] = []
        self.overlaps: list[tuple[str, frozenset[str]]] = []  # a write that had company
        self.writing: str | None = None
        self.groups: dict[str, asyncio.Event] = {}

    def starts(self) -> list[str]:
        return [key for kind, key in self.log if kind == "start"]

    def _enter(self, key: str, write: bool) -> None:
        if self.writing is not None or (write and self.active):
            self.overlaps.append((key, frozenset(self.active)))
        self.active.add(key)
        if write:
            self.writing = key
        self.peak = max(self.peak, len(self.active))
        self.log.append(("start", key))

    def _leave(self, key: str) -> None:
        self.active.discard(key)
        if self.writing == key:
            self.writing = None
        self.log.append(("end", key))

    def tools(self, callers: tuple[str, ...] = ("hosted",)) -> list[Tool]:
        lane = self

        async def read(args: dict[str, Any]) -> str:
            key = str(args["id"])
            lane._enter(key, write=False)
            try:
                group = str(args.get("group", key))
                released = lane.groups.setdefault(group, asyncio.Event())
                in_group = [k for k in lane.active if k.startswith(group + ".")]
                if len(in_group) >= min(lane.cap, int(args.get("size", 1))):
                    released.set()
                await asyncio.wait_for(released.wait(), 5)
                await asyncio.sleep(0)
                return f"read {key}"
            finally:
                lane._leave(key)

        async def write(args: dict[str, Any]) -> str:
            key = str(args["id"])
            lane._enter(key, write=True)
            try:
                await asyncio.sleep(0)
                await asyncio.sleep(0)
                if args.get("fail"):
                    raise RuntimeError(str(args["fail"]))
                return f"wrote {key}"
            finally:
                lane._leave(key)

        return [
            Tool("read", "Read a record.", {"type": "object"}, execute=read,
                 hints=ToolHints(read_only=True), callers=callers),
            Tool("write", "Write a record.", {"type": "object"}, execute=write,
                 hints=ToolHints(read_only=False), callers=callers),
        ]  # fmt: skip


def step_calls(step: int, reads: int = 20, writes: int = 2) -> list[tuple[str, Any]]:
    """One program step: ``reads`` reads split in ``writes`` groups, each group followed by a
    write (reads, write, reads, write)."""
    calls: list[tuple[str, Any]] = []
    per_group = reads // writes
    for group in range(writes):
        name = f"s{step}g{group}"
        for n in range(per_group):
            calls.append(("read", {"id": f"{name}.{n}", "group": name, "size": per_group}))
        calls.append(("write", {"id": f"s{step}w{group}"}))
    return calls


def tool_results(body: dict[str, Any], provider: str) -> list[dict[str, Any]]:
    """The results a request sends back for the last step: ``{id, text, error}`` each."""
    if provider == "responses":
        items = body["input"]
        start = len(items)
        while start and items[start - 1].get("type") == "function_call_output":
            start -= 1
        return [
            {
                "id": i["call_id"],
                "text": i["output"],
                "error": i["output"].startswith("Error: "),
                "caller": i.get("caller"),
            }
            for i in items[start:]
        ]
    last = body["messages"][-1]
    out = []
    for block in last["content"]:
        if block.get("type") != "tool_result":
            continue
        content = block.get("content", "")
        text = content if isinstance(content, str) else "".join(p["text"] for p in content)
        out.append({"id": block["tool_use_id"], "text": text, "error": bool(block.get("is_error"))})
    return out


def logged_callers(result: RunResult) -> list[Any]:
    """The caller of each call in the session log's assistant messages, in order."""
    return [
        call.get("caller")
        for event in result.session.events
        if event.type == "assistant_message"
        for call in event.data["tool_calls"]
    ]


def program_caller(endpoint: Endpoint, provider: str) -> dict[str, Any]:
    """The caller the endpoint's (first) program gives its calls."""
    first = endpoint.replies[0]
    if provider == "responses":
        (program,) = [i for i in first["output"] if i["type"] == "program"]
        return {"type": "program", "caller_id": program["call_id"]}
    (server,) = [b for b in first["content"] if b["type"] == "server_tool_use"]
    return {"type": CODE_EXECUTION, "tool_id": server["id"]}


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_three_step_program_runs_its_calls_through_the_lane(
    endpoint: Endpoint, provider: str, stream: bool
) -> None:
    lane = Lane(CAP)
    steps = [step_calls(n) for n in range(3)]
    endpoint.script(*hosted_program(steps, result="total", text="all written"))
    client = client_for(endpoint, provider, max_parallel=CAP)
    announced: list[Any] = []
    result = await run(client, "go", stream=stream, calls=announced, tools=lane.tools())
    assert endpoint.rejections == []
    assert (result.status, result.text) == ("done", "all written")
    assert lane.peak == CAP  # 10 reads at a time are possible: the cap holds them to 4
    assert lane.overlaps == []  # each write alone
    for number, calls in enumerate(steps):
        names = [args["id"] for _, args in calls]
        for position, (name, args) in enumerate(calls):
            if name != "write":
                continue
            start = lane.log.index(("start", args["id"]))
            for earlier in names[:position]:  # after every call emitted before it
                assert lane.log.index(("end", earlier)) < start
            for later in names[position + 1 :]:
                assert lane.log.index(("start", later)) > lane.log.index(("end", args["id"]))
        assert endpoint.result_orders[number] == endpoint.emitted[number]  # emitted order
        sent = tool_results(endpoint.requests[number + 1], provider)
        assert [r["id"] for r in sent] == endpoint.emitted[number]
        assert [r["text"] for r in sent] == [
            f"{'wrote' if name == 'write' else 'read'} {args['id']}" for name, args in calls
        ]
    # the program got every result, in the order it made the calls
    assert endpoint.finished == [
        [f"{'wrote' if n == 'write' else 'read'} {a['id']}" for step in steps for n, a in step]
    ]
    caller = program_caller(endpoint, provider)
    assert logged_callers(result) == [caller] * 66
    if stream:  # each ToolCall as it was announced carries its caller
        assert [call.caller for call in announced] == [caller] * 66
    if provider == "anthropic":  # one container throughout
        (container,) = endpoint.issued_containers
        assert endpoint.containers == [None, container, container, container]
    else:
        for body in endpoint.requests[1:]:
            assert all(r["caller"] == caller for r in tool_results(body, provider))
    assert result.usage.input_tokens == sum(u["input"] for u in endpoint.usages)
    assert result.usage.output_tokens == sum(u["output"] for u in endpoint.usages)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_hosted_code_offers_each_tool_to_its_callers(
    endpoint: Endpoint, provider: str
) -> None:
    @tool(hints=ToolHints(read_only=True), callers=("direct", "hosted"))
    def both(key: str) -> str:
        """Either may call it."""
        return key

    @tool(hints=ToolHints(read_only=True))
    def direct_only(key: str) -> str:
        """Only the model calls it."""
        return key

    lane = Lane(CAP)
    endpoint.script(Step(text="nothing to do"))
    await client_for(endpoint, provider).run("go", tools=[*lane.tools(), both, direct_only])
    tools = endpoint.requests[0]["tools"]
    hosted = CODE_EXECUTION if provider == "anthropic" else "programmatic"
    by_name = {t["name"]: t.get("allowed_callers") for t in tools if t.get("name") in (
        "read", "write", "both", "direct_only")}  # fmt: skip
    assert by_name["read"] == by_name["write"] == [hosted]
    assert sorted(by_name["both"]) == sorted(["direct", hosted])
    assert by_name["direct_only"] in (None, ["direct"])
    if provider == "anthropic":
        assert {"type": CODE_EXECUTION, "name": "code_execution"} in tools
    else:
        assert {"type": "programmatic_tool_calling"} in tools

    endpoint.script(Step(text="plain"))
    await client_for(endpoint, provider, hosted_code=False).run("go", tools=[both])
    plain = json.dumps(endpoint.requests[1]["tools"])
    assert "allowed_callers" not in plain and "code_execution" not in plain
    assert "programmatic" not in plain


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_mixed_turn_runs_a_direct_call_and_the_programs_calls_together(
    endpoint: Endpoint, provider: str, spans: InMemorySpanExporter
) -> None:
    seen: list[str] = []

    @tool(hints=ToolHints(read_only=True))
    def lookup(key: str) -> str:
        """Look something up (the model calls it itself)."""
        seen.append(key)
        return key.upper()

    lane = Lane(CAP)
    reads = [("read", {"id": f"g.{n}", "group": "g", "size": 3}) for n in range(3)]
    endpoint.script(
        *hosted_program([reads, [("write", {"id": "w"})]], direct=[("lookup", {"key": "k"})])
    )
    result = await client_for(endpoint, provider).run("go", tools=[*lane.tools(), lookup])
    assert endpoint.rejections == [] and result.status == "done"
    assert seen == ["k"] and lane.overlaps == []
    sent = tool_results(endpoint.requests[1], provider)
    assert [r["text"] for r in sent] == ["K", "read g.0", "read g.1", "read g.2"]
    caller = program_caller(endpoint, provider)
    assert logged_callers(result) == [None, caller, caller, caller, caller]
    if provider == "responses":
        assert [r["caller"] for r in sent] == [None, caller, caller, caller]
    # each tool span says who made the call: the program (by its id), or nobody for a direct one
    program_id = caller.get("tool_id") or caller.get("caller_id")
    noted = {
        s.attributes["gen_ai.tool.call.id"]: s.attributes.get("toolnexus.call.caller")
        for s in spans.get_finished_spans()
        if s.name.startswith("execute_tool") and s.attributes is not None
    }
    direct, *hosted = endpoint.emitted[0]
    assert noted[direct] is None
    assert all(program_id in str(noted[call]) for call in hosted)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_failing_hosted_call_goes_back_as_a_failure_and_the_program_goes_on(
    endpoint: Endpoint, provider: str
) -> None:
    lane = Lane(CAP)
    endpoint.script(
        *hosted_program(
            [
                [("write", {"id": "w1", "fail": "disk on fire"}), ("write", {"id": "w2"})],
                [("write", {"id": "w3"})],
            ]
        )
    )
    result = await client_for(endpoint, provider).run("go", tools=lane.tools())
    assert endpoint.rejections == [] and result.status == "done"
    failed, ok = tool_results(endpoint.requests[1], provider)
    assert failed["error"] and "disk on fire" in failed["text"]
    if provider == "responses":  # no error flag on the item: the text says so
        assert failed["text"].startswith("Error: ")
    assert (ok["error"], ok["text"]) == (False, "wrote w2")
    assert lane.starts() == ["w1", "w2", "w3"]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_hosted_call_past_the_deadline_is_answered_as_failed(
    endpoint: Endpoint, provider: str
) -> None:
    release = asyncio.Event()

    @tool(hints=ToolHints(read_only=True), callers=("hosted",))
    async def slow(key: str) -> str:
        """Takes as long as it takes."""
        await release.wait()
        return key

    @tool(hints=ToolHints(read_only=True), callers=("hosted",))
    async def quick(key: str) -> str:
        """Answers at once."""
        return key.upper()

    endpoint.script(
        *hosted_program(
            [[("slow", {"key": "s"}), ("quick", {"key": "q"})], [("quick", {"key": "r"})]]
        )
    )
    client = client_for(endpoint, provider, hosted_call_timeout=0.5)
    try:
        result = await client.run("go", tools=[slow, quick])
    finally:
        release.set()
    assert endpoint.rejections == [] and result.status == "done"
    late, fine = tool_results(endpoint.requests[1], provider)
    assert late["error"] and re.search(r"deadline|did not finish|0\.5", late["text"])
    assert (fine["error"], fine["text"]) == (False, "Q")
    assert endpoint.finished[0][-1] == "R"  # the program carried on


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_per_tool_timeout_holds_for_hosted_calls(endpoint: Endpoint, provider: str) -> None:
    release = asyncio.Event()

    async def hang(args: dict[str, Any]) -> str:
        await release.wait()
        return "late"

    hung = Tool("hang", "Hangs.", {"type": "object"}, execute=hang,
                hints=ToolHints(read_only=True), timeout=0.3, callers=("hosted",))  # fmt: skip
    endpoint.script(*hosted_program([[("hang", {})]]))
    try:
        result = await client_for(endpoint, provider).run("go", tools=[hung])
    finally:
        release.set()
    assert endpoint.rejections == [] and result.status == "done"
    (late,) = tool_results(endpoint.requests[1], provider)
    assert late["error"] and "did not finish within" in late["text"]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_hosted_calls_ask_for_approval_and_run_the_hooks(
    endpoint: Endpoint, provider: str
) -> None:
    ran: list[str] = []
    asked: list[Any] = []
    hooked: list[str] = []

    @tool(requires_approval=True, callers=("hosted",))
    def delete(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return f"deleted {path}"

    def approve(name: str, args: Any) -> bool:
        asked.append((name, args))
        return bool(args["path"] != "keep.txt")

    def before(name: str, args: Any, ctx: Any) -> None:
        hooked.append(f"{name}:{args['path']}")

    endpoint.script(
        *hosted_program([[("delete", {"path": "keep.txt"}), ("delete", {"path": "tmp.txt"})]])
    )
    client = client_for(
        endpoint, provider, approval_handler=approve, hooks=ToolHooks(before=[before])
    )
    result = await client.run("go", tools=[delete])
    assert endpoint.rejections == [] and result.status == "done"
    assert asked == [("delete", {"path": "keep.txt"}), ("delete", {"path": "tmp.txt"})]
    assert ran == ["tmp.txt"] and hooked == ["delete:tmp.txt"]
    denied, done = tool_results(endpoint.requests[1], provider)
    assert denied["error"] and not done["error"] and done["text"] == "deleted tmp.txt"


@pytest.mark.parametrize("stream", [False, True])
async def test_a_pause_turn_is_sent_back_as_it_is_in_the_same_container(
    endpoint: Endpoint, stream: bool
) -> None:
    lane = Lane(CAP)
    steps = [step_calls(n, reads=4, writes=1) for n in range(2)]
    endpoint.script(*hosted_program(steps, pause_turn_after=0))
    result = await run(client_for(endpoint, "anthropic"), "go", stream=stream, tools=lane.tools())
    assert endpoint.rejections == [] and result.status == "done"
    (container,) = endpoint.issued_containers
    assert endpoint.containers == [None, container, container, container]
    paused = endpoint.replies[1]
    assert paused["stop_reason"] == "pause_turn"
    assert endpoint.requests[2]["messages"][-1]["content"] == paused["content"]


async def test_a_relay_tool_cannot_be_hosted(endpoint: Endpoint) -> None:
    pick = relay_tool("pick_color", "Ask the user for a color.")
    client = client_for(endpoint, "anthropic")
    with pytest.raises(ConfigurationError, match="relay"):  # noqa: PT012 - either may refuse it
        hosted = dataclasses.replace(pick, callers=("hosted",))
        await client.run("go", tools=[hosted])
    assert endpoint.requests == []


async def test_a_relay_call_beside_a_program_makes_the_run_pending_and_resume_answers_it(
    endpoint: Endpoint,
) -> None:
    lane = Lane(CAP)
    pick = relay_tool("pick_color", "Ask the user for a color.")
    reads = [("read", {"id": f"g.{n}", "group": "g", "size": 2}) for n in range(2)]
    endpoint.script(*hosted_program([reads, reads[:1]], direct=[("pick_color", {})]))
    client = client_for(endpoint, "responses")
    pending = await client.run("go", tools=[pick, *lane.tools()])
    assert pending.status == "pending" and len(endpoint.requests) == 1
    (call,) = pending.pending
    done = await client.resume(pending, {call.id: "teal"})
    assert endpoint.rejections == [] and done.status == "done"
    sent = tool_results(endpoint.requests[1], "responses")
    assert [r["text"] for r in sent] == ["teal", "read g.0", "read g.1"]
    assert endpoint.result_orders == endpoint.emitted


async def _post(url: str, body: dict[str, Any]) -> httpx.Response:
    async with httpx.AsyncClient() as raw:
        return await raw.post(url, json=body)


async def test_the_endpoint_answers_a_broken_anthropic_reply_with_an_error(
    endpoint: Endpoint,
) -> None:
    lane = Lane(CAP)
    endpoint.script(*hosted_program([[("read", {"id": "g.0", "group": "g"})]]))
    result = await client_for(endpoint, "anthropic").run("go", tools=lane.tools())
    assert endpoint.rejections == [] and result.status == "done"
    good = endpoint.requests[1]

    # replay the same conversation against a program paused at the same point
    rules = Endpoint().start()
    try:
        rules.script(*hosted_program([[("read", {"id": "g.0", "group": "g"})]]))
        url = rules.url + "/v1/messages"
        first = await _post(url, endpoint.requests[0])
        assert first.status_code == 200
        issued = first.json()
        reply = copy.deepcopy(good)
        reply["messages"][1]["content"] = issued["content"]
        reply["messages"][2]["content"][0]["tool_use_id"] = issued["content"][1]["id"]
        reply["container"] = issued["container"]["id"]

        no_container = {k: v for k, v in reply.items() if k != "container"}
        answer = await _post(url, no_container)
        assert answer.status_code == 400
        assert answer.json()["error"] == {
            "type": "invalid_request_error",
            "message": CONTAINER_REQUIRED,
        }
        altered = copy.deepcopy(reply)
        altered["messages"][1]["content"][0]["input"]["code"] += "\n"
        assert "server_tool_use" in (await _post(url, altered)).json()["error"]["message"]
        chatty = copy.deepcopy(reply)
        chatty["messages"][2]["content"].append({"type": "text", "text": "also"})
        answer = await _post(url, chatty)
        assert "only `tool_result` blocks" in answer.json()["error"]["message"]
        image = copy.deepcopy(reply)
        png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 60).decode()  # a valid image:
        image["messages"][2]["content"][0]["content"] = [  # only its place is wrong
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}}
        ]
        assert "only text" in (await _post(url, image)).json()["error"]["message"]
        assert len(rules.rejections) == 4
        assert (await _post(url, reply)).status_code == 200  # the client's own reply passes
    finally:
        rules.stop()
    unhosted = copy.deepcopy(endpoint.requests[0])
    for t in unhosted["tools"]:
        t.pop("allowed_callers", None)
    fresh = Endpoint().start()
    try:
        fresh.script(*hosted_program([[("read", {"id": "g.0"})]]))
        answer = await _post(fresh.url + "/v1/messages", unhosted)
        assert answer.status_code == 400 and "allowed_callers" in answer.text
    finally:
        fresh.stop()


async def test_the_endpoint_answers_a_broken_program_replay_with_an_error(
    endpoint: Endpoint,
) -> None:
    lane = Lane(CAP)
    endpoint.script(*hosted_program([[("read", {"id": "g.0", "group": "g"})]]))
    result = await client_for(endpoint, "responses").run("go", tools=lane.tools())
    assert endpoint.rejections == [] and result.status == "done"

    rules = Endpoint().start()
    try:
        rules.script(*hosted_program([[("read", {"id": "g.0", "group": "g"})]]))
        url = rules.url + "/v1/responses"
        first = await _post(url, endpoint.requests[0])
        output = first.json()["output"]
        reply = copy.deepcopy(endpoint.requests[1])
        reply["input"] = [reply["input"][0], *output]
        reply["input"].append(
            {
                "type": "function_call_output",
                "call_id": output[1]["call_id"],
                "output": "read g.0",
                "caller": output[1]["caller"],
            }
        )
        altered = copy.deepcopy(reply)
        altered["input"][1]["code"] = "return 1;"
        answer = await _post(url, altered)
        assert answer.status_code == 400 and "fingerprint" in answer.json()["error"]["message"]
        uncalled = copy.deepcopy(reply)
        del uncalled["input"][-1]["caller"]
        answer = await _post(url, uncalled)
        assert "caller" in answer.json()["error"]["message"]
        unhosted = copy.deepcopy(endpoint.requests[0])
        for t in unhosted["tools"]:
            t.pop("allowed_callers", None)
        fresh = Endpoint().start()
        try:
            fresh.script(*hosted_program([[("read", {"id": "g.0"})]]))
            answer = await _post(fresh.url + "/v1/responses", unhosted)
            assert answer.status_code == 400 and "allowed_callers" in answer.text
        finally:
            fresh.stop()
        assert len(rules.rejections) == 2
        assert (await _post(url, reply)).status_code == 200
    finally:
        rules.stop()


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_hosted_programs_calls_get_the_one_by_one_results(
    endpoint: Endpoint, provider: str
) -> None:
    # Stateful tools returning live objects (see tests/test_result_snapshot.py): what the
    # provider's program receives is each call's result as it was when the call finished.
    from test_result_snapshot import Store, calls_of, one_by_one, random_sequences

    for ops in random_sequences(3, seed=5):
        endpoint.requests.clear()
        calls = [(c.name, dict(c.arguments)) for c in calls_of(ops)]
        endpoint.script(*hosted_program([calls]))
        tools = [dataclasses.replace(t, callers=("hosted",)) for t in Store().tools()]
        client = client_for(endpoint, provider, max_parallel=CAP)
        result = await run(client, "go", stream=False, tools=tools)
        assert endpoint.rejections == []
        assert result.status == "done"
        sent = tool_results(endpoint.requests[1], provider)
        assert [json.loads(r["text"]) for r in sent] == one_by_one(ops)
