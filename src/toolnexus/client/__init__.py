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
