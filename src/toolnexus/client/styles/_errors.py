"""What went wrong on the wire, in one line, and whether trying again can help.

Both official SDKs raise errors of the same shape (``APIStatusError`` with ``status_code``,
``body`` and ``response``; ``APIConnectionError``; ``APITimeoutError``). Each style names its
own SDK's classes in an `SdkErrors`; this module recognises them with ``isinstance``, turns them
into the [`ProviderError`][toolnexus.errors.ProviderError] subclass of their cause with a
one-line message (the full body stays in ``detail``) and decides which are worth a retry.

Why toolnexus retries instead of the SDKs: the SDKs retry every 5xx and every timeout. A 500
from a local server usually means *our request* broke it (a validation error): it fails the
same way every time, and two retries only triple the wait and the log. A timeout on a
single-slot server (llama.cpp) means the slot is still busy with the abandoned generation, so
a retry queues behind it. Here 408, 429, 502, 503, 504, 529 and failed connections are retried
with backoff (honouring ``Retry-After``); 500 and timeouts are not, unless asked.
"""

from __future__ import annotations

import importlib
import json
import random
import socket
import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from toolnexus.errors import (
    ProviderError,
    ProviderProtocolError,
    ProviderRateLimited,
    ProviderStatusError,
    ProviderTimeout,
    ProviderUnreachable,
)

__all__ = [
    "NO_SDK",
    "RETRYABLE_STATUSES",
    "EmptyStream",
    "ErrorsOf",
    "SdkErrors",
    "described",
    "lost_connection",
    "malformed",
    "provider_error",
    "retry_after",
    "retry_delay",
    "retryable",
    "root_cause",
    "sdk_errors",
    "undecodable_body",
]

RETRYABLE_STATUSES = frozenset({408, 429, 502, 503, 504, 529})
"""Statuses that say "not now" rather than "not this request"."""

MAX_CAUSE_CHARS = 300
MAX_RETRY_AFTER = 60.0


class EmptyStream(Exception):
    """A streamed response that carried nothing at all (no chunk, no event).

    Seen from llama.cpp-style servers that answer a streamed request with tools by a bare
    200; the turn is asked again without streaming.
    """


@dataclass(frozen=True)
class SdkErrors:
    """The exception classes of one SDK, by cause, for ``isinstance`` checks.

    A style sets it from the SDK it imports (the SDKs are optional extras; a style whose SDK is
    missing has `NO_SDK`, which matches nothing). Why classes and not their names: a subclass
    the SDK adds later still matches, and a class of the same name from elsewhere does not.

    Attributes:
        base: Every error the SDK raises on purpose (``APIError``): what the style translates.
        timeout: No answer within the request timeout (``APITimeoutError``); checked before
            ``connection``, of which it is a subclass in both SDKs.
        connection: The connection failed or broke (``APIConnectionError``).
        status: The server answered with an error status (``APIStatusError``).
        rate_limited: The server answered 429 (``RateLimitError``).
        transport: The HTTP library's own transport errors (``httpx.TransportError``, or
            ``httpx2``'s), which a raw event stream lets through when the connection drops
            mid-body (`http_library_errors`).
        connect_timeout: The HTTP library's connect timeout (``httpx.ConnectTimeout``, or
            ``httpx2``'s), for the root cause of a failed connection.
    """

    base: tuple[type[BaseException], ...] = ()
    timeout: tuple[type[BaseException], ...] = ()
    connection: tuple[type[BaseException], ...] = ()
    status: tuple[type[BaseException], ...] = ()
    rate_limited: tuple[type[BaseException], ...] = ()
    transport: tuple[type[BaseException], ...] = ()
    connect_timeout: tuple[type[BaseException], ...] = ()


NO_SDK = SdkErrors()
"""The errors of a style without its SDK (the in-process test models): none."""


class ErrorsOf:
    """A style's `errors`: the `SdkErrors` of the SDK module ``module``, read the first time
    a style asks for them (`NO_SDK` where the SDK is not installed).

    Why not at import: importing an official SDK takes about a second, and ``import
    toolnexus`` (every CLI command, every gateway and worker process) needs none of them. By
    the time a request can fail, its style has imported its SDK anyway.
    """

    def __init__(self, module: str) -> None:
        self.module = module
        self.errors: SdkErrors | None = None

    def __get__(self, instance: object, owner: type | None = None) -> SdkErrors:
        if self.errors is None:
            try:
                sdk = importlib.import_module(self.module)
            except ImportError:  # the in-process models reuse the style's shapes without it
                self.errors = NO_SDK
            else:
                self.errors = sdk_errors(sdk)
        return self.errors


