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
# The package's interface to the layers above it: what they use that is not public API
# (it may change in any release), imported here so that they read this package, never its
# private modules.
from toolnexus.tools._calls import Prechecked as Prechecked
from toolnexus.tools._calls import direct_dispatch as direct_dispatch
from toolnexus.tools._calls import dispatch_call as dispatch_call
from toolnexus.tools._calls import needs_approval as needs_approval
from toolnexus.tools._calls import refuse_caller as refuse_caller
from toolnexus.tools._calls import start_prechecked as start_prechecked
from toolnexus.tools._guards import guards_from as guards_from
from toolnexus.tools._hooks import maybe_await as maybe_await
from toolnexus.tools._mcp_content import ContentParts as ContentParts
from toolnexus.tools._outcome import outcome_from_exception as outcome_from_exception
from toolnexus.tools._outcome import outcome_from_value as outcome_from_value
from toolnexus.tools._outcome import outcome_of as outcome_of
from toolnexus.tools._outcome import retry_outcome as retry_outcome
from toolnexus.tools._policy import filter_tools as filter_tools
from toolnexus.tools._relay import is_relay as is_relay
from toolnexus.tools._resources import resolves_paths as resolves_paths

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
