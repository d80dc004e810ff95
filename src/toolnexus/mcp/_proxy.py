"""The gateway as a faithful proxy of its upstream MCP servers.

* Direct upstream tools (``--mode both``) are listed as their server listed them (its
  ``outputSchema``, ``title``, ``icons``, ``annotations``, ``execution``, ``_meta``), under
  the gateway's name for them, and their results come back verbatim (every content part,
  ``structuredContent``, ``isError``, ``_meta``): `Upstreams.listing`, `Upstreams.verbatim`.
* Resources, resource templates, prompts and completion of every upstream are aggregated.
  Resource URIs stay exactly as their server gives them (tool results carry them): a read,
  subscribe or unsubscribe goes to the server that listed the URI, else to the one whose
  template matches it most specifically (`toolnexus.mcp._templates`). Two servers listing one
  URI (or one template), or equally specific templates of two servers matching one URI, is
  an error naming both.
  Prompts are named ``<server>_<prompt>`` like tools (by their own names for a server whose
  ``prefix`` is false); ``completion/complete`` is routed by prompt name or template.
* Logging: ``logging/setLevel`` is honoured (and passed on to every upstream that logs), and
  upstream log messages are passed on with the server named as their ``logger``, on the
  stream of the gateway call that caused them when there is one.
* Pagination: the upstreams' cursors are followed (`list_all`, bounded), and the gateway's
  own listings are paged (`PAGE_SIZE` items a page, opaque cursors; a cursor the gateway
  did not issue is ``-32602``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import weakref
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.subscriptions import PromptsListChanged, ResourcesListChanged, ServerEvent
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from toolnexus.errors import ConfigurationError
from toolnexus.mcp._templates import Template
from toolnexus.tools import Tool, ToolResult
from toolnexus.tools._mcp import McpTools, _parse_problem, calls_as_task, list_all, task_support
from toolnexus.tools.mcp import call_value

__all__ = ["PAGE_SIZE", "RAW_RESULT", "Upstreams"]

logger = logging.getLogger("toolnexus.mcp")

PAGE_SIZE = 100
"""Items per page of the gateway's own ``resources/list``, ``resources/templates/list`` and
``prompts/list`` answers."""

RAW_RESULT = "mcp_result"
"""The outcome metadata key holding an upstream's ``CallToolResult`` as it came."""

LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


@dataclass
class _Routes:
    """Which upstream serves what: resource URIs, templates, prompts (gateway name ->
    ``(server, name)``)."""

    uris: dict[str, str] = field(default_factory=dict)
    templates: dict[str, str] = field(default_factory=dict)
    matching: list[Template] = field(default_factory=list)  # the most specific first
    prompts: dict[str, tuple[str, str]] = field(default_factory=dict)


@dataclass
class _InFlight:
    """A gateway call running on an upstream: where that upstream's log messages go."""

    server: str
    session: Any
    request_id: Any


