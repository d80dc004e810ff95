"""Provider styles: the wire formats the agent loop speaks, through the official SDKs."""

from toolnexus.client.styles._base import AssistantTurn, OnCall, OnText, Style, Usage

__all__ = ["AssistantTurn", "OnCall", "OnText", "Style", "Usage"]
