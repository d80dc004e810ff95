"""The session log's vocabulary: one builder per event type toolnexus writes, and the shape of
each event's data for whoever reads it.

Why a vocabulary (as h11 makes its events the protocol): the log has several writers (the
in-process loop, the durable rebuild, the MCP gateway, the scheduler, Code Mode) and several
readers (the run viewer, the CLI, resume). When each spelled the types and keys itself, they
drifted; here a type is spelled once, by its builder, and `BOOKKEEPING_TYPES` is the set of
types the builders write, so it cannot list a type nothing writes, nor miss one that is.

A builder returns an `Entry`: the event's type and data, JSON-shaped by construction (its
arguments are text, numbers and data the caller already holds as JSON), so a writer appends
it as it is: ``session._append_json(*turn_start(1))``.
"""

# No ``from __future__ import annotations``: a TypedDict reads ``NotRequired`` from its real
# annotations, so readers (and tests) see which keys an event may leave out.
import json
from collections.abc import Callable
from typing import Any, NamedTuple, NotRequired, ParamSpec, TypedDict

from toolnexus._json import MAX_NESTING, encodable_data, json_problem

__all__ = [
    "BOOKKEEPING_TYPES",
    "PROVIDER_DEPTH",
    "SURFACE_TYPES",
    "ApprovalData",
    "AssistantMessageData",
    "CallTimingData",
    "CancelledData",
    "CodeRunData",
    "Entry",
    "FallbackData",
    "ModelResponseData",
    "ModelStopData",
    "ToolCallData",
    "ToolResultData",
    "TurnData",
    "UserMessageData",
    "assistant_message",
    "call_timing",
    "code_run",
    "code_run_cancelled",
    "fallback",
    "model_response",
    "model_stop",
    "tool_call_cancelled",
    "tool_result",
    "turn_end",
    "turn_start",
    "user_message",
]

SURFACE_TYPES: dict[str, str] = {
    "system_message": "system",
    "user_message": "user",
    "assistant_message": "assistant",
    "tool_result": "tool",
}
"""Surface event types and the message role each projects to."""


class Entry(NamedTuple):
    """An event not yet appended: its type and its JSON-shaped data."""

    type: str
    data: dict[str, Any]


_P = ParamSpec("_P")
_BOOKKEEPING: set[str] = set()


def _bookkeeping(kind: str) -> Callable[[Callable[_P, dict[str, Any]]], Callable[_P, Entry]]:
    """Register ``kind`` as a bookkeeping type written by the decorated builder of its data."""

    def register(build: Callable[_P, dict[str, Any]]) -> Callable[_P, Entry]:
        _BOOKKEEPING.add(kind)

        def builder(*args: _P.args, **kwargs: _P.kwargs) -> Entry:
            return Entry(kind, build(*args, **kwargs))

        builder.__name__, builder.__qualname__ = build.__name__, build.__qualname__
        builder.__doc__ = build.__doc__
        return builder

    return register


def _kind(kind: str) -> str:
    """Register ``kind`` as a bookkeeping type whose data is built by its TypedDict (below)."""
    _BOOKKEEPING.add(kind)
    return kind


# --- the data of each event, for readers ---------------------------------------------------


class UserMessageData(TypedDict):
    """A ``user_message``: the prompt as sent, or the request to answer through the output
    tool."""

    content: str


class TurnData(TypedDict):
    """A ``turn_start`` or ``turn_end``; a turn that failed ends with its ``error``."""

    turn: int
    error: NotRequired[str]


class ModelResponseData(TypedDict):
    """A ``model_response``: one model request and its cost."""

    turn: int
    model: str
    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    stop_reason: str | None


class ModelStopData(TypedDict):
    """A ``model_stop``: the provider ended the run (a refusal, a full context window)."""

    turn: int
    reason: str
    details: Any
    text: str


class FallbackData(TypedDict):
    """A ``fallback``: the model ``failed`` could not answer; ``next`` was asked instead."""

    turn: int
    failed: str
    error: str
    next: str


class CancelledData(TypedDict):
    """A ``code_run_cancelled`` or ``tool_call_cancelled``: the gateway's call ``id``."""

    id: str


class SchedulingFacts(TypedDict, total=False):
    """What a call declared it touches, and which call and resource it waited for."""

    resources: Any
    waited_for: dict[str, Any]


class ToolCallData(TypedDict):
    """A ``tool_call`` a lane audits as it starts (a Code Mode sub-call, a direct call)."""

    id: str
    name: str
    arguments: Any
    mode: NotRequired[str]
    seq: NotRequired[int]
    source: str
    resources: NotRequired[Any]
    waited_for: NotRequired[dict[str, Any]]


class CallTimingData(TypedDict):
    """A ``call_timing``: when a call entered its lane, started and finished."""

    id: str
    name: str
    lane: int
    seq: int
    mode: str | None
    admitted: float
    started: float
    finished: float
    ok: bool
    resources: NotRequired[Any]
    waited_for: NotRequired[dict[str, Any]]
    error: NotRequired[str]
    program: NotRequired[str | None]


