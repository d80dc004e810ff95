"""Starting durable work from a caller: a batch of tool calls, or a whole agent run."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from typing import Any

from temporalio.client import Client as TemporalClient
from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError

from toolnexus._checks import positive_int, positive_number
from toolnexus._json import encodable_text
from toolnexus.client import (
    ASK_FOR_OUTPUT,
    OUTPUT_TOOL,
    Output,
    RunResult,
    ToolCallRecord,
    Usage,
    model_response,
    provider_stop,
    requested_output,
)
from toolnexus.codemode import Execution, execution_from
from toolnexus.errors import (
    ConfigurationError,
    ModelRetry,
    ProviderError,
    ProviderProtocolError,
    ProviderRateLimited,
    ProviderStatusError,
    ProviderTimeout,
    ProviderUnreachable,
)
from toolnexus.scheduling import (
    Outcome,
    ToolCall,
    check_calls,
    max_tool_concurrency,
    record_tool_result,
    transcript_arguments,
)
from toolnexus.session import Session, events
from toolnexus.temporal._history import RunHistory, read_history
from toolnexus.temporal._wire import (
    PAYLOAD_BUDGET,
    Timings,
    call_from_wire,
    call_to_wire,
    has_store,
    outcome_from_wire,
    permissions_to_wire,
    stored_size,
)
from toolnexus.temporal._workflows import (
    BATCH_WORKFLOW,
    CONTINUE_AFTER,
    PROGRAM_WORKFLOW,
    RUN_WORKFLOW,
    TOO_LARGE,
)
from toolnexus.tools import Guards

DIGEST = "toolnexus_request"
"""The memo key holding a digest of what a workflow was started with: a resubmission under the
same id is matched against it."""


def _common(
    temporal_client: object,
    task_queue: object,
    max_parallel: int | None,
    execution: Execution | None,
    guards: Guards | None,
    timings: Timings | None,
    workflow_id: object,
    continue_after: object,
) -> dict[str, Any]:
    """The checked options every durable entry point shares, as request fields (the caller's
    permissions only when given, so a request made without them is the one made before).

    Raises:
        ConfigurationError: one of them is of the wrong kind or out of range.
    """
    cap = _cap(execution, max_parallel)  # first, as when it was an argument
    if not isinstance(temporal_client, TemporalClient):
        raise ConfigurationError(
            "the first argument must be a connected temporalio.client.Client "
            f"(await Client.connect(address)), got {type(temporal_client).__name__}."
        )
    if not isinstance(task_queue, str) or not task_queue:
        raise ConfigurationError(f"task_queue must be a non-empty string, got {task_queue!r}.")
    if workflow_id is not None and (not isinstance(workflow_id, str) or not workflow_id):
        raise ConfigurationError(
            f"workflow_id must be a non-empty string or None, got {workflow_id!r}."
        )
    if timings is not None and not isinstance(timings, Timings):
        raise ConfigurationError(
            f"timings must be a toolnexus.temporal.Timings, got {type(timings).__name__}."
        )
    permissions = permissions_to_wire(guards)
    return {
        "max_parallel": max_tool_concurrency(cap),
        "timings": (timings or Timings()).to_wire(),
        "store": has_store(temporal_client.data_converter),
        "continue_after": positive_int("continue_after", continue_after),
        **({"permissions": permissions} if permissions is not None else {}),
    }


def _cap(execution: Execution | None, max_parallel: int | None) -> int | None:
    """The cap a durable entry point was given: ``execution``'s, else ``max_parallel``.

    Raises:
        ConfigurationError: both given, saying different things.
    """
    given = execution_from(execution, "the durable entry point", max_parallel=max_parallel)
    return max_parallel if given is None else given.max_tool_concurrency


async def _start(
    temporal_client: TemporalClient,
    workflow: str,
    request: dict[str, Any],
    workflow_id: str | None,
    default_prefix: str,
    task_queue: str,
    memo: dict[str, Any] | None = None,
) -> WorkflowHandle[Any, Any]:
    """Start ``workflow`` once per id: a second submission under an id that ran (or runs)
    gets that workflow's handle, never a second run; one that asked for something else under
    the same id is refused. ``memo``: more memo fields the workflow is started with.

    Raises:
        ConfigurationError: the request does not fit one Temporal payload (and the client has
            no payload store), or ``workflow_id`` was used for a different request.
    """
    converter = temporal_client.data_converter.payload_converter
    if not request["store"]:
        size = stored_size(request, converter)
        if size > PAYLOAD_BUDGET:
            raise ConfigurationError(
                f"the {workflow} request takes {size:,} bytes as Temporal stores it, past its "
                "2 MB payload limit; connect the caller and the workers with "
                "data_converter=toolnexus.temporal.file_store(directory) to send it in parts "
                "through a store they share."
            )
    digest = hashlib.sha256(
        json.dumps(request, sort_keys=True, default=repr).encode("utf-8", "replace")
    ).hexdigest()
    chosen = workflow_id or f"{default_prefix}-{uuid.uuid4()}"
    try:
        handle = await temporal_client.start_workflow(
            workflow,
            request,
            id=chosen,
            task_queue=task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            memo={**(memo or {}), DIGEST: digest},
        )
    except WorkflowAlreadyStartedError:
        handle = temporal_client.get_workflow_handle(chosen)
    if workflow_id is not None:
        described = await handle.describe()
        recorded = (await described.memo()).get(DIGEST)
        if described.workflow_type != workflow or recorded != digest:
            raise ConfigurationError(
                f"workflow id {workflow_id!r} already ran a different request "
                f"({described.workflow_type}); a resubmission must send the same one, and new "
                "work needs a new id."
            )
    return handle


__all__ = ["RunHandle", "run_batch", "run_program", "start_program", "start_run"]


async def run_batch(
    temporal_client: TemporalClient,
    calls: Sequence[ToolCall],
    *,
    task_queue: str,
    max_parallel: int | None = None,
    timings: Timings | None = None,
    session: Session | None = None,
    workflow_id: str | None = None,
    continue_after: int = CONTINUE_AFTER,
    execution: Execution | None = None,
    guards: Guards | None = None,
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
        workflow_id: The workflow's id (a fresh one by default). It makes a retried
            submission safe: resubmitting the same batch under the id of one that runs or ran
            returns that batch's outcomes (its calls never run again); a different batch under
            a used id is refused.
        continue_after: A run of the workflow continues as new once its history has this many
            events (sooner when Temporal suggests it): a batch of any length completes.
        execution: An [`Execution`][toolnexus.codemode.Execution] whose
            ``max_tool_concurrency`` is the cap (instead of ``max_parallel``; both, differing,
            is an error). Its other knobs are the workers' (``worker(..., client=...)``): a
            durable run's tool calls run there.
        guards: A [`Guards`][toolnexus.tools.Guards] whose ``permissions`` narrow the tools
            the calls may call (``deny``, ``deny_prefixes``, ``allow``): a call to a tool they
            leave out is answered as a call to an unknown tool, without running. They narrow
            what the workers allow and never widen it; approvals and hooks are the workers'
            client's (its approval handler is a function, which cannot travel to them).

    Raises:
        ConfigurationError: ``calls`` holds something that is not a ``ToolCall``, an option
            is of the wrong kind, ``guards`` holds more than permissions that narrow, the
            batch does not fit one Temporal payload without a payload store (`file_store`),
            ``workflow_id`` ran a different batch, or (without a store) the outcomes of a
            batch so large that even left in its history they would not fit one payload (the
            batch fails then, it does not stall).
    """
    check_calls(calls)
    request = {
        "calls": [call_to_wire(call) for call in calls],
        **_common(
            temporal_client,
            task_queue,
            max_parallel,
            execution,
            guards,
            timings,
            workflow_id,
            continue_after,
        ),
    }
    handle = await _start(
        temporal_client, BATCH_WORKFLOW, request, workflow_id, "toolnexus-batch", task_queue
    )
    try:
        result = await handle.result()
    except WorkflowFailureError as exc:
        cause = exc.cause
        if isinstance(cause, ApplicationError) and cause.type == TOO_LARGE:
            raise ConfigurationError(cause.message) from None
        raise
    parts = [i for i, data in enumerate(result["outcomes"]) if isinstance(data, int)]
    history = None
    if parts or session is not None:  # one reading of the histories serves both
        history = await read_history(temporal_client, handle.id)
    wire = list(result["outcomes"])
    for index in parts:  # left in a history: the activity result of "<position>:<call id>"
        assert history is not None
        payloads = history.results[f"{index}:{calls[index].id}"].payloads
        [wire[index]] = await temporal_client.data_converter.decode(payloads, [dict])
    outcomes = [outcome_from_wire(data) for data in wire]
    if session is not None:
        assert history is not None
        for index, (call, outcome) in enumerate(zip(calls, outcomes, strict=True)):
            finished = history.record_call(session, str(index), call, outcome, lane=1)
            record_tool_result(session, call, outcome, at=finished)
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
    continue_after: int = CONTINUE_AFTER,
    execution: Execution | None = None,
    guards: Guards | None = None,
) -> dict[str, Any]:
    """Run a Code Mode program durably; returns what ``toolnexus.codemode.run_program`` does.

    Each sub-call is an activity, scheduled by the rule; the program itself runs in steps on
    the workers, each re-running it with the outcomes recorded so far (see ``docs/temporal.md``
    for why that is safe and what it asks of a program). A worker lost in the middle never
    makes a completed sub-call run again.

    ``workflow_id``, ``continue_after``, ``execution`` and ``guards`` work as for `run_batch`:
    a program
    with any number of sub-calls completes, and a resubmitted program returns its recorded
    output.

    Raises:
        ConfigurationError: ``code`` or ``call_id`` is not a string, ``language`` is not
            ``"python"`` or ``"javascript"``, or another option is wrong (as for `run_batch`).
    """
    handle = await start_program(
        temporal_client,
        code,
        task_queue=task_queue,
        language=language,
        max_parallel=max_parallel,
        timings=timings,
        call_id=call_id,
        workflow_id=workflow_id,
        continue_after=continue_after,
        execution=execution,
        guards=guards,
    )
    output: dict[str, Any] = await handle.result()
    return output


