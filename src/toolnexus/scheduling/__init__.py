"""The scheduling core: one lane that orders native tool calls and Code Mode sub-calls alike.

The rule is explained once, with a diagram, in ``docs/scheduling.md``.
"""

from toolnexus._snapshot import result_snapshot, snapshot
from toolnexus.scheduling._batch import ToolCall, run_batch
from toolnexus.scheduling._limits import max_tool_concurrency
from toolnexus.scheduling._rule import EVERYTHING, MAX_KEY_WORK, Mode, SchedulingRule, Wait
from toolnexus.scheduling._scheduler import (
    AuditNaming,
    Dispatch,
    Scheduler,
    Ticket,
    invoke_tool,
)
from toolnexus.tools import HostReason, Outcome, concurrency_mode

# isort: split
# The package's interface to the layers above it: what they use that is not public API
# (it may change in any release), imported here so that they read this package, never its
# private modules.
from toolnexus.scheduling._batch import caller_id as caller_id
from toolnexus.scheduling._batch import check_calls as check_calls
from toolnexus.scheduling._batch import parse_arguments as parse_arguments
from toolnexus.scheduling._batch import precheck as precheck
from toolnexus.scheduling._batch import record_tool_result as record_tool_result
from toolnexus.scheduling._batch import transcript_arguments as transcript_arguments
from toolnexus.scheduling._scheduler import DID_NOT_COMPLETE as DID_NOT_COMPLETE

__all__ = [
    "EVERYTHING",
    "MAX_KEY_WORK",
    "AuditNaming",
    "Dispatch",
    "HostReason",
    "Mode",
    "Outcome",
    "Scheduler",
    "SchedulingRule",
    "Ticket",
    "ToolCall",
    "Wait",
    "concurrency_mode",
    "invoke_tool",
    "max_tool_concurrency",
    "result_snapshot",
    "run_batch",
    "snapshot",
]