_HTTP_LIBRARIES = ("httpx", "httpx2")
"""The HTTP libraries the official SDKs are built on: ``httpx``, and its fork ``httpx2``, which
their current releases use instead."""


def sdk_errors(sdk: Any) -> SdkErrors:
    """The `SdkErrors` of an official SDK module (``openai``, ``anthropic``): both name their
    exception classes alike (``APIError``, ``APITimeoutError``, ``APIConnectionError``,
    ``APIStatusError``, ``RateLimitError``), plus the ``TransportError`` and ``ConnectTimeout``
    of each installed HTTP library they may be built on. A style calls it where it imports its
    SDK, so all of these are already imported."""
    transport: list[type[BaseException]] = []
    connect_timeout: list[type[BaseException]] = []
    for name in _HTTP_LIBRARIES:
        try:
            library = importlib.import_module(name)
        except ImportError:
            continue
        transport.append(library.TransportError)
        connect_timeout.append(library.ConnectTimeout)
    return SdkErrors(
        base=(sdk.APIError,),
        timeout=(sdk.APITimeoutError,),
        connection=(sdk.APIConnectionError,),
        status=(sdk.APIStatusError,),
        rate_limited=(sdk.RateLimitError,),
        transport=tuple(transport),
        connect_timeout=tuple(connect_timeout),
    )


def lost_connection(exc: BaseException, sdk: SdkErrors) -> bool:
    """Whether ``exc`` says the connection failed or broke: the SDK's connection error, or the
    HTTP library's own transport error, which a raw event stream lets through when the
    connection drops mid-body."""
    return isinstance(exc, (sdk.connection, sdk.transport))


def retryable(exc: BaseException, sdk: SdkErrors, *, timeouts: bool) -> bool:
    """Whether a failed request is worth sending again (before anything of it was used)."""
    if isinstance(exc, sdk.timeout):
        return timeouts
    if lost_connection(exc, sdk):
        return True
    return getattr(exc, "status_code", None) in RETRYABLE_STATUSES


