"""toolnexus as an MCP server: scheduled, audited Code Mode for any MCP client.

``toolnexus mcp serve --config mcp.json`` sits in front of the MCP servers an MCP client
already uses (the same ``mcpServers`` JSON) and offers ``run_code``, whose description is the
typed SDK of their tools. See ``docs/mcp_server.md``.

Needs the ``mcp`` extra.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from toolnexus.errors import MissingExtraError

try:
    from mcp.server.stdio import stdio_server
except ImportError as exc:
    raise MissingExtraError("toolnexus.mcp (the mcp SDK)", "mcp") from exc

from toolnexus.errors import ConfigurationError
from toolnexus.mcp._config import durable_settings, gateway_options, load_config
from toolnexus.mcp._gateway import RESERVED_NAMES, Gateway, GatewayMode
from toolnexus.mcp._proxy import Upstreams
from toolnexus.mcp._relay import Relay
from toolnexus.tools import Tool
from toolnexus.tools.mcp import mcp_servers

__all__ = [
    "Gateway",
    "GatewayMode",
    "gateway_options",
    "load_config",
    "run_gateway",
    "serve",
    "serve_config",
]

Transport = Literal["stdio", "http"]


async def serve(
    tools: Sequence[Tool],
    *,
    transport: Transport = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    **options: Any,
) -> None:
    """Serve ``run_code`` over ``tools`` to MCP clients until the transport closes.

    Args:
        tools: The tools behind the gateway.
        transport: ``"stdio"`` (the client starts this process) or ``"http"`` (streamable HTTP
            at ``http://host:port/mcp``).
        host: Where the HTTP transport listens (loopback by default).
        port: The HTTP transport's port.
        **options: `Gateway` options (``language``, ``mode``, ``max_parallel``, ``approval``,
            ``audit_log``, ``failures``, ``execution``, ``guards``).
    """
    await run_gateway(Gateway(tools, **options), transport=transport, host=host, port=port)


async def run_gateway(
    gateway: Gateway,
    *,
    transport: Transport = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    sock: socket.socket | None = None,
) -> None:
    """Serve ``gateway`` over ``transport`` until it closes (see `serve`); over HTTP on
    ``sock`` when given (see `listening_socket`), else on ``host:port``.

    Raises:
        ConfigurationError: a bad transport, or a port that cannot be listened on.
    """
    server = gateway.server
    if transport == "stdio":
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
        return
    if transport != "http":
        raise ConfigurationError(f"transport must be 'stdio' or 'http', got {transport!r}.")
    import uvicorn

    sock = sock if sock is not None else listening_socket(host, port)
    config = uvicorn.Config(http_app(gateway, host), log_level="warning")
    await uvicorn.Server(config).serve(sockets=[sock])


def http_app(gateway: Gateway, host: str = "127.0.0.1") -> Any:
    """The gateway as a streamable HTTP ASGI app at ``/mcp``, resumable (SEP-1699): a priming
    event and ``retry`` on each stream, an event store per session bounded by size and age
    (see `ResumableSessions`); DNS-rebinding protection on a loopback ``host``."""
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.applications import Starlette
    from starlette.routing import Route

    from toolnexus.mcp._resumable import ResumableSessions

    security = None
    if _loopback(host):
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
    sessions = ResumableSessions(app=gateway.server, security_settings=security)
    return Starlette(
        routes=[Route("/mcp", endpoint=StreamableHTTPASGIApp(sessions))],
        lifespan=lambda app: sessions.run(),
    )


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port``, bound now, so a bad port is known at once.

    Raises:
        ConfigurationError: the port is out of range, in use, or cannot be bound (one line
            saying which, and what to do).
    """
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ConfigurationError(f"--port must be a port number from 1 to 65535, got {port!r}.")
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        return socket.create_server((host, port), family=family)
    except socket.gaierror as exc:
        raise ConfigurationError(f"--host {host!r} is not an address: {exc.strerror}.") from None
    except OSError as exc:
        why = exc.strerror or str(exc)
        hint = "; choose another --port" if exc.errno == 98 else ""
        raise ConfigurationError(f"cannot listen on {host}:{port}: {why}{hint}.") from None


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _say(line: str) -> None:
    """One line on stderr (stdout is the stdio transport's)."""
    print(f"toolnexus: {line}", file=sys.stderr, flush=True)


async def serve_config(
    config: Mapping[str, Any],
    *,
    transport: Transport = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    extra_tools: Sequence[Tool] = (),
    durable: bool = False,
    **overrides: Any,
) -> None:
    """Connect the MCP servers of ``config`` (see `load_config`) and serve the gateway over
    their tools and ``extra_tools``; ``overrides`` (not ``None``) win over the config's
    ``toolnexus`` options: an ``execution=`` override over its ``max_parallel``,
    ``sdk_threshold`` and ``always_loaded``, a ``guards=`` over its ``policy``.

    ``run_code`` tasks are durable Temporal workflows when the config has a
    ``toolnexus.durable`` key, or when ``durable`` is true (``--durable``): then, without that
    key, on a Temporal server at ``127.0.0.1:7233``, task queue ``toolnexus-gateway``.

    The upstream servers' requests (sampling, elicitation, roots) and progress are relayed
    to the client whose call caused them (see `Relay`). At start, one line on stderr says the
    transport and address, the upstreams that came up and those that failed, with why; a
    non-loopback ``host`` (there is no authentication) adds a warning.

    Raises:
        ConfigurationError: a bad server entry or option; a port out of range or in use
            (found before any upstream starts).
    """
    options = _overridden(gateway_options(config), overrides)
    # run_code tasks as Temporal workflows (_durable.py)
    settings = durable_settings(options.pop("durable", None), durable)
    sock = listening_socket(host, port) if transport == "http" else None
    relay = Relay()
    servers = {
        name: {**relay.handlers(str(name)), **entry} if isinstance(entry, Mapping) else entry
        for name, entry in dict(_on_sessions(config.get("mcpServers", {}))).items()
    }
    reserved = {*RESERVED_NAMES, *(t.name for t in extra_tools)}
    async with mcp_servers({"mcpServers": servers}, reserved=reserved) as tools:
        relay.server_of = tools.server_of
        upstreams = Upstreams(tools)
        await upstreams.index()  # two servers claiming one resource URI stop it here
        gateway = Gateway(
            [*tools, *extra_tools],
            failures=dict(tools.failures),
            upstreams=upstreams,
            relay=relay,
            **options,
        )

        async def changed(current: Sequence[Tool]) -> None:
            await gateway.update([*current, *extra_tools])

        tools.on_change(changed)
        async with contextlib.AsyncExitStack() as stack:
            if settings is not None:  # Temporal reached before the gateway says it serves
                from toolnexus.mcp._durable import durable_tasks  # needs the temporal extra

                await stack.enter_async_context(durable_tasks(gateway, settings))
            _say(_started(transport, host, port, tools))
            if transport == "http" and not _loopback(host):
                _say(
                    f"warning: --host {host} is not a loopback address and the gateway has no "
                    "authentication: anyone who can reach it can run programs and call your "
                    "tools."
                )
            await run_gateway(gateway, transport=transport, host=host, port=port, sock=sock)


UPSTREAM_PROTOCOL = "legacy"
"""The revision choice for an upstream whose entry does not set ``protocol``: the handshake
(2025-11-25 or older). Why not ``"auto"``, the library's default: what the gateway passes on
from an upstream beside its answers (log messages, resource updates, list changes) reaches it
on a session, which the per-request revision (2026-07-28) does not keep. An entry's own
``"protocol": "auto"`` negotiates 2026-07-28 where the upstream speaks it."""


_COVERED = {"execution": ("max_parallel", "sdk_threshold", "always_loaded"), "guards": ("policy",)}
"""The config options an option object given to `serve_config` stands in for."""


def _overridden(options: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The config's gateway ``options`` with the ``overrides`` (not ``None``) winning; an
    option object wins over the config options it covers (`_COVERED`)."""
    given = {k: v for k, v in overrides.items() if v is not None}
    kept = dict(options)
    for name, keys in _COVERED.items():
        if name in given:
            kept = {k: v for k, v in kept.items() if k not in keys}
    return kept | given


def _on_sessions(servers: Any) -> Any:
    """``servers`` (an ``mcpServers`` mapping) with `UPSTREAM_PROTOCOL` for each entry that
    does not choose its revision; anything else is left for the config check to name."""
    if not isinstance(servers, Mapping):
        return servers
    return {
        name: {"protocol": UPSTREAM_PROTOCOL, **entry} if isinstance(entry, Mapping) else entry
        for name, entry in servers.items()
    }


def _started(transport: str, host: str, port: int, tools: Any) -> str:
    """The start line: where the gateway serves, what came up and what failed, with why."""
    where = "stdio" if transport == "stdio" else f"streamable HTTP at http://{host}:{port}/mcp"
    counts = Counter(tools.server_of(t.name) for t in tools)
    up = ", ".join(f"{name} ({n} tools)" for name, n in sorted(counts.items()) if name) or "none"
    line = f"serving MCP over {where}; upstream servers up: {up}"
    if tools.failures:
        failed = "; ".join(f"{name}: {why}" for name, why in sorted(tools.failures.items()))
        line += f"; failed: {failed}"
    return line
