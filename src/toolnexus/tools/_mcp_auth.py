"""OAuth 2.1 for MCP servers over HTTP, through the ``mcp`` SDK's ``OAuthClientProvider``.

A server entry's ``auth`` is either an ``httpx2.Auth`` (the SDK's ``OAuthClientProvider`` or
one of its client-credentials providers, built by the caller) or a settings mapping that
`oauth_provider` builds one from. The SDK's provider does the protocol: protected-resource
metadata discovery (from ``WWW-Authenticate``, path-based and root), authorization-server
metadata (RFC 8414 and OpenID, with the 2025-03-26 fallbacks), PKCE, client registration
(pre-registered, dynamic, or a client-ID metadata document), scope selection and step-up on
``insufficient_scope``, and token refresh.

Tokens and the client registration are kept by a ``TokenStorage`` (the SDK's protocol): a
`FileTokenStorage` by default, one JSON file per server written with mode 0600, its entries
keyed by the resource URL and the issuer (`token_key`). With ``issuer`` set, no credential
goes to any other authorization server, on any grant (`_issuer_bound`). The browser
step of the authorization-code grant goes through the user's ``redirect_handler(url)`` and
``callback_handler()``; `headless_authorization` is the pair for CI and tests, where the
authorization endpoint redirects at once.

Secrets (header values, client secrets, tokens) never appear in a `ServerConfig`'s repr, in a
log line, in a call's error or in an error message of toolnexus: `Secrets` scrubs them by value
from every message about a server that has any, and from what a server echoes back.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import logging
import os
import re
import tempfile
import traceback
import weakref
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlparse

from toolnexus.errors import ConfigurationError

__all__ = [
    "DEFAULT_REDIRECT_URI",
    "FileTokenStorage",
    "MemoryTokenStorage",
    "Secrets",
    "headless_authorization",
    "oauth_provider",
]

DEFAULT_REDIRECT_URI = "http://localhost:3000/callback"
AUTH_KEYS = {
    "grant": 'one of "authorization_code" (default) or "client_credentials"',
    "client_id": "a string (a client registered beforehand)",
    "client_secret": "a string",
    "token_endpoint_auth_method": '"client_secret_basic", "client_secret_post" or "none"',
    "private_key": "a PEM string (client_credentials with private_key_jwt)",
    "signing_algorithm": 'a JWS algorithm, like "ES256" or "RS256"',
    "scope": "a space-separated string of scopes",
    "issuer": "the authorization server's issuer URL (the only one credentials are sent to)",
    "client_name": "a string",
    "redirect_uri": "a string (where the authorization server sends the browser back)",
    "client_metadata_url": "an https URL with a path (a client-ID metadata document)",
    "token_file": "a path (where tokens and the registration are kept, mode 0600)",
    "token_storage": "a TokenStorage object (Python only)",
    "redirect_handler": "an async callable taking the authorization URL (Python only)",
    "callback_handler": "an async callable returning an AuthorizationCodeResult (Python only)",
    "headless": "true: follow the authorization URL without a browser (CI and tests only)",
}


MIN_SECRET = 6
"""The shortest value scrubbed as a secret: shorter ones would blank ordinary words."""

_CREDENTIAL = re.compile(r"^\s*[A-Za-z][\w.~+/-]*\s+(\S.*?)\s*$")
"""A header value of the form ``<scheme> <credentials>`` (``Bearer <t>``, ``Basic <b64>``)."""


def _parts(value: str) -> set[str]:
    """``value`` and the secrets inside it: the credentials after an auth scheme, and for
    ``Basic`` their decoded ``user:password`` and the password; each also percent-encoded."""
    found = {value, value.strip()}
    scheme = _CREDENTIAL.match(value)
    if scheme is not None:
        credential = scheme.group(1)
        found.add(credential)
        if value.split(None, 1)[0].lower() == "basic":
            with contextlib.suppress(ValueError, UnicodeDecodeError):
                pair = base64.b64decode(credential, validate=True).decode()
                found.update((pair, pair.partition(":")[2]))
    found.update({quote(part, safe="") for part in found})
    return {part for part in found if len(part) >= MIN_SECRET}


class Secrets:
    """The secret values of one server (its header values, tokens, client secret), to scrub
    from any text about it, by value: each whole and wherever it is part of a longer text.

    A header value ``<scheme> <credentials>`` (``Authorization: Bearer <t>``) also makes its
    credentials a secret on their own. While a server is connected, `guard_logs` scrubs its
    secrets from every log record of toolnexus, the ``mcp`` SDK and httpx, too.
    """

    def __init__(self) -> None:
        self._values: set[str] = set()
        self._ordered: list[str] = []  # longest first, so a secret inside another goes too

    def add(self, *values: Any) -> None:
        """Remember ``values`` (strings of `MIN_SECRET` characters or more) as secrets."""
        for value in values:
            if isinstance(value, str):
                self._values.update(_parts(value))
        self._ordered = sorted(self._values, key=len, reverse=True)

    def __bool__(self) -> bool:
        return bool(self._values)

    def redact(self, text: str) -> str:
        """``text`` with every known secret replaced by ``[redacted]``."""
        for value in self._ordered:
            if value in text:
                text = text.replace(value, "[redacted]")
        return text

    def leaks(self, text: str) -> bool:
        """Whether ``text`` holds a known secret."""
        return any(value in text for value in self._ordered)

    def scrub(self, value: Any) -> Any:
        """``value`` (JSON-like data) with every string in it, keys too, redacted."""
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, (list, tuple)):
            return [self.scrub(item) for item in value]
        if isinstance(value, dict):
            return {self.scrub(k): self.scrub(v) for k, v in value.items()}
        return value

    def scrubbed(self, exc: BaseException) -> BaseException | None:
        """A copy of ``exc`` with the secrets scrubbed from its message (and, for the SDK's
        ``MCPError``, from its data), when it or an exception it chains holds any; else
        ``None``. The copy has the same type when that type can be rebuilt from a message (or
        is ``MCPError``), else it is a ``RuntimeError`` naming the type; raise it ``from None``
        so the original chain, secrets and all, is not printed with it."""
        if not self._values or not self.leaks("".join(traceback.format_exception(exc))):
            return None
        from mcp.shared.exceptions import MCPError

        if isinstance(exc, MCPError):
            return MCPError(exc.code, self.redact(exc.message), self.scrub(exc.data))
        text = self.redact(str(exc))
        with contextlib.suppress(Exception):
            copy = type(exc)(text)
            if str(copy) == text:
                return copy
        return RuntimeError(f"{type(exc).__name__}: {text}")

    def guard_logs(self) -> None:
        """Scrub these secrets from log records (see `_ScrubLogs`) while this object lives."""
        _LIVE.add(self)
        for name, logger in list(logging.Logger.manager.loggerDict.items()):
            if (
                isinstance(logger, logging.Logger)
                and name.split(".", 1)[0] in GUARDED_LOGGERS
                and _SCRUB_LOGS not in logger.filters
            ):
                logger.addFilter(_SCRUB_LOGS)


GUARDED_LOGGERS = frozenset({"toolnexus", "mcp", "httpx", "httpx2", "httpcore", "httpcore2"})
"""The top-level names of the loggers `Secrets.guard_logs` scrubs (each logger under them)."""

_LIVE: weakref.WeakSet[Secrets] = weakref.WeakSet()


class _ScrubLogs(logging.Filter):
    """Rewrites a log record holding a live server's secret: its message, and its traceback
    (formatted here, then dropped as ``exc_info``) redacted. A logger's filters see only the
    records made at that logger, so this one is added to each guarded logger."""

    def filter(self, record: logging.LogRecord) -> bool:
        live = [secrets for secrets in list(_LIVE) if secrets]
        if not live:
            return True
        with contextlib.suppress(Exception):  # a record whose message cannot be formatted
            message = record.getMessage()
            if any(secrets.leaks(message) for secrets in live):
                for secrets in live:
                    message = secrets.redact(message)
                record.msg, record.args = message, ()
        if record.exc_info and record.exc_info[1] is not None:
            shown = record.exc_text or logging.Formatter().formatException(record.exc_info)
            if any(secrets.leaks(shown) for secrets in live):
                for secrets in live:
                    shown = secrets.redact(shown)
                record.exc_info, record.exc_text = None, shown
        return True


_SCRUB_LOGS = _ScrubLogs()


class _Storage:
    """A TokenStorage that remembers what it holds as secrets of the server."""

    def __init__(self, inner: Any, secrets: Secrets) -> None:
        self._inner, self._secrets = inner, secrets
        self.registered: Any = None  # a client registered beforehand (client_id in settings)

    async def get_tokens(self) -> Any:
        tokens = await self._inner.get_tokens()
        if tokens is not None:
            self._secrets.add(tokens.access_token, tokens.refresh_token)
        return tokens

    async def set_tokens(self, tokens: Any) -> None:
        self._secrets.add(tokens.access_token, tokens.refresh_token)
        await self._inner.set_tokens(tokens)

    async def get_client_info(self) -> Any:
        info = await self._inner.get_client_info()
        if info is None or (
            self.registered is not None and info.client_id != self.registered.client_id
        ):
            info = self.registered
        if info is not None:
            self._secrets.add(info.client_secret)
        return info

    async def set_client_info(self, client_info: Any) -> None:
        self._secrets.add(client_info.client_secret)
        await self._inner.set_client_info(client_info)


class MemoryTokenStorage:
    """A ``TokenStorage`` kept in memory only (gone when the process ends)."""

    def __init__(self) -> None:
        self._tokens: Any = None
        self._client: Any = None

    async def get_tokens(self) -> Any:
        """The stored tokens, if any."""
        return self._tokens

    async def set_tokens(self, tokens: Any) -> None:
        """Keep ``tokens``."""
        self._tokens = tokens

    async def get_client_info(self) -> Any:
        """The stored client registration, if any."""
        return self._client

    async def set_client_info(self, client_info: Any) -> None:
        """Keep ``client_info``."""
        self._client = client_info


class FileTokenStorage:
    """A ``TokenStorage`` in one JSON file, created with mode 0600 (owner only).

    With a ``key`` (what `oauth_provider` passes: the resource URL and the issuer), the tokens
    and the registration are kept under that key, so one file can serve several servers and
    a server at another URL or with another issuer never reads them; entries of other keys and
    the unkeyed layout of earlier versions are left alone and never returned. Without one,
    they are kept at the top level (the earlier layout).

    Each write replaces the file whole (a temporary file in the same folder, renamed), so a
    crash never leaves half a token behind. The folder is created (mode 0700) if missing.
    """

    def __init__(self, path: str | os.PathLike[str], key: str | None = None) -> None:
        self.path = Path(path).expanduser()
        self.key = key

    def __repr__(self) -> str:
        return f"FileTokenStorage({str(self.path)!r})"

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _entry(self, data: dict[str, Any]) -> dict[str, Any]:
        """What this storage holds of the file's ``data`` (its key's entry, or all of it)."""
        if self.key is None:
            return data
        entries = data.get("by_resource")
        entry = entries.get(self.key) if isinstance(entries, dict) else None
        return entry if isinstance(entry, dict) else {}

    def _write(self, name: str, value: dict[str, Any]) -> None:
        data = self._read()
        if self.key is None:
            data[name] = value
        else:
            entries = data.get("by_resource")
            entries = entries if isinstance(entries, dict) else {}
            entries[self.key] = {**self._entry(data), name: value}
            data["by_resource"] = entries
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".tokens-")
        try:
            os.fchmod(handle, 0o600)
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(data, out)
            os.replace(temporary, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise

    async def get_tokens(self) -> Any:
        """The stored tokens (an ``OAuthToken``), if any."""
        from mcp.shared.auth import OAuthToken

        stored = self._entry(self._read()).get("tokens")
        return OAuthToken.model_validate(stored) if isinstance(stored, dict) else None

    async def set_tokens(self, tokens: Any) -> None:
        """Store ``tokens``."""
        self._write("tokens", tokens.model_dump(mode="json", exclude_none=True))

    async def get_client_info(self) -> Any:
        """The stored client registration (an ``OAuthClientInformationFull``), if any."""
        from mcp.shared.auth import OAuthClientInformationFull

        stored = self._entry(self._read()).get("client")
        if not isinstance(stored, dict):
            return None
        return OAuthClientInformationFull.model_validate(stored)

    async def set_client_info(self, client_info: Any) -> None:
        """Store ``client_info``."""
        self._write("client", client_info.model_dump(mode="json", exclude_none=True))


def headless_authorization() -> tuple[
    Callable[[str], Awaitable[None]], Callable[[], Awaitable[Any]]
]:
    """A ``(redirect_handler, callback_handler)`` pair that needs no browser, for CI and tests.

    The redirect handler requests the authorization URL itself, without following redirects,
    and reads the ``code`` (and ``state``, ``iss``) from the redirect it gets back: it works
    with an authorization server that approves at once, as test servers do, and with no real
    one.
    """
    from mcp.shared.auth import AuthorizationCodeResult

    got: list[Any] = []

    async def redirect_handler(url: str) -> None:
        import httpx2

        async with httpx2.AsyncClient(timeout=30) as client:
            response = await client.get(url, follow_redirects=False)
        location = response.headers.get("location")
        if response.status_code not in (301, 302, 303, 307, 308) or not location:
            raise RuntimeError(
                f"the authorization endpoint answered {response.status_code} without a "
                "redirect; headless authorization needs one that approves at once"
            )
        query = parse_qs(urlparse(location).query)
        if "code" not in query:
            raise RuntimeError("the authorization endpoint redirected without a code")
        got.append(
            AuthorizationCodeResult(
                code=query["code"][0],
                state=query.get("state", [None])[0],
                iss=query.get("iss", [None])[0],
            )
        )

    async def callback_handler() -> Any:
        if not got:
            raise RuntimeError("no authorization code: the redirect handler has not run")
        return got.pop()

    return redirect_handler, callback_handler


def token_key(url: str, issuer: str | None) -> str:
    """What stored tokens are kept under: the resource URL and the issuer (``""`` when the
    settings name none), so they are read back only for that resource and issuer."""
    return json.dumps([url, issuer or ""])


def _default_token_file(server: str, key: str) -> Path:
    """``<server>-<digest of the key>.json`` in the user's state folder: a server of the same
    name at another URL (another config) has a file of its own."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(Path.home(), ".local", "state")
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in server)
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return Path(base) / "toolnexus" / "mcp-oauth" / f"{safe}-{digest}.json"


