"""The session log: an append-only list of events, from which model messages are derived.

`Session` and `Event` are the log (``_log``); the builders and the TypedDicts of the events
toolnexus writes are its vocabulary (``_events``): a writer builds an event with its builder,
a reader reads its data as the TypedDict says, and `BOOKKEEPING_TYPES` is derived from the
builders.
"""

from toolnexus.session._events import (
    BOOKKEEPING_TYPES,
    SURFACE_TYPES,
    CallTimingData,
    CancelledData,
    Entry,
    FallbackData,
    ModelResponseData,
    ModelStopData,
    ToolCallData,
    TurnData,
    UserMessageData,
    code_run_cancelled,
    fallback,
    model_response,
    model_stop,
    tool_call_cancelled,
    turn_end,
    turn_start,
    user_message,
)
from toolnexus.session._log import MAX_DEPTH, Event, Session

__all__ = [
    "BOOKKEEPING_TYPES",
    "MAX_DEPTH",
    "SURFACE_TYPES",
    "CallTimingData",
    "CancelledData",
    "Entry",
    "Event",
    "FallbackData",
    "ModelResponseData",
    "ModelStopData",
    "Session",
    "ToolCallData",
    "TurnData",
    "UserMessageData",
    "code_run_cancelled",
    "fallback",
    "model_response",
    "model_stop",
    "tool_call_cancelled",
    "turn_end",
    "turn_start",
    "user_message",
]
