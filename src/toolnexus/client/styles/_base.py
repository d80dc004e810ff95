"""What a provider style does for the loop: wire format in, one assistant turn out."""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from toolnexus._json import encodable_data
from toolnexus._tracing import model_request_span, record_response
from toolnexus.client.styles._errors import (
    EmptyStream,
    provider_error,
    retry_delay,
    retryable,
    undecodable_body,
)
from toolnexus.errors import ProviderError
from toolnexus.scheduling import Outcome, ToolCall
from toolnexus.tools import Tool

__all__ = [
    "CHOICE_WORDS",
    "AssistantTurn",
    "OnCall",
    "OnText",
    "Style",
    "ToolChoice",
    "Usage",
    "WireOptions",
    "tls_context",
]

logger = logging.getLogger("toolnexus.client")

_TLS: ssl.SSLContext | None = None


async def tls_context() -> ssl.SSLContext:
    """The process's one TLS context for model endpoints, made in a thread on first use."""
    global _TLS
    if _TLS is None:
        _TLS = await asyncio.to_thread(ssl.create_default_context)
    return _TLS


OnText = Callable[[str], Awaitable[None]]
"""Called with each piece of assistant text as it arrives."""

OnCall = Callable[[ToolCall], Awaitable[None]]
"""Called once per tool call, in emitted order, as soon as its arguments are complete."""


@dataclass
class Usage:
    """Token counts, summed over the turns of a run; ``None`` where no server reported one.

    Why ``None`` and not 0: many OpenAI-compatible servers (llama.cpp, some gateways) send no
    usage at all, and "0 tokens" would read as a fact. A sum is known once any turn reported.
    """

    input_tokens: int | None = None
    output_tokens: int | None = None

    def add(self, other: Usage) -> None:
        """Add ``other``'s counts to these (an unknown count adds nothing)."""
        self.input_tokens = _plus(self.input_tokens, other.input_tokens)
        self.output_tokens = _plus(self.output_tokens, other.output_tokens)

    @property
    def total(self) -> int | None:
        """Input plus output tokens, or ``None`` when neither is known."""
        if self.input_tokens is None and self.output_tokens is None:
            return None
        return (self.input_tokens or 0) + (self.output_tokens or 0)

    def __str__(self) -> str:
        if self.total is None:
            return "usage unknown (the server did not report it)"
        return f"{_count(self.input_tokens)} in / {_count(self.output_tokens)} out"


def _plus(a: int | None, b: int | None) -> int | None:
    return a if b is None else b if a is None else a + b


def _count(value: int | None) -> str:
    return "?" if value is None else str(value)


@dataclass
class AssistantTurn:
    """One model response: its text, its tool calls in emitted order, and what it cost."""

    text: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None
    message: dict[str, Any] = field(default_factory=dict)
    """The assistant message in the provider's own shape, for the transcript."""
    streamed: bool = False
    """Whether its text and calls were announced while it streamed."""


ToolChoice = str
"""``"auto"``, ``"none"``, ``"required"``, or the name of one offered tool."""

CHOICE_WORDS = ("auto", "none", "required")


@dataclass(frozen=True)
class WireOptions:
    """How requests go out: the SDK's timeout, toolnexus's retries, a turn's time limit."""

    timeout: float | None = 120.0
    retries: int = 2
    retry_timeouts: bool = False
    turn_timeout: float | None = 600.0


class _Held:
    """An SDK client kept for one event loop, closed at the latest when that loop shuts down.

    Why an async generator: ``asyncio.run`` (and every ``asyncio.Runner``) finalises the async
    generators still suspended on its loop before closing it (``loop.shutdown_asyncgens``).
    A suspended generator is therefore the loop's own "run this when you end" hook, and a
    client nobody closed does not leave sockets behind a closed loop.
    """

    def __init__(self, sdk: Any) -> None:
        self.sdk = sdk
        self._keeper = self._keep()

    async def start(self, loop: asyncio.AbstractEventLoop) -> None:
        # Held by the loop itself, not by the client: a client dropped after one run must
        # not take its connections' closer with it.
        _HELD_BY_LOOP.setdefault(loop, []).append(self)
        await self._keeper.__anext__()  # suspended at its yield until the loop shuts down

    async def _keep(self) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            await self.sdk.close()

    async def close(self) -> None:
        await self._keeper.aclose()


