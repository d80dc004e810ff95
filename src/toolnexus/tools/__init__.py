"""Tools: what a model can call, how it is described, and how its arguments are checked."""

from toolnexus.tools._decorator import tool
from toolnexus.tools._hooks import AfterHook, BeforeHook, ToolHooks
from toolnexus.tools._safety import Mode, concurrency_mode
from toolnexus.tools._tool import ConcurrencyPredicate, Tool, ToolHints, ToolResult
from toolnexus.tools._toolkit import Toolkit

__all__ = [
    "AfterHook",
    "BeforeHook",
    "ConcurrencyPredicate",
    "Mode",
    "Tool",
    "ToolHints",
    "ToolHooks",
    "ToolResult",
    "Toolkit",
    "concurrency_mode",
    "tool",
]
