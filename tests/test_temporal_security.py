"""Durable runs under hostile or unlucky input: results near and past Temporal's payload limit,
options that would hang a workflow, a resubmitted workflow id, a call that runs out of time.

Against a real Temporal dev server (``temporal_address``) and real worker processes
(``tests/temporal_worker.py``); every case must end (data or a ``ConfigurationError``), never
hang, and never lose or repeat a call's result.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import math
import os
import sys
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel, field_validator
from temporalio.api.common.v1 import Payload
from temporalio.client import Client

from fake_provider import FakeProvider, Turn
from test_client import client_for
from test_temporal import FAST, look, touch, workers  # noqa: F401  (workers: a fixture)
from test_temporal_scale import runs_of
from toolnexus import ModelRetry, Tool, ToolCall, ToolHints, tool
from toolnexus.client import RunResult
from toolnexus.codemode import PermissionPolicy, RunContext
from toolnexus.errors import ConfigurationError, PayloadStoreError, ProviderError
from toolnexus.temporal import (
    MAX_RESULT_BYTES,
    FileStore,
    RunHandle,
    Timings,
    file_store,
    run_batch,
    run_program,
    start_run,
    worker,
)
from toolnexus.temporal._wire import STORE_ENCODING
from toolnexus.tools import ToolHooks
from toolnexus.tools.relay import relay_tool

pytestmark = pytest.mark.temporal


async def test_a_result_is_measured_in_the_bytes_temporal_stores(
    temporal_address: str,
    workers: Any,  # noqa: F811
) -> None:
    """1.2 MB of CJK text (escaped to 2.4 MB) or of quotes (escaped twice) is refused as data
    by its size as stored, not sent and lost as a failed activity task."""
    pool = workers(1)
    client = await Client.connect(temporal_address)
    calls = [
        ToolCall("cjk", "text", {"char": "字", "count": 400_000}),  # 1.2 MB of UTF-8
        ToolCall("quotes", "text", {"char": '"', "count": 1_200_000}),
        ToolCall("small", "text", {"char": "字", "count": 10}),
    ]
    outcomes = await asyncio.wait_for(
        run_batch(client, calls, task_queue=pool.queue, timings=FAST), 60
    )
    for outcome in outcomes[:2]:
        assert outcome.error is not None
        assert "result too large for a durable run" in outcome.error["message"]
        assert "as Temporal stores it" in outcome.error["message"]
    assert outcomes[2].value == "字" * 10
    assert MAX_RESULT_BYTES < 2 * 1024 * 1024


async def test_results_that_pass_the_payload_limit_together_come_back_in_parts(
    temporal_address: str,
    workers: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Three 0.9 MB results make a 2.7 MB answer: instead of a workflow task failing forever,
    the batch returns the largest results as parts (read back from the history), whole; across
    continue-as-new boundaries too; and whole through a payload store."""
    calls = [ToolCall(f"b{i}", "big", {"size": 900_000}) for i in range(3)]
    calls.append(ToolCall("s", "big", {"size": 5}))
    expected = ["x" * 900_000] * 3 + ["xxxxx"]
    pool = workers(1)
    client = await Client.connect(temporal_address)
    outcomes = await asyncio.wait_for(
        run_batch(client, calls, task_queue=pool.queue, timings=FAST), 60
    )
    assert [o.value for o in outcomes] == expected
    longer = calls[:3] + calls + calls[:3]  # several runs, each carrying parts of the last
    outcomes = await asyncio.wait_for(
        run_batch(client, longer, task_queue=pool.queue, timings=FAST, continue_after=12), 90
    )
    assert [o.value for o in outcomes] == ["x" * 900_000] * 3 + expected + ["x" * 900_000] * 3

    store = tmp_path / "store"
    stored = workers(1, store=store)
    kept = await Client.connect(temporal_address, data_converter=file_store(store))
    whole = await asyncio.wait_for(
        run_batch(kept, calls, task_queue=stored.queue, timings=FAST), 60
    )
    assert [o.value for o in whole] == expected
    assert any(store.rglob("*"))  # the large payloads went through the store


async def test_a_program_whose_output_passes_the_payload_limit_fails_as_data(
    temporal_address: str, tmp_path: Path
) -> None:
    program = 'n = await tools.look({"n": 1})\n"x" * 3_000_000'
    client = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4()}"
    async with worker(client, task_queue=queue, tools=[look, touch]):
        output = await asyncio.wait_for(run_program(client, program, task_queue=queue), 60)
    assert output["error"]["kind"] == "limit", output
    assert "payload limit" in output["error"]["message"]

    stored = await Client.connect(temporal_address, data_converter=file_store(tmp_path))
    async with worker(stored, task_queue=queue, tools=[look, touch]):
        output = await asyncio.wait_for(run_program(stored, program, task_queue=queue), 60)
    assert output["result"] == "x" * 3_000_000


