"""Durable runs under hostile or unlucky input: results near and past Temporal's payload limit,
options that would hang a workflow, a resubmitted workflow id, a call that runs out of time.

Against a real Temporal dev server (``temporal_address``) and real worker processes
(``tests/temporal_worker.py``); every case must end (data or a ``ConfigurationError``), never
hang, and never lose or repeat a call's result.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import sys
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any, ClassVar

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.client import Client

from test_temporal import FAST, look, touch, workers  # noqa: F401  (workers: a fixture)
from toolnexus import ToolCall
from toolnexus.errors import ConfigurationError, PayloadStoreError
from toolnexus.temporal import (
    MAX_RESULT_BYTES,
    FileStore,
    Timings,
    file_store,
    run_batch,
    run_program,
    start_run,
    worker,
)
from toolnexus.temporal._wire import STORE_ENCODING

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
