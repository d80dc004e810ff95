"""Provider errors by cause: each failure a real endpoint on 127.0.0.1 can give (no answer in
time, a refused port, a 429 with ``Retry-After``, a 500, a 200 that is not JSON) raises the
`ProviderError` subclass of its cause, in every style, through the official SDKs over real
HTTP, with ``status`` and the one-line message as they always were."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from toolnexus import create_client
from toolnexus.errors import (
    ProviderError,
    ProviderProtocolError,
    ProviderRateLimited,
    ProviderStatusError,
    ProviderTimeout,
    ProviderUnreachable,
)

STYLES = ("openai", "anthropic", "responses")


class Answer:
    """What the endpoint sends: a status, headers and a body, or nothing until released."""

    def __init__(
        self, status: int = 200, body: str = "", headers: dict[str, str] | None = None
    ) -> None:
        self.status = status
        self.body = body
        self.headers = headers or {}


HANG = Answer(0)
"""Answer nothing until the test ends (a server that never replies in time)."""


class Endpoint:
    """An HTTP server on 127.0.0.1 answering every request with the scripted `Answer`, and
    counting the requests."""

    def __init__(self) -> None:
        self.answer = Answer()
        self.requests = 0
        self.released = threading.Event()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", "0")))
                endpoint.requests += 1
                answer = endpoint.answer
                if answer is HANG:
                    endpoint.released.wait(30)
                    return
                data = answer.body.encode()
                self.send_response(answer.status)
                self.send_header("content-type", "application/json")
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def netloc(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{host!s}:{port}"

    def stop(self) -> None:
        self.released.set()
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    served = Endpoint()
    yield served
    served.stop()


def url(netloc: str, style: str) -> str:
    return f"http://{netloc}" + ("" if style == "anthropic" else "/v1")


def client_at(netloc: str, style: str, **options: Any) -> Any:
    options.setdefault("retries", 0)
    return create_client(
        base_url=url(netloc, style),
        style=style,
        model="m",
        api_key="none",
        code_mode="native",
        **options,
    )


def error_body(style: str, message: str, kind: str) -> str:
    """An error body in the style's own wire format."""
    if style == "anthropic":
        return json.dumps({"type": "error", "error": {"type": kind, "message": message}})
    return json.dumps({"error": {"message": message, "type": kind, "code": None}})


async def failure(client: Any) -> ProviderError:
    with pytest.raises(ProviderError) as info:
        await client.run("hello")
    return info.value


@pytest.mark.parametrize("style", STYLES)
async def test_no_answer_within_the_request_timeout_is_a_provider_timeout(
    endpoint: Endpoint, style: str
) -> None:
    endpoint.answer = HANG
    error = await failure(client_at(endpoint.netloc, style, timeout=0.3))
    assert type(error) is ProviderTimeout
    assert error.status is None
    assert error.message == (
        f"the model at {url(endpoint.netloc, style)} gave no answer within 0.3 s (the request "
        "timeout); it was not retried, since a busy server would only queue the retry behind it"
    )
    assert endpoint.requests == 1  # a timeout is not retried unless asked


@pytest.mark.parametrize("style", STYLES)
async def test_a_turn_past_its_time_limit_is_a_provider_timeout(
    endpoint: Endpoint, style: str
) -> None:
    endpoint.answer = HANG
    error = await failure(client_at(endpoint.netloc, style, turn_timeout=0.3))
    assert type(error) is ProviderTimeout
    assert error.status is None
    assert "did not finish its turn within 0.3 s (turn_timeout)" in error.message


@pytest.mark.parametrize("style", STYLES)
async def test_a_refused_port_is_provider_unreachable(style: str) -> None:
    with socket.socket() as taken:  # a port nothing listens on once it is closed
        taken.bind(("127.0.0.1", 0))
        netloc = f"127.0.0.1:{taken.getsockname()[1]}"
    error = await failure(client_at(netloc, style))
    assert type(error) is ProviderUnreachable
    assert error.status is None
    assert error.message == (
        f"could not reach the model at {url(netloc, style)}: the connection to {netloc} was refused"
    )


@pytest.mark.parametrize("style", STYLES)
async def test_a_429_is_provider_rate_limited_with_the_servers_retry_after(
    endpoint: Endpoint, style: str
) -> None:
    said = "slow down: 3 requests a minute"
    endpoint.answer = Answer(429, error_body(style, said, "rate_limit_error"), {"retry-after": "7"})
    error = await failure(client_at(endpoint.netloc, style))
    assert type(error) is ProviderRateLimited
    assert isinstance(error, ProviderStatusError)
    assert (error.status, error.retry_after) == (429, 7.0)
    assert error.message == f"the model at {url(endpoint.netloc, style)} answered HTTP 429: {said}"
    assert said in (error.detail or "")