async def test_every_option_is_checked_before_anything_starts(temporal_address: str) -> None:
    client = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4()}"  # no worker polls it: a started workflow would hang
    call = [ToolCall("c", "look", {"n": 1})]
    bad_timings = [
        {"start_to_close": timedelta(0)},
        {"start_to_close": timedelta(seconds=-1)},
        {"heartbeat": timedelta(seconds=-5)},
        {"heartbeat": 10},
        {"idempotent_attempts": 0},
    ]
    for fields in bad_timings:
        with pytest.raises(ConfigurationError) as raised:
            Timings(**fields)
        assert "\n" not in str(raised.value) and next(iter(fields)) in str(raised.value)
    for timeout in (0, -1, math.nan, math.inf, True):
        with pytest.raises(ConfigurationError, match="model_timeout"):
            await asyncio.wait_for(
                start_run(client, "go", task_queue=queue, model_timeout=timeout), 10
            )
    with pytest.raises(ConfigurationError, match="program as a string"):
        await asyncio.wait_for(run_program(client, 5, task_queue=queue), 10)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="continue_after"):
        await asyncio.wait_for(run_batch(client, call, task_queue=queue, continue_after=0), 10)
    with pytest.raises(ConfigurationError, match="task_queue"):
        await asyncio.wait_for(run_batch(client, call, task_queue=""), 10)
    with pytest.raises(ConfigurationError, match="timings"):
        await asyncio.wait_for(run_batch(client, call, task_queue=queue, timings=5), 10)  # type: ignore[arg-type]
    started = [w async for w in client.list_workflows(f"TaskQueue = '{queue}'")]
    assert started == []


async def test_a_batch_past_the_payload_limit_without_a_store_is_refused_up_front(
    temporal_address: str,
) -> None:
    client = await Client.connect(temporal_address)
    calls = [ToolCall(f"c{i}", "look", {"n": i, "pad": "y" * 100}) for i in range(20_000)]
    with pytest.raises(ConfigurationError, match="file_store"):
        await asyncio.wait_for(run_batch(client, calls, task_queue="nobody"), 20)


async def test_resubmitting_a_workflow_id_returns_the_recorded_result_and_runs_nothing(
    temporal_address: str,
    workers: Any,  # noqa: F811
) -> None:
    pool = workers(1)
    client = await Client.connect(temporal_address)
    workflow_id = f"once-{uuid.uuid4()}"
    calls = [ToolCall("a", "read", {"key": "a", "seconds": 0.05})]
    calls.append(ToolCall("w", "write", {"key": "w", "seconds": 0.05}))
    first = await run_batch(client, calls, task_queue=pool.queue, workflow_id=workflow_id)
    again = await asyncio.wait_for(
        run_batch(client, calls, task_queue=pool.queue, workflow_id=workflow_id), 30
    )
    assert [o.value for o in again] == [o.value for o in first] == ["read a", "wrote w"]
    starts = [x["call"] for x in pool.effects() if x["event"] == "start"]
    assert sorted(starts) == ["a", "w"]  # each call ran once, for both submissions
    other = [ToolCall("w2", "write", {"key": "w2", "seconds": 0.05})]
    with pytest.raises(ConfigurationError, match="already ran a different request"):
        await run_batch(client, other, task_queue=pool.queue, workflow_id=workflow_id)
    assert "w2" not in [x["call"] for x in pool.effects()]


async def test_a_call_past_start_to_close_ran_out_of_time(
    temporal_address: str,
    workers: Any,  # noqa: F811
) -> None:
    pool = workers(1)
    client = await Client.connect(temporal_address)
    timings = Timings(
        start_to_close=timedelta(seconds=1), heartbeat=timedelta(seconds=30), idempotent_attempts=2
    )
    calls = [
        ToolCall("slow", "write", {"key": "slow", "seconds": 4}),
        ToolCall("again", "read", {"key": "again", "seconds": 4}),
    ]
    outcomes = await asyncio.wait_for(
        run_batch(client, calls, task_queue=pool.queue, timings=timings), 60
    )
    slow, again = (o.error["message"] for o in outcomes)  # type: ignore[index]
    assert slow.startswith("the call ran out of time: it was still running after 1 s"), slow
    assert "lost" not in slow
    assert again.startswith("the call ran out of time 2 times"), again