class Upstreams:
    """The upstream servers behind a gateway, as a proxy (see the module's docstring).

    Args:
        tools: The connected servers' tools (`mcp_servers`); their links carry the sessions.
    """

    def __init__(self, tools: McpTools) -> None:
        self.tools = tools
        self.routes = _Routes()
        self.resources: list[types.Resource] = []
        self.templates: list[types.ResourceTemplate] = []
        self.prompts: list[types.Prompt] = []
        # a client connection -> the log level it set; a URI -> the connections subscribed
        self.level: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
        self.subscribers: dict[str, weakref.WeakSet[Any]] = {}
        self.failures: dict[str, str] = {}  # "<server> <kind>" -> why that listing failed
        self._flights: list[_InFlight] = []
        self._clients: Callable[[], list[Any]] = list
        self._served: set[str] = set()  # what lists the gateway serves ("resources", "prompts")
        self._publish: Callable[[ServerEvent], Awaitable[None]] = _unheard
        for link in self._links().values():
            link.on_notification = self._forwarder(link.server.name)

    # -- the upstreams -------------------------------------------------------------------------

    def _links(self) -> dict[str, Any]:
        """Every connected server's link, by server name."""
        return {name: link for name, (link, _) in self.tools._listed.items()}

    def _capable(self, what: str) -> dict[str, Any]:
        """The connected servers that declare capability ``what``, by name."""
        capable = {}
        for name, link in self._links().items():
            caps = getattr(link.session, "server_capabilities", None)
            if caps is not None and getattr(caps, what, None) is not None:
                capable[name] = link
        return capable

    def _prefix(self, server: str) -> bool:
        link = self._links().get(server)
        return link is None or link.server.prefix

    # -- tools ---------------------------------------------------------------------------------

    def listing(self, tool: Tool) -> types.Tool | None:
        """``tool`` as its server listed it, under the gateway's name (``None``: not an
        upstream tool)."""
        origin = self.tools.origins.get(tool.name)
        if origin is None:
            return None
        listed: types.Tool = origin[1].model_copy(update={"name": tool.name})
        return listed

    def verbatim(self, tool: Tool) -> Tool:
        """``tool``, answering with its server's ``CallToolResult`` as it came (in the
        outcome's metadata under `RAW_RESULT`; the value is what a program would read)."""
        origin = self.tools.origins.get(tool.name)
        if origin is None:
            return tool
        link, listed = origin
        remote, as_task = listed.name, calls_as_task(link.server, task_support(listed))

        async def execute(args: dict[str, Any], ctx: Any = None) -> Any:
            try:
                result = await link.call(remote, args, as_task=as_task, ctx=ctx)
            except ValidationError as exc:  # one line, not pydantic's dump of what it sent
                raise ConnectionError(
                    f"MCP server {link.server.name!r} answered {remote} with a result that is "
                    f"not valid MCP ({_parse_problem(exc)}); nothing of it was passed on"
                ) from None
            value, _, failed = call_value(result)
            return ToolResult(output=value, is_error=failed, metadata={RAW_RESULT: result})

        return replace(tool, execute=execute)

    @contextlib.contextmanager
    def in_flight(self, tool: Tool, session: Any, request_id: Any) -> Iterator[None]:
        """While a gateway call of ``tool`` runs, its server's log messages go to its stream."""
        origin = self.tools.origins.get(tool.name)
        if origin is None:
            yield
            return
        flight = _InFlight(origin[0].server.name, session, request_id)
        self._flights.append(flight)
        try:
            yield
        finally:
            self._flights.remove(flight)

    # -- the index -----------------------------------------------------------------------------

    async def index(self) -> None:
        """List every upstream's resources, templates and prompts (following their cursors)
        and route them; the gateway's listings serve from this until listed again.

        Raises:
            ConfigurationError: two servers list one resource URI or template, or templates
                of two servers that are equally specific and match one URI, or two prompts
                take one name, naming both servers.
        """
        routes = _Routes()
        resources: list[types.Resource] = []
        templates: list[types.ResourceTemplate] = []
        prompts: list[types.Prompt] = []
        for server, link in self._capable("resources").items():
            for resource in await self._listed(link, "resources"):
                _claim(routes.uris, resource.uri, server, "resource URI")
                resources.append(resource)
            for template in await self._listed(link, "resource_templates"):
                _claim(routes.templates, template.uri_template, server, "resource template")
                routes.matching.append(Template(template.uri_template, server))
                templates.append(template)
        routes.matching = _by_specificity(routes.matching)
        for server, link in self._capable("prompts").items():
            for prompt in await self._listed(link, "prompts"):
                name = f"{server}_{prompt.name}" if self._prefix(server) else prompt.name
                if name in routes.prompts:
                    other = routes.prompts[name][0]
                    raise ConfigurationError(
                        f"two prompts take the name {name!r}: one of MCP server {other!r} "
                        f"and one of {server!r}; rename a server in the config (or give it "
                        "prefix: true)."
                    )
                routes.prompts[name] = (server, prompt.name)
                prompts.append(prompt.model_copy(update={"name": name}))
        self.routes, self.resources, self.templates, self.prompts = (
            routes,
            resources,
            templates,
            prompts,
        )

    async def _listed(self, link: Any, kind: str) -> list[Any]:
        """Every item of one server's ``kind`` listing (cursors followed, `list_all`'s
        bounds); a server whose listing fails (it pages forever, errs, is gone) is left out
        of it, with a log line naming it and why, in `failures`."""
        server = link.server.name
        try:
            items = await asyncio.wait_for(
                list_all(link.session, server, kind), link.server.connect_timeout
            )
        except Exception as exc:
            why = link.secrets.redact(f"{type(exc).__name__}: {exc}")[:500]
            self.failures[f"{server} {kind}"] = why
            logger.warning("MCP server %r: its %s were left out: %s", server, kind, why)
            return []
        self.failures.pop(f"{server} {kind}", None)
        return items

    async def _reindex(self) -> None:
        """`index` again for a listing request: a failure is the request's JSON-RPC error."""
        try:
            await self.index()
        except (ConfigurationError, ConnectionError) as exc:
            raise MCPError(types.INTERNAL_ERROR, str(exc)) from None

    def _resource_server(self, uri: str) -> str:
        """The server that serves ``uri``: the one that listed it, else the one whose
        template matches it most specifically (see `toolnexus.mcp._templates`).

        Raises:
            MCPError: no server lists it nor has a matching template (``-32602``).
        """
        server = self.routes.uris.get(uri)
        if server is not None:
            return server
        for template in self.routes.matching:
            if template.matches(uri):
                return template.server
        raise MCPError(
            types.INVALID_PARAMS,
            f"no upstream server lists the resource {uri[:300]!r} or a template it matches",
        )

    # -- handlers ------------------------------------------------------------------------------

    def install(
        self,
        server: Server[Any],
        clients: Callable[[], list[Any]],
        publish: Callable[[ServerEvent], Awaitable[None]],
    ) -> None:
        """Serve the aggregated resources, prompts, completion and logging on ``server``
        (``clients`` lists the connected clients, to pass upstream log messages and list
        changes on to; ``publish`` tells the 2026-07-28 clients' ``subscriptions/listen``).

        The gateway serves (and declares, with ``listChanged: true``) ``resources`` and
        ``prompts`` only when an upstream declares them, and passes list changes on only then.
        """
        self._clients, self._publish = clients, publish
        self._served = {kind for kind in ("resources", "prompts") if self._capable(kind)}
        add = server.add_request_handler
        if "resources" in self._served:
            add("resources/list", types.PaginatedRequestParams, self._list_resources)
            add("resources/templates/list", types.PaginatedRequestParams, self._list_templates)
            add("resources/read", types.ReadResourceRequestParams, self._read)
            subscribable = [
                name
                for name, link in self._capable("resources").items()
                if link.session.server_capabilities.resources.subscribe
            ]
            if subscribable:
                add("resources/subscribe", types.SubscribeRequestParams, self._subscribe)
                add("resources/unsubscribe", types.UnsubscribeRequestParams, self._unsubscribe)
        if "prompts" in self._served:
            add("prompts/list", types.PaginatedRequestParams, self._list_prompts)
            add("prompts/get", types.GetPromptRequestParams, self._get_prompt)
        if self._capable("completions"):
            add("completion/complete", types.CompleteRequestParams, self._complete)
        add("logging/setLevel", types.SetLevelRequestParams, self._set_level)

    async def _list_resources(
        self, ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        await self._reindex()
        items, cursor = _page(self.resources, params)
        return types.ListResourcesResult(resources=items, next_cursor=cursor)

    async def _list_templates(
        self, ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        await self._reindex()
        items, cursor = _page(self.templates, params)
        return types.ListResourceTemplatesResult(resource_templates=items, next_cursor=cursor)

    async def _list_prompts(
        self, ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        await self._reindex()
        items, cursor = _page(self.prompts, params)
        return types.ListPromptsResult(prompts=items, next_cursor=cursor)

    async def _read(self, ctx: Any, params: types.ReadResourceRequestParams) -> Any:
        server = self._resource_server(params.uri)
        return await self._forward(
            server, types.ReadResourceRequest(params=params), types.ReadResourceResult
        )

    async def _subscribe(self, ctx: Any, params: types.SubscribeRequestParams) -> Any:
        """Subscribe the client to ``uri``'s updates (the upstream once, for every client)."""
        server = self._resource_server(params.uri)
        clients = self.subscribers.setdefault(params.uri, weakref.WeakSet())
        if not clients:
            await self._forward(server, types.SubscribeRequest(params=params), types.EmptyResult)
        clients.add(_connection(ctx))
        return types.EmptyResult()

    async def _unsubscribe(self, ctx: Any, params: types.UnsubscribeRequestParams) -> Any:
        """The client's subscription ends (the upstream's when no client is left)."""
        server = self._resource_server(params.uri)
        clients = self.subscribers.get(params.uri)
        if clients is not None:
            clients.discard(_connection(ctx))
            if not clients:
                del self.subscribers[params.uri]
                await self._forward(
                    server, types.UnsubscribeRequest(params=params), types.EmptyResult
                )
        return types.EmptyResult()

    async def _get_prompt(self, ctx: Any, params: types.GetPromptRequestParams) -> Any:
        route = self.routes.prompts.get(params.name)
        if route is None:
            await self._reindex()
            route = self.routes.prompts.get(params.name)
        if route is None:
            known = ", ".join(sorted(self.routes.prompts)[:50]) or "none"
            raise MCPError(
                types.INVALID_PARAMS, f"unknown prompt {params.name[:200]!r}; prompts: {known}"
            )
        server, name = route
        upstream = params.model_copy(update={"name": name})
        return await self._forward(
            server, types.GetPromptRequest(params=upstream), types.GetPromptResult
        )

    async def _complete(self, ctx: Any, params: types.CompleteRequestParams) -> Any:
        ref = params.ref
        if isinstance(ref, types.PromptReference):
            route = self.routes.prompts.get(ref.name)
            if route is None:
                raise MCPError(types.INVALID_PARAMS, f"unknown prompt {ref.name[:200]!r}")
            server = route[0]
            params = params.model_copy(update={"ref": ref.model_copy(update={"name": route[1]})})
        else:
            server = self.routes.templates.get(ref.uri) or self._resource_server(ref.uri)
        return await self._forward(
            server, types.CompleteRequest(params=params), types.CompleteResult
        )

    async def _set_level(self, ctx: Any, params: types.SetLevelRequestParams) -> Any:
        self.level[_connection(ctx)] = params.level
        for name, link in self._capable("logging").items():
            try:
                await link.session.send_request(
                    types.SetLevelRequest(params=types.SetLevelRequestParams(level=params.level)),
                    types.EmptyResult,
                )
            except Exception as exc:  # one server's refusal does not refuse the client
                logger.warning("MCP server %r refused logging/setLevel: %s", name, exc)
        return types.EmptyResult()

    async def _forward(self, server: str, request: Any, result_type: Any) -> Any:
        """``request`` sent to ``server`` as it is; its answer, or its error as the request's.

        Raises:
            MCPError: the server answered with an error (passed on) or is gone.
        """
        link = self._links().get(server)
        if link is None or link.gone is not None:
            raise MCPError(types.INTERNAL_ERROR, f"MCP server {server!r} is not connected")
        try:
            return await link.session.send_request(request, result_type)
        except MCPError:
            raise
        except Exception as exc:
            raise MCPError(
                types.INTERNAL_ERROR, link.secrets.redact(f"MCP server {server!r}: {exc}")
            ) from None

    # -- notifications -------------------------------------------------------------------------

    def _forwarder(self, server: str) -> Callable[[Any], Awaitable[None]]:
        async def forward(message: Any) -> None:
            if isinstance(message, types.LoggingMessageNotification):
                await self._log(server, message.params)
            elif isinstance(message, types.ResourceUpdatedNotification):
                for client in list(self.subscribers.get(message.params.uri, ())):
                    await _told(client.send_resource_updated(message.params.uri))
            elif isinstance(message, types.ResourceListChangedNotification):
                await self._list_changed("resources", ResourcesListChanged())
            elif isinstance(message, types.PromptListChangedNotification):
                await self._list_changed("prompts", PromptsListChanged())

        return forward

    async def _list_changed(self, kind: str, event: ServerEvent) -> None:
        """An upstream's ``kind`` list (``"resources"``, ``"prompts"``) changed: every client
        is told (a 2026-07-28 one on ``subscriptions/listen``) when the gateway serves that
        list, and so declares ``listChanged`` for it (see `install`); else it is dropped."""
        if kind not in self._served:
            logger.debug("dropped an upstream's %s list change: the gateway serves none", kind)
            return
        await self._publish(event)
        for client in self._clients():
            told = (
                client.send_resource_list_changed()
                if kind == "resources"
                else client.send_prompt_list_changed()
            )
            await _told(told)

    async def _log(self, server: str, params: types.LoggingMessageNotificationParams) -> None:
        """An upstream's log message, passed on with the server as its ``logger``: on the
        stream of each gateway call running on that server, else to every client that set a
        level; never below the level a client set."""
        name = f"{server}/{params.logger}" if params.logger else server
        flights = [f for f in self._flights if f.server == server]
        if flights:
            for flight in flights:
                connection = getattr(flight.session, "_connection", flight.session)
                if _below(params.level, self.level.get(connection)):
                    continue
                await _told(
                    flight.session.send_log_message(
                        params.level, params.data, name, related_request_id=flight.request_id
                    )
                )
            return
        for client, wanted in list(self.level.items()):
            if _below(params.level, wanted):
                continue
            await _told(client.log(params.level, params.data, name))


async def _unheard(event: ServerEvent) -> None:
    """No ``subscriptions/listen`` to tell (the proxy is not installed on a server)."""


SEND_SECONDS = 5.0
"""How long passing one notification on to one client may take: the upstream's reader waits
for it, so a client that does not read cannot hold that upstream's answers for long."""


async def _told(send: Awaitable[Any]) -> None:
    """Send one notification to one client: a client that is gone or too slow is skipped."""
    try:
        await asyncio.wait_for(send, SEND_SECONDS)
    except Exception:
        logger.debug("could not pass a notification on to a client", exc_info=True)


def _connection(ctx: Any) -> Any:
    """The client connection a request came on (it outlives the per-request session)."""
    return getattr(ctx.session, "_connection", None) or ctx.session


def _below(level: str, wanted: str | None) -> bool:
    """Whether ``level`` is less severe than ``wanted`` (``None``: nothing is)."""
    if wanted is None or wanted not in LOG_LEVELS or level not in LOG_LEVELS:
        return False
    return LOG_LEVELS.index(level) < LOG_LEVELS.index(wanted)


def _claim(owners: dict[str, str], key: str, server: str, what: str) -> None:
    """``key`` is served by ``server``.

    Raises:
        ConfigurationError: another server serves it already, naming both.
    """
    other = owners.get(key)
    if other is not None and other != server:
        raise ConfigurationError(
            f"the {what} {key[:300]!r} is listed by two MCP servers, {other!r} and {server!r}; "
            "the gateway could not tell which to ask: leave one of them out of the config."
        )
    owners[key] = server


def _by_specificity(templates: list[Template]) -> list[Template]:
    """``templates``, the most specific first (listing order among equals).

    Raises:
        ConfigurationError: templates of two servers are equally specific and some URI
            matches both, naming both templates and both servers.
    """
    ordered = sorted(templates, key=lambda t: t.specificity, reverse=True)
    for i, template in enumerate(ordered):
        for other in ordered[i + 1 :]:
            if other.specificity != template.specificity:
                break
            if other.server != template.server and template.overlaps(other):
                raise ConfigurationError(
                    f"the resource templates {template.text[:200]!r} of MCP server "
                    f"{template.server!r} and {other.text[:200]!r} of {other.server!r} are "
                    "equally specific and match the same URIs, so the gateway cannot tell "
                    "which server to ask: leave one of the servers out of the config."
                )
    return ordered


def _page(items: list[Any], params: types.PaginatedRequestParams | None) -> tuple[list[Any], Any]:
    """One page of ``items`` from the cursor of ``params``, and the next page's cursor.

    Raises:
        MCPError: a cursor the gateway did not issue (``-32602``).
    """
    cursor = params.cursor if params is not None else None
    start = 0
    if cursor is not None:
        match = re.fullmatch(r"page:(\d{1,9})", cursor)
        if match is None or int(match.group(1)) > len(items):
            raise MCPError(types.INVALID_PARAMS, "a cursor this gateway did not issue")
        start = int(match.group(1))
    end = start + PAGE_SIZE
    return items[start:end], (f"page:{end}" if end < len(items) else None)
