"""``webfetch`` and ``websearch``: the web, with limits.

``webfetch`` GETs one HTTP(S) URL (size and time limits; HTML converted to Markdown with
``markdownify``, text passed through). ``websearch`` asks a pluggable backend: a callable
``(query, limit) -> [{"title", "url", "snippet"}]``, or the URL of a SearXNG instance.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Annotated, Any

import httpx
import markdownify
from bs4 import BeautifulSoup
from pydantic import Field

from toolnexus.errors import ConfigurationError
from toolnexus.tools._decorator import tool
from toolnexus.tools._hooks import maybe_await
from toolnexus.tools._tool import Tool, ToolHints

__all__ = ["MAX_FETCH_BYTES", "PrivateNetwork", "SearchBackend", "web_tools"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

MAX_FETCH_BYTES = 2_000_000
FETCH_TIMEOUT = 30.0
MAX_TEXT_CHARS = 100_000
WEB = ToolHints(read_only=True, destructive=False, idempotent=True, open_world=True)

SearchBackend = (
    str | Callable[[str, int], "Sequence[dict[str, Any]] | Awaitable[Sequence[dict[str, Any]]]"]
)
"""A SearXNG base URL, or ``backend(query, limit)`` returning ``{"title", "url", "snippet"}``s."""


PrivateNetwork = bool | Collection[str]
"""``webfetch``'s reach into non-public addresses: ``False`` (none), ``True`` (all), or the
addresses and networks (``"127.0.0.1"``, ``"10.0.0.0/8"``) it may reach."""

MAX_REDIRECTS = 5


class _Destinations:
    """Which addresses ``webfetch`` may connect to.

    Why by address and not by name: a public-looking name can resolve to a private address
    (DNS rebinding, or just an internal DNS record). So the name is resolved here, every
    address it resolves to is checked, and the request then goes to a checked address, the
    name kept for the ``Host`` header and TLS, so a second resolution cannot change the answer.
    """

    def __init__(self, allow: PrivateNetwork) -> None:
        self.everything = allow is True
        networks = [] if isinstance(allow, bool) else list(allow)
        try:
            self.allowed = [ipaddress.ip_network(n, strict=False) for n in networks]
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(
                f"allow_private_network takes True, False or addresses/networks such as "
                f"'127.0.0.1' or '10.0.0.0/8': {exc}"
            ) from None

    def permits(self, address: IPAddress) -> bool:
        if self.everything or _public(address):
            return True
        return any(address in network for network in self.allowed)

    async def address_for(self, url: httpx.URL) -> str:
        """The checked address to connect to for ``url``.

        Raises:
            PermissionError: the host is (or resolves to) an address that is not allowed.
            OSError: the name does not resolve.
        """
        host = url.host
        try:
            addresses = [ipaddress.ip_address(host)]
        except ValueError:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, url.port or (443 if url.scheme == "https" else 80), type=socket.SOCK_STREAM
            )
            addresses = [ipaddress.ip_address(info[4][0]) for info in infos]
        refused = [a for a in addresses if not self.permits(a)]
        if refused:
            raise PermissionError(
                f"webfetch does not fetch {url.host} ({refused[0]}): a loopback, private, "
                "link-local or otherwise non-public address. To fetch local servers, build "
                "the tools with builtin_tools(..., allow_private_network=True) or name the "
                "allowed addresses"
            )
        return str(addresses[0])


def _public(address: IPAddress) -> bool:
    mapped = getattr(address, "ipv4_mapped", None)
    if mapped is not None:
        address = mapped
    return address.is_global and not address.is_multicast


async def _fetch(url: str, destinations: _Destinations) -> tuple[str, bytes]:
    """GET ``url``, following redirects; every hop's address is checked before it is used."""
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"webfetch takes an http(s) URL, got {url!r}")
    target = httpx.URL(url)
    async with httpx.AsyncClient(timeout=FETCH_TIMEOUT, follow_redirects=False) as client:
        for _ in range(MAX_REDIRECTS + 1):
            if target.scheme not in ("http", "https"):
                raise ValueError(f"webfetch was redirected to {target}, which is not http(s)")
            address = await destinations.address_for(target)
            pinned = target.copy_with(host=address)
            headers = {"user-agent": "toolnexus-webfetch", "host": target.netloc.decode()}
            extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
            request = client.build_request("GET", pinned, headers=headers, extensions=extensions)
            response = await client.send(request, stream=True)
            try:
                if response.is_redirect and "location" in response.headers:
                    target = target.join(response.headers["location"])
                    continue
                return await _body(url, response)
            finally:
                await response.aclose()
    raise ValueError(f"{url} redirected more than {MAX_REDIRECTS} times; not fetched")