async def test_outcomes_that_cannot_fit_even_as_parts_fail_the_batch_clearly(
    temporal_address: str,
    workers: Any,  # noqa: F811
) -> None:
    """20,000 calls of a tool no worker has: each is answered by its classification (no
    activity result a history holds), 4 MB of answers in all. Without a store the batch ends
    with a `ConfigurationError` that says why and how to lift the limit; it never stalls."""
    pool = workers(1)
    client = await Client.connect(temporal_address)
    calls = [ToolCall(f"u{i}", "no_such_tool", {"n": i}) for i in range(20_000)]
    with pytest.raises(ConfigurationError, match="payload limit") as caught:
        await asyncio.wait_for(run_batch(client, calls, task_queue=pool.queue), 120)
    assert "file_store" in str(caught.value)


# -- the payload store: a reference comes from a workflow history, which anyone who can start a
# workflow writes, so it names a file in the store by its hash or nothing at all


class Opens:
    """Every file this process opens while ``watching`` (the interpreter's ``open`` audit
    event: ``open()``, ``Path.read_bytes``, ``os.open``)."""

    watching = False
    paths: ClassVar[list[str]] = []

    @classmethod
    def hook(cls, event: str, args: tuple[Any, ...]) -> None:
        if cls.watching and event == "open" and args and isinstance(args[0], (str, bytes)):
            cls.paths.append(os.fsdecode(args[0]))


sys.addaudithook(Opens.hook)


def reference(data: bytes) -> Payload:
    return Payload(metadata={"encoding": STORE_ENCODING}, data=data)


def big_payload() -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=b'"' + b"x" * 400_000 + b'"')


async def test_a_store_reference_names_only_a_sha256_and_anything_else_is_not_opened(
    tmp_path: Path,
) -> None:
    store = FileStore(tmp_path / "store")
    secret = tmp_path / "secret.txt"
    secret.write_text("the operator's secret")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    forged = {
        "an absolute path": {"sha256": str(secret)},
        "a path up out of the store": {"sha256": "../../secret.txt"},
        "a pipe, which would block the worker": {"sha256": str(fifo)},
        "upper-case hex": {"sha256": "A" * 64},
        "a short digest": {"sha256": "a" * 63},
        "a digest and more": {"sha256": "a" * 64 + "/x"},
        "a digest with a newline": {"sha256": "a" * 64 + "\n"},
        "a number": {"sha256": 5},
        "a list": {"sha256": ["a" * 64]},
        "no digest": {"size": 12},
        "a size that is not a count": {"sha256": "a" * 64, "size": "12"},
    }
    raw = {
        "not JSON": b"\xff{",
        "a JSON list": b'["' + b"a" * 64 + b'"]',
        "a JSON string": b'"' + b"a" * 64 + b'"',
        "NaN": b'{"sha256": NaN}',
    }
    cases = {k: json.dumps(v).encode() for k, v in forged.items()} | raw
    try:
        for case, data in cases.items():
            Opens.paths, Opens.watching = [], True
            try:
                with pytest.raises(PayloadStoreError) as raised:
                    await asyncio.wait_for(store.decode([reference(data)]), 5)
            finally:
                Opens.watching = False
            message = str(raised.value)
            assert str(tmp_path / "store") in message and "\n" not in message, case
            assert "the operator's secret" not in message, case
            assert Opens.paths == [], (case, Opens.paths)  # refused before any file is opened
    finally:  # on a store that did open the pipe: let its reader go
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


async def test_a_stored_file_that_is_not_a_regular_file_is_refused_without_waiting(
    tmp_path: Path,
) -> None:
    store = FileStore(tmp_path, threshold=1000)
    payload = big_payload()
    [ref] = await store.encode([payload])
    digest = json.loads(ref.data)["sha256"]
    place = tmp_path / digest[:2] / digest
    place.unlink()
    os.mkfifo(place)  # someone with access to the store put a pipe under the payload's name
    try:
        with pytest.raises(PayloadStoreError, match="not in the store"):
            await asyncio.wait_for(store.decode([ref]), 5)
        outside = tmp_path / "outside"
        outside.write_bytes(payload.SerializeToString())
        place.unlink()
        place.symlink_to(outside)  # a link: never followed, even to the right bytes
        with pytest.raises(PayloadStoreError, match="not in the store"):
            await asyncio.wait_for(store.decode([ref]), 5)
    finally:
        with contextlib.suppress(OSError):
            os.close(os.open(place, os.O_WRONLY | os.O_NONBLOCK))
    await store.encode([payload])  # writing the payload again puts the file back
    assert place.is_file() and not place.is_symlink()
    assert await store.decode([ref]) == [payload]


