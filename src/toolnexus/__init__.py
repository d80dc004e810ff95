"""toolnexus: runs the tool calls of LLM agents safely and fast.

Native tool calls and Code Mode programs go through one scheduling core: reads overlap up to a
cap, anything not known to be safe runs alone in the order the model asked, and results always
come back in the emitted order. Start with ``docs/scheduling.md``.
"""

import logging

from toolnexus._version import __version__
from toolnexus.client import Client, Endpoint, Retries, Timeouts, create_client
from toolnexus.codemode import Execution, RunContext
from toolnexus.errors import (
    ConfigurationError,
    ModelRetry,
    ProviderError,
    ToolError,
    ToolnexusError,
)
from toolnexus.scheduling import Outcome, Scheduler, ToolCall, run_batch
from toolnexus.session import Session
from toolnexus.tools import Guards, Resources, Tool, ToolHints, Toolkit, ToolResult, tool

__all__ = [
    "Client",
    "ConfigurationError",
    "Endpoint",
    "Execution",
    "Guards",
    "ModelRetry",
    "Outcome",
    "ProviderError",
    "Resources",
    "Retries",
    "RunContext",
    "Scheduler",
    "Session",
    "Timeouts",
    "Tool",
    "ToolCall",
    "ToolError",
    "ToolHints",
    "ToolResult",
    "Toolkit",
    "ToolnexusError",
    "__version__",
    "create_client",
    "run_batch",
    "tool",
]

# A library configures no output: without this, Python's last-resort handler would print the
# library's warnings on stderr. Applications choose (the CLI's -v, or logging.basicConfig).
logging.getLogger("toolnexus").addHandler(logging.NullHandler())
