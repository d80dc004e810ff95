"""MCP tools (``toolnexus.tools.mcp``): see :func:`mcp_servers`."""

from toolnexus.tools._mcp import McpTools, ServerConfig, mcp_servers, parse_config

__all__ = ["McpTools", "ServerConfig", "mcp_servers", "parse_config"]