async def test_a_damaged_stored_file_is_repaired_when_the_payload_is_written_again(
    tmp_path: Path,
) -> None:
    store = FileStore(tmp_path, threshold=1000)
    payload = big_payload()
    [ref] = await store.encode([payload])
    digest = json.loads(ref.data)["sha256"]
    place = tmp_path / digest[:2] / digest
    for damage in (b"", place.read_bytes()[:-1] + b"y", place.read_bytes() + b"more"):
        place.write_bytes(damage)  # a torn copy, a flipped byte, bytes added
        with pytest.raises(PayloadStoreError, match="was changed"):
            await store.decode([ref])
        assert await store.encode([payload]) == [ref]
        assert await store.decode([ref]) == [payload]
    written = place.stat().st_mtime_ns
    await store.encode([payload])  # a whole file is left as it is
    assert place.stat().st_mtime_ns == written


def test_an_empty_store_directory_is_refused(tmp_path: Path) -> None:
    for directory in ("", "   ", None, 5):
        with pytest.raises(ConfigurationError, match="FileStore needs the path of a directory"):
            file_store(directory)  # type: ignore[arg-type]
    assert file_store(tmp_path / "fine").payload_codec is not None


# -- the durable loop enforces the limits of the in-process loop ---------------------------
#
# The same scripted model (answering by the number of assistant turns in the request, so both
# runs get the same answer to the same question) runs once durably and once in process; the
# two must end the same way: the same status and ``stopped_by``, the same tool call outcomes,
# the same transcript, and the same requests sent to the model.


def _turn_of(body: dict[str, Any]) -> int:
    return sum(1 for m in body["messages"] if m.get("role") == "assistant")


def _answering(provider: FakeProvider, script: list[Turn]) -> None:
    provider.router = lambda body: script[min(_turn_of(body), len(script) - 1)]


def _outcomes(result: RunResult) -> list[tuple[str, str, str, bool]]:
    return [(r.id, r.name, r.output, r.is_error) for r in result.tool_calls]


async def _both(
    temporal_address: str,
    provider: FakeProvider,
    tools: list[Any],
    *,
    client_options: dict[str, Any] | None = None,
    run_options: dict[str, Any] | None = None,
    durable_options: dict[str, Any] | None = None,
    runs: list[Any] | None = None,
) -> tuple[RunResult | ProviderError, RunResult | ProviderError, list[Any], list[Any]]:
    """(durable, in process, the durable run's requests, the in-process run's requests); a
    run that raised a `ProviderError` gives the error. ``runs`` receives the histories of
    the durable workflow's runs."""
    options = {"max_turns": 10, **(client_options or {})}
    provider.requests.clear()
    client = client_for(provider, "openai", **options)
    temporal = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4()}"
    durable: RunResult | ProviderError
    local: RunResult | ProviderError
    async with worker(temporal, task_queue=queue, tools=tools, client=client):
        handle = await start_run(
            temporal,
            "go",
            task_queue=queue,
            timings=FAST,
            max_turns=options["max_turns"],
            **(run_options or {}),
            **(durable_options or {}),
        )
        try:
            durable = await asyncio.wait_for(handle.result(), 60)
        except ProviderError as exc:
            durable = exc
        if runs is not None:
            runs += await runs_of(temporal, handle.id)
    asked = list(provider.requests)
    provider.requests.clear()
    try:
        local = await client.run("go", tools=tools, **(run_options or {}))
    except ProviderError as exc:
        local = exc
    return durable, local, asked, list(provider.requests)


def _assert_same_run(durable: RunResult, local: RunResult) -> None:
    assert durable.status == local.status
    assert durable.stopped_by == local.stopped_by
    assert _outcomes(durable) == _outcomes(local)
    assert durable.messages == local.messages
    assert durable.turns == local.turns
    assert durable.output == local.output


@tool
def _flaky(n: int) -> str:
    """Asks the model to try again, always."""
    raise ModelRetry(f"try another n than {n}")


flaky = dataclasses.replace(_flaky, name="flaky", retries=1)


