"""What a provider style does for the loop: wire format in, one assistant turn out."""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import ssl
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from toolnexus._json import encodable_data
from toolnexus._tracing import model_request_span, record_response
from toolnexus.client.styles._errors import (
    NO_SDK,
    EmptyStream,
    SdkErrors,
    lost_connection,
    provider_error,
    retry_delay,
    retryable,
    undecodable_body,
)
from toolnexus.errors import (
    ConfigurationError,
    ProviderError,
    ProviderProtocolError,
    ProviderTimeout,
    ProviderUnreachable,
)
from toolnexus.scheduling import Outcome, ToolCall
from toolnexus.tools import Tool

__all__ = [
    "CHOICE_WORDS",
    "AssistantTurn",
    "Ending",
    "OnCall",
    "OnText",
    "Style",
    "ToolChoice",
    "Usage",
    "WireOptions",
    "system_text",
    "tls_context",
]

logger = logging.getLogger("toolnexus.client")

_TLS: ssl.SSLContext | None = None

_ARRIVED_SHOWN = 200
"""How much of an answer cut off mid-stream its error quotes."""
_LENGTH_LIMITS = ("max_tokens", "max_completion_tokens", "max_output_tokens")


def _forced(choice: Any) -> bool:
    """Whether a wire ``tool_choice`` forces a call (OpenAI ``required`` or a named function,
    Anthropic ``any`` or ``tool``)."""
    if isinstance(choice, dict):
        return choice.get("type") in ("function", "any", "tool")
    return bool(choice == "required")


def _cut_off(base_url: str, arrived: str, exc: ProviderError) -> ProviderError:
    """A connection lost after part of the answer had arrived: the answer was cut off."""
    shown = arrived if len(arrived) <= _ARRIVED_SHOWN else arrived[:_ARRIVED_SHOWN] + "…"
    what = f"after this much of it had arrived: {shown!r}" if arrived else "after it had begun"
    return ProviderUnreachable(
        None,
        f"the model at {base_url} stopped answering mid-stream: the connection was lost "
        f"{what} (the answer was cut off; it was not retried, since part of it was used)",
        exc.detail,
    )


def system_text(content: Any) -> str:
    """A system message's content as the text a request sends: a string as it is, text
    blocks (``[{"type": "text", "text": ...}]``) as their text, anything else as nothing."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(
            str(block.get("text", ""))
            for block in content
            if isinstance(block, Mapping) and block.get("type") in ("text", "input_text", None)
        )
    return ""


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

    Attributes:
        input_tokens: Prompt tokens, as the server counts them (Anthropic leaves the cached
            ones out of this figure; OpenAI-style servers include them).
        output_tokens: Generated tokens.
        cache_read_tokens: Prompt tokens read from the provider's prompt cache (Anthropic
            ``cache_read_input_tokens``, OpenAI-style ``prompt_tokens_details.cached_tokens``).
        cache_write_tokens: Prompt tokens written to the cache (Anthropic
            ``cache_creation_input_tokens``, OpenAI-style ``cache_write_tokens``).
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None

    def add(self, other: Usage) -> None:
        """Add ``other``'s counts to these (an unknown count adds nothing)."""
        self.input_tokens = _plus(self.input_tokens, other.input_tokens)
        self.output_tokens = _plus(self.output_tokens, other.output_tokens)
        self.cache_read_tokens = _plus(self.cache_read_tokens, other.cache_read_tokens)
        self.cache_write_tokens = _plus(self.cache_write_tokens, other.cache_write_tokens)

    @property
    def total(self) -> int | None:
        """Input plus output tokens, or ``None`` when neither is known."""
        if self.input_tokens is None and self.output_tokens is None:
            return None
        return (self.input_tokens or 0) + (self.output_tokens or 0)

    def __str__(self) -> str:
        if self.total is None:
            return "usage unknown (the server did not report it)"
        text = f"{_count(self.input_tokens)} in / {_count(self.output_tokens)} out"
        if self.cache_read_tokens or self.cache_write_tokens:
            text += (
                f" (cache: {_count(self.cache_read_tokens)} read, "
                f"{_count(self.cache_write_tokens)} written)"
            )
        return text


def _plus(a: int | None, b: int | None) -> int | None:
    return a if b is None else b if a is None else a + b


