"""The scheduling core: one lane that orders native tool calls and Code Mode sub-calls alike.

The rule is explained once, with a diagram, in ``docs/scheduling.md``.
"""

from toolnexus._snapshot import snapshot
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
    "run_batch",
    "snapshot",
]