STRICT = Tool(
    "strict",
    "Takes an integer.",
    {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    execute=lambda args: args["n"],
    retries=2,
)


async def test_a_durable_run_stops_when_a_tool_runs_out_of_retries_as_in_process(
    temporal_address: str, provider: FakeProvider
) -> None:
    """A tool's ``retries`` bound the durable run too: ``ModelRetry`` and arguments that do
    not validate are counted per tool and per response, and past the bound the run stops as
    ``"incomplete"`` with ``stopped_by`` naming the tool (before, the durable run went on to
    ``max_turns``, asking the model again and again)."""
    _answering(
        provider,
        [
            Turn(calls=[("a1", "strict", {"n": "one"}), ("a2", "flaky", {"n": 1})]),
            Turn(calls=[("b1", "strict", "{not json"), ("b2", "look", {"n": 2})]),
            Turn(calls=[("c1", "look", {"n": 3}), ("c2", "strict", {})]),
            Turn(text="never reached"),
        ],
    )
    durable, local, asked, local_asked = await _both(
        temporal_address, provider, [look, flaky, STRICT]
    )
    assert isinstance(durable, RunResult) and isinstance(local, RunResult)
    assert local.status == "incomplete"
    assert (
        local.stopped_by == "tool 'strict' needed another try more often than its retries (2) allow"
    )
    _assert_same_run(durable, local)
    assert len(asked) == len(local_asked) == 3
    assert asked == local_asked

    _answering(  # a tool with no retries left stops the run at its first try
        provider,
        [Turn(calls=[("a1", "flaky", {"n": 1}), ("a2", "flaky", {"n": 2})]), Turn(text="no")],
    )
    durable, local, asked, local_asked = await _both(
        temporal_address, provider, [dataclasses.replace(flaky, retries=0)]
    )
    assert isinstance(durable, RunResult) and isinstance(local, RunResult)
    assert (
        local.stopped_by == "tool 'flaky' needed another try more often than its retries (0) allow"
    )
    _assert_same_run(durable, local)
    assert asked == local_asked


async def test_tries_are_counted_across_continue_as_new_boundaries(
    temporal_address: str, provider: FakeProvider
) -> None:
    """A run that continues as new between its turns carries the tries counted so far: it
    stops at the same turn, for the same tool, as the in-process run."""
    _answering(
        provider,
        [
            Turn(calls=[("a1", "strict", {"n": "one"}), ("a2", "look", {"n": 1})]),
            Turn(calls=[("b1", "strict", {"n": "two"}), ("b2", "look", {"n": 2})]),
            Turn(calls=[("c1", "strict", {}), ("c2", "look", {"n": 3})]),
            Turn(text="never reached"),
        ],
    )
    runs: list[Any] = []
    durable, local, asked, local_asked = await _both(
        temporal_address,
        provider,
        [look, STRICT],
        durable_options={"continue_after": 12},
        runs=runs,
    )
    assert len(runs) >= 3  # it crossed boundaries between its turns
    assert isinstance(durable, RunResult) and isinstance(local, RunResult)
    assert local.stopped_by is not None and "'strict'" in local.stopped_by
    _assert_same_run(durable, local)
    assert asked == local_asked


async def test_a_durable_run_sends_the_clients_tool_choice_as_in_process(
    temporal_address: str, provider: FakeProvider
) -> None:
    """The workers' client's ``tool_choice`` is sent on the turns ``client.run`` sends it on
    (before, a durable run always sent ``"auto"``)."""
    _answering(provider, [Turn(calls=[("a", "look", {"n": 1})]), Turn(text="done")])
    for options in ({"tool_choice": "look"}, {"tool_choice": "required"}):
        for every_turn in (False, True):
            if every_turn:  # "required" on every turn would never let the model answer
                options = {**options, "tool_choice_every_turn": True, "max_turns": 3}
            durable, local, asked, local_asked = await _both(
                temporal_address, provider, [look], client_options=options
            )
            assert isinstance(durable, RunResult) and isinstance(local, RunResult)
            _assert_same_run(durable, local)
            assert [r.get("tool_choice") for r in asked] == [
                r.get("tool_choice") for r in local_asked
            ]
            assert asked == local_asked
            assert local_asked[0]["tool_choice"] != "auto"
    temporal = await Client.connect(temporal_address)
    unknown = client_for(provider, "openai", tool_choice="nope")
    with pytest.raises(ConfigurationError, match="tool_choice='nope' cannot be honoured"):
        worker(temporal, task_queue=f"q-{uuid.uuid4()}", tools=[look], client=unknown)


@tool(hints=ToolHints(read_only=True))
async def stall(n: int) -> str:
    """Never returns in time."""
    await asyncio.sleep(30)
    return f"stalled {n}"


async def test_a_durable_turns_calls_are_bounded_by_calls_timeout_as_in_process(
    temporal_address: str, provider: FakeProvider
) -> None:
    """The workers' client's ``calls_timeout`` bounds a durable turn's calls in all: a call
    still running then is cancelled and answered as late, the calls that finished keep their
    outcomes, one the rule still held is late too, and one that could not run keeps its
    answer; the run goes on (before, a durable turn waited for every call)."""
    _answering(
        provider,
        [
            Turn(
                calls=[
                    ("a", "look", {"n": 1}),
                    ("b", "stall", {"n": 2}),
                    ("c", "touch", {"n": 3}),  # unsafe: waits for the stalled read
                    ("d", "nope", {}),
                ]
            ),
            Turn(text="done"),
        ],
    )
    durable, local, asked, local_asked = await _both(
        temporal_address, provider, [look, stall, touch], client_options={"calls_timeout": 1}
    )
    assert isinstance(durable, RunResult) and isinstance(local, RunResult)
    assert local.status == "done"
    outputs = [r.output for r in local.tool_calls]
    assert outputs[0] == "look 1"
    assert outputs[1].startswith("the call did not finish within 1 s (calls_timeout")
    assert outputs[2] == outputs[1]
    assert outputs[3].startswith("unknown tool 'nope'")
    _assert_same_run(durable, local)
    assert asked == local_asked


@tool(requires_approval=True)
async def wipe(n: int) -> str:
    """Needs consent for every call."""
    return f"wiped {n}"


@tool
async def whose(n: int, ctx: RunContext[str]) -> str:
    """Tells whose dependencies it got."""
    return f"{ctx.deps} {n}"


async def test_a_durable_run_keeps_the_clients_permissions_approvals_hooks_and_deps(
    temporal_address: str, provider: FakeProvider
) -> None:
    """The workers' client's guards hold for a durable run's calls as for its in-process
    runs: a tool its ``permissions`` deny is not offered and not run if called anyway, a tool
    that needs approval runs only when its handler approves (and never without one), hooks
    run around every call, and tools see the client's ``deps`` (before, a durable run ran
    every call of every worker tool, approval or not)."""
    _answering(
        provider,
        [
            Turn(
                calls=[
                    ("a", "touch", {"n": 1}),
                    ("b", "wipe", {"n": 2}),
                    ("c", "wipe", {"n": 3}),
                    ("d", "whose", {"n": 4}),
                ]
            ),
            Turn(text="done"),
        ],
    )
    tools = [look, touch, wipe, whose]
    denied = {"permissions": PermissionPolicy(deny=["touch"]), "deps": "the client's"}
    durable, local, asked, local_asked = await _both(
        temporal_address, provider, tools, client_options=denied
    )
    assert isinstance(durable, RunResult) and isinstance(local, RunResult)
    outputs = [r.output for r in local.tool_calls]
    assert outputs[0].startswith("unknown tool 'touch'")
    assert "needs approval and no approval handler is configured" in outputs[1]
    assert outputs[3] == "the client's 4"
    assert "touch" not in json.dumps(local_asked[0]["tools"])
    _assert_same_run(durable, local)
    assert asked == local_asked

    seen: list[str] = []

    def approve(name: str, args: dict[str, Any]) -> bool:
        return bool(args["n"] == 2)

    def before(name: str, args: dict[str, Any], ctx: Any) -> None:
        seen.append(f"{name} {args['n']}")

    guarded = {"approval_handler": approve, "hooks": ToolHooks(before=[before])}
    durable, local, asked, local_asked = await _both(
        temporal_address, provider, tools, client_options=guarded
    )
    assert isinstance(durable, RunResult) and isinstance(local, RunResult)
    outputs = [r.output for r in local.tool_calls]
    assert outputs[1] == "wiped 2" and "was not approved" in outputs[2]
    _assert_same_run(durable, local)
    assert asked == local_asked
    assert sorted(seen) == sorted(2 * ["touch 1", "wipe 2", "whose 4"])  # each run's

    _answering(
        provider,
        [Turn(calls=[("r", "ask", {"q": "why"}), ("l", "look", {"n": 1})]), Turn(text="done")],
    )
    relayed = {"relay_handler": lambda call: f"the host says: {call.arguments['q']}"}
    ask = relay_tool("ask", "Ask the host.", {"type": "object", "properties": {"q": {}}})
    durable, local, asked, local_asked = await _both(
        temporal_address, provider, [look, ask], client_options=relayed
    )
    assert isinstance(durable, RunResult) and isinstance(local, RunResult)
    assert local.tool_calls[0].output == "the host says: why"
    _assert_same_run(durable, local)
    assert asked == local_asked


async def test_a_durable_run_stops_at_max_turns_as_in_process(
    temporal_address: str, provider: FakeProvider
) -> None:
    _answering(
        provider, [Turn(calls=[("a", "look", {"n": 1})]), Turn(calls=[("b", "look", {"n": 2})])]
    )
    durable, local, asked, local_asked = await _both(
        temporal_address, provider, [look], client_options={"max_turns": 2}
    )
    assert isinstance(durable, RunResult) and isinstance(local, RunResult)
    assert local.status == "incomplete" and local.stopped_by is None and local.turns == 2
    _assert_same_run(durable, local)
    assert asked == local_asked


async def test_a_durable_turn_past_turn_timeout_fails_as_in_process(
    temporal_address: str, provider: FakeProvider
) -> None:
    _answering(provider, [Turn(calls=[("a", "look", {"n": 1})]), Turn(text="late", delay=3)])
    durable, local, asked, local_asked = await _both(
        temporal_address, provider, [look], client_options={"turn_timeout": 0.5, "retries": 0}
    )
    assert isinstance(durable, ProviderError) and isinstance(local, ProviderError)
    assert "(turn_timeout)" in local.message
    assert durable.message == local.message
    assert durable.partial is not None and local.partial is not None
    assert durable.partial.status == local.partial.status == "error"
    _assert_same_run(durable.partial, local.partial)
    assert len(asked) == len(local_asked) == 2


async def test_a_durable_runs_provider_error_is_of_the_class_raised_in_process(
    temporal_address: str, provider: FakeProvider
) -> None:
    """A model turn's failure crosses the workflow boundary with its class: a durable run's
    500 is the same `ProviderStatusError` (status, message) as in process, and a turn past
    ``turn_timeout`` the same `ProviderTimeout`."""
    from toolnexus.errors import ProviderStatusError, ProviderTimeout

    _answering(provider, [Turn(status=500)])
    durable, local, _, _ = await _both(
        temporal_address, provider, [look], client_options={"retries": 0}
    )
    assert type(durable) is type(local) is ProviderStatusError
    assert isinstance(durable, ProviderError) and isinstance(local, ProviderError)
    assert (
        (durable.status, durable.message) == (local.status, local.message) == (500, local.message)
    )
    _answering(provider, [Turn(text="late", delay=3)])
    durable, local, _, _ = await _both(
        temporal_address, provider, [look], client_options={"turn_timeout": 0.5, "retries": 0}
    )
    assert type(durable) is type(local) is ProviderTimeout


async def test_model_timeout_bounds_a_durable_model_turn_retries_included(
    temporal_address: str, provider: FakeProvider
) -> None:
    """``start_run(model_timeout=...)`` is what one model turn may take, its retries
    included: a turn past it ends the run with a `ProviderError` that names it, and the slow
    request is not sent again (before, Temporal retried it twice more on the timeout)."""
    _answering(provider, [Turn(text="late", delay=4)])
    client = client_for(provider, "openai")
    temporal = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4()}"
    async with worker(temporal, task_queue=queue, tools=[look], client=client):
        handle = await start_run(temporal, "go", task_queue=queue, model_timeout=1)
        with pytest.raises(ProviderError, match="model_timeout") as raised:
            await asyncio.wait_for(handle.result(), 60)
    assert raised.value.partial is not None and raised.value.partial.status == "error"
    assert len(provider.requests) == 1


