"""What one tool call produced, in the shape a program or a model sees it."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any, Literal

from toolnexus._json import _INT_BOUND, encodable_text
from toolnexus._snapshot import result_snapshot, safe_repr, snapshot
from toolnexus.errors import ModelRetry, ToolError
from toolnexus.tools._mcp_content import ContentParts
from toolnexus.tools._tool import ToolResult

__all__ = [
    "GENERIC_FAILURE",
    "MAX_MESSAGE_CHARS",
    "RETRY",
    "HostReason",
    "Outcome",
    "clamp_message",
    "outcome_from_exception",
    "outcome_from_value",
    "outcome_of",
    "retry_outcome",
]

logger = logging.getLogger("toolnexus.scheduling")

MAX_MESSAGE_CHARS = 2000
"""Longer error messages are cut to this many characters and marked ``… (truncated)``."""

TRUNCATION_MARK = "… (truncated)"
RETRY = "retry"
"""``Outcome.metadata`` key set on a failure the model may fix by calling again (a
[`ModelRetry`][toolnexus.errors.ModelRetry], arguments that did not validate)."""
GENERIC_FAILURE = "tool call failed"

HostReason = Literal[
    "retry",
    "abandoned",
    "gone",
    "late",
    "lost",
    "cancelled",
    "dropped",
    "refused",
    "denied",
    "pending",
]
"""Why the host itself answered a call the way it did (`Outcome.reason`), as a value the host
compares instead of a message text:

* ``"retry"``: the model may fix the call by calling again (a
  [`ModelRetry`][toolnexus.errors.ModelRetry], arguments that are not JSON or do not validate,
  text where a structured output was asked for); counted against ``Tool.retries``;
* ``"abandoned"``: the lane stopped before the call finished (``Scheduler.stop``);
* ``"gone"``: the call came to, or waited on, a lane that had stopped;
* ``"late"``: the turn's deadline (``calls_timeout``, ``hosted_call_timeout``, a durable call's
  ``start_to_close``) passed first;
* ``"lost"``: a durable call's worker was lost (each time it was tried);
* ``"cancelled"``: the call was cancelled before it finished (the run, or the tool itself);
* ``"dropped"``: the call is left out of the transcript (its turn was refused or cut off);
* ``"refused"``: the host would not run it (a caller the tool does not allow, a call collapsed
  under ``code_mode="code"``, a budget spent, a call without a call id);
* ``"denied"``: a permission rule or the approval handler said no;
* ``"pending"``: a relay call waiting for the host's answer.
"""


def clamp_message(message: str) -> str:
    """``message`` cut to `MAX_MESSAGE_CHARS` characters, marked when cut."""
    if len(message) > MAX_MESSAGE_CHARS:
        return message[:MAX_MESSAGE_CHARS] + TRUNCATION_MARK
    return message


_AS_IS = frozenset({str, int, float, bool, type(None)})
"""Values an outcome holds as they are: immutable, nothing to snapshot."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """The result of one tool call: a value, or an error of exactly two strings.

    ``value`` is a snapshot (`result_snapshot`), taken as the outcome is made, which is when
    the call finishes and before any later call may start: a tool that returns a live object a
    later call changes (``{"watchlist": self.watchlist}``) still reads as it was. What JSON
    cannot hold becomes its ``repr()`` there; an MCP tool's content parts stay
    [`ContentParts`][toolnexus.tools.mcp.ContentParts].

    ``error``, when set, is ``{"tool": name, "message": message}`` and nothing else: no
    exception type, no traceback, no chained cause. The full detail of a failure goes to the
    ``toolnexus.scheduling`` logger, because what a program or model reads is one
    prompt-injection hop from the transcript.

    Attributes:
        value: The tool's return value when the call succeeded.
        error: ``{"tool": str, "message": str}`` when the call failed, else ``None``.
    """

    value: Any = None
    error: dict[str, str] | None = None
    metadata: dict[str, Any] | None = None
    """Facts for the host from a [`ToolResult`][toolnexus.tools.ToolResult]; never shown to a
    model."""
    reason: HostReason | None = field(default=None, repr=False, compare=False)
    """Why the host answered the call so (`HostReason`), set where the outcome is made; ``None``
    for what the tool itself returned or raised. Never shown to a model (it reads ``error``'s
    two strings), and not part of equality: two outcomes a model reads the same are equal."""
    _text: str | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        value = self.value
        if type(value) not in _AS_IS:
            _set_value(self, freeze(value))

    @property
    def text(self) -> str:
        """What a model reads: the error message, or the value (as is when a string, else JSON).

        Computed once, when first read: the session log, the run's records and the provider's
        result message all hand the model the same text, and encoding a large value three
        times per call was a measurable share of the per-call cost. Never raises, and the
        text always encodes as UTF-8.
        """
        text = self._text
        if text is None:
            if self.error is not None:
                text = encodable_text(self.error.get("message", GENERIC_FAILURE))
            else:
                text = _result_text(self.value)
            object.__setattr__(self, "_text", text)
        return text

    @property
    def ok(self) -> bool:
        """Whether the call succeeded."""
        return self.error is None

    @classmethod
    def failure(cls, tool: str, message: str, reason: HostReason | None = None) -> Outcome:
        """An error outcome; ``message`` is clamped, and an empty one becomes generic;
        ``reason``: why the host answered so (`HostReason`), when it did."""
        error = {"tool": tool, "message": clamp_message(message) or GENERIC_FAILURE}
        return cls(error=error, reason=reason)

    @classmethod
    def noted(cls, value: Any, notes: str, metadata: dict[str, Any] | None = None) -> Outcome:
        """A success whose model text is the value's text, then ``notes`` on lines of their
        own: what the tool said beside its value (an MCP result's content parts that are not a
        mirror of its ``structuredContent``). The value, what a program gets, is ``value``."""
        outcome = cls(value=value, metadata=metadata)
        object.__setattr__(outcome, "_text", f"{_result_text(value)}\n{encodable_text(notes)}")
        return outcome

    def unwrap(self) -> Any:
        """The value, or raise the error as [`ToolError`][toolnexus.errors.ToolError]."""
        if self.error is not None:
            raise ToolError(self.error["tool"], self.error["message"])
        return self.value


_new = object.__new__
_set_value = Outcome.__dict__["value"].__set__
_set_error = Outcome.__dict__["error"].__set__
_set_metadata = Outcome.__dict__["metadata"].__set__
_set_reason = Outcome.__dict__["reason"].__set__
_set_text = Outcome.__dict__["_text"].__set__


def freeze(value: Any) -> Any:
    """A call's value as it is now (`result_snapshot`); content parts stay `ContentParts`."""
    if type(value) is ContentParts:
        return ContentParts(result_snapshot(list(value)))
    return result_snapshot(value)


