"""Property: a call's result is what its tool returned when it finished, on every path.

Stateful tools (a benchmark's trading and file-system tools do this) return live objects:
``{"items": self.items}``. A read that finishes before a later write must read as it was when it
finished, whoever reads it and whenever: the model's text, the run's records, a program's value,
the session log. Random sequences of reads and writes on shared mutable state, with random
small delays, run through each path (``run_batch``, ``client.run``, Monty's ``gather``, V8's
``Promise.all``, the durable batch, the gateway's ``run_code`` and a provider-hosted program)
must give exactly the results of the same calls run one by one in order.
"""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolnexus import Tool, ToolCall, ToolHints, run_batch
from toolnexus.client import create_client
from toolnexus.codemode import run_program
from toolnexus.codemode.runtimes import MontyRuntime, V8Runtime
from toolnexus.session import Session
from toolnexus.testing import FunctionModel

KEYS = ("a", "b")
DELAYS = (0.0, 0.0, 0.001, 0.003)
"""Per-call delays: none (the call finishes in its first step), or a short sleep."""

OP = st.tuples(st.booleans(), st.sampled_from(KEYS), st.sampled_from(DELAYS))
"""One call: a write?, its key, its delay."""
SEQUENCE = st.lists(OP, min_size=1, max_size=10)

READ_SCHEMA = {
    "type": "object",
    "properties": {"key": {"type": "string"}, "delay": {"type": "number"}},
    "required": ["key"],
}
WRITE_SCHEMA = {
    "type": "object",
    "properties": {
        "key": {"type": "string"},
        "n": {"type": "integer"},
        "delay": {"type": "number"},
    },
    "required": ["key", "n"],
}


@dataclass
class Store:
    """Shared mutable state whose tools return it live, as a benchmark's stateful tools do."""

    items: dict[str, list[int]] = field(default_factory=lambda: {k: [] for k in KEYS})

    async def _after(self, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)

    def read_now(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"key": args["key"], "items": self.items[args["key"]], "all": self.items}

    def write_now(self, args: dict[str, Any]) -> dict[str, Any]:
        self.items[args["key"]].append(args["n"])
        return {"key": args["key"], "items": self.items[args["key"]]}

    async def read(self, args: dict[str, Any]) -> dict[str, Any]:
        await self._after(args.get("delay", 0))
        return self.read_now(args)

    async def write(self, args: dict[str, Any]) -> dict[str, Any]:
        await self._after(args.get("delay", 0))
        return self.write_now(args)

    def tools(self) -> list[Tool]:
        read = Tool(
            "read", "Read a key.", READ_SCHEMA, execute=self.read, hints=ToolHints(read_only=True)
        )
        return [read, Tool("write", "Append to a key.", WRITE_SCHEMA, execute=self.write)]


def calls_of(ops: list[tuple[bool, str, float]]) -> list[ToolCall]:
    calls = []
    for i, (write, key, delay) in enumerate(ops):
        args: dict[str, Any] = {"key": key, "delay": delay}
        if write:
            args["n"] = i
        calls.append(ToolCall(f"c{i}", "write" if write else "read", args))
    return calls


def one_by_one(ops: list[tuple[bool, str, float]]) -> list[Any]:
    """The results of the calls run one after another, each read (as JSON) as it returns."""

    store = Store()
    execute = {"read": store.read_now, "write": store.write_now}
    return [json.loads(json.dumps(execute[c.name](dict(c.arguments)))) for c in calls_of(ops)]


def program(ops: list[tuple[bool, str, float]], language: str) -> str:
    """A program that fans the calls out at once and returns their results in order."""
    calls = [json.dumps(c.arguments) for c in calls_of(ops)]
    names = ["write" if write else "read" for write, _, _ in ops]
    if language == "python":
        parts = ", ".join(f"tools.{n}({a})" for n, a in zip(names, calls, strict=True))
        return f"import asyncio\nawait asyncio.gather({parts})"
    parts = ", ".join(f"tools.{n}({a})" for n, a in zip(names, calls, strict=True))
    return f"return await Promise.all([{parts}]);"


settled = settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))