class City(BaseModel):
    name: str
    population: int


async def test_a_durable_run_with_an_output_type_bounds_its_tries_as_in_process(
    temporal_address: str, provider: FakeProvider
) -> None:
    """``output_type`` and ``output_retries`` work durably as in process: a text answer is
    asked to use the output tool (one try), a result that does not match the type is handed
    back as field errors (one more), and past ``output_retries`` the run stops."""
    _answering(
        provider,
        [
            Turn(text="Oslo, about 700k"),
            Turn(calls=[("f1", "final_result", {"name": "Oslo"})]),
            Turn(calls=[("f2", "final_result", {"name": "Oslo", "population": 7})]),
        ],
    )
    run = {"output_type": City, "output_retries": 1}
    durable, local, asked, local_asked = await _both(
        temporal_address, provider, [look], run_options=run
    )
    assert isinstance(durable, RunResult) and isinstance(local, RunResult)
    assert local.status == "incomplete" and local.output is None
    assert local.stopped_by == (
        "tool 'final_result' needed another try more often than its retries (1) allow"
    )
    _assert_same_run(durable, local)
    assert asked == local_asked

    run = {"output_type": City, "output_retries": 2}
    durable, local, asked, local_asked = await _both(
        temporal_address, provider, [look], run_options=run
    )
    assert isinstance(durable, RunResult) and isinstance(local, RunResult)
    assert local.status == "done" and local.output == City(name="Oslo", population=7)
    _assert_same_run(durable, local)
    assert asked == local_asked