async def start_program(
    temporal_client: TemporalClient,
    code: str,
    *,
    task_queue: str,
    language: str = "python",
    max_parallel: int | None = None,
    timings: Timings | None = None,
    call_id: str = "program",
    workflow_id: str | None = None,
    continue_after: int = CONTINUE_AFTER,
    memo: dict[str, Any] | None = None,
    execution: Execution | None = None,
    guards: Guards | None = None,
) -> WorkflowHandle[Any, Any]:
    """Start a durable program (as `run_program` does) and return its workflow handle at
    once, for a caller that fetches the output later (``await handle.result()``), from this
    process or, by the workflow id, from another; ``memo`` adds fields to the workflow's
    memo (what the gateway's durable tasks keep about their owner and TTL).

    Raises:
        ConfigurationError: as for `run_program`.
    """
    if not isinstance(code, str):
        raise ConfigurationError(
            f"run_program takes the program as a string of code, got {type(code).__name__}."
        )
    if language not in ("python", "javascript"):
        raise ConfigurationError(
            f"Code Mode language must be 'python' or 'javascript', got {language!r}."
        )
    if not isinstance(call_id, str):
        raise ConfigurationError(f"call_id must be a string, got {call_id!r}.")
    request = {
        "code": code,
        "language": language,
        "call_id": call_id,
        **_common(
            temporal_client,
            task_queue,
            max_parallel,
            execution,
            guards,
            timings,
            workflow_id,
            continue_after,
        ),
    }
    return await _start(
        temporal_client,
        PROGRAM_WORKFLOW,
        request,
        workflow_id,
        "toolnexus-program",
        task_queue,
        memo,
    )


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
    continue_after: int = CONTINUE_AFTER,
    output_type: Any = None,
    output_retries: int = 1,
    execution: Execution | None = None,
    guards: Guards | None = None,
) -> RunHandle:
    """Start a durable agent run (the durable ``Client.run``) and return its handle.

    It keeps the limits of ``Client.run``: ``max_turns``; each tool's ``retries`` (a
    ``ModelRetry`` or arguments that do not validate, counted per tool and per response: past
    them the run stops as ``"incomplete"`` with ``stopped_by`` naming the tool); the output
    type's ``output_retries``; and the workers' client's ``turn_timeout``, ``retries``,
    ``calls_timeout`` and ``tool_choice``, and its guards on every call (``permissions``,
    ``approval_handler``, ``hooks``, ``deps``, ``relay_handler``). See ``docs/temporal.md``.

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
        workflow_id: The run's id (a fresh one by default); starting the same run again
            under it returns the handle of the one that runs or ran.
        continue_after: As for `run_batch`: a run of any length continues as new between
            turns (or inside a turn's batch), its messages and records carried over.
        execution: As for `run_batch` (its cap instead of ``max_parallel``).
        guards: As for `run_batch`: its permissions narrow the tools the model is offered
            and its calls may call, beyond what the workers' client allows.
        output_type: Ask for a structured answer, as ``Client.run`` does: the model hands it
            over through a ``final_result`` tool, and ``RunResult.output`` holds the typed
            value. The workers check the arguments against the type's JSON Schema (field
            errors go back to the model); the type's own validators run when the result is
            read (`RunHandle.result`), in this process, where the type is.
        output_retries: How often the model may try again to hand over its result (a text
            answer, or one that does not match the schema, is one try).

    Raises:
        ConfigurationError: ``prompt`` is not a string, ``max_turns`` is below 1,
            ``model_timeout`` is not a finite number of seconds above zero, ``output_type``
            cannot be described as JSON Schema, ``output_retries`` is not an int >= 0, or
            another option is wrong (as for `run_batch`).
    """
    if not isinstance(prompt, str):
        raise ConfigurationError(f"start_run takes the prompt as a string, got {prompt!r}.")
    positive_int("max_turns", max_turns)
    if not positive_number(model_timeout):
        raise ConfigurationError(
            f"model_timeout must be a finite number of seconds above zero, got {model_timeout!r}."
        )
    output = requested_output(output_type, output_retries)
    request = {
        "prompt": prompt,
        "max_turns": max_turns,
        "model_timeout": model_timeout,
        **_common(
            temporal_client,
            task_queue,
            max_parallel,
            execution,
            guards,
            timings,
            workflow_id,
            continue_after,
        ),
    }
    if output is not None:  # absent otherwise: a run without one is started as before
        request["output"] = {"schema": output.tool.input_schema, "retries": output.retries}
    handle = await _start(
        temporal_client, RUN_WORKFLOW, request, workflow_id, "toolnexus-run", task_queue
    )
    return RunHandle(temporal_client, handle, prompt, output)