@settled
@given(SEQUENCE, st.integers(1, 4))
def test_run_batch_gives_the_one_by_one_results(
    ops: list[tuple[bool, str, float]], cap: int
) -> None:
    async def run() -> tuple[list[Any], list[str]]:
        session = Session()
        outcomes = await run_batch(
            calls_of(ops), Store().tools(), max_parallel=cap, session=session
        )
        texts = [o.text for o in outcomes]  # read after the whole batch ran
        return [o.value for o in outcomes], texts

    values, texts = asyncio.run(run())
    expected = one_by_one(ops)
    assert values == expected
    assert [json.loads(t) for t in texts] == expected


@settled
@given(SEQUENCE, st.integers(1, 4))
def test_a_model_run_records_and_sends_the_one_by_one_results(
    ops: list[tuple[bool, str, float]], cap: int
) -> None:
    sent: list[Any] = []

    def model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "user":
            return calls_of(ops)
        sent.extend(json.loads(m["content"]) for m in messages if m["role"] == "tool")
        return "done"

    async def run() -> Any:
        client = create_client(
            model=FunctionModel(model), code_mode="native", max_tool_concurrency=cap
        )
        return await client.run("go", tools=Store().tools())

    result = asyncio.run(run())
    expected = one_by_one(ops)
    assert [json.loads(r.output) for r in result.tool_calls] == expected
    assert sent == expected
    logged = [e.data for e in result.session.events if e.type == "tool_result"]
    assert [json.loads(d["content"]) for d in logged] == expected


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(SEQUENCE, st.integers(1, 4))
def test_a_monty_gather_gives_the_one_by_one_results(
    ops: list[tuple[bool, str, float]], cap: int
) -> None:
    async def run() -> dict[str, Any]:
        runtime = MontyRuntime(timeout=20)
        try:
            return await run_program(
                program(ops, "python"), Store().tools(), runtime=runtime, max_parallel=cap
            )
        finally:
            await runtime.aclose()

    assert asyncio.run(run()) == {"result": one_by_one(ops), "logs": []}


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(SEQUENCE, st.integers(1, 4))
def test_a_v8_promise_all_gives_the_one_by_one_results(
    ops: list[tuple[bool, str, float]], cap: int
) -> None:
    async def run() -> dict[str, Any]:
        runtime = V8Runtime(timeout=20)
        try:
            return await run_program(
                program(ops, "javascript"),
                Store().tools(),
                language="javascript",
                runtime=runtime,
                max_parallel=cap,
            )
        finally:
            await runtime.aclose()

    assert asyncio.run(run()) == {"result": one_by_one(ops), "logs": []}


def random_sequences(count: int, seed: int) -> list[list[tuple[bool, str, float]]]:
    """``count`` random sequences, for the paths too costly for a hypothesis search."""
    rng = random.Random(seed)
    return [
        [
            (rng.random() < 0.5, rng.choice(KEYS), rng.choice(DELAYS))
            for _ in range(rng.randint(2, 8))
        ]
        for _ in range(count)
    ]


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(SEQUENCE, st.sampled_from(["python", "javascript"]))
def test_a_code_mode_run_sends_records_and_logs_the_one_by_one_results(
    ops: list[tuple[bool, str, float]], language: str
) -> None:
    # The program's value as the model reads it, the run's record and the session log's line,
    # all read after the whole program ran.
    code = program(ops, language)
    sent: list[Any] = []

    def model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "user":
            return [ToolCall("p1", "run_code", {"code": code, "description": "fan out"})]
        sent.extend(json.loads(m["content"]) for m in messages if m["role"] == "tool")
        return "done"

    async def run() -> Any:
        runtime = MontyRuntime(timeout=20) if language == "python" else V8Runtime(timeout=20)
        client = create_client(model=FunctionModel(model), code_mode="code", runtime=runtime)
        try:
            return await client.run("go", tools=Store().tools())
        finally:
            await runtime.aclose()

    result = asyncio.run(run())
    expected = {"result": one_by_one(ops), "logs": []}
    assert sent == [expected]
    assert [json.loads(r.output) for r in result.tool_calls] == [expected]
    logged = [e.data for e in result.session.events if e.type == "tool_result"]
    assert [json.loads(d["content"]) for d in logged] == [expected]