class PositiveCity(BaseModel):
    name: str
    population: int

    @field_validator("population")
    @classmethod
    def positive(cls, value: int) -> int:
        if value <= 0:
            raise ValueError("a population is positive")
        return value


async def test_a_durable_result_the_types_own_validators_refuse_is_not_taken(
    temporal_address: str, provider: FakeProvider
) -> None:
    """The workers have only the output type's schema; its own validators run where the type
    is, when the result is read. A result they refuse is never handed over as the output: the
    run is ``"incomplete"`` and ``stopped_by`` says why."""
    _answering(provider, [Turn(calls=[("f1", "final_result", {"name": "Oslo", "population": -1})])])
    client = client_for(provider, "openai")
    temporal = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4()}"
    async with worker(temporal, task_queue=queue, tools=[look], client=client):
        handle = await start_run(
            temporal, "go", task_queue=queue, timings=FAST, output_type=PositiveCity
        )
        result = await asyncio.wait_for(handle.result(), 60)
        again = RunHandle.attach(temporal, handle.id, "go", output_type=PositiveCity)
        assert (await again.result()).stopped_by == result.stopped_by
    assert result.status == "incomplete" and result.output is None
    assert result.stopped_by is not None
    assert "not output_type's own validators" in result.stopped_by
    assert "a population is positive" in result.stopped_by
    with pytest.raises(ConfigurationError, match="output_retries"):
        await start_run(temporal, "go", task_queue=queue, output_type=City, output_retries=-1)