# --- the data of the events the run viewer and resume read -------------------------------


class AssistantMessageData(TypedDict):
    """An ``assistant_message``: the model's text and calls, and the provider's own message
    when it can be saved."""

    content: str
    tool_calls: list[dict[str, Any]]
    provider: NotRequired[dict[str, Any]]


class ToolResultData(TypedDict):
    """A ``tool_result``: the answer to the model's call ``tool_call_id``."""

    tool_call_id: str
    name: str
    content: str
    is_error: bool


class ApprovalData(TypedDict):
    """An ``approval``: whether ``tool`` was approved, and when the handler was asked and
    answered."""

    tool: str
    approved: bool
    asked: float
    answered: float


class CodeRunData(TypedDict):
    """A ``code_run``: a program starts (a durable one names its ``task``)."""

    id: str | None
    language: str
    runtime: NotRequired[str]
    description: str
    source: NotRequired[str]
    task: NotRequired[str]
    durable: NotRequired[bool]


# --- the builders --------------------------------------------------------------------------


def user_message(content: str) -> Entry:
    """A ``user_message`` surface event (``content``: text that can be saved as it is)."""
    return Entry("user_message", {"content": content})


def tool_result(call_id: str, name: str, content: str, is_error: bool) -> Entry:
    """A ``tool_result`` surface event: ``content`` answers the model's call ``call_id``."""
    data = {"tool_call_id": call_id, "name": name, "content": content, "is_error": is_error}
    return Entry(TOOL_RESULT, data)


@_bookkeeping("turn_start")
def turn_start(turn: int) -> dict[str, Any]:
    """A ``turn_start``: model turn ``turn`` (from 1) begins."""
    return {"turn": turn}


@_bookkeeping("turn_end")
def turn_end(turn: int, error: str | None = None) -> dict[str, Any]:
    """A ``turn_end``: model turn ``turn`` is over, failed with ``error`` if one is given."""
    if error is None:
        return {"turn": turn}
    return {"turn": turn, "error": error}


@_bookkeeping("model_response")
def model_response(
    turn: int,
    model: str,
    input_tokens: int | None,
    output_tokens: int | None,
    cache_read_tokens: int | None,
    cache_write_tokens: int | None,
    stop_reason: str | None,
) -> dict[str, Any]:
    """A ``model_response``: one model request and its cost (``None``: not reported)."""
    return {
        "turn": turn,
        "model": model,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_read_tokens": cache_read_tokens,
        "cache_write_tokens": cache_write_tokens,
        "stop_reason": stop_reason,
    }


@_bookkeeping("model_stop")
def model_stop(turn: int, reason: str, details: Any, text: str) -> dict[str, Any]:
    """A ``model_stop``: the provider ended the run (``details``: its JSON-shaped reasons)."""
    return {"turn": turn, "reason": reason, "details": details, "text": text}


@_bookkeeping("fallback")
def fallback(turn: int, failed: str, error: str, next: str) -> dict[str, Any]:
    """A ``fallback``: ``failed`` could not answer turn ``turn``; ``next`` is asked instead."""
    return {"turn": turn, "failed": failed, "error": error, "next": next}


@_bookkeeping("code_run_cancelled")
def code_run_cancelled(call_id: str) -> dict[str, Any]:
    """A ``code_run_cancelled``: the gateway's program ``call_id`` was cancelled."""
    return {"id": call_id}


@_bookkeeping("tool_call_cancelled")
def tool_call_cancelled(call_id: str) -> dict[str, Any]:
    """A ``tool_call_cancelled``: the gateway's direct call ``call_id`` was cancelled."""
    return {"id": call_id}


PROVIDER_DEPTH = 2 * MAX_NESTING - 2  # MAX_DEPTH - 2 (the log imports this module)
"""How deep a provider's own message may nest to be saved with its ``assistant_message``: the
event's data is one level, ``provider`` another, and a saved line holds `MAX_DEPTH` levels of
data."""


def assistant_message(
    text: str,
    calls: list[dict[str, Any]],
    recorded: dict[str, Any] | None,
    family: str,
    endpoint: str | None = None,
) -> Entry:
    """An ``assistant_message`` surface event: the neutral text and calls, and the provider's
    own message as it goes back on the wire (a copy of its own), when there is one and it can
    be saved, with the ``endpoint`` whose state it is.

    The provider's message is kept whenever a saved log can hold it: its text as it was sent
    (a lone surrogate, half of an emoji a stream split in two, becomes what the request carried:
    the emoji again, or U+FFFD), nested as deep as the event's place in a saved line allows
    (`PROVIDER_DEPTH`, not the limit for tool arguments). Dropping it would drop signed
    thinking with it, and the next request carrying the conversation on would be refused.
    """
    data: dict[str, Any] = {"content": text, "tool_calls": calls}
    if recorded is not None:
        sent = encodable_data(recorded)  # what every request carries (Style.sendable)
        if json_problem(sent, max_depth=PROVIDER_DEPTH) is None:
            data["provider"] = {"style": family, "message": json.loads(json.dumps(sent))}
            if endpoint is not None:
                data["provider"]["endpoint"] = endpoint
    return Entry("assistant_message", data)


