"""Tool tiers (``toolnexus.tools.tiers``): see [`tool_tiers`][toolnexus.tools.tiers.tool_tiers]."""

from toolnexus.tools._tiers import CALL_TOOL, DEFAULT_THRESHOLD, TOOL_SEARCH, tool_tiers

__all__ = ["CALL_TOOL", "DEFAULT_THRESHOLD", "TOOL_SEARCH", "tool_tiers"]
