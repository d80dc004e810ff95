"""Starting durable work from a caller: a batch of tool calls, or a whole agent run."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from temporalio.client import Client as TemporalClient
from temporalio.client import WorkflowHandle

from toolnexus._checks import positive_int
from toolnexus._json import encodable_text
from toolnexus.client import RunResult, ToolCallRecord, Usage
from toolnexus.errors import ConfigurationError, ProviderError
from toolnexus.scheduling import Outcome, ToolCall, max_tool_concurrency
from toolnexus.scheduling._batch import check_calls, record_tool_result, transcript_arguments
from toolnexus.session import Session
from toolnexus.temporal._wire import Timings, call_from_wire, call_to_wire, outcome_from_wire
from toolnexus.temporal._workflows import BATCH_WORKFLOW, PROGRAM_WORKFLOW, RUN_WORKFLOW

__all__ = ["RunHandle", "run_batch", "run_program", "start_run"]


async def run_batch(
    temporal_client: TemporalClient,
    calls: Sequence[ToolCall],
    *,
    task_queue: str,
    max_parallel: int | None = None,
    timings: Timings | None = None,
    session: Session | None = None,
    workflow_id: str | None = None,
) -> list[Outcome]:
    """Run the tool calls of one model response durably; one outcome per call, in order.

    The durable `toolnexus.run_batch`: the same rule and the same outcomes, with each call an
    activity on the workers of ``task_queue``. A call whose worker is lost is retried on
    another worker only when its tool is idempotent (``ToolHints(idempotent=True)``);
    otherwise it fails with "the worker running this call was lost; not retried because the
    tool is not idempotent", and the batch goes on.

    Args:
        temporal_client: A connected ``temporalio.client.Client``.
        calls: The calls, in the order the model emitted them.
        task_queue: Where the workers poll.
        max_parallel: The cap across all workers (``max_tool_concurrency``'s default: 10).
        timings: Call timeouts and how a lost worker is noticed (`Timings`).
        session: Receives one ``tool_result`` event per call, in order, as in process.
        workflow_id: The workflow's id (a fresh one by default); starting a second batch with
            the id of a running one fails, which makes a retried submission safe.

    Raises:
        ConfigurationError: ``calls`` holds something that is not a ``ToolCall``.
    """
    check_calls(calls)
    request = {
        "calls": [call_to_wire(call) for call in calls],
        "max_parallel": max_tool_concurrency(max_parallel),
        "timings": (timings or Timings()).to_wire(),
    }
    result = await temporal_client.execute_workflow(
        BATCH_WORKFLOW,
        request,
        id=workflow_id or f"toolnexus-batch-{uuid.uuid4()}",
        task_queue=task_queue,
    )
    outcomes = [outcome_from_wire(data) for data in result["outcomes"]]
    if session is not None:
        for call, outcome in zip(calls, outcomes, strict=True):
            record_tool_result(session, call, outcome)
    return outcomes


async def run_program(
    temporal_client: TemporalClient,
    code: str,
    *,
    task_queue: str,
    language: str = "python",
    max_parallel: int | None = None,
    timings: Timings | None = None,
    call_id: str = "program",
    workflow_id: str | None = None,
) -> dict[str, Any]:
    """Run a Code Mode program durably; returns what ``toolnexus.codemode.run_program`` does.

    Each sub-call is an activity, scheduled by the rule; the program itself runs in steps on
    the workers, each re-running it with the outcomes recorded so far (see ``docs/temporal.md``
    for why that is safe and what it asks of a program). A worker lost in the middle never
    makes a completed sub-call run again.

    Raises:
        ConfigurationError: ``language`` is not ``"python"`` or ``"javascript"``.
    """
    if language not in ("python", "javascript"):
        raise ConfigurationError(
            f"Code Mode language must be 'python' or 'javascript', got {language!r}."
        )
    request = {
        "code": code,
        "language": language,
        "call_id": call_id,
        "max_parallel": max_tool_concurrency(max_parallel),
        "timings": (timings or Timings()).to_wire(),
    }
    output: dict[str, Any] = await temporal_client.execute_workflow(
        PROGRAM_WORKFLOW,
        request,
        id=workflow_id or f"toolnexus-program-{uuid.uuid4()}",
        task_queue=task_queue,
    )
    return output


async def start_run(
    temporal_client: TemporalClient,
    prompt: str,
    *,
    task_queue: str,
    max_turns: int = 20,
    max_parallel: int | None = None,
    timings: Timings | None = None,
    model_timeout: float = 300.0,
    workflow_id: str | None = None,
) -> RunHandle:
    """Start a durable agent run (the durable ``Client.run``) and return its handle.

    The workers of ``task_queue`` (started with ``worker(..., client=...)``) make the model
    requests with their client and run the tool calls; this process may exit and another pick
    the run up by its id (``RunHandle.attach``).

    Args:
        temporal_client: A connected ``temporalio.client.Client``.
        prompt: The user's message.
        task_queue: Where the workers poll.
        max_turns: Model round trips before the run stops as ``"incomplete"``.
        max_parallel: The cap on tool calls across all workers (default 10).
        timings: Tool-call timeouts and how a lost worker is noticed (`Timings`).
        model_timeout: Seconds one model request may take, its retries included.
        workflow_id: The run's id (a fresh one by default).

    Raises:
        ConfigurationError: ``prompt`` is not a string or ``max_turns`` is below 1.
    """
    if not isinstance(prompt, str):
        raise ConfigurationError(f"start_run takes the prompt as a string, got {prompt!r}.")
    positive_int("max_turns", max_turns)
    request = {
        "prompt": prompt,
        "max_turns": max_turns,
        "max_parallel": max_tool_concurrency(max_parallel),
        "timings": (timings or Timings()).to_wire(),
        "model_timeout": model_timeout,
    }
    handle = await temporal_client.start_workflow(
        RUN_WORKFLOW,
        request,
        id=workflow_id or f"toolnexus-run-{uuid.uuid4()}",
        task_queue=task_queue,
    )
    return RunHandle(handle, prompt)


class RunHandle:
    """A durable agent run: its id, its result as a ``RunResult``, and cancellation."""

    def __init__(self, handle: WorkflowHandle[Any, Any], prompt: str) -> None:
        self._handle = handle
        self._prompt = prompt

    @classmethod
    def attach(cls, temporal_client: TemporalClient, run_id: str, prompt: str) -> RunHandle:
        """The handle of a run started elsewhere (by this or another process)."""
        return cls(temporal_client.get_workflow_handle(run_id), prompt)

    @property
    def id(self) -> str:
        """The run's workflow id."""
        return self._handle.id

    async def result(self) -> RunResult:
        """Wait for the run and return it as a ``RunResult``: the same text, messages, tool
        call records and session events (with the same ids) as an in-process run.

        Raises:
            ProviderError: a model request failed (its message says why).
            temporalio.client.WorkflowFailureError: the run was cancelled or terminated.
        """
        data = await self._handle.result()
        result = _run_result(self._prompt, data)
        if data["status"] == "error":
            error = ProviderError(None, data.get("error", "a model request failed"))
            error.partial = result
            raise error
        return result

    async def cancel(self) -> None:
        """Ask the run to stop: its running tool calls are cancelled through their heartbeats,
        and ``result()`` then raises."""
        await self._handle.cancel()


def _run_result(prompt: str, data: dict[str, Any]) -> RunResult:
    """The ``RunResult`` of a finished durable run, with its session log rebuilt in order."""
    session = Session()
    session.append("user_message", {"content": encodable_text(prompt)})  # as sent
    records: list[ToolCallRecord] = []
    usage = Usage()
    models: list[str] = []
    text = ""
    for turn in data["turns"]:
        reply = turn["reply"]
        calls = [call_from_wire(c) for c in reply["calls"]]
        text = reply["text"]
        models.append(reply["model"])
        usage.add(Usage(**reply["usage"]))
        transcript_calls = [
            {"id": c.id, "name": c.name, "arguments": transcript_arguments(c)} for c in calls
        ]
        session._append_json("assistant_message", {"content": text, "tool_calls": transcript_calls})
        for call, wire in zip(calls, turn["outcomes"], strict=False):
            outcome = outcome_from_wire(wire)
            record_tool_result(session, call, outcome)
            records.append(
                ToolCallRecord(
                    call.id,
                    call.name,
                    transcript_arguments(call),
                    outcome.text,
                    not outcome.ok,
                    outcome.metadata,
                )
            )
    return RunResult(
        text=text,
        messages=data["messages"],
        tool_calls=records,
        turns=len(data["turns"]),
        usage=usage,
        status=data["status"],
        session=session,
        models=models,
    )