def retry_after(exc: BaseException) -> float | None:
    """The seconds the server's ``Retry-After`` header asks to wait, or ``None`` when it sent
    none (or a date, or something that is not a number of seconds)."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    try:
        after = float(headers.get("retry-after", ""))
    except (TypeError, ValueError):
        return None
    return after if after >= 0 else None


def retry_delay(exc: BaseException, attempt: int) -> float:
    """Seconds to wait before attempt ``attempt + 1``: the server's ``Retry-After`` when it sent
    one (at most a minute), else exponential backoff with jitter (0.5 s, 1 s, 2 s, … 8 s)."""
    after = retry_after(exc)
    if after is not None and after <= MAX_RETRY_AFTER:
        return after
    backoff: float = min(0.5 * 2**attempt, 8.0)
    return backoff * (0.8 + 0.4 * random.random())


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it was raised from or during (``__cause__``, else ``__context__``), in
    order, each once."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def root_cause(exc: BaseException, base_url: str = "", sdk: SdkErrors = NO_SDK) -> str | None:
    """Why a connection failed, in a few words, from the OS or TLS error at the bottom of
    ``exc``'s chain: the DNS lookup, a refused connection, TLS, a timeout, or the OS's own
    words; ``None`` when the chain holds none of them.

    The SDKs say only "Connection error."; the cause is three or four exceptions down.
    """
    host = urlsplit(base_url).hostname or "the host"
    for link in reversed(_chain(exc)):
        if isinstance(link, socket.gaierror):
            return f"the DNS lookup of {host} failed: {link.strerror or link}"
        if isinstance(link, ConnectionRefusedError):
            return f"the connection to {urlsplit(base_url).netloc or host} was refused"
        if isinstance(link, ssl.SSLCertVerificationError):
            return f"TLS failed: the certificate of {host} was not trusted ({link.verify_message})"
        if isinstance(link, ssl.SSLError):
            return f"TLS failed: {link.reason or link}"
        if isinstance(link, (TimeoutError, sdk.connect_timeout)):
            return f"connecting to {host} timed out"
        if isinstance(link, OSError) and link.strerror:
            return f"{link.strerror} ({host})"
    return None


def _cause(exc: BaseException) -> tuple[str, str]:
    """(one line saying what the server said, the whole of it)."""
    body = getattr(exc, "body", None)
    text: Any = None
    if isinstance(body, list) and body and isinstance(body[0], dict):
        body = body[0]  # Gemini's OpenAI-compatible endpoint answers with a JSON array
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            text = error.get("message") or error.get("detail") or error.get("type")
            metadata = error.get("metadata")
            raw = metadata.get("raw") if isinstance(metadata, dict) else None
            if isinstance(raw, str) and raw.strip():  # a gateway's wrapping of the upstream's
                text = f"{text}: {raw}" if isinstance(text, str) else raw
        elif isinstance(error, str):
            text = error
    if not isinstance(text, str) or not text.strip():
        text = str(getattr(exc, "message", "") or exc)
    try:
        detail = json.dumps(body, ensure_ascii=False) if body is not None else str(exc)
    except (TypeError, ValueError):
        detail = str(exc)
    line = " ".join(text.split())
    if len(line) > MAX_CAUSE_CHARS:
        line = line[: MAX_CAUSE_CHARS - 1] + "…"
    return line, detail


def provider_error(
    exc: BaseException,
    base_url: str,
    key_variables: tuple[str, ...],
    timeout: float | None,
    sdk: SdkErrors = NO_SDK,
) -> ProviderError:
    """Translate an SDK error (openai's and anthropic's share their shape) into the
    [`ProviderError`][toolnexus.errors.ProviderError] subclass of its cause.

    A 401 names the key variables that were tried; a timeout says how long was waited; a failed
    connection names the URL; every message is one line, the full body is in ``detail``.
    """
    if isinstance(exc, json.JSONDecodeError):
        return ProviderProtocolError(
            200, f"the model at {base_url} answered with a body that is not JSON ({exc})"
        )
    if isinstance(exc, sdk.timeout):
        waited = f"within {timeout:g} s" if timeout is not None else "in time"
        return ProviderTimeout(
            None,
            f"the model at {base_url} gave no answer {waited} (the request timeout); it was "
            "not retried, since a busy server would only queue the retry behind it",
        )
    cause, detail = _cause(exc)
    status = getattr(exc, "status_code", None)
    if status is None:
        root = root_cause(exc, base_url, sdk)
        said = root if root is not None else cause  # the SDK's own words: "Connection error."
        return ProviderUnreachable(None, f"could not reach the model at {base_url}: {said}", detail)
    if status == 401:
        variables = " or ".join(key_variables)
        return ProviderStatusError(
            401,
            f"the model at {base_url} answered HTTP 401: {cause} (the API key was refused: "
            f"check api_key= or {variables})",
            detail,
        )
    message = f"the model at {base_url} answered HTTP {status}: {cause}"
    if not isinstance(exc, sdk.status):  # a body the SDK refused (APIResponseValidationError)
        return ProviderProtocolError(int(status), message, detail)
    if isinstance(exc, sdk.rate_limited) or status == 429:
        return ProviderRateLimited(int(status), message, detail, retry_after(exc))
    return ProviderStatusError(int(status), message, detail)


def undecodable_body(base_url: str, exc: BaseException) -> ProviderError:
    """The error for a response body the SDK could not decode as JSON at all."""
    if isinstance(exc, RecursionError):
        cause = "it is nested too deeply to decode"
    else:
        cause = f"it is not JSON Python can read ({str(exc).split(';')[0]})"
    return ProviderProtocolError(
        200, f"the model at {base_url} sent a response that cannot be used: {cause}"
    )


def malformed(base_url: str, what: str) -> ProviderError:
    """The error for an answer (or one event of it) that is not of the shape its API defines:
    ``what`` says which part and what came instead."""
    return ProviderProtocolError(
        200,
        f"the model at {base_url} answered with a body toolnexus cannot read: {what} (the "
        "server is not speaking this style's API, or failed without saying so; check the "
        "base_url, the style and the server's logs)",
    )


def described(value: Any) -> str:
    """What a decoded JSON value (or an SDK object made of one) is, in a few words: for a
    message saying what came where something else was expected."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        head = value.lstrip()[:6]
        if head.startswith(("data:", "event:")):
            return "an event stream (SSE), though the request did not ask to stream"
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    return "an object"
