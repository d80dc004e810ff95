"""The agent client: a model endpoint (OpenAI- or Anthropic-style) with the tool loop around it.

Each model turn's tool calls run through one scheduler lane (``docs/scheduling.md``); Code Mode
is built in (``docs/codemode.md``). See ``docs/client.md``.
"""

from toolnexus.client._client import Client, ClientStyle, create_client
from toolnexus.client._endpoint import Endpoint, Retries, Timeouts
from toolnexus.client._loop import Meter
from toolnexus.client._result import (
    DoneEvent,
    RunResult,
    RunStatus,
    StreamEvent,
    TextDelta,
    ToolCallEvent,
    ToolCallRecord,
    ToolResultEvent,
    UsageEvent,
)
from toolnexus.client.styles import Usage

# isort: split
# The package's interface to the layers above it: what they use that is not public API
# (it may change in any release), imported here so that they read this package, never its
# private modules.
from toolnexus.client._loop import check_tool_choice as check_tool_choice
from toolnexus.client._loop import model_response as model_response
from toolnexus.client._loop import provider_stop as provider_stop
from toolnexus.client._loop import turn_tool_choice as turn_tool_choice
from toolnexus.client._output import ACCEPTED as ACCEPTED
from toolnexus.client._output import ASK_FOR_OUTPUT as ASK_FOR_OUTPUT
from toolnexus.client._output import OUTPUT_TOOL as OUTPUT_TOOL
from toolnexus.client._output import Output as Output
from toolnexus.client._output import output_tool as output_tool
from toolnexus.client._output import requested_output as requested_output
from toolnexus.client._turn import RelayHandler as RelayHandler
from toolnexus.client._turn_rule import RUN_CALLS as RUN_CALLS
from toolnexus.client._turn_rule import AskForOutput as AskForOutput
from toolnexus.client._turn_rule import Continue as Continue
from toolnexus.client._turn_rule import RunCalls as RunCalls
from toolnexus.client._turn_rule import Stop as Stop
from toolnexus.client._turn_rule import TurnRule as TurnRule
from toolnexus.client._turn_rule import calls_deadline as calls_deadline
from toolnexus.client._turn_rule import output_accepted as output_accepted

__all__ = [
    "Client",
    "ClientStyle",
    "DoneEvent",
    "Endpoint",
    "Meter",
    "Retries",
    "RunResult",
    "RunStatus",
    "StreamEvent",
    "TextDelta",
    "Timeouts",
    "ToolCallEvent",
    "ToolCallRecord",
    "ToolResultEvent",
    "Usage",
    "UsageEvent",
    "create_client",
]