@pytest.mark.parametrize("style", STYLES)
async def test_a_429_without_retry_after_has_none(endpoint: Endpoint, style: str) -> None:
    endpoint.answer = Answer(429, error_body(style, "busy", "rate_limit_error"))
    error = await failure(client_at(endpoint.netloc, style))
    assert type(error) is ProviderRateLimited
    assert (error.status, error.retry_after) == (429, None)


@pytest.mark.parametrize("style", STYLES)
async def test_a_500_is_a_provider_status_error(endpoint: Endpoint, style: str) -> None:
    said = "the template failed to render"
    endpoint.answer = Answer(500, error_body(style, said, "server_error"))
    error = await failure(client_at(endpoint.netloc, style))
    assert type(error) is ProviderStatusError
    assert error.status == 500
    assert error.message == f"the model at {url(endpoint.netloc, style)} answered HTTP 500: {said}"


@pytest.mark.parametrize("style", STYLES)
async def test_a_401_is_a_provider_status_error_naming_the_key(
    endpoint: Endpoint, style: str
) -> None:
    endpoint.answer = Answer(401, error_body(style, "bad key", "authentication_error"))
    error = await failure(client_at(endpoint.netloc, style))
    assert type(error) is ProviderStatusError
    assert error.status == 401
    assert "(the API key was refused: check api_key= or " in error.message


@pytest.mark.parametrize("style", STYLES)
async def test_a_200_that_is_not_json_is_a_provider_protocol_error(
    endpoint: Endpoint, style: str
) -> None:
    endpoint.answer = Answer(200, "<html>this is no model endpoint</html>")
    error = await failure(client_at(endpoint.netloc, style))
    assert type(error) is ProviderProtocolError
    assert error.status == 200
    assert error.message.startswith(f"the model at {url(endpoint.netloc, style)} ")


@pytest.mark.parametrize("style", STYLES)
async def test_a_200_of_the_wrong_shape_is_a_provider_protocol_error(
    endpoint: Endpoint, style: str
) -> None:
    endpoint.answer = Answer(200, json.dumps([1, 2, 3]))
    error = await failure(client_at(endpoint.netloc, style))
    assert type(error) is ProviderProtocolError
    assert error.status == 200
    assert "answered with a body toolnexus cannot read" in error.message


@pytest.mark.parametrize("style", STYLES)
async def test_a_retried_429_honours_retry_after_then_raises_rate_limited(
    endpoint: Endpoint, style: str
) -> None:
    endpoint.answer = Answer(
        429, error_body(style, "busy", "rate_limit_error"), {"retry-after": "0"}
    )
    error = await failure(client_at(endpoint.netloc, style, retries=2))
    assert type(error) is ProviderRateLimited
    assert endpoint.requests == 3  # the first try and two retries


def test_a_durable_runs_provider_error_is_rebuilt_as_its_class() -> None:
    """The record a durable run's failed model turn leaves names its class; a record from
    before (without one) still gives a `ProviderError`."""
    from toolnexus.temporal._client import _provider_error

    limited = _provider_error(
        {"status": 429, "detail": "d", "kind": "ProviderRateLimited", "retry_after": 7}, "m"
    )
    assert type(limited) is ProviderRateLimited
    assert (limited.status, limited.message, limited.detail, limited.retry_after) == (
        429,
        "m",
        "d",
        7.0,
    )
    older = _provider_error({"status": 500, "detail": None}, "m")
    assert type(older) is ProviderError and older.status == 500
    forged = _provider_error({"status": None, "kind": "ConfigurationError"}, "m")
    assert type(forged) is ProviderError  # only provider errors are rebuilt by name


def test_no_style_recognises_an_error_by_its_class_name() -> None:
    """SDK errors are classified with ``isinstance`` against each SDK's own classes."""
    import re
    from pathlib import Path

    client = Path(__file__).parent.parent / "src" / "toolnexus" / "client"
    by_name = re.compile(r"__name__\s*(==|!=|in\b)|__name__\.startswith|__module__")
    found = [
        f"{path.name}:{number}"
        for path in sorted(client.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if by_name.search(line)
    ]
    assert found == []