# --- events built by their TypedDict --------------------------------------------------------
#
# Where an event's data is only its fields, its TypedDict is its builder: a writer makes the
# data with ``ToolCallData(id=..., ...)`` (a plain dict, checked key by key by the type
# checker) and appends it under the type's constant. Most of these are written once per tool
# call, where a function call per event would show in the per-call budget.

TOOL_RESULT = "tool_result"
TOOL_CALL = _kind("tool_call")
CALL_RESOURCES = _kind("call_resources")
CALL_TIMING = _kind("call_timing")
CALL_REFUSED = _kind("call_refused")
CALL_OUTSIDE_TRANSCRIPT = _kind("call_outside_transcript")
APPROVAL = _kind("approval")
APPROVAL_ANSWER = _kind("approval_answer")
TOOL_SEARCH = _kind("tool_search")
TOOL_DESCRIBE = _kind("tool_describe")
MCP_PROGRESS = _kind("mcp_progress")
TASK_RESULT = _kind("task_result")


class CallResourcesData(TypedDict):
    """A ``call_resources``: what a native call declared it touches, and what it waited for."""

    id: str | None
    name: str
    resources: NotRequired[Any]
    waited_for: NotRequired[dict[str, Any]]


class CallRefusedData(TypedDict):
    """A ``call_refused``: the model's call of ``name`` came from a caller the tool does not
    list."""

    id: str | None
    name: str
    caller: str
    program: str | None
    message: str


class CallOutsideTranscriptData(TypedDict):
    """A ``call_outside_transcript``: a call of a turn that never entered the transcript."""

    turn: int
    tool_call_id: str
    name: str
    arguments: Any
    content: str
    is_error: bool
    why: str


class ApprovalAnswerData(TypedDict):
    """An ``approval_answer``: how the gateway's client answered for call ``id``."""

    id: str
    tool: str
    outcome: str


class ToolSearchData(TypedDict):
    """A ``tool_search`` a program made, and the names it found (or its ``error``)."""

    id: str | None
    query: NotRequired[Any]
    limit: NotRequired[Any]
    found: NotRequired[list[str]]
    function: NotRequired[str]
    error: NotRequired[str]


class ToolDescribeData(TypedDict):
    """A ``tool_describe`` a program made (or its ``error``)."""

    id: str | None
    name: NotRequired[Any]
    function: NotRequired[str]
    error: NotRequired[str]


class McpProgressData(TypedDict):
    """An ``mcp_progress``: an MCP server reported progress on a call of ``tool``."""

    server: str
    tool: str
    progress: float
    total: float | None
    message: str | None


class TaskResultData(TypedDict):
    """A ``task_result``: how the gateway's durable task ``task`` ended."""

    id: Any
    task: str
    status: str
    is_error: bool


@_bookkeeping("code_run")
def code_run(
    call_id: str | None,
    language: str,
    description: str,
    runtime: str | None = None,
    source: str | None = None,
    *,
    task: str | None = None,
) -> dict[str, Any]:
    """A ``code_run``: program ``call_id`` starts (``runtime``, ``source``: when given; a
    durable one names the ``task`` that runs it)."""
    data: dict[str, Any] = {"id": call_id, "language": language}
    if runtime is not None:
        data["runtime"] = runtime
    data["description"] = description
    if source is not None:
        data["source"] = source
    if task is not None:
        data["task"] = task
        data["durable"] = True
    return data


@_bookkeeping("call_timing")
def call_timing(
    call_id: str,
    name: str,
    lane: int,
    seq: int,
    mode: str | None,
    times: tuple[float, float, float],
    ok: bool,
    *,
    error: str | None = None,
    resources: Any = None,
    waited_for: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``call_timing``: when a call was admitted, started and finished (``times``); a call
    not ``ok`` has its ``error`` (its message), one that declared them its ``resources``, and
    one that waited for an earlier call ``waited_for`` (that call's ``seq``, the resource)."""
    admitted, started, finished = times
    data: dict[str, Any] = {"id": call_id, "name": name, "lane": lane, "seq": seq, "mode": mode}
    data.update(admitted=admitted, started=started, finished=finished, ok=ok)
    if resources is not None:
        data["resources"] = resources
    if waited_for is not None:
        data["waited_for"] = waited_for
    if not ok:
        data["error"] = error
    return data


BOOKKEEPING_TYPES = frozenset(_BOOKKEEPING)
"""The bookkeeping event types toolnexus itself writes (derived from the vocabulary's
builders). Any other non-surface type is allowed."""