_PROVIDER_ERRORS: dict[str, type[ProviderError]] = {
    kind.__name__: kind
    for kind in (
        ProviderError,
        ProviderTimeout,
        ProviderUnreachable,
        ProviderStatusError,
        ProviderRateLimited,
        ProviderProtocolError,
    )
}
"""The provider errors a model activity's failure names (its ``kind``), by name."""


def _provider_error(said: dict[str, Any], message: str) -> ProviderError:
    """The provider error a durable run's model turn failed with, of the class it was raised
    as in the activity; a record without a ``kind`` (a run from before) is a `ProviderError`."""
    kind = _PROVIDER_ERRORS.get(str(said.get("kind")), ProviderError)
    error = kind(said.get("status"), message, said.get("detail"))
    if isinstance(error, ProviderRateLimited):
        after = said.get("retry_after")
        error.retry_after = float(after) if isinstance(after, (int, float)) else None
    return error


class RunHandle:
    """A durable agent run: its id, its result as a ``RunResult``, and cancellation."""

    def __init__(
        self,
        temporal_client: TemporalClient,
        handle: WorkflowHandle[Any, Any],
        prompt: str,
        output: Output | None = None,
    ) -> None:
        self._client = temporal_client
        self._handle = handle
        self._prompt = prompt
        self._output = output

    @classmethod
    def attach(
        cls,
        temporal_client: TemporalClient,
        run_id: str,
        prompt: str,
        *,
        output_type: Any = None,
        output_retries: int = 1,
    ) -> RunHandle:
        """The handle of a run started elsewhere (by this or another process); a run started
        with an ``output_type`` is attached with the same one, to read its typed output.

        Raises:
            ConfigurationError: ``output_type`` or ``output_retries`` is unusable (as for
                `start_run`).
        """
        output = requested_output(output_type, output_retries)
        handle = temporal_client.get_workflow_handle(run_id)
        return cls(temporal_client, handle, prompt, output)

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
        history = await read_history(self._client, self._handle.id)
        result = _run_result(self._prompt, data, history, self._output)
        if data["status"] == "error":
            said = data.get("provider_error") or {}
            message = data.get("error", "a model request failed")
            error = _provider_error(said, message)
            error.partial = result
            raise error
        return result

    async def cancel(self) -> None:
        """Ask the run to stop: its running tool calls are cancelled through their heartbeats,
        and ``result()`` then raises."""
        await self._handle.cancel()


