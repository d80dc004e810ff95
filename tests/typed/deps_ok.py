"""User code with typed per-run dependencies; ``mypy --strict`` must accept it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from toolnexus import ModelRetry, RunContext, create_client, tool
from toolnexus.client import RunResult


@dataclass
class Bank:
    balances: dict[str, int]

    def balance(self, account: str) -> int:
        return self.balances[account]


@tool
def balance(account: str, ctx: RunContext[Bank]) -> int:
    """The balance of an account."""
    if account not in ctx.deps.balances:
        raise ModelRetry(f"no account {account!r}; accounts: {', '.join(ctx.deps.balances)}")
    return ctx.deps.balance(account)


async def main() -> RunResult:
    client = create_client(base_url="http://127.0.0.1:9/v1", model="m", api_key="none")
    return await client.run("How much is in savings?", tools=[balance], deps=Bank({"savings": 3}))


if __name__ == "__main__":
    print(asyncio.run(main()).text)
