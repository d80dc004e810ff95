"""User code that misuses its dependencies; ``mypy --strict`` must reject it."""

from __future__ import annotations

from dataclasses import dataclass

from toolnexus import RunContext, tool


@dataclass
class Bank:
    balances: dict[str, int]


@tool
def balance(account: str, ctx: RunContext[Bank]) -> int:
    """The balance of an account."""
    return ctx.deps.balanse[account]
