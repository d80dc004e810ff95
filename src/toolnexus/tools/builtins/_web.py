"""``webfetch`` and ``websearch``: the web, with limits.

``webfetch`` GETs one HTTP(S) URL (size and time limits; HTML converted to Markdown with
``markdownify``, text passed through). ``websearch`` asks a pluggable backend: a callable
``(query, limit) -> [{"title", "url", "snippet"}]``, or the URL of a SearXNG instance.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any

import httpx
import markdownify
from bs4 import BeautifulSoup
from pydantic import Field

from toolnexus.tools._decorator import tool
from toolnexus.tools._hooks import maybe_await
from toolnexus.tools._tool import Tool, ToolHints

__all__ = ["MAX_FETCH_BYTES", "SearchBackend", "web_tools"]

MAX_FETCH_BYTES = 2_000_000
FETCH_TIMEOUT = 30.0
MAX_TEXT_CHARS = 100_000
WEB = ToolHints(read_only=True, destructive=False, idempotent=True, open_world=True)

SearchBackend = (
    str | Callable[[str, int], "Sequence[dict[str, Any]] | Awaitable[Sequence[dict[str, Any]]]"]
)
"""A SearXNG base URL, or ``backend(query, limit)`` returning ``{"title", "url", "snippet"}``s."""


async def _fetch(url: str) -> tuple[str, bytes]:
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"webfetch takes an http(s) URL, got {url!r}")
    async with (
        httpx.AsyncClient(timeout=FETCH_TIMEOUT, follow_redirects=True) as client,
        client.stream("GET", url, headers={"user-agent": "toolnexus-webfetch"}) as response,
    ):
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


def web_tools(search_backend: SearchBackend | None) -> list[Tool]:
    """``webfetch`` and ``websearch`` (asking ``search_backend``)."""

    @tool(name="webfetch", hints=WEB)
    async def webfetch(url: str) -> str:
        """Fetch a web page or text file; HTML comes back as Markdown.

        Args:
            url: An http(s) URL.
        """
        kind, body = await _fetch(url)
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
