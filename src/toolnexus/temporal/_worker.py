"""Workers: the processes that run toolnexus workflows and the activities of their tools."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from temporalio.client import Client as TemporalClient
from temporalio.worker import Replayer, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from toolnexus.client import Client
from toolnexus.errors import ConfigurationError
from toolnexus.temporal._activities import ModelActivities, ToolActivities
from toolnexus.temporal._workflows import BatchWorkflow, RunWorkflow
from toolnexus.tools import Tool, Toolkit

__all__ = ["WORKFLOWS", "replayer", "worker"]

WORKFLOWS = [BatchWorkflow, RunWorkflow]


def worker(
    temporal_client: TemporalClient,
    *,
    task_queue: str,
    tools: Toolkit | Iterable[Tool],
    client: Client | None = None,
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
            (`start_run`); without one, this worker runs batches and tool calls only.
        **options: Passed on to ``temporalio.worker.Worker`` (``max_concurrent_activities``,
            ``identity``, ...).

    Returns:
        The ``temporalio.worker.Worker``: ``async with`` it, or ``await worker.run()``.

    Raises:
        ConfigurationError: ``client`` is not a toolnexus ``Client``.
    """
    kit = tools if isinstance(tools, Toolkit) else Toolkit(list(tools))
    calls = ToolActivities(kit)
    activities: list[Any] = [calls.classify, calls.call_tool]
    if client is not None:
        if not isinstance(client, Client):
            raise ConfigurationError(
                f"worker(client=...) takes a toolnexus Client (create_client(...)), got "
                f"{type(client).__name__}."
            )
        model = ModelActivities(client, kit)
        activities += [model.opening, model.model_turn, model.results]
    options.setdefault("workflow_runner", _runner())
    return Worker(
        temporal_client,
        task_queue=task_queue,
        workflows=WORKFLOWS,
        activities=activities,
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
