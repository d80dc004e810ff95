"""What a provider style does for the loop: wire format in, one assistant turn out."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from toolnexus._json import encodable_data
from toolnexus._tracing import model_request_span, record_response
from toolnexus.errors import ProviderError
from toolnexus.scheduling import Outcome, ToolCall
from toolnexus.tools import Tool

__all__ = [
    "AssistantTurn",
    "OnCall",
    "OnText",
    "Style",
    "Usage",
    "provider_error",
    "undecodable_body",
]

OnText = Callable[[str], Awaitable[None]]
"""Called with each piece of assistant text as it arrives."""

OnCall = Callable[[ToolCall], Awaitable[None]]
"""Called once per tool call, in emitted order, as soon as its arguments are complete."""


@dataclass
class Usage:
    """Token counts, summed over the turns of a run."""

    input_tokens: int = 0
    output_tokens: int = 0

    def add(self, other: Usage) -> None:
        """Add ``other``'s counts to these."""
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens


@dataclass
class AssistantTurn:
    """One model response: its text, its tool calls in emitted order, and what it cost."""

    text: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None
    message: dict[str, Any] = field(default_factory=dict)
    """The assistant message in the provider's own shape, for the transcript."""


def provider_error(exc: Exception, base_url: str, key_variables: Sequence[str]) -> ProviderError:
    """Translate an SDK error (openai's and anthropic's share their shape) into ProviderError.

    A 401 names the key variables that were tried; a failed connection names the URL.
    """
    if isinstance(exc, json.JSONDecodeError):
        return ProviderError(
            200, f"the model at {base_url} answered with a body that is not JSON ({exc})"
        )
    status = getattr(exc, "status_code", None)
    message = str(getattr(exc, "message", "") or exc)
    if status == 401:
        variables = " or ".join(key_variables)
        return ProviderError(
            401, f"{message} (the API key was refused: check api_key= or {variables})"
        )
    if status is None:
        return ProviderError(None, f"could not reach the model at {base_url}: {message}")
    return ProviderError(int(status), message)


def undecodable_body(base_url: str, exc: BaseException) -> ProviderError:
    """The error for a response body the SDK could not decode as JSON at all."""
    if isinstance(exc, RecursionError):
        cause = "it is nested too deeply to decode"
    else:
        cause = f"it is not JSON Python can read ({str(exc).split(';')[0]})"
    return ProviderError(
        200, f"the model at {base_url} sent a response that cannot be used: {cause}"
    )


class Style:
    """A wire format the loop speaks: OpenAI Chat Completions or Anthropic Messages.

    Holds what both share (construction, a fresh SDK client per run, one error boundary).
    Subclasses say how tools are declared, how a request is built (``request``), answered whole
    (``complete``) or streamed (``stream``), and how results go back (``results``);
    :meth:`respond` picks one and translates the SDK's errors.
    """

    name: str = ""
    key_variables: tuple[str, ...] = ()
    sdk_errors: tuple[type[Exception], ...] = ()

    def __init__(
        self,
        connect: Callable[[], Any],
        model: str,
        system_prompt: str | None,
        request_params: dict[str, Any],
        base_url: str,
    ) -> None:
        self._connect = connect
        self.model = model
        self.system_prompt = system_prompt
        self.request_params = request_params
        self.base_url = base_url

    def connect(self) -> Any:
        """A new SDK client for one run (closed by the run: no connection outlives its loop)."""
        return self._connect()

    async def respond(
        self,
        sdk: Any,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        *,
        stream: bool,
        on_text: OnText,
        on_call: OnCall,
        on_usage: Callable[[Usage], None] | None = None,
    ) -> AssistantTurn:
        """Ask the model for its next turn; SDK errors become :class:`ProviderError`.

        ``on_usage`` hears what the response cost once it is known: for a whole response,
        before its calls are announced (so a budget sees the cost before those calls start);
        for a stream, at its end.
        """
        params = encodable_data(self.request(messages, tools))
        translated: tuple[type[Exception], ...] = (*self.sdk_errors, json.JSONDecodeError)
        server = urlsplit(self.base_url).hostname or self.base_url
        with model_request_span(self.name, self.model, server) as span:
            try:
                if stream:
                    turn = await self.stream(sdk, params, on_text, on_call)
                else:
                    turn = await self.complete(sdk, params)
            except translated as exc:  # the one boundary where SDK errors are translated
                raise provider_error(exc, self.base_url, self.key_variables) from exc
            except RecursionError as exc:  # the SDK decoding a body nested past Python's stack
                raise undecodable_body(self.base_url, exc) from None
            if on_usage is not None:
                on_usage(turn.usage)
            if not stream:  # a whole response: its text and calls are all known now
                if turn.text:
                    await on_text(turn.text)
                for call in turn.calls:
                    await on_call(call)
            record_response(
                span,
                input_tokens=turn.usage.input_tokens,
                output_tokens=turn.usage.output_tokens,
                finish_reason=turn.stop_reason,
            )
            return turn

    def tool_definitions(self, tools: Sequence[Tool]) -> list[dict[str, Any]]:
        """The tools as this provider declares them."""
        raise NotImplementedError

    def opening(self, history: Sequence[dict[str, Any]], prompt: str) -> list[dict[str, Any]]:
        """The messages of a new request: earlier history, then the user's prompt."""
        raise NotImplementedError

    def results(
        self, calls: Sequence[ToolCall], outcomes: Sequence[Outcome]
    ) -> list[dict[str, Any]]:
        """The messages that hand the calls' results back, in emitted order."""
        raise NotImplementedError

    def request(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """The request body (besides streaming flags)."""
        raise NotImplementedError

    async def complete(self, sdk: Any, params: dict[str, Any]) -> AssistantTurn:
        """One whole (JSON) response (:meth:`respond` announces its text and calls)."""
        raise NotImplementedError

    async def stream(
        self, sdk: Any, params: dict[str, Any], on_text: OnText, on_call: OnCall
    ) -> AssistantTurn:
        """One streamed (SSE) response, reporting calls as soon as they are complete."""
        raise NotImplementedError
