"""Tool tiers (``toolnexus.tools.tiers``): see [`tool_tiers`][toolnexus.tools.tiers.tool_tiers]."""

from toolnexus.tools._tiers import CALL_TOOL, DEFAULT_THRESHOLD, TOOL_SEARCH, tool_tiers

# isort: split
# The package's interface to the layers above it: what they use that is not public API
# (it may change in any release), imported here so that they read this package, never its
# private modules.
from toolnexus.tools._tiers import SEARCH_SCHEMA as SEARCH_SCHEMA
from toolnexus.tools._tiers import search_tools as search_tools

__all__ = ["CALL_TOOL", "DEFAULT_THRESHOLD", "TOOL_SEARCH", "tool_tiers"]