def _issuer_bound(base: type[Any], server: str, issuer: str) -> type[Any]:
    """``base`` (the SDK's ``OAuthClientProvider``) that uses only the authorization server
    ``issuer``: it is picked when the resource server lists it, and no authorization or token
    request (the client secret, a refresh token) goes to metadata of any other issuer."""
    from mcp.client.auth import OAuthFlowError
    from mcp.client.auth.utils import issuers_match

    class IssuerBound(base):  # type: ignore[misc]
        def _select_authorization_server(self, advertised: list[str]) -> str:
            return next((a for a in advertised if issuers_match(a, issuer)), advertised[0])

        def _require_issuer(self) -> None:
            metadata = self.context.oauth_metadata
            named = str(metadata.issuer) if metadata is not None else None
            if named is None or not issuers_match(named, issuer):
                offered = named or self.context.auth_server_url or "none"
                raise OAuthFlowError(
                    f"MCP server {server!r} names the authorization server {offered}, not the "
                    f"issuer {issuer} its auth settings name: no credential was sent to it; "
                    "fix auth.issuer if the server really moved"
                )

        async def _perform_authorization(self) -> Any:
            self._require_issuer()
            return await super()._perform_authorization()

        async def _refresh_token(self) -> Any:
            self._require_issuer()
            return await super()._refresh_token()

    return IssuerBound


