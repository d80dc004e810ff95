"""Durable, distributed tool calls on Temporal, by the same scheduling rule as in process.

A workflow drives the pure scheduling rule; each tool call is an activity that any worker on
the task queue may run. Reads overlap up to the cap across all workers, an unsafe call runs
alone, per-resource order holds, outcomes come back in emitted order, and a call that completed
is never run again (a replay serves its result from the history). Work of any length continues
as new before a run's history nears Temporal's limits, and totals past its 2 MB payload limit
travel through a payload store the workers share (`file_store`). See ``docs/temporal.md``.

Needs the ``temporal`` extra (``temporalio``).
"""

from toolnexus.errors import MissingExtraError

try:
    import temporalio  # noqa: F401  # the extra, checked before anything imports from it
except ImportError as exc:
    raise MissingExtraError("toolnexus.temporal (temporalio)", "temporal") from exc

from toolnexus.temporal._client import RunHandle, run_batch, run_program, start_program, start_run
from toolnexus.temporal._wire import MAX_RESULT_BYTES, FileStore, Timings, file_store
from toolnexus.temporal._worker import replayer, worker
from toolnexus.temporal._workflows import (
    BATCH_WORKFLOW,
    CONTINUE_AFTER,
    LOST,
    PROGRAM_WORKFLOW,
    RUN_WORKFLOW,
    BatchWorkflow,
    ProgramWorkflow,
    RunWorkflow,
)

__all__ = [
    "BATCH_WORKFLOW",
    "CONTINUE_AFTER",
    "LOST",
    "MAX_RESULT_BYTES",
    "PROGRAM_WORKFLOW",
    "RUN_WORKFLOW",
    "BatchWorkflow",
    "FileStore",
    "ProgramWorkflow",
    "RunHandle",
    "RunWorkflow",
    "Timings",
    "file_store",
    "replayer",
    "run_batch",
    "run_program",
    "start_program",
    "start_run",
    "worker",
]
