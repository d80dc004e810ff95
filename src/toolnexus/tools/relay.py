"""Relay tools (``toolnexus.tools.relay``): see :func:`relay_tool`."""

from toolnexus.tools._relay import is_relay, relay_tool

__all__ = ["is_relay", "relay_tool"]
