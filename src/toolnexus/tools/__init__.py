"""Tools: what a model can call, how it is described, and how its arguments are checked."""

from toolnexus.tools._calls import ApprovalHandler, RunContext
from toolnexus.tools._decorator import tool
from toolnexus.tools._guards import Guards
from toolnexus.tools._hooks import AfterHook, BeforeHook, ToolHooks
from toolnexus.tools._outcome import HostReason, Outcome
from toolnexus.tools._policy import PermissionPolicy
from toolnexus.tools._resources import Resources, ResourcesFunction
from toolnexus.tools._safety import Mode, classify, concurrency_mode
from toolnexus.tools._tool import ConcurrencyPredicate, Tool, ToolHints, ToolResult
from toolnexus.tools._toolkit import Toolkit

# isort: split
# For the layers above (Code Mode, the gateway), which take guards as objects and as keywords.
# Not public API.
from toolnexus.tools._guards import guards_from as guards_from

__all__ = [
    "AfterHook",
    "ApprovalHandler",
    "BeforeHook",
    "ConcurrencyPredicate",
    "Guards",
    "HostReason",
    "Mode",
    "Outcome",
    "PermissionPolicy",
    "Resources",
    "ResourcesFunction",
    "RunContext",
    "Tool",
    "ToolHints",
    "ToolHooks",
    "ToolResult",
    "Toolkit",
    "classify",
    "concurrency_mode",
    "tool",
]
