"""Relay tools (``toolnexus.tools.relay``): see [`relay_tool`][toolnexus.tools.relay.relay_tool]."""

from toolnexus.tools._relay import is_relay, relay_tool

__all__ = ["is_relay", "relay_tool"]