def oauth_provider(server: str, url: str, settings: Mapping[str, Any], secrets: Secrets) -> Any:
    """An ``httpx2.Auth`` for ``server`` at ``url`` built from ``settings`` (see `AUTH_KEYS`).

    Raises:
        ConfigurationError: an unknown key, a value of the wrong type, or an authorization-code
            grant without a way to do its browser step.
    """
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata

    where = f"MCP server {server!r}: auth"
    unknown = sorted(set(settings) - set(AUTH_KEYS))
    if unknown:
        raise ConfigurationError(
            f"{where}.{unknown[0]} is not a known setting; known: {', '.join(AUTH_KEYS)}."
        )
    for key, value in settings.items():
        python_only = key in ("token_storage", "redirect_handler", "callback_handler")
        if key == "headless":
            ok = isinstance(value, bool)
        elif key in ("redirect_handler", "callback_handler"):
            ok = callable(value)
        else:
            ok = python_only or isinstance(value, str)
        if not ok:
            raise ConfigurationError(f"{where}.{key} must be {AUTH_KEYS[key]}, got {value!r:.40}.")
    secrets.add(settings.get("client_secret"), settings.get("private_key"))
    grant = settings.get("grant", "authorization_code")
    issuer = settings.get("issuer")
    if "token_storage" in settings:
        inner = settings["token_storage"]
    else:
        key = token_key(url, issuer)
        inner = FileTokenStorage(
            settings.get("token_file") or _default_token_file(server, key), key
        )
    storage = _Storage(inner, secrets)
    client_id = settings.get("client_id")
    secret = settings.get("client_secret")
    scope = settings.get("scope")
    if grant == "client_credentials":
        from mcp.client.auth.extensions.client_credentials import (
            ClientCredentialsOAuthProvider,
            PrivateKeyJWTOAuthProvider,
            SignedJWTParameters,
        )

        if not client_id:
            raise ConfigurationError(f"{where}: the client_credentials grant needs a client_id.")
        if "private_key" in settings:
            jwt = SignedJWTParameters(
                issuer=client_id,
                subject=client_id,
                signing_algorithm=settings.get("signing_algorithm", "ES256"),
                signing_key=settings["private_key"],
            )
            return PrivateKeyJWTOAuthProvider(
                server_url=url,
                storage=storage,
                client_id=client_id,
                assertion_provider=jwt.create_assertion_provider(),
                scope=scope,
                issuer=issuer,
            )
        if not secret:
            raise ConfigurationError(
                f"{where}: the client_credentials grant needs a client_secret or a private_key."
            )
        method = settings.get("token_endpoint_auth_method", "client_secret_basic")
        if method not in ("client_secret_basic", "client_secret_post"):
            raise ConfigurationError(
                f"{where}.token_endpoint_auth_method must be client_secret_basic or "
                f"client_secret_post for client_credentials, got {method!r}."
            )
        return ClientCredentialsOAuthProvider(
            server_url=url,
            storage=storage,
            client_id=client_id,
            client_secret=secret,
            token_endpoint_auth_method=method,
            scope=scope,
            issuer=issuer,
        )
    if grant != "authorization_code":
        raise ConfigurationError(f"{where}.grant must be {AUTH_KEYS['grant']}, got {grant!r}.")
    redirect = settings.get("redirect_handler")
    callback = settings.get("callback_handler")
    if settings.get("headless"):
        redirect, callback = headless_authorization()
    if redirect is None or callback is None:
        raise ConfigurationError(
            f"{where}: the authorization_code grant needs a redirect_handler and a "
            "callback_handler (Python), or headless: true (CI and tests)."
        )
    redirect_uri = settings.get("redirect_uri", DEFAULT_REDIRECT_URI)
    metadata = OAuthClientMetadata.model_validate(
        {
            "client_name": settings.get("client_name", "toolnexus"),
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            **({"scope": scope} if scope else {}),
        }
    )
    provider_class = (
        OAuthClientProvider
        if issuer is None
        else _issuer_bound(OAuthClientProvider, server, issuer)
    )
    provider = provider_class(
        server_url=url,
        client_metadata=metadata,
        storage=storage,
        redirect_handler=redirect,
        callback_handler=callback,
        client_metadata_url=settings.get("client_metadata_url"),
    )
    if client_id:
        method = settings.get("token_endpoint_auth_method") or (
            "client_secret_basic" if secret else "none"
        )
        storage.registered = OAuthClientInformationFull.model_validate(
            {
                "client_id": client_id,
                "client_secret": secret,
                "redirect_uris": [redirect_uri],
                "token_endpoint_auth_method": method,
            }
        )
    return provider
