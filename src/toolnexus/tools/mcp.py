"""MCP tools (``toolnexus.tools.mcp``): see [`mcp_servers`][toolnexus.tools.mcp.mcp_servers]."""

from toolnexus.tools._mcp import McpTools, ServerConfig, mcp_servers, parse_config

__all__ = ["McpTools", "ServerConfig", "mcp_servers", "parse_config"]