async def _body(url: str, response: httpx.Response) -> tuple[str, bytes]:
    if response.status_code >= 400:
        raise RuntimeError(f"{url} answered HTTP {response.status_code}")
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body.extend(chunk)
        if len(body) > MAX_FETCH_BYTES:
            raise ValueError(f"{url} is larger than {MAX_FETCH_BYTES} bytes; not fetched")
    return response.headers.get("content-type", ""), bytes(body)


def _markdown(html: str) -> str:
    """``html`` as Markdown, without scripts, styles and other non-content elements."""
    soup = BeautifulSoup(html, "html.parser")
    for element in soup(["script", "style", "noscript", "template", "iframe"]):
        element.decompose()
    text: str = markdownify.MarkdownConverter(heading_style="ATX").convert_soup(soup)
    return text


def _cap(text: str) -> str:
    if len(text) <= MAX_TEXT_CHARS:
        return text
    return text[:MAX_TEXT_CHARS] + f"\n… ({len(text) - MAX_TEXT_CHARS} characters cut)"


async def _searxng(base_url: str, query: str, limit: int) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(timeout=FETCH_TIMEOUT) as client:
        response = await client.get(
            base_url.rstrip("/") + "/search", params={"q": query, "format": "json"}
        )
        response.raise_for_status()
        results = response.json().get("results", [])
    return [
        {"title": r.get("title", ""), "url": r.get("url", ""), "snippet": r.get("content", "")}
        for r in results[:limit]
    ]


def web_tools(
    search_backend: SearchBackend | None, *, allow_private_network: PrivateNetwork = False
) -> list[Tool]:
    """``webfetch`` and ``websearch`` (asking ``search_backend``).

    ``webfetch`` refuses loopback, private, link-local (cloud metadata at 169.254.169.254) and
    other non-public addresses, on every redirect hop, unless ``allow_private_network`` allows
    them: a read-only tool that the scheduler overlaps freely must not be a way into the
    machine's own network.

    Raises:
        ConfigurationError: ``allow_private_network`` names something that is not an address.
    """
    destinations = _Destinations(allow_private_network)

    @tool(name="webfetch", hints=WEB)
    async def webfetch(url: str) -> str:
        """Fetch a web page or text file; HTML comes back as Markdown.

        Args:
            url: An http(s) URL.
        """
        kind, body = await _fetch(url, destinations)
        text = body.decode("utf-8", errors="replace")
        if "html" in kind.lower() or text.lstrip()[:15].lower().startswith(("<!doctype", "<html")):
            text = _markdown(text)
        elif not (kind.startswith("text/") or "json" in kind or "xml" in kind or not kind):
            raise ValueError(f"{url} is {kind}, not text; webfetch reads text and HTML only")
        return _cap(text.strip())

    @tool(name="websearch", hints=WEB)
    async def websearch(query: str, limit: Annotated[int, Field(ge=1, le=50)] = 10) -> str:
        """Search the web.

        Args:
            query: What to search for.
            limit: How many results at most.
        """
        if search_backend is None:
            raise RuntimeError(
                "websearch is not configured: pass search_backend= to builtin_tools (a "
                "function (query, limit) -> results, or the URL of a SearXNG instance)"
            )
        if isinstance(search_backend, str):
            results = await _searxng(search_backend, query, limit)
        else:
            results = list(await maybe_await(search_backend(query, limit)))[:limit]
        if not results:
            return f"no results for {query!r}"
        return "\n\n".join(
            f"{i}. {r.get('title', '')}\n   {r.get('url', '')}\n   {r.get('snippet', '')}".rstrip()
            for i, r in enumerate(results, start=1)
        )

    return [webfetch, websearch]