def _recorded(reply: dict[str, Any]) -> dict[str, Any] | None:
    """The provider's own message of a durable turn, with its keys in the order it came in:
    the model activity sends it as JSON text, since Temporal's payloads sort an object's keys
    (a run started by an earlier version sent the object itself)."""
    text = reply.get("recorded_json")
    return json.loads(text) if isinstance(text, str) else reply.get("recorded")


def _run_result(
    prompt: str, data: dict[str, Any], times: RunHistory, output: Output | None = None
) -> RunResult:
    """The ``RunResult`` of a finished durable run, with its session log rebuilt in order: its
    events at the times the histories give (`RunHistory`), each call's ``call_timing`` too.

    ``output``: the run's output type, which checks the result the workers accepted (its own
    validators run here); a result it refuses ends the run as ``"incomplete"``, saying why.
    """
    session = Session()
    opening = times.activities.get("model:0")  # the prompt was sent with the first request
    prompt_event = events.user_message(encodable_text(prompt))  # as sent
    session._append_json(*prompt_event, at=opening.scheduled if opening else None)
    records: list[ToolCallRecord] = []
    usage = Usage()
    models: list[str] = []
    text = ""
    stopped_by = data.get("stopped_by")
    status = data["status"]
    accepted: Any = _NOTHING
    for number, turn in enumerate(data["turns"], start=1):
        reply = turn["reply"]
        calls = [call_from_wire(c) for c in reply["calls"]]
        text = reply["text"]
        models.append(reply["model"])
        usage.add(Usage(**reply["usage"]))
        stop_reason = reply.get("stop_reason")
        request = times.activities.get(f"model:{number - 1}")
        answered = request.closed if request is not None else None
        if request is not None:
            session._append_json(*events.turn_start(number), at=request.scheduled)
        response = model_response(number, reply["model"], Usage(**reply["usage"]), stop_reason)
        session._append_json(*response, at=answered)
        ending = reply.get("ending", "answered")
        if ending in ("refused", "context_window"):  # as in process: a bookkeeping event
            _, stopped_by = provider_stop(ending, reply["stop_reason"], reply["stop_details"])
            reason = reply["stop_reason"] or ending
            session.log_event(*events.model_stop(number, reason, reply["stop_details"], text))
            session._append_json(*events.turn_end(number), at=answered)  # as in process
            continue
        transcript_calls = [
            {"id": c.id, "name": c.name, "arguments": transcript_arguments(c)}
            | ({"caller": dict(c.caller)} if c.caller is not None else {})
            for c in calls
        ]
        said = events.assistant_message(  # the endpoint whose state it is, as in process
            text, transcript_calls, _recorded(reply), reply["family"], reply.get("endpoint")
        )
        session._append_json(*said, at=answered)
        waits = {wait[0]: wait for wait in turn.get("waits", [])}
        outcomes = [outcome_from_wire(wire) for wire in turn["outcomes"]]
        # as in process: the lane logs each call's timing as it commits, then the turn's
        # results enter the transcript
        ended = [
            times.record_call(session, f"{number - 1}:{index}", call, outcome, number, wait)
            for index, (call, outcome) in enumerate(zip(calls, outcomes, strict=False))
            for wait in [waits.get(index)]
        ]
        over = max((t for t in ended if t is not None), default=answered)
        for call, outcome in zip(calls, outcomes, strict=False):
            record_tool_result(session, call, outcome, at=over)  # once the turn's calls are done
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
            if output is not None and call.name == OUTPUT_TOOL and outcome.ok:
                accepted = transcript_arguments(call)
        if turn.get("asked_for_output"):  # a text answer where the output tool was asked for
            session._append_json(*events.user_message(ASK_FOR_OUTPUT), at=answered)
        session._append_json(*events.turn_end(number), at=over)  # as in process
    value = None
    if output is not None and accepted is not _NOTHING and status == "done":
        value, refused = _checked_output(output, accepted)
        if refused is not None:
            status, stopped_by = "incomplete", refused
    return RunResult(
        text=text,
        messages=data["messages"],
        tool_calls=records,
        turns=len(data["turns"]),
        usage=usage,
        status=status,
        session=session,
        models=models,
        stopped_by=stopped_by,
        output=value,
    )


_NOTHING = object()


def _checked_output(output: Output, arguments: Any) -> tuple[Any, str | None]:
    """(the typed value, ``None``), or (``None``, why the type refused) for the arguments of
    the ``final_result`` call the workers accepted by the schema."""
    try:
        output.tool.execute(arguments)
    except ModelRetry as exc:
        return None, (
            f"the final result matched its schema on the workers, but not output_type's own "
            f"validators: {exc}"
        )
    return output.value, None
