"""toolnexus as an MCP server: scheduled, audited Code Mode for any MCP client.

``toolnexus mcp serve --config mcp.json`` sits in front of the MCP servers an MCP client
already uses (the same ``mcpServers`` JSON) and offers ``run_code``, whose description is the
typed SDK of their tools. See ``docs/mcp_server.md``.

Needs the ``mcp`` extra.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from mcp.server.stdio import stdio_server

from toolnexus.codemode import PermissionPolicy
from toolnexus.errors import ConfigurationError
from toolnexus.mcp._gateway import Gateway, GatewayMode
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

OPTION_KEYS = ("language", "mode", "max_parallel", "approval", "audit_log", "policy", "budgets")
"""What the ``toolnexus`` key of a gateway config may set (command-line options win)."""


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


def gateway_options(config: Mapping[str, Any]) -> dict[str, Any]:
    """The gateway options a config's ``toolnexus`` key sets, checked.

    Raises:
        ConfigurationError: an unknown key, or a value of the wrong kind.
    """
    options = config.get("toolnexus", {})
    if not isinstance(options, Mapping):
        raise ConfigurationError("the config's 'toolnexus' key must be an object of options.")
    unknown = sorted(set(options) - set(OPTION_KEYS))
    if unknown:
        raise ConfigurationError(
            f"unknown toolnexus option(s) {', '.join(unknown)} in the config; known: "
            f"{', '.join(OPTION_KEYS)}."
        )
    approval = options.get("approval", [])
    if not isinstance(approval, list) or not all(isinstance(n, str) for n in approval):
        raise ConfigurationError("toolnexus.approval must be a list of tool names.")
    checked = dict(options)
    policy = options.get("policy")
    if policy is not None:
        if not isinstance(policy, Mapping):
            raise ConfigurationError(
                'toolnexus.policy must be an object, like {"deny": ["fs_write_file"]}.'
            )
        try:
            checked["policy"] = PermissionPolicy(**policy)
        except TypeError as exc:
            raise ConfigurationError(f"toolnexus.policy: {exc}") from None
    budgets = options.get("budgets")
    if budgets is not None and not isinstance(budgets, Mapping):
        raise ConfigurationError('toolnexus.budgets must be an object, like {"timeout": 60}.')
    return checked


def load_config(config_path: str | Path) -> dict[str, Any]:
    """Read a gateway config file: the ``mcpServers`` JSON MCP clients use, plus an optional
    ``toolnexus`` key of gateway options.

    Raises:
        ConfigurationError: the file is missing, not JSON, or not an object.
    """
    path = Path(config_path)
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigurationError(f"no config file {path}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"{path} is not JSON: {exc}") from None
    if not isinstance(config, dict):
        raise ConfigurationError(f"{path} must hold a JSON object with an mcpServers key.")
    gateway_options(config)  # checked now, before any server starts
    return config


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
    upstream = {"mcpServers": config.get("mcpServers", {})}
    async with mcp_servers(upstream) as tools:
        gateway = Gateway([*tools, *extra_tools], failures=dict(tools.failures), **options)

        async def changed(current: Sequence[Tool]) -> None:
            await gateway.update([*current, *extra_tools])

        tools.on_change(changed)
        await run_gateway(gateway, transport=transport, host=host, port=port)
