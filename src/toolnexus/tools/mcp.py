"""MCP tools (``toolnexus.tools.mcp``): see [`mcp_servers`][toolnexus.tools.mcp.mcp_servers]."""

from toolnexus.tools._mcp import (
    MAX_LIST_PAGES,
    McpTools,
    ServerConfig,
    list_all,
    mcp_servers,
    parse_config,
)
from toolnexus.tools._mcp_auth import (
    FileTokenStorage,
    MemoryTokenStorage,
    headless_authorization,
    oauth_provider,
)
from toolnexus.tools._mcp_content import ContentParts, describe_part, image_problem

# isort: split
# The package's interface to the layers above it: what they use that is not public API
# (it may change in any release), imported here so that they read this package, never its
# private modules.
from toolnexus.tools._mcp_config import config_error as config_error
from toolnexus.tools._mcp_content import call_value as call_value

__all__ = [
    "MAX_LIST_PAGES",
    "ContentParts",
    "FileTokenStorage",
    "McpTools",
    "MemoryTokenStorage",
    "ServerConfig",
    "describe_part",
    "headless_authorization",
    "image_problem",
    "list_all",
    "mcp_servers",
    "oauth_provider",
    "parse_config",
]