_HELD_BY_LOOP: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[_Held]] = (
    weakref.WeakKeyDictionary()
)


class Style:
    """A wire format the loop speaks: OpenAI Chat Completions or Anthropic Messages.

    Holds what both share: construction, one SDK client per event loop (reused by every run of
    the client, closed by `aclose`), and `respond`, the one place where a turn is
    asked for, retried, cut off at its time limit and its errors translated. Subclasses say how
    tools are declared, how a request is built (``request``), answered whole (``complete``) or
    streamed (``stream``), and how results go back (``results``).
    """

    name: str = ""
    key_variables: tuple[str, ...] = ()
    sdk_errors: tuple[type[Exception], ...] = ()

    def __init__(
        self,
        connect: Callable[[ssl.SSLContext], Any],
        model: str,
        system_prompt: str | None,
        request_params: dict[str, Any],
        base_url: str,
        wire: WireOptions | None = None,
    ) -> None:
        self._connect = connect
        self.model = model
        self.system_prompt = system_prompt
        self.request_params = request_params
        self.base_url = base_url
        self.wire = wire or WireOptions()
        self._sdks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Held] = (
            weakref.WeakKeyDictionary()
        )

    async def sdk(self) -> Any:
        """The SDK client for the running event loop, made on first use.

        Why per loop: its connections belong to the loop that opened them, and reusing them
        saves a connection (and a TLS handshake) per run. Why made in a thread, with one TLS
        context for the whole process: loading the CA bundle takes tens of milliseconds, which
        on the loop would stall every other run and tool in the process.
        """
        loop = asyncio.get_running_loop()
        held = self._sdks.get(loop)
        if held is None:
            made = await asyncio.to_thread(self._connect, await tls_context())
            held = self._sdks.get(loop)
            if held is None:
                held = self._sdks[loop] = _Held(made)
                await held.start(loop)
            else:  # another run of this loop made one meanwhile
                await made.close()
        return held.sdk

    async def aclose(self) -> None:
        """Close the SDK client of the running loop (a later run makes a new one)."""
        loop = asyncio.get_running_loop()
        held = self._sdks.pop(loop, None)
        if held is not None:
            kept = _HELD_BY_LOOP.get(loop, [])
            if held in kept:
                kept.remove(held)
            await held.close()

    async def respond(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        *,
        stream: bool,
        on_text: OnText,
        on_call: OnCall,
        on_complete: Callable[[AssistantTurn], None] | None = None,
        tool_choice: ToolChoice | None = None,
    ) -> AssistantTurn:
        """Ask the model for its next turn.

        Failures that say "not now" (429, 502, 503, 504, 529, a lost connection) are retried
        with backoff, as long as nothing of the response was used yet; a streamed response
        that carries nothing at all is asked again without streaming. The whole turn, retries
        included, must finish within ``turn_timeout``.

        ``on_complete`` gets the whole turn (its text, calls and cost) as soon as it is known:
        for a whole response, before its calls are announced, so a budget sees the cost and the
        session log holds the calls before any of them starts; for a stream, at its end (its
        first calls may be running by then).

        Raises:
            ProviderError: one line saying what went wrong (the server's body in ``detail``).
        """
        params = encodable_data(self.request(messages, tools, tool_choice))
        server = urlsplit(self.base_url).hostname or self.base_url
        limit = self.wire.turn_timeout
        with model_request_span(self.name, self.model, server) as span:
            try:
                async with asyncio.timeout(limit):
                    turn = await self._attempts(params, stream, on_text, on_call)
            except TimeoutError:
                raise ProviderError(
                    None,
                    f"the model at {self.base_url} did not finish its turn within {limit:g} s "
                    "(turn_timeout): a runaway generation was cut off; set max_tokens in "
                    "request_params, or raise turn_timeout",
                ) from None
            if on_complete is not None:
                on_complete(turn)
            if not turn.streamed:  # a whole response: its text and calls are all known now
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

    async def _attempts(
        self, params: dict[str, Any], stream: bool, on_text: OnText, on_call: OnCall
    ) -> AssistantTurn:
        sdk = await self.sdk()
        used = False  # whether anything of a streamed response reached the loop

        async def text(piece: str) -> None:
            nonlocal used
            used = True
            await on_text(piece)

        async def call(tool_call: ToolCall) -> None:
            nonlocal used
            used = True
            await on_call(tool_call)

        attempt = 0
        while True:
            try:
                if stream:
                    try:
                        return await self._one(self.stream(sdk, params, text, call))
                    except EmptyStream:
                        logger.warning(
                            "the model at %s sent an empty stream; asking again without streaming",
                            self.base_url,
                        )
                        stream = False
                return await self._one(self.complete(sdk, params))
            except ProviderError as exc:
                cause = exc.__cause__
                if used or attempt >= self.wire.retries or cause is None:
                    raise
                if not retryable(cause, timeouts=self.wire.retry_timeouts):
                    raise
                delay = retry_delay(cause, attempt)
                logger.info("retrying the model request in %.1f s: %s", delay, exc.message)
                await asyncio.sleep(delay)
                attempt += 1

    async def _one(self, attempt: Awaitable[AssistantTurn]) -> AssistantTurn:
        """One request; the SDK's errors become [`ProviderError`][toolnexus.errors.ProviderError]
        (caused by them)."""
        translated: tuple[type[Exception], ...] = (*self.sdk_errors, json.JSONDecodeError)
        try:
            return await attempt
        except translated as exc:  # the one boundary where SDK errors are translated
            error = provider_error(exc, self.base_url, self.key_variables, self.wire.timeout)
            raise error from exc
        except RecursionError as exc:  # the SDK decoding a body nested past Python's stack
            raise undecodable_body(self.base_url, exc) from None

    def tool_definitions(self, tools: Sequence[Tool]) -> list[dict[str, Any]]:
        """The tools as this provider declares them."""
        raise NotImplementedError

    def opening(self, history: Sequence[dict[str, Any]], prompt: str) -> list[dict[str, Any]]:
        """The messages of a new request: earlier history, then the user's prompt."""
        raise NotImplementedError

    def history(self, transcript: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """A session's transcript (``Session.messages()``: ``role`` plus the event's data) in
        this provider's message shape, to carry a conversation on."""
        raise NotImplementedError

    def results(
        self, calls: Sequence[ToolCall], outcomes: Sequence[Outcome]
    ) -> list[dict[str, Any]]:
        """The messages that hand the calls' results back, in emitted order."""
        raise NotImplementedError

    def request(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        tool_choice: ToolChoice | None = None,
    ) -> dict[str, Any]:
        """The request body (besides streaming flags); ``tool_choice`` is sent when tools are
        offered and ``request_params`` does not set one itself."""
        raise NotImplementedError

    async def complete(self, sdk: Any, params: dict[str, Any]) -> AssistantTurn:
        """One whole (JSON) response (`respond` announces its text and calls)."""
        raise NotImplementedError

    async def stream(
        self, sdk: Any, params: dict[str, Any], on_text: OnText, on_call: OnCall
    ) -> AssistantTurn:
        """One streamed (SSE) response, reporting calls as soon as they are complete.

        Raises:
            EmptyStream: the stream carried nothing (the turn is asked again, whole).
            ProviderError: the stream ended without saying the response was complete.
        """
        raise NotImplementedError