def _count(value: int | None) -> str:
    return "?" if value is None else str(value)


Ending = Literal["answered", "paused", "refused", "context_window"]
"""How a model turn ended, whatever the provider called it:

* ``"answered"``: the model finished its turn (text, tool calls, or a length limit);
* ``"paused"``: the provider paused a long turn and continues it when the turn is sent back
  as it is (Anthropic ``pause_turn``);
* ``"refused"``: the provider refused to answer (Anthropic ``refusal``, OpenAI-style
  ``content_filter``);
* ``"context_window"``: the conversation no longer fits the model's context window (Anthropic
  ``model_context_window_exceeded``); the response is truncated.
"""


@dataclass
class AssistantTurn:
    """One model response: its text, its tool calls in emitted order, and what it cost."""

    text: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None
    message: dict[str, Any] = field(default_factory=dict)
    """The assistant message exactly as the provider sent it (every block and field, in
    order), sent back unchanged on every later request: the provider's opaque state
    (thinking signatures, reasoning details, encrypted reasoning) lives in it."""
    streamed: bool = False
    """Whether its text and calls were announced while it streamed."""
    ending: Ending = "answered"
    """How the turn ended (see `Ending`), from the provider's stop or finish reason."""
    stop_details: dict[str, Any] | None = None
    """What the provider said about a refusal (Anthropic ``stop_details``: category,
    explanation), when it said anything."""
    items: list[dict[str, Any]] | None = None
    """The turn as several transcript entries, where the provider's transcript is a list of
    items (the Responses API's output items, as sent): recorded instead of ``message``."""
    state: dict[str, Any] = field(default_factory=dict)
    """What the run's later requests must carry (Anthropic's ``container`` id, the
    Responses API's ``previous_response_id``): merged into the run's provider state."""

    @property
    def transcript(self) -> list[dict[str, Any]]:
        """What the turn adds to the transcript: its items, else its one message."""
        return self.items if self.items is not None else [self.message]

    @property
    def recorded(self) -> dict[str, Any]:
        """The turn as the session log keeps it beside the neutral transcript."""
        return {"items": self.items} if self.items is not None else self.message


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
    family: str = ""
    """The message shape the style speaks (``"openai"``, ``"anthropic"``): what a transcript
    recorded by one style needs for another to carry it on verbatim."""
    hosted_code = False
    """Whether requests offer the provider's code execution to the tools whose
    [`callers`][toolnexus.tools.Tool.callers] include ``"hosted"`` (``create_client(
    hosted_code=True)``; styles whose provider hosts programs)."""
    keeps_state: bool = True
    """Whether the provider's own assistant message is worth recording beside the neutral
    transcript (it may carry state the neutral form cannot); in-process models have none."""
    key_variables: tuple[str, ...] = ()
    errors: SdkErrors = NO_SDK
    """The style's SDK's exception classes by cause (`SdkErrors`): what `respond` translates
    and retries, recognised with ``isinstance``."""
    endings: Mapping[str, Ending] = {}
    """Every stop or finish reason the style knows, and what it means for the loop. Any other
    reason is reported as a `ProviderError` naming it, never taken for success."""
    owned_params: Mapping[str, str] = {
        "model": "create_client(model=...)",
        "messages": "history= or session= on run()",
        "tools": "tools= on run() or create_client()",
        "stream": "client.stream() instead of client.run()",
        "tool_choice": "create_client(tool_choice=...)",
    }
    """Request body fields the loop sets itself, each with the option that sets it instead:
    ``request_params`` naming one is refused before any request."""
    list_params: frozenset[str] = frozenset()
    """Body fields the API takes only as a list (Responses ``include``, Anthropic
    ``stop_sequences``): a ``request_params`` string there is sent as a list of that one item
    (`body_params`)."""

    def __init__(
        self,
        connect: Callable[[ssl.SSLContext], Any],
        model: str,
        system_prompt: str | None,
        request_params: dict[str, Any],
        base_url: str,
        wire: WireOptions | None = None,
        *,
        prompt_cache: bool = True,
    ) -> None:
        self._connect = connect
        self.model = model
        self.system_prompt = system_prompt
        self.request_params = request_params
        self.base_url = base_url
        self.wire = wire or WireOptions()
        self.prompt_cache = prompt_cache
        """Whether requests carry prompt-cache breakpoints (styles that place them)."""
        self._sdks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Held] = (
            weakref.WeakKeyDictionary()
        )

    @property
    def endpoint(self) -> str:
        """Where this style's requests go (its base URL, without a trailing ``/``): the
        endpoint whose turns' opaque state it may be sent (see ``create_client(fallback=...)``
        and `recorded`)."""
        return self.base_url.rstrip("/")

    def check_request_params(self, params: Mapping[str, Any]) -> None:
        """Refuse ``request_params`` that would take over what the loop sends.

        Raises:
            ConfigurationError: a field the loop owns, naming the option to use instead.
        """
        for key in params:
            instead = self.owned_params.get(key)
            if instead is not None:
                raise ConfigurationError(
                    f"request_params may not set {key!r}: the tool loop sends it itself on "
                    f"every request; use {instead}."
                )

    def body_params(self) -> dict[str, Any]:
        """``request_params`` as the body carries them (a copy): each of `list_params` given
        as one string sent as a list of that string, never split into its letters, and never
        refused for being a string where one item was meant."""
        params = dict(self.request_params)
        for key in self.list_params:
            if isinstance(params.get(key), str):
                params[key] = [params[key]]
        return params

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
        state: Mapping[str, Any] | None = None,
    ) -> AssistantTurn:
        """Ask the model for its next turn.

        Failures that say "not now" (408, 429, 502, 503, 504, 529, a lost connection) are retried
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
        params = self.sendable(self.request(messages, tools, tool_choice, state or {}))
        server = urlsplit(self.base_url).hostname or self.base_url
        limit = self.wire.turn_timeout
        with model_request_span(self.name, self.model, server) as span:
            try:
                async with asyncio.timeout(limit):
                    turn = await self._attempts(params, stream, on_text, on_call)
            except TimeoutError:
                raise self._late(limit, stream) from None
            except ProviderError as exc:
                if exc.status == 500 and _forced(params.get("tool_choice")):
                    exc.message += (
                        f" (the request forced a tool choice, tool_choice={tool_choice!r}: "
                        "some servers fail on forced choices; try tool_choice='auto')"
                    )
                    exc.args = (exc.message,)
                raise
            record_response(
                span,
                input_tokens=turn.usage.input_tokens,
                output_tokens=turn.usage.output_tokens,
                finish_reason=turn.stop_reason,
                cache_read_tokens=turn.usage.cache_read_tokens,
                cache_write_tokens=turn.usage.cache_write_tokens,
            )
            turn.ending = self.ending(turn.stop_reason)
            if on_complete is not None:
                on_complete(turn)
            if not turn.streamed:  # a whole response: its text and calls are all known now
                if turn.text:
                    await on_text(turn.text)
                if turn.ending in ("answered", "paused"):  # a refused or cut-off one runs nothing
                    for call in turn.calls:
                        await on_call(call)
            return turn

    def sendable(self, params: dict[str, Any]) -> dict[str, Any]:
        """The request body with every string made encodable (`encodable_data`): one lone
        surrogate anywhere (a model's text, a tool's result) would fail the whole request."""
        sendable: dict[str, Any] = encodable_data(params)
        return sendable

    def _late(self, limit: float | None, stream: bool) -> ProviderError:
        """The error for a turn past ``turn_timeout``: what was stopped, and what to change."""
        if stream:
            stopped = "the stream was closed, which stops the generation on most servers"
        else:
            stopped = (
                "toolnexus stopped waiting, but the server may still be generating this answer "
                "(a request that is not streamed cannot be stopped from the client; a "
                "single-slot server stays busy until it finishes)"
            )
        bounded = any(key in self.request_params for key in _LENGTH_LIMITS)
        advice = "raise turn_timeout"
        if not bounded:
            advice = "set max_tokens in request_params, or " + advice
        return ProviderTimeout(
            None,
            f"the model at {self.base_url} did not finish its turn within {limit or 0:g} s "
            f"(turn_timeout): {stopped}; {advice}",
        )

    def ending(self, stop_reason: str | None) -> Ending:
        """What ``stop_reason`` means for the loop.

        A missing reason in a whole response counts as answered (some compatible servers
        leave it out; a stream without one is already an error).

        Raises:
            ProviderError: a reason this style does not know (OpenRouter's ``"error"``, a
                newer API's addition): reported by name rather than taken for success.
        """
        if stop_reason is None:
            return "answered"
        ending = self.endings.get(stop_reason)
        if ending is None:
            known = ", ".join(sorted(self.endings))
            raise ProviderProtocolError(
                None,
                f"the model at {self.base_url} ended its turn with the stop reason "
                f"{stop_reason!r}, which toolnexus does not know (it knows {known}): the turn "
                "is not taken for an answer; check the server's logs or its status page",
            )
        return ending

    async def _attempts(
        self, params: dict[str, Any], stream: bool, on_text: OnText, on_call: OnCall
    ) -> AssistantTurn:
        sdk = await self.sdk()
        arrived: list[str] = []  # the text of a streamed response that reached the loop
        used = False  # whether anything of a streamed response reached the loop

        async def text(piece: str) -> None:
            nonlocal used
            used = True
            if sum(map(len, arrived)) < _ARRIVED_SHOWN:
                arrived.append(piece)
            await on_text(piece)

        async def call(tool_call: ToolCall) -> None:
            nonlocal used
            used = True
            await on_call(tool_call)

        attempt = 0
        reasked = False  # the whole re-ask after an empty stream: its connection is suspect
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
                        reasked = True
                return await self._one(self.complete(sdk, params))
            except ProviderError as exc:
                cause = exc.__cause__
                if reasked and cause is not None and lost_connection(cause, self.errors):
                    # Servers that answer a stream with an empty body (llama.cpp) close the
                    # connection a few milliseconds later, and the pool hands that very
                    # connection to the re-ask: part of the same attempt, not a retry.
                    reasked = False
                    logger.info("asking again on a new connection: %s", exc.message)
                    continue
                if used and cause is not None and lost_connection(cause, self.errors):
                    raise _cut_off(self.base_url, "".join(arrived), exc) from cause
                if used or attempt >= self.wire.retries or cause is None:
                    raise
                if not retryable(cause, self.errors, timeouts=self.wire.retry_timeouts):
                    raise
                delay = retry_delay(cause, attempt)
                logger.info("retrying the model request in %.1f s: %s", delay, exc.message)
                await asyncio.sleep(delay)
                attempt += 1

    async def _one(self, attempt: Awaitable[AssistantTurn]) -> AssistantTurn:
        """One request; the SDK's errors become [`ProviderError`][toolnexus.errors.ProviderError]
        (caused by them)."""
        translated: tuple[type[BaseException], ...] = (*self.errors.base, json.JSONDecodeError)
        try:
            return await attempt
        except translated as exc:  # the one boundary where SDK errors are translated
            raise self._translated(exc) from exc
        except RecursionError as exc:  # the SDK decoding a body nested past Python's stack
            raise undecodable_body(self.base_url, exc) from None
        except Exception as exc:
            if not lost_connection(exc, self.errors):
                raise
            # a raw event stream lets the HTTP library's error through when the body breaks
            raise self._translated(exc) from exc

    def _translated(self, exc: BaseException) -> ProviderError:
        """An SDK's (or the HTTP library's) error as the `ProviderError` of its cause."""
        return provider_error(
            exc, self.base_url, self.key_variables, self.wire.timeout, self.errors
        )

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

    def recorded(self, message: Mapping[str, Any]) -> dict[str, Any] | None:
        """An assistant message of a neutral transcript as its provider sent it, when it was
        recorded by a style of this one's `family` at this `endpoint` (a copy; a log that names
        no endpoint counts as this one's); else ``None``, and the style rebuilds the message from
        its text and tool calls (what every style can carry): another endpoint's opaque state
        (a fallback's turn, say) is never sent here."""
        provider = message.get("provider")
        if not isinstance(provider, Mapping) or provider.get("style") != self.family:
            return None
        endpoint = provider.get("endpoint")
        if isinstance(endpoint, str) and endpoint.rstrip("/") != self.endpoint:
            return None
        sent = provider.get("message")
        return copy.deepcopy(dict(sent)) if isinstance(sent, Mapping) else None

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
        state: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The request body (besides streaming flags); ``tool_choice`` is sent when tools are
        offered; ``state``: what earlier turns of the run said later requests must carry
        (`AssistantTurn.state`)."""
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
