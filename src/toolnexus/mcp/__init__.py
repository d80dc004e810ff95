"""toolnexus as an MCP server: scheduled, audited Code Mode for any MCP client.

``toolnexus mcp serve --config mcp.json`` sits in front of the MCP servers an MCP client
already uses (the same ``mcpServers`` JSON) and offers ``run_code``, whose description is the
typed SDK of their tools. See ``docs/mcp_server.md``.

Needs the ``mcp`` extra.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from toolnexus.errors import MissingExtraError

try:
    from mcp.server.stdio import stdio_server
except ImportError as exc:
    raise MissingExtraError("toolnexus.mcp (the mcp SDK)", "mcp") from exc

from toolnexus.errors import ConfigurationError
from toolnexus.mcp._config import gateway_options, load_config
from toolnexus.mcp._gateway import RESERVED_NAMES, Gateway, GatewayMode
from toolnexus.mcp._proxy import Upstreams
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
            ``audit_log``, ``failures``).
    """
    await run_gateway(Gateway(tools, **options), transport=transport, host=host, port=port)


async def run_gateway(
    gateway: Gateway, *, transport: Transport = "stdio", host: str = "127.0.0.1", port: int = 8000
) -> None:
    """Serve ``gateway`` over ``transport`` until it closes (see `serve`)."""
    server = gateway.server
    if transport == "stdio":
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
        return
    if transport != "http":
        raise ConfigurationError(f"transport must be 'stdio' or 'http', got {transport!r}.")
    import uvicorn

    app = server.streamable_http_app(host=host)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning")
    await uvicorn.Server(config).serve()


async def serve_config(
    config: Mapping[str, Any],
    *,
    transport: Transport = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    extra_tools: Sequence[Tool] = (),
    **overrides: Any,
) -> None:
    """Connect the MCP servers of ``config`` (see `load_config`) and serve the gateway over
    their tools and ``extra_tools``; ``overrides`` (not ``None``) win over the config's
    ``toolnexus`` options.

    Raises:
        ConfigurationError: a bad server entry or option.
    """
    options = gateway_options(config) | {k: v for k, v in overrides.items() if v is not None}
    durable = options.pop("durable", None)  # run_code tasks as Temporal workflows (_durable.py)
    upstream = {"mcpServers": _on_sessions(config.get("mcpServers", {}))}
    reserved = {*RESERVED_NAMES, *(t.name for t in extra_tools)}
    async with mcp_servers(upstream, reserved=reserved) as tools:
        upstreams = Upstreams(tools)
        await upstreams.index()  # two servers claiming one resource URI stop it here
        gateway = Gateway(
            [*tools, *extra_tools], failures=dict(tools.failures), upstreams=upstreams, **options
        )

        async def changed(current: Sequence[Tool]) -> None:
            await gateway.update([*current, *extra_tools])

        tools.on_change(changed)
        async with contextlib.AsyncExitStack() as stack:
            if durable is not None:
                from toolnexus.mcp._durable import durable_tasks  # needs the temporal extra

                await stack.enter_async_context(durable_tasks(gateway, durable))
            await run_gateway(gateway, transport=transport, host=host, port=port)


UPSTREAM_PROTOCOL = "legacy"
"""The revision choice for an upstream whose entry does not set ``protocol``: the handshake
(2025-11-25 or older). Why not ``"auto"``, the library's default: what the gateway passes on
from an upstream beside its answers (log messages, resource updates, list changes) reaches it
on a session, which the per-request revision (2026-07-28) does not keep. An entry's own
``"protocol": "auto"`` negotiates 2026-07-28 where the upstream speaks it."""


def _on_sessions(servers: Any) -> Any:
    """``servers`` (an ``mcpServers`` mapping) with `UPSTREAM_PROTOCOL` for each entry that
    does not choose its revision; anything else is left for the config check to name."""
    if not isinstance(servers, Mapping):
        return servers
    return {
        name: {"protocol": UPSTREAM_PROTOCOL, **entry} if isinstance(entry, Mapping) else entry
        for name, entry in servers.items()
    }
