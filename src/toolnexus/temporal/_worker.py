"""Workers: the processes that run toolnexus workflows and the activities of their tools."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from temporalio.client import Client as TemporalClient
from temporalio.worker import Replayer, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from toolnexus.client import Client
from toolnexus.codemode.runtimes import Budgets, CodeRuntime
from toolnexus.errors import ConfigurationError
from toolnexus.temporal._activities import ModelActivities, ProgramActivities, ToolActivities
from toolnexus.temporal._workflows import BatchWorkflow, ProgramWorkflow, RunWorkflow
from toolnexus.tools import Tool, Toolkit

__all__ = ["STICKY_TIMEOUT", "WORKFLOWS", "replayer", "worker"]

WORKFLOWS = [BatchWorkflow, ProgramWorkflow, RunWorkflow]

STICKY_TIMEOUT = timedelta(seconds=2)
"""How long a workflow's next task waits for the worker that ran its last one before any
worker may take it (Temporal's default is 10 s)."""


def worker(
    temporal_client: TemporalClient,
    *,
    task_queue: str,
    tools: Toolkit | Iterable[Tool],
    client: Client | None = None,
    code_language: str = "python",
    code_runtime: CodeRuntime | None = None,
    **options: Any,
) -> Worker:
    """A Temporal worker that runs toolnexus workflows and the calls of ``tools``.

    Start as many as you like, on as many machines, on one ``task_queue``: the workflows decide
    what runs when, the workers only run what they schedule. Tools are matched by name between
    the caller and the workers, so every worker of a queue should have the same tools.

    Args:
        temporal_client: A connected ``temporalio.client.Client``.
        task_queue: The queue to poll.
        tools: The tools this worker runs (``@tool`` functions, built-ins, MCP tools).
        client: The toolnexus ``Client`` that makes the model requests of durable agent runs
            (`start_run`), whose limits and guards (``permissions``, approval handler, hooks,
            ``deps``) the runs keep, as its in-process runs do; without one, this worker
            runs batches and tool calls only.
        code_language: The language of the programs a ``run_code`` tool among ``tools``
            receives (``"python"`` or ``"javascript"``). Such a call runs as a durable
            program: its sub-calls are activities too.
        code_runtime: The sandbox durable programs of its language run in (default: the
            process-wide runtime). Its budgets apply to each step, which re-runs the whole
            program: a program with many sub-calls needs a ``max_sub_calls`` to match, e.g.
            ``MontyRuntime(max_sub_calls=50_000)``.
        **options: Passed on to ``temporalio.worker.Worker`` (``max_concurrent_activities``,
            ``identity``, ...); ``workflows`` and ``activities`` of your own are added to
            toolnexus's. ``sticky_queue_schedule_to_start_timeout`` defaults to
            `STICKY_TIMEOUT` (2 s) instead of Temporal's 10 s: a workflow whose worker died
            moves to another worker after that long, so a lost worker delays a run by
            seconds, not tens of seconds.

    Returns:
        The ``temporalio.worker.Worker``: ``async with`` it, or ``await worker.run()``.

    Raises:
        ConfigurationError: ``client`` is not a toolnexus ``Client``, or ``code_runtime`` is
            not a Code Mode runtime.
    """
    kit = tools if isinstance(tools, Toolkit) else Toolkit(list(tools))
    if code_runtime is not None and not isinstance(getattr(code_runtime, "budgets", None), Budgets):
        raise ConfigurationError(
            "worker(code_runtime=...) takes a Code Mode runtime (MontyRuntime(...) or "
            f"V8Runtime(...)), got {type(code_runtime).__name__}."
        )
    calls = ToolActivities(kit, code_language, client if isinstance(client, Client) else None)
    programs = ProgramActivities(kit, code_runtime)
    activities: list[Any] = [calls.classify, calls.call_tool, programs.program_step]
    if client is not None:
        if not isinstance(client, Client):
            raise ConfigurationError(
                f"worker(client=...) takes a toolnexus Client (create_client(...)), got "
                f"{type(client).__name__}."
            )
        model = ModelActivities(client, kit)
        activities += [model.opening, model.model_turn, model.results]
    options.setdefault("workflow_runner", _runner())
    options.setdefault("sticky_queue_schedule_to_start_timeout", STICKY_TIMEOUT)
    return Worker(
        temporal_client,
        task_queue=task_queue,
        workflows=[*WORKFLOWS, *options.pop("workflows", [])],
        activities=[*activities, *options.pop("activities", [])],
        **options,
    )


def replayer(**options: Any) -> Replayer:
    """A ``temporalio.worker.Replayer`` for toolnexus workflows: replays a recorded history
    (``await replayer().replay_workflow(history)``) and fails if the code would now decide
    differently. Run it on recorded histories before deploying a new version of the workers."""
    options.setdefault("workflow_runner", _runner())
    return Replayer(workflows=WORKFLOWS, **options)


def _runner() -> SandboxedWorkflowRunner:
    """Temporal's workflow sandbox, with toolnexus passed through.

    Why: the sandbox re-imports a workflow's modules to keep them deterministic, and importing
    ``toolnexus`` pulls in HTTP clients and subprocess code the sandbox refuses. The workflow
    code only uses the pure scheduling rule, so the package is shared as it is.
    """
    restrictions = SandboxRestrictions.default.with_passthrough_modules("toolnexus")
    return SandboxedWorkflowRunner(restrictions=restrictions)
