"""OpenTelemetry spans for tool calls, code runs, model requests and agent turns.

Why only the OpenTelemetry *API*: an application that configures an OpenTelemetry SDK sees
toolnexus's work inside its own traces; one that does not gets the API's no-op tracer, which
costs nothing per tool call (a scheduler lane then skips its calls' spans, see
`tool_spans_needed`). Names and attributes follow the GenAI semantic conventions
(``execute_tool {tool}``, ``chat {model}``, ``invoke_agent {agent}``, ``gen_ai.*``), so
backends that know them show toolnexus's spans as agent steps; what they do not cover is under
``toolnexus.*``.

Spans nest the way the work does: a tool call's span is current while the tool runs, so a
Code Mode program's sub-calls (and anything the tool itself traces) become its children.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, Span, SpanKind, Status, StatusCode

from toolnexus._version import __version__

__all__ = [
    "agent_turn_span",
    "code_run_span",
    "end_tool_span",
    "model_request_span",
    "note_caller",
    "record_code_run",
    "record_response",
    "tool_span",
    "tool_spans_needed",
]

_tracer = trace.get_tracer("toolnexus", __version__)


def tool_span(name: str, attributes: Callable[[], Mapping[str, Any]]) -> Span:
    """Start the span of one tool call and make it current. Call it inside the call's own
    context (so the span is the parent of whatever the tool traces, and goes away with that
    context); end it with `end_tool_span`.

    ``attributes`` is called only when the span records. With no SDK configured a lane does
    not call this at all (`tool_spans_needed`).
    """
    span = _tracer.start_span(f"execute_tool {name}")
    if span.is_recording():
        span.set_attributes(
            {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
            | _present(attributes())
        )
    if span.get_span_context().is_valid:  # the no-op tracer's span needs no context
        otel_context.attach(trace.set_span_in_context(span))
    return span


def tool_spans_needed(context: contextvars.Context) -> bool:
    """Whether `tool_span` would do anything for a call run in a copy of ``context``.

    Not when no tracer provider is set and no recording span is current there: the API's
    no-op tracer then hands back the current span itself, and making it current again
    changes nothing. A scheduler lane asks once, when it is made, and skips its calls' span
    work altogether; a provider set while a lane is running traces that lane's calls only
    from its next lane on.
    """
    return not context.run(_nothing_to_trace)


def _nothing_to_trace() -> bool:
    """Whether the tracer would only hand back the current span: no tracer provider is set,
    and the current span does not record."""
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return False
    return isinstance(trace.get_current_span(), NonRecordingSpan)


def note_caller(caller: str) -> None:
    """Record on the current tool call's span that a provider-hosted program made the call."""
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attribute("toolnexus.call.caller", caller)


def end_tool_span(span: Span, error: Mapping[str, str] | None) -> None:
    """End a tool call's span; a failed call's span has status ERROR with its message."""
    if error is not None and span.is_recording():
        span.set_status(Status(StatusCode.ERROR, error.get("message", "")))
        span.set_attribute("error.type", "tool_error")
    span.end()


@contextlib.contextmanager
def code_run_span(language: str, call_id: str | None) -> Iterator[Span]:
    """The span of one Code Mode program, current while it runs (its sub-calls nest under
    it). Record the outcome with `record_code_run`.

    Why the early exit: with no tracer provider set and no recording span current, the API's
    no-op tracer would hand back the current span and make it current again: about 6 us for
    nothing (of ``run_program``'s own ~40 us on a trivial program; 2 us with the exit). The
    current span is yielded as it is (a provider set meanwhile traces the next run).
    """
    if _nothing_to_trace():
        yield trace.get_current_span()
        return
    attributes = _present({"toolnexus.code.language": language, "gen_ai.tool.call.id": call_id})
    with _tracer.start_as_current_span(
        f"code_run {language}", attributes=attributes, record_exception=False
    ) as span:
        yield span


def record_code_run(span: Span, output: Mapping[str, Any]) -> None:
    """Put a program's outcome on its span: the failure kind and message, if it failed."""
    failure = output.get("error")
    if failure is not None and span.is_recording():
        span.set_attribute("error.type", str(failure.get("kind")))
        span.set_status(Status(StatusCode.ERROR, str(failure.get("message", ""))))


def model_request_span(
    provider: str, model: str, server: str
) -> contextlib.AbstractContextManager[Span]:
    """The span of one request to the model (kind CLIENT); errors are recorded on it.

    With no tracer provider set and no recording span current, the API's tracer would only
    hand back the current span: that span is given as it is, without starting anything (the
    tracer's context managers were a per-turn cost worth a few tenths of a microsecond per
    tool call of a hundred-call turn)."""
    if _nothing_to_trace():
        return contextlib.nullcontext(trace.get_current_span())
    return _model_request_span(provider, model, server)


@contextlib.contextmanager
def _model_request_span(provider: str, model: str, server: str) -> Iterator[Span]:
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": model,
        "server.address": server,
    }
    with _tracer.start_as_current_span(
        f"chat {model}", kind=SpanKind.CLIENT, attributes=attributes
    ) as span:
        yield span


def record_response(
    span: Span,
    *,
    input_tokens: int | None,
    output_tokens: int | None,
    finish_reason: str | None,
    cache_read_tokens: int | None = None,
    cache_write_tokens: int | None = None,
) -> None:
    """Put what a model response cost (when the server said), and why it stopped, on its
    request's span."""
    if not span.is_recording():
        return
    span.set_attributes(
        _present(
            {
                "gen_ai.usage.input_tokens": input_tokens,
                "gen_ai.usage.output_tokens": output_tokens,
                "gen_ai.usage.cache_read.input_tokens": cache_read_tokens,
                "gen_ai.usage.cache_creation.input_tokens": cache_write_tokens,
            }
        )
    )
    if finish_reason is not None:
        span.set_attribute("gen_ai.response.finish_reasons", [finish_reason])


@contextlib.contextmanager
def agent_turn_span(name: str, agent_id: str) -> Iterator[Span]:
    """The span of one sub-agent turn: its model requests and tool calls nest under it."""
    attributes = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": name,
        "gen_ai.agent.id": agent_id,
    }
    with _tracer.start_as_current_span(f"invoke_agent {name}", attributes=attributes) as span:
        yield span


def _present(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """The attributes that have a value (OpenTelemetry refuses ``None``)."""
    return {key: value for key, value in attributes.items() if value is not None}
