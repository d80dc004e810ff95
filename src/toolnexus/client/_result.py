"""What a run produces: the result, and the events a stream yields on the way."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from toolnexus.client.styles import Usage
from toolnexus.scheduling import ToolCall
from toolnexus.session import Session

__all__ = [
    "DoneEvent",
    "RunResult",
    "RunStatus",
    "StreamEvent",
    "TextDelta",
    "ToolCallEvent",
    "ToolCallRecord",
    "ToolResultEvent",
    "UsageEvent",
]

RunStatus = Literal["done", "incomplete", "pending", "refused", "error"]


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    """One tool call of a run and what it returned, as the model saw it.

    Attributes:
        id: The provider's call id.
        name: The tool the model asked for.
        arguments: The arguments as sent (parsed JSON, or the raw text when it was not JSON).
        output: The text handed back to the model.
        is_error: Whether the call failed.
        metadata: What the tool reported for the host (``ToolResult.metadata``), if anything.
    """

    id: str
    name: str
    arguments: Any
    output: str
    is_error: bool
    metadata: dict[str, Any] | None = None


_new = object.__new__
_set_id = ToolCallRecord.__dict__["id"].__set__
_set_name = ToolCallRecord.__dict__["name"].__set__
_set_arguments = ToolCallRecord.__dict__["arguments"].__set__
_set_output = ToolCallRecord.__dict__["output"].__set__
_set_is_error = ToolCallRecord.__dict__["is_error"].__set__
_set_metadata = ToolCallRecord.__dict__["metadata"].__set__


def made_record(
    id: str, name: str, arguments: Any, output: str, is_error: bool, metadata: Any
) -> ToolCallRecord:
    """``ToolCallRecord(...)`` with its slots set directly.

    Why: the frozen dataclass's ``__init__`` goes through ``object.__setattr__`` once per
    field, half the cost of a record, and a run makes one per tool call. Slots, not a
    ``__dict__``: a run keeps every record while it lasts, and each one is then one object for
    the garbage collector to walk, not two.
    """
    record: ToolCallRecord = _new(ToolCallRecord)
    _set_id(record, id)
    _set_name(record, name)
    _set_arguments(record, arguments)
    _set_output(record, output)
    _set_is_error(record, is_error)
    _set_metadata(record, metadata)
    return record


@dataclass
class RunResult:
    """The end of a run.

    Attributes:
        text: The model's last text.
        messages: The transcript in the provider's own message shape (history included).
        tool_calls: Every tool call, in emitted order, with its output.
        turns: Model round trips.
        usage: Tokens, summed over the turns.
        status: ``"done"`` (the model answered without tools), ``"incomplete"`` (``max_turns``
            reached, a budget ran out, or the conversation outgrew the model's context
            window), ``"pending"`` (a relay call waits for the host's answer), ``"refused"``
            (the provider refused to answer: Anthropic ``refusal``, OpenAI-style
            ``content_filter``; the refused turn is not in ``messages``), or ``"error"`` (only on
            [`ProviderError.partial`][toolnexus.errors.ProviderError]: the run so far, when a
            request failed).
        session: The session log: surface events for the transcript, bookkeeping events for
            turns and Code Mode sub-calls.
        pending: When ``status`` is ``"pending"``: the relay calls waiting for the host's
            answers (pass them to ``client.resume``).
        stopped_by: Why the run ended early, in words: which budget ran out (see `Meter`), a
            tool's retries, the provider's refusal with its details (category, explanation),
            or the context window; else ``None``.
        models: The model that answered each turn, in order (with ``fallback`` clients, the
            one that did; each fallback is also a ``fallback`` event in the session log).
        output: With ``output_type``: the validated value the model handed over (an instance
            of the type); ``None`` when the run ended without one.
    """

    text: str
    messages: list[dict[str, Any]]
    tool_calls: list[ToolCallRecord]
    turns: int
    usage: Usage
    status: RunStatus
    session: Session = field(repr=False)
    pending: list[ToolCall] = field(default_factory=list)
    _run: Any = field(default=None, repr=False, compare=False)
    stopped_by: str | None = None
    models: list[str] = field(default_factory=list)
    output: Any = None


@dataclass(frozen=True)
class TextDelta:
    """A piece of the model's text."""

    text: str
    type: Literal["text"] = "text"


@dataclass(frozen=True)
class ToolCallEvent:
    """A tool call, announced as soon as its arguments are complete (before it runs)."""

    call: ToolCall
    type: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True)
class ToolResultEvent:
    """A tool call's result; these come in emitted order."""

    record: ToolCallRecord
    type: Literal["tool_result"] = "tool_result"


@dataclass(frozen=True)
class UsageEvent:
    """The tokens of one model turn."""

    usage: Usage
    type: Literal["usage"] = "usage"


@dataclass(frozen=True)
class DoneEvent:
    """The run is over."""

    result: RunResult
    type: Literal["done"] = "done"


StreamEvent = TextDelta | ToolCallEvent | ToolResultEvent | UsageEvent | DoneEvent
