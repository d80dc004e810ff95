"""The client under test of the MCP conformance suite (``@modelcontextprotocol/conformance``):
toolnexus's MCP client (``toolnexus.tools.mcp.mcp_servers``), driven per scenario.

The suite runs ``python tests/mcp_conformance_client.py <server-url>`` once per scenario, with
the scenario's name in ``MCP_CONFORMANCE_SCENARIO`` and, for some, JSON in
``MCP_CONFORMANCE_CONTEXT`` (client credentials, keys). It exits 0 when the scenario's calls
were made; the suite itself judges what went over the wire.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from toolnexus.tools.mcp import MemoryTokenStorage, mcp_servers

SERVER = "s"


async def accept_defaults(context: Any, params: Any) -> Any:
    """Accepts every form as it is: the client fills the schema's defaults (SEP-1034)."""
    from mcp.types import ElicitResult

    return ElicitResult(action="accept", content={})


def _context() -> dict[str, Any]:
    raw = os.environ.get("MCP_CONFORMANCE_CONTEXT")
    return json.loads(raw) if raw else {}


async def _cross_app_auth(url: str, context: dict[str, Any]) -> Any:
    """SEP-990: the IdP's ID token exchanged (RFC 8693) for an ID-JAG, which the SDK's
    ``IdentityAssertionOAuthProvider`` presents to the MCP authorization server."""
    from urllib.parse import urlsplit

    import httpx2
    from mcp.client.auth.extensions.identity_assertion import IdentityAssertionOAuthProvider

    parts = urlsplit(url)
    metadata_url = (
        f"{parts.scheme}://{parts.netloc}/.well-known/oauth-protected-resource{parts.path}"
    )
    async with httpx2.AsyncClient(timeout=10) as http:
        issuer = (await http.get(metadata_url)).json()["authorization_servers"][0]

    async def id_jag(audience: str, resource: str) -> str:
        async with httpx2.AsyncClient(timeout=10) as http:
            answer = await http.post(
                context["idp_token_endpoint"],
                data={
                    "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
                    "subject_token": context["idp_id_token"],
                    "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
                    "requested_token_type": "urn:ietf:params:oauth:token-type:id-jag",
                    "audience": audience,
                    "resource": resource,
                    "client_id": context.get("idp_client_id", ""),
                },
            )
        token: str = answer.json()["access_token"]
        return token

    return IdentityAssertionOAuthProvider(
        server_url=url,
        storage=MemoryTokenStorage(),
        client_id=context["client_id"],
        client_secret=context["client_secret"],
        issuer=issuer,
        assertion_provider=id_jag,
        token_endpoint_auth_method="client_secret_basic",
    )


async def _auth(scenario: str, url: str) -> Any:
    context = _context()
    if scenario == "auth/cross-app-access-complete-flow":
        return await _cross_app_auth(url, context)
    settings: dict[str, Any] = {"token_storage": MemoryTokenStorage()}
    if scenario == "auth/client-credentials-jwt":
        settings.update(
            grant="client_credentials",
            client_id=context["client_id"],
            private_key=context["private_key_pem"],
            signing_algorithm=context.get("signing_algorithm", "ES256"),
        )
    elif scenario == "auth/client-credentials-basic":
        settings.update(
            grant="client_credentials",
            client_id=context["client_id"],
            client_secret=context["client_secret"],
        )
    else:
        settings.update(
            headless=True,
            client_name="toolnexus-conformance",
            client_metadata_url="https://conformance-test.local/client-metadata.json",
        )
        if context.get("client_id"):
            settings["client_id"] = context["client_id"]
        if context.get("client_secret"):
            settings["client_secret"] = context["client_secret"]
    return settings


async def run(scenario: str, url: str) -> int:
    entry: dict[str, Any] = {"url": url, "connect_timeout": 25, "timeout": 25}
    call: tuple[str, dict[str, Any]] | None = None
    if scenario == "tools_call":
        call = ("add_numbers", {"a": 5, "b": 3})
    elif scenario == "sse-retry":
        call = ("test_reconnection", {})
    elif scenario == "elicitation-sep1034-client-defaults":
        entry["elicitation_handler"] = accept_defaults
        call = ("test_client_elicitation_defaults", {})
    elif scenario.startswith("auth/"):
        entry["auth"] = await _auth(scenario, url)
        entry["elicitation_handler"] = accept_defaults
    async with mcp_servers({"mcpServers": {SERVER: entry}}) as tools:
        if tools.failures:
            print(f"did not connect: {tools.failures[SERVER]}", file=sys.stderr)
            return 1
        named = {tool.name: tool for tool in tools}
        print(f"listed {len(named)} tools: {sorted(named)}")
        if call is None and scenario.startswith("auth/") and tools:
            call = (tools[0].name.removeprefix(f"{SERVER}_"), {})
        if call is not None:
            tool = named[f"{SERVER}_{call[0]}"]
            try:
                result = await tool.invoke(call[1])
            except Exception as exc:  # the suite judges the wire; say what came back
                print(f"{call[0]} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
                return 0 if scenario.startswith("auth/") else 1
            print(f"{call[0]} -> {str(result)[:200]}")
    return 0


def main() -> None:
    url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "initialize")
    sys.exit(asyncio.run(run(scenario, url)))


if __name__ == "__main__":
    main()