def outcome_of(tool: str, value: Any) -> Outcome:
    """The outcome of a call of ``tool`` that returned ``value``: `outcome_from_value` for an
    `Outcome` or a `ToolResult`; a plain value needs no checks: its snapshot is the value
    (`freeze`; a string, a number, a bool or ``None`` as it is).

    A plain value's ``Outcome(value=value)`` is made by setting its five slots directly. Why:
    a frozen dataclass's ``__init__`` parses its keywords and then goes through
    ``object.__setattr__`` once per field; this is the outcome of every successful tool call,
    and the direct way costs a third less of what is, per call, a noticeable constant.
    """
    if isinstance(value, (Outcome, ToolResult)):
        return outcome_from_value(tool, value)
    outcome: Outcome = _new(Outcome)
    _set_value(outcome, value if type(value) in _AS_IS else freeze(value))
    _set_error(outcome, None)
    _set_metadata(outcome, None)
    _set_reason(outcome, None)
    _set_text(outcome, None)
    return outcome


def _exception_text(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # a broken __str__ still yields an outcome
        return ""


def outcome_from_exception(tool: str, exc: BaseException) -> Outcome:
    """The error outcome of a call that raised: its ``str()``, clamped, and nothing more.

    The full detail (type, traceback) is logged at DEBUG level on ``toolnexus.scheduling``:
    a tool failing is ordinary (the model or program reads the message and carries on), so it
    is not a warning; an operator who wants the tracebacks turns DEBUG on for that logger.
    """
    if isinstance(exc, ModelRetry):
        return retry_outcome(tool, exc.message)
    logger.debug("tool %r raised %s", tool, type(exc).__name__, exc_info=exc)
    return Outcome.failure(tool, _exception_text(exc))


def retry_outcome(tool: str, message: str) -> Outcome:
    """A failure the model may fix by calling again (counted against ``Tool.retries``)."""
    return Outcome(
        error=Outcome.failure(tool, message).error, metadata={RETRY: True}, reason="retry"
    )


_ENCODER = json.JSONEncoder(ensure_ascii=False, default=safe_repr)
"""``json.dumps(value, ensure_ascii=False, default=safe_repr)`` without a new encoder per
call (``json.dumps`` builds one whenever it is given options)."""


def _result_text(output: Any) -> str:
    """``output`` as text: a string as is, anything else as JSON. Never raises.

    What plain ``json.dumps`` cannot write (an object whose ``repr`` raises, nesting past the
    stack, a cycle, an integer past Python's digit limit) is written from its
    [`snapshot`][toolnexus.scheduling.snapshot]; lone surrogates become U+FFFD, so the text can
    always be sent on.
    """
    if isinstance(output, str):
        return encodable_text(str.__str__(output))
    if type(output) is int and -_INT_BOUND < output < _INT_BOUND:
        return int.__repr__(output)  # as JSON writes it, without the encoder's set-up
    if type(output) is ContentParts:  # an MCP tool's content parts: images as one line each
        return encodable_text(output.model_text())
    try:
        text = _ENCODER.encode(output)
    except (TypeError, ValueError, RecursionError):
        text = json.dumps(snapshot(output), ensure_ascii=False)
    return encodable_text(text)


def outcome_from_value(tool: str, value: Any) -> Outcome:
    """Normalise what a dispatch returned into an outcome for ``tool``.

    * an [`Outcome`][toolnexus.scheduling.Outcome] is taken as is; an error outcome keeps its
      message (clamped), with the tool name re-stamped from the call; a malformed one becomes "tool
      call failed";
    * a [`ToolResult`][toolnexus.tools.ToolResult] with ``is_error`` fails with its output as the
      message; otherwise its output is the value;
    * anything else is the value.
    """
    if isinstance(value, Outcome):
        error = value.error
        if error is None:
            return value
        message = error.get("message") if isinstance(error, dict) else None
        if not isinstance(message, str):
            logger.warning("dispatch for tool %r returned a malformed outcome: %r", tool, value)
            return Outcome.failure(tool, GENERIC_FAILURE)
        error = Outcome.failure(tool, message).error
        return Outcome(error=error, metadata=value.metadata, reason=value.reason)
    if isinstance(value, ToolResult):
        if value.is_error:
            failed = Outcome.failure(tool, _result_text(value.output))
            return Outcome(error=failed.error, metadata=value.metadata)
        return Outcome(value=value.output, metadata=value.metadata)
    return Outcome(value=value)