async def test_a_durable_reply_with_a_call_without_an_id_runs_nothing_as_in_process(
    temporal_address: str, provider: FakeProvider
) -> None:
    _answering(provider, [Turn(calls=[("a", "look", {"n": 1}), ("", "look", {"n": 2})])])
    durable, local, asked, local_asked = await _both(temporal_address, provider, [look])
    assert isinstance(durable, ProviderError) and isinstance(local, ProviderError)
    assert "'look' without a call id" in durable.message
    assert "'look' without a call id" in local.message
    assert durable.partial is not None and durable.partial.tool_calls == []  # nothing ran
    assert len(asked) == len(local_asked) == 1  # no result was sent back with an empty id


def _refusal(text: str) -> str:
    """A whole Chat Completions body whose turn the provider refused (``content_filter``)."""
    message = {"role": "assistant", "content": text}
    choice = {"index": 0, "message": message, "finish_reason": "content_filter"}
    usage = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    body = {"id": "r", "object": "chat.completion", "created": 0, "model": "m"}
    return json.dumps(body | {"choices": [choice], "usage": usage})


async def test_a_durable_run_the_provider_refuses_ends_as_in_process(
    temporal_address: str, provider: FakeProvider
) -> None:
    """The turn rule decides on a refused reply for both loops: the run is ``"refused"``,
    ``stopped_by`` says so, the refused turn's calls are not run and it never enters the
    transcript."""
    _answering(
        provider,
        [
            Turn(calls=[("a", "look", {"n": 1})]),
            Turn(raw=_refusal("I will not.")),
        ],
    )
    durable, local, asked, local_asked = await _both(temporal_address, provider, [look])
    assert isinstance(durable, RunResult) and isinstance(local, RunResult)
    assert local.status == "refused" and local.turns == 2
    assert local.stopped_by == "the provider refused to answer (content_filter)"
    assert [r.id for r in local.tool_calls] == ["a"]
    _assert_same_run(durable, local)
    assert asked == local_asked


async def test_a_run_continued_inside_a_turns_batch_goes_on_under_the_same_turn_rule(
    temporal_address: str, provider: FakeProvider
) -> None:
    """A boundary inside a turn's batch: the next run rebuilds the turn rule from the turns
    and tries carried, takes the turn's reply again, and settles its calls where the last run
    left them; the run stops at the same turn, for the same tool, as in process."""
    looks = [(f"l{n}", "look", {"n": n}) for n in range(5)]
    _answering(
        provider,
        [
            Turn(calls=[("a1", "strict", {"n": "one"}), *looks]),
            Turn(calls=[*looks, ("b1", "strict", {"n": "two"})]),
            Turn(calls=[("c1", "strict", {}), *looks]),
            Turn(text="never reached"),
        ],
    )
    runs: list[Any] = []
    durable, local, asked, local_asked = await _both(
        temporal_address,
        provider,
        [look, STRICT],
        durable_options={"continue_after": 12, "max_parallel": 1},
        runs=runs,
    )
    assert isinstance(durable, RunResult) and isinstance(local, RunResult)
    assert len(runs) > 2 * local.turns  # boundaries fell inside the turns' batches
    assert local.status == "incomplete" and local.turns == 3
    assert local.stopped_by == (
        "tool 'strict' needed another try more often than its retries (2) allow"
    )
    _assert_same_run(durable, local)
    assert asked == local_asked
