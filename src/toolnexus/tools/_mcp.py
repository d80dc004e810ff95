"""MCP tools: the tools of Model Context Protocol servers, through the official ``mcp`` SDK.

    async with mcp_servers({"mcpServers": {
        "files": {"command": "uvx", "args": ["mcp-server-filesystem", "."]},
        "docs": {"url": "https://example.com/mcp", "headers": {"authorization": "Bearer …"}},
    }}) as tools:
        result = await client.run("…", tools=[*tools, *builtin_tools()])

Each server's tools are named ``<server>_<tool>`` (sanitised; names that then clash are all
given a digest suffix, see `McpTools`) with their schemas passed through.
Annotations become [`ToolHints`][toolnexus.tools.ToolHints]: a ``readOnlyHint`` makes a tool safe,
so it overlaps (the scheduling rule's safe class). Per server, ``trust_annotations: false`` makes
every tool unsafe and ``read_only_tools: [...]`` marks named ones safe. A server that fails to start
is reported (in ``tools.failures`` and the log) and left out; the others work. A message a
server sends that the SDK cannot parse fails the calls waiting on that server at once, and
every call has a deadline (the server's ``timeout``, 120 s by default).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import functools
import hashlib
import itertools
import json
import logging
import re
import sys
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from typing import Any, TextIO

from toolnexus.errors import ConfigurationError, MissingExtraError
from toolnexus.session import events
from toolnexus.tools._arguments import check_references
from toolnexus.tools._mcp_auth import Secrets, oauth_provider
from toolnexus.tools._mcp_config import ServerConfig, calls_as_task, parse_config
from toolnexus.tools._mcp_content import CONTENT_RESULT_SCHEMA, call_value, notes
from toolnexus.tools._mcp_handlers import callbacks, session_class
from toolnexus.tools._mcp_tasks import call_as_task, takes_tasks
from toolnexus.tools._outcome import Outcome
from toolnexus.tools._resources import Resources, ResourcesFunction
from toolnexus.tools._tool import Tool, ToolHints, ToolResult

__all__ = [
    "MAX_LIST_PAGES",
    "McpTools",
    "ServerConfig",
    "calls_as_task",
    "list_all",
    "mcp_servers",
    "parse_config",
    "task_support",
]

logger = logging.getLogger("toolnexus.mcp")

MAX_NAME = 64
MAX_LIST_PAGES = 100
"""The most pages one listing (``tools/list``, ``resources/list``, ``prompts/list``) may take:
a server still paging after that fails with an error naming it, never a partial list."""
MAX_MESSAGE_BYTES = 100 * 1024 * 1024
"""The largest server message read over streamable HTTP (one event of its SSE stream): a
50 MB image is 67 MB of base64. A larger message fails its call, with a message saying so."""
MAX_INPUT_ROUNDS = 10
"""The most ``InputRequiredResult`` rounds one call may take (the SDK's default): a server
still asking after that fails the call with an error naming it."""
MAX_REQUEST_STATE_CHARS = 4 * 1024 * 1024
"""The longest ``requestState`` of an ``InputRequiredResult`` that is echoed back: a server
sending a longer one fails the call with an error naming it (its state is not sent back)."""


def _declaration(arg_names: dict[str, tuple[str, ...]]) -> ResourcesFunction:
    """Declares the values of the named arguments as the keys one call reads and writes."""

    def declare(args: dict[str, Any]) -> Resources | None:
        keys: dict[str, list[str]] = {"reads_arg": [], "writes_arg": []}
        for kind, names in arg_names.items():
            for name in names:
                value = args.get(name)
                values: list[Any] = value if isinstance(value, list) else [value]
                if not values or not all(isinstance(v, str) and v for v in values):
                    return None  # not a key: the call keeps its safety class
                keys[kind].extend(str(v) for v in values)
        return Resources(reads=keys["reads_arg"], writes=keys["writes_arg"])

    return declare


ToolsChanged = Callable[["McpTools"], Awaitable[None]]
"""``await listener(tools)``: called after a server's tool list changed (``tools`` is updated)."""


class McpTools(list[Tool]):
    """The tools of every server that connected; ``failures`` names those that did not, and
    ``protocols`` gives each connected server's negotiated protocol revision.

    Every upstream tool is reachable under a unique name: ``<server>_<tool>`` (sanitised, at
    most 64 characters) when no other tool has it, else that name cut to 57 characters plus
    ``_`` and six hex digits of the server and tool names (see `unique_names`), with the
    original names said in its description; ``renamed`` maps each such name to its
    ``(server, tool)``.

    When a server announces that its tools changed (``notifications/tools/list_changed``), its
    tools are listed again and replaced here, in place; listeners added with `on_change` are
    then called.
    """

    def __init__(self, reserved: Collection[str] = ()) -> None:
        super().__init__()
        self.failures: dict[str, str] = {}
        self.protocols: dict[str, str] = {}
        self.renamed: dict[str, tuple[str, str]] = {}
        self._reserved = frozenset(reserved)
        self._listeners: list[ToolsChanged] = []
        self._listed: dict[str, tuple[_Link, list[Any]]] = {}
        self._refused: list[str] = []  # the keys of `failures` naming a refused tool
        self._wrapped: dict[tuple[str, str], _Wrapped] = {}  # (server, tool) -> its wrapper
        self.origins: dict[str, tuple[_Link, Any]] = {}
        """Each tool's name -> its server's link and the tool as the server listed it (the
        gateway passes the listing and the results through verbatim from these)."""

    def server_of(self, name: str) -> str | None:
        """The server whose tool is offered here as ``name``, or ``None``."""
        origin = self.origins.get(name)
        return origin[0].server.name if origin is not None else None

    def on_change(self, listener: ToolsChanged) -> None:
        """Call ``await listener(tools)`` each time a server's tool list changed."""
        self._listeners.append(listener)

    def _add(self, link: _Link, listed: list[Any]) -> None:
        self._listed[link.server.name] = (link, listed)
        self._name_all()

    async def _replace(self, link: _Link, listed: list[Any]) -> None:
        """``server``'s tools, listed again: swapped in place (only the tools that changed are
        wrapped anew), then the listeners told if any changed (a new list whose names cannot
        be told apart is refused, with a log line naming them)."""
        previous = self._listed.get(link.server.name)
        self._listed[link.server.name] = (link, listed)
        try:
            changed = self._name_all()
        except ConfigurationError as exc:
            if previous is not None:
                self._listed[link.server.name] = previous
            logger.error(
                "MCP server %r: its changed tools were not taken: %s", link.server.name, exc
            )
            return
        if not changed:
            return
        for listener in self._listeners:
            try:
                await listener(self)
            except Exception:
                logger.exception("a listener of MCP tool changes failed")

    def _name_all(self) -> bool:
        """Wrap every server's tools under unique names (a clash renames every tool in it);
        whether any changed. A tool listed as before, under the same name, keeps its wrapper
        (and the validator built for its schema); a tool whose schema is refused (see `Tool`)
        is left out and named in `failures`."""
        pairs = [
            (server, tool.name)
            for server, (_, listed) in self._listed.items()
            for tool in _distinct(listed)
        ]
        bare = {server for server, (link, _) in self._listed.items() if not link.server.prefix}
        names = unique_names(pairs, self._reserved, bare=bare)
        origins: dict[str, tuple[_Link, Any]] = {}
        wrapped: dict[tuple[str, str], _Wrapped] = {}
        for key in self._refused:
            self.failures.pop(key, None)
        self._refused = []
        for server, (link, listed) in self._listed.items():
            for tool in _distinct(listed):
                pair = (server, tool.name)
                try:
                    wrapped[pair] = self._wrapper(link, tool, names[pair])
                except ConfigurationError as exc:  # this tool only: the others are offered
                    self._refuse(server, tool.name, link.secrets.redact(str(exc)))
                    continue
                origins[names[pair]] = (link, tool)
        tools = [entry.tool for entry in wrapped.values()]
        changed = len(tools) != len(self) or any(
            a is not b for a, b in zip(tools, self, strict=True)
        )
        self.renamed = {
            names[pair]: pair
            for pair in pairs
            if names[pair] in origins and names[pair] != tool_name(*pair, bare=bare)
        }
        self.origins = origins
        self._wrapped = wrapped
        self[:] = tools
        return changed

    def _refuse(self, server: str, tool: str, why: str) -> None:
        """Leave out one tool of ``server``, named in `failures` as ``<server>/<tool>``."""
        key = f"{server}/{tool}"
        self._refused.append(key)
        self.failures[key] = f"MCP server {server!r}: its tool was refused: {why}"
        logger.warning("MCP server %r: its tool %r was refused: %s", server, tool, why)

    def _wrapper(self, link: _Link, tool: Any, name: str) -> _Wrapped:
        """``tool`` of ``link``'s server wrapped as ``name``: the wrapper it had, when it was
        listed alike and named alike before."""
        kept = self._wrapped.get((link.server.name, tool.name))
        if kept is not None and kept.link is link and kept.name == name and kept.listed == tool:
            return kept
        return _Wrapped(link, tool, name, _wrap(link.server, link, tool, name))


@dataclasses.dataclass(frozen=True)
class _Wrapped:
    """One upstream tool as listed, and its wrapper (kept while it is listed alike)."""

    link: _Link
    listed: Any
    name: str
    tool: Tool


def _distinct(listed: list[Any]) -> list[Any]:
    """A server's listing with a tool name it lists twice kept once (the first)."""
    seen: set[str] = set()
    kept = []
    for tool in listed:
        if tool.name not in seen:
            seen.add(tool.name)
            kept.append(tool)
    return kept


def tool_name(server: str, name: str, *, bare: Collection[str] = ()) -> str:
    """``<server>_<tool>`` (``<tool>`` for a server in ``bare``: its ``prefix`` is false),
    with characters providers refuse replaced, at most 64 long."""
    full = name if server in bare else f"{server}_{name}"
    return re.sub(r"[^A-Za-z0-9_-]", "_", full)[:MAX_NAME]


def unique_names(
    pairs: Sequence[tuple[str, str]],
    reserved: Collection[str] = (),
    *,
    bare: Collection[str] = (),
) -> dict[tuple[str, str], str]:
    """A unique, deterministic tool name for each ``(server, tool)``.

    A pair keeps `tool_name` unless another pair (or a ``reserved`` name) gives the same: then
    every pair of the clash gets the name cut to fit, ``_`` and hex digits of a SHA-256 of the
    server and tool names. The name depends only on the pair and on whether it clashes, so it
    does not change with the order of servers or tools. (``a.b`` and ``a_b`` of one server,
    server ``x`` tool ``y_z`` and server ``x_y`` tool ``z``, and names alike in their first 64
    characters all clash.)

    Raises:
        ConfigurationError: names still clash after four rounds of longer digests (only a
            server choosing names to collide with the digests could do this), naming them.
    """
    names = {pair: tool_name(*pair, bare=bare) for pair in pairs}
    for digits in (6, 12, 24, 48):
        taken = Counter([*names.values(), *set(reserved)])
        clashing = [pair for pair in pairs if taken[names[pair]] > 1]
        if not clashing:
            return names
        for pair in clashing:
            digest = hashlib.sha256("\0".join(pair).encode()).hexdigest()[:digits]
            names[pair] = f"{tool_name(*pair, bare=bare)[: MAX_NAME - digits - 1]}_{digest}"
    taken = Counter([*names.values(), *set(reserved)])
    left = sorted(f"{s}/{t}" for (s, t), name in names.items() if taken[name] > 1)
    raise ConfigurationError(
        f"MCP tool names clash and could not be told apart: {', '.join(left)}; rename a server "
        "in the config."
    )


def _hints(server: ServerConfig, tool: Any) -> ToolHints | None:
    if tool.name in server.read_only_tools:
        return ToolHints(read_only=True, destructive=False)
    notes = tool.annotations
    if not server.trust_annotations or notes is None:
        return None  # nothing promised: the tool runs alone
    read_only = bool(notes.read_only_hint)
    return ToolHints(
        read_only=read_only,
        destructive=not read_only and notes.destructive_hint is not False,
        idempotent=bool(notes.idempotent_hint),
        open_world=notes.open_world_hint is not False,
    )


def _result(result: Any) -> Any:
    """A ``CallToolResult`` as a value (see `call_value`: every content part is kept), or a
    failing ToolResult. Content beside ``structuredContent`` that is not a mirror of it
    (`unmirrored`) is what a model reads after the value (`Outcome.noted`)."""
    value, metadata, failed = call_value(result)
    said = notes(result)
    if said is not None:
        return Outcome.noted(value, said, metadata)
    if failed or metadata is not None:
        return ToolResult(output=value, is_error=failed, metadata=metadata)
    return value


def _output_schema(schema: Any) -> dict[str, Any] | None:
    """The type of what a call returns, from the tool's ``outputSchema``: a plain value is sent
    wrapped as ``{"result": value}`` and unwrapped by `_result`, so its type is unwrapped too."""
    if not isinstance(schema, dict):
        return dict(CONTENT_RESULT_SCHEMA)  # its text, or its content parts
    properties = schema.get("properties")
    if isinstance(properties, dict) and list(properties) == ["result"]:
        inner = properties["result"]
        return dict(inner) if isinstance(inner, dict) else None
    return dict(schema)


def task_support(tool: Any) -> str:
    execution = getattr(tool, "execution", None)
    return getattr(execution, "task_support", None) or "forbidden"


async def list_all(session: Any, server: str, kind: str = "tools") -> list[Any]:
    """Every item of a listing (``kind``: ``"tools"``, ``"resources"``, ``"prompts"`` or
    ``"resource_templates"``), following ``nextCursor`` to the end (no cursor, or ``""``).

    Raises:
        ConnectionError: the server paged past `MAX_LIST_PAGES`, or sent a cursor it had sent
            before (its list would never end), naming the server.
    """
    from mcp.types import PaginatedRequestParams

    method = getattr(session, f"list_{kind}")
    items: list[Any] = []
    cursor: str | None = None
    seen: set[str] = set()
    for page_number in range(1, MAX_LIST_PAGES + 1):
        page = await method(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
        items.extend(getattr(page, kind))
        cursor = page.next_cursor
        if not cursor:  # absent, or "" (which some servers send on the last page)
            return _first_definitions(session, server, items) if kind == "tools" else items
        if cursor in seen:
            raise ConnectionError(
                f"MCP server {server!r} sent a {kind}/list cursor it had sent before (page "
                f"{page_number}, {len(items)} items so far): its list never ends, so none of "
                "it was taken"
            )
        seen.add(cursor)
    raise ConnectionError(
        f"MCP server {server!r} was still paging {kind}/list after {MAX_LIST_PAGES} pages "
        f"({len(items)} items): none of it was taken"
    )


def _first_definitions(session: Any, server: str, tools: list[Any]) -> list[Any]:
    """A tool listing with each name once, as first listed, saying which names came twice.

    The SDK checks a call's result against the output schema it saw last for the name; it is
    given the kept listing again, so a call is checked against the definition offered."""
    kept = _distinct(tools)
    if len(kept) == len(tools):
        return tools
    twice = sorted(name for name, count in Counter(t.name for t in tools).items() if count > 1)
    logger.warning(
        "MCP server %r lists the tools %s more than once: the first definition of each is "
        "offered, and its results are checked against it",
        server,
        ", ".join(repr(name) for name in twice),
    )
    absorb = getattr(session, "_absorb_tool_listing", None)
    if absorb is not None:
        from mcp.types import ListToolsResult

        absorb(ListToolsResult(tools=kept), complete=True)
    return kept


def _wrap(server: ServerConfig, link: _Link, tool: Any, name: str) -> Tool:
    remote = tool.name
    description = tool.description or tool.title or ""
    usual = tool_name(server.name, remote, bare=() if server.prefix else (server.name,))
    if name != usual:
        description = (
            f"(The tool {remote!r} of MCP server {server.name!r}; named {name} because "
            f"another tool has the name {usual}.) {description}"
        ).strip()

    as_task = calls_as_task(server, task_support(tool))

    async def execute(args: dict[str, Any], ctx: Any = None) -> Any:
        return _result(await link.call(remote, args, as_task=as_task, ctx=ctx))

    schema = dict(tool.input_schema or {"type": "object"})
    schema.setdefault("type", "object")
    if isinstance(tool.output_schema, dict):  # the SDK checks every result against it
        check_references(name, "outputSchema", tool.output_schema)
    return Tool(
        name,
        description,
        schema,
        execute=execute,
        hints=_hints(server, tool),
        resources=_declaration(server.resources[remote]) if remote in server.resources else None,
        output_schema=_output_schema(tool.output_schema),
        source="mcp",
        timeout=server.timeout,
    )


def _server_log() -> TextIO:
    """Where a stdio server's stderr goes: ours, or the real one when ours is not a file (a
    captured or replaced ``sys.stderr`` has no descriptor to hand a subprocess)."""
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return sys.__stderr__ or sys.stderr
    return sys.stderr


async def _open(
    stack: contextlib.AsyncExitStack,
    server: ServerConfig,
    on_message: Any = None,
    secrets: Secrets | None = None,
) -> Any:
    """Enter the server's transport and session; the initialised session. ``on_message``
    receives the server's notifications; ``secrets`` learns the server's secrets."""
    from mcp import StdioServerParameters

    secrets = secrets if secrets is not None else Secrets()
    secrets.add(*server.headers.values())
    if server.transport == "stdio":
        from mcp.client.stdio import stdio_client

        parameters = StdioServerParameters(
            command=server.command or "", args=list(server.args), env=server.env, cwd=server.cwd
        )
        secrets.guard_logs()  # the SDK's loggers exist once its modules are imported
        read, write = await stack.enter_async_context(stdio_client(parameters, _server_log()))
    else:
        assert server.url is not None
        auth = server.auth
        if isinstance(auth, Mapping):
            auth = oauth_provider(server.name, server.url, auth, secrets)
        if server.transport == "sse":
            from mcp.client.sse import sse_client

            secrets.guard_logs()
            read, write = await stack.enter_async_context(
                sse_client(
                    server.url, headers=server.headers, timeout=server.connect_timeout, auth=auth
                )
            )
        else:
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            secrets.guard_logs()
            http = await stack.enter_async_context(
                create_mcp_http_client(headers=server.headers, auth=auth)
            )
            read, write = await stack.enter_async_context(
                streamable_http_client(
                    server.url, http_client=http, max_sse_event_size=MAX_MESSAGE_BYTES
                )
            )
    answers = callbacks(
        server.name,
        elicitation=server.elicitation_handler,
        sampling=server.sampling_handler,
        roots=server.roots,
        timeout=server.handler_timeout,
    )
    session = await stack.enter_async_context(
        session_class()(read, write, message_handler=on_message, **answers)
    )
    await _negotiate(session, server)
    return session


async def _negotiate(session: Any, server: ServerConfig) -> None:
    """Settle the protocol revision, as the SDK's ``Client(mode=...)`` does (see
    ``ServerConfig.protocol``): ``"auto"`` probes ``server/discover`` and falls back to the
    ``initialize`` handshake on a server that does not speak it (``negotiate_auto``).

    Raises:
        ConnectionError: a pinned modern revision the server does not speak, naming both.
    """
    if server.protocol == "legacy":
        await session.initialize()
        return
    if server.protocol == "auto":
        from mcp.client._probe import negotiate_auto

        await negotiate_auto(session)
        return
    from mcp.shared.exceptions import MCPError
    from mcp.types import DiscoverResult
    from pydantic import ValidationError

    pinned = f"; its entry pins protocol {server.protocol}"
    try:
        result = DiscoverResult.model_validate(await session.send_discover(server.protocol))
    except (MCPError, ValidationError) as exc:
        why = exc.error.message if isinstance(exc, MCPError) else "its answer is no DiscoverResult"
        raise ConnectionError(
            f"MCP server {server.name!r} did not answer server/discover ({why[:200]}){pinned}"
        ) from None
    if server.protocol not in result.supported_versions:
        raise ConnectionError(
            f"MCP server {server.name!r} speaks {', '.join(result.supported_versions) or 'none'} "
            f"of the per-request revisions{pinned}"
        )
    session.adopt(result.model_copy(update={"supported_versions": [server.protocol]}))


class _Link:
    """One server's connection, owned by a task of its own for its whole life.

    Why a task of its own: the SDK's transports run anyio task groups, which must be entered
    and left in one task, and which cancel the task that entered them when the connection
    fails (a refused or dying HTTP server). Held in a dedicated task, such a failure ends that
    task only: the caller gets the failure as data (``McpTools.failures``, or a failed call),
    never a cancellation or a traceback; and the servers connect at once, not one by one.
    """

    def __init__(self, server: ServerConfig) -> None:
        self.server = server
        self.secrets = Secrets()  # what to scrub from any text about this server
        self.session: Any = None
        self.protocol: str | None = None  # the negotiated revision, once connected
        # takes each new listing after a tools/list_changed (see `watch`)
        self.on_tools_changed: Callable[[list[Any]], Awaitable[None]] | None = None
        # every other notification of the server (log messages, resource updates), for the
        # gateway to pass on; called in the session's reader, so it must not wait long
        self.on_notification: Callable[[Any], Awaitable[None]] | None = None
        self._relisting: asyncio.Task[None] | None = None  # the one relisting running
        self._changes = 0  # the tools/list_changed heard so far (a generation count)
        self._listed_at = 0  # the generation the listing taken last was asked for at
        self.gone: str | None = None  # why the connection ended, once it has
        self._waiting: set[asyncio.Future[str]] = set()  # one per call awaiting its answer
        self._tasks_progress: dict[str, _Progress] = {}  # a running task's token -> its callback
        self._tokens = itertools.count(1)
        self._ready: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        self._close = asyncio.Event()
        self._task = asyncio.ensure_future(self._hold())

    async def tools(self) -> list[Any]:
        """The server's tool listings, once connected.

        Raises:
            ConnectionError: it did not connect (in time), saying why.
        """
        try:
            return await asyncio.wait_for(asyncio.shield(self._ready), self.server.connect_timeout)
        except TimeoutError:
            raise ConnectionError(
                f"no answer within {self.server.connect_timeout:g} s (connect_timeout)"
            ) from None

    async def call(
        self, name: str, args: dict[str, Any], *, as_task: bool = False, ctx: Any = None
    ) -> Any:
        """The server's answer to one ``tools/call`` (run as a task when ``as_task`` and the
        server declares task-augmented calls, see `takes_tasks`), asking for progress (see
        `_progress`; a task's comes for as long as it runs, through `_notified`).

        Raises:
            ConnectionError: the server is gone, or it sent a message that could not be read
                while the call waited (see `_unreadable`).
            TaskFailed: a task ended without a result.
        """
        if self.gone is not None:
            raise ConnectionError(f"MCP server {self.server.name!r} is gone: {self.gone}")
        unreadable: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._waiting.add(unreadable)
        progress = self._progress(name, getattr(ctx, "session", None))
        token = None
        if as_task and takes_tasks(self.session.server_capabilities):
            token = f"toolnexus-task-{next(self._tokens)}"
            self._tasks_progress[token] = progress
            sent = call_as_task(self.session, self.server.name, name, args, token)
        else:
            sent = self._call_driven(name, args, progress)
        request = asyncio.ensure_future(sent)
        request.add_done_callback(_retrieved)
        try:
            await asyncio.wait({request, unreadable}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._waiting.discard(unreadable)
            if token is not None:
                self._tasks_progress.pop(token, None)
            if not request.done():
                request.cancel()  # the SDK tells the server the request is abandoned
        if not unreadable.done() or (request.done() and not request.cancelled()):
            try:
                answer = request.result()
                await progress.settled()  # its notifications reach the hook before its answer
            except Exception as exc:
                scrubbed = self.secrets.scrubbed(exc)  # a server echoing a header or token
                if scrubbed is not None:
                    raise scrubbed from None
                raise
            return self._scrubbed_failure(answer)
        raise ConnectionError(
            f"MCP server {self.server.name!r} sent a message that could not be read while "
            f"this call waited ({unreadable.result()}); it may have been this call's answer, "
            "so the call failed (its outcome on the server is unknown)"
        )

    def _scrubbed_failure(self, answer: Any) -> Any:
        """A failed ``CallToolResult`` (``isError``) with the server's secrets scrubbed from
        it, as from an error answer; any other answer as it is (the tool's own data)."""
        if not (self.secrets and getattr(answer, "is_error", False)):
            return answer
        dumped = answer.model_dump(by_alias=True, mode="json", exclude_none=True)
        if not self.secrets.leaks(json.dumps(dumped)):
            return answer
        return type(answer).model_validate(self.secrets.scrub(dumped))

    async def _call_driven(self, name: str, args: dict[str, Any], progress: Any) -> Any:
        """``tools/call``, with a server's ``InputRequiredResult`` (SEP-2322) answered through
        the same handlers as its requests, by the SDK's own driver."""
        from mcp.client._input_required import (
            InputRequiredRoundsExceededError,
            run_input_required_driver,
        )
        from mcp.client.session import ClientRequestContext
        from mcp.shared.exceptions import MCPError
        from mcp.types import ErrorData

        session = self.session
        server = self.server.name

        async def retry(responses: Any, state: str | None) -> Any:
            answer = await session.call_tool(
                name,
                args,
                progress_callback=progress,
                input_responses=responses,
                request_state=state,
                allow_input_required=True,
            )
            # checked before the handlers are asked: a state too long to echo ends the call
            echoed = getattr(answer, "request_state", None) if _asks(answer) else None
            if echoed is not None and len(echoed) > MAX_REQUEST_STATE_CHARS:
                raise RuntimeError(
                    f"MCP server {server!r} asked for input with a requestState of "
                    f"{len(echoed):,} characters (at most {MAX_REQUEST_STATE_CHARS:,} are echoed "
                    f"back): the call of {name!r} failed"
                )
            return answer

        refused: list[str] = []  # the handlers' errors, which the driver raises as MCPError

        async def dispatch(key: str, request: Any) -> Any:
            meta = request.params.meta if request.params else None
            context = ClientRequestContext(session=session, request_id=key, meta=meta)
            answer = await session.dispatch_input_request(context, request)
            if isinstance(answer, ErrorData):
                refused.append(answer.message)
            return answer

        first = await retry(None, None)
        if not _asks(first):
            return first
        try:
            return await run_input_required_driver(
                first, dispatch=dispatch, retry=retry, max_rounds=MAX_INPUT_ROUNDS
            )
        except InputRequiredRoundsExceededError:
            raise RuntimeError(
                f"MCP server {server!r} was still asking for input (InputRequiredResult) after "
                f"{MAX_INPUT_ROUNDS} rounds: the call of {name!r} failed"
            ) from None
        except MCPError as exc:
            if not refused:
                raise  # the server's own error
            raise RuntimeError(
                f"MCP server {server!r} asked for input for {name!r} and it was not given: "
                f"{exc.error.message}"
            ) from None

    def _progress(self, tool: str, log: Any) -> Any:
        """A progress callback for one call of ``tool`` (it makes the SDK send a
        ``progressToken``): each notification goes to the server's ``on_progress``, the
        session log (a bookkeeping ``mcp_progress`` event, never a message) and the log.

        ``on_progress`` runs in the context of the call (its context variables as the caller
        set them), not of the SDK's reader task the notification arrives on: so a hook can
        tell which of several concurrent calls of one server a notification is for."""
        return _Progress(self.server, tool, log, contextvars.copy_context())

    def _unreadable(self, problem: Exception) -> None:
        """The transport could not parse a message of the server (the SDK hands the parse
        error to the message handler and drops the message).

        Why every waiting call fails: the message cannot be read, so neither can its request
        id; any waiting call may have been the one answered, and would otherwise wait forever.
        """
        why = _parse_problem(problem)
        logger.warning(
            "MCP server %r sent a message that could not be read: %s", self.server.name, why
        )
        for waiting in list(self._waiting):
            if not waiting.done():
                waiting.set_result(why)

    async def _notified(self, message: Any) -> None:
        """A message from the server: a changed tool list is listed again, in a task of its
        own (the session's reader delivers the answer, so it must not wait here); a running
        task's progress goes to its call's callback; a message the transport could not parse
        fails the waiting calls."""
        from mcp.types import ToolListChangedNotification

        if isinstance(message, ValueError):  # pydantic's ValidationError and json's errors
            self._unreadable(message)
        elif (callback := self._task_progress(message)) is not None:
            params = message.params
            await callback(params.progress, params.total, params.message)
        elif isinstance(message, ToolListChangedNotification):
            self._changes += 1
            self._relist_soon()
        elif self.on_notification is not None and not isinstance(message, Exception):
            try:
                await self.on_notification(message)
            except Exception:
                logger.exception(
                    "passing on a notification of MCP server %r failed", self.server.name
                )

    def watch(self, listener: Callable[[list[Any]], Awaitable[None]]) -> None:
        """Hand ``listener`` each new listing, after each ``tools/list_changed`` from now on,
        and at once when one came after the first listing was asked for (while connecting:
        it would be lost)."""
        self.on_tools_changed = listener
        self._relist_soon()

    def _relist_soon(self) -> None:
        """Start relisting, in a task of its own, when the tools changed since the listing
        taken last and no relisting is running (a running one lists once more as it ends:
        however many changes came meanwhile, one listing takes them all)."""
        running = self._relisting is not None and not self._relisting.done()
        if self.on_tools_changed is not None and self._changes > self._listed_at and not running:
            self._relisting = asyncio.ensure_future(self._relist())

    async def _relist(self) -> None:
        """List the tools until a listing was asked for after the last change heard; the
        answers are taken in the order asked, so an older one never replaces a newer one (it
        would put back tools the server no longer has)."""
        while self._changes > self._listed_at and self.on_tools_changed is not None:
            generation = self._changes
            try:
                listed = await asyncio.wait_for(
                    list_all(self.session, self.server.name), self.server.connect_timeout
                )
            except Exception as exc:
                logger.warning(
                    "MCP server %r: listing its changed tools failed: %s",
                    self.server.name,
                    self.secrets.redact(_why(exc)),
                )
                return
            self._listed_at = generation
            await self.on_tools_changed(listed)

    def _task_progress(self, message: Any) -> _Progress | None:
        """The callback of the running task whose progress ``message`` is, if it is one."""
        from mcp.types import ProgressNotification

        if not isinstance(message, ProgressNotification):
            return None
        return self._tasks_progress.get(str(message.params.progress_token))

    def _announces_changes(self) -> bool:
        """Whether the server is on a per-request revision (2026-07-28) and says its tool list
        changes: its announcements then come only on a ``subscriptions/listen`` stream."""
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        tools = getattr(self.session.server_capabilities, "tools", None)
        return self.protocol in MODERN_PROTOCOL_VERSIONS and bool(
            getattr(tools, "list_changed", False)
        )

    def _listen(self) -> asyncio.Task[None]:
        """A task holding the server's ``subscriptions/listen`` stream for tool list changes
        (SEP-2575). Each change arrives as a ``notifications/tools/list_changed`` the SDK also
        hands to the message handler (`_notified`), so it is relisted like one on any
        revision; here the stream is only kept open and drained."""
        from mcp.client.subscriptions import listen

        async def held() -> None:
            try:
                async with listen(self.session, tools_list_changed=True) as events:
                    async for _ in events:
                        pass  # the SDK also hands each one to _notified, which relists
            except Exception as exc:
                logger.warning(
                    "MCP server %r: its tool list changes are no longer heard: %s",
                    self.server.name,
                    self.secrets.redact(_why(exc)),
                )

        return asyncio.ensure_future(held())

    async def close(self) -> None:
        self._close.set()
        if self._relisting is not None:
            self._relisting.cancel()
            with contextlib.suppress(BaseException):
                await self._relisting
        try:
            await asyncio.wait_for(asyncio.shield(self._task), self.server.connect_timeout)
        except (TimeoutError, Exception):
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task

    async def _hold(self) -> None:
        try:
            async with contextlib.AsyncExitStack() as stack:
                self.session = await _open(stack, self.server, self._notified, self.secrets)
                self.protocol = self.session.protocol_version
                generation = self._changes
                listed = await list_all(self.session, self.server.name)
                self._listed_at = generation
                listening = self._listen() if self._announces_changes() else None
                self._ready.set_result(listed)
                try:
                    await self._close.wait()
                finally:
                    if listening is not None:
                        listening.cancel()
                        with contextlib.suppress(BaseException):
                            await listening
        except BaseException as exc:
            self.gone = self.secrets.redact(_why(exc))
            if not self._ready.done():
                self._ready.set_exception(ConnectionError(self.gone))
                self._ready.exception()  # retrieved: tools() reports it
            if not isinstance(exc, (Exception, asyncio.CancelledError)):
                raise
        else:
            self.gone = "closed"


class _Progress:
    """One call's progress callback (see `_Link._progress`). `settled` waits for the hooks of
    the notifications that came before the answer: the SDK runs each callback in a task of its
    own, so without the wait an answer could overtake its last notifications."""

    def __init__(
        self, server: ServerConfig, tool: str, log: Any, caller: contextvars.Context
    ) -> None:
        self.server, self.tool, self.log, self.caller = server, tool, log, caller
        self.hooks: set[asyncio.Task[Any]] = set()

    async def settled(self) -> None:
        for _ in range(3):  # let the callbacks the SDK spawned for earlier notifications start
            await asyncio.sleep(0)
        if self.hooks:
            await asyncio.wait(self.hooks, timeout=5)

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        server, tool = self.server, self.tool
        logger.debug(
            "MCP server %r: %s progress %s/%s %s", server.name, tool, progress, total, message
        )
        if self.log is not None:
            with contextlib.suppress(Exception):
                reported = events.McpProgressData(
                    server=server.name, tool=tool, progress=progress, total=total, message=message
                )
                self.log.log_event(events.MCP_PROGRESS, reported)
        if server.on_progress is not None:
            hook = server.on_progress(server.name, tool, progress, total, message)
            task = asyncio.get_running_loop().create_task(hook, context=self.caller)
            self.hooks.add(task)
            task.add_done_callback(self.hooks.discard)
            try:
                await task
            except Exception:
                logger.exception("the on_progress hook of MCP server %r failed", server.name)


def _asks(answer: Any) -> bool:
    """Whether a call's answer is an ``InputRequiredResult`` (SEP-2322)."""
    from mcp.types import InputRequiredResult

    return isinstance(answer, InputRequiredResult)


def _retrieved(task: asyncio.Future[Any]) -> None:
    """Mark an abandoned request's failure as seen (its caller already has its answer)."""
    if not task.cancelled():
        task.exception()


def _parse_problem(problem: Exception) -> str:
    """One short line for a parse failure (pydantic's first error, else the exception)."""
    errors = getattr(problem, "errors", None)
    if callable(errors):
        with contextlib.suppress(Exception):
            first = errors(include_url=False)[0]
            return f"{type(problem).__name__}: {first['msg']}"[:300]
    return _why(problem)[:300]


def _why(exc: BaseException) -> str:
    """One line for a failed connection, from the innermost real error of a group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, asyncio.CancelledError):
        return "the connection was cancelled (the server went away)"
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@contextlib.asynccontextmanager
async def mcp_servers(
    config: Mapping[str, Any], *, reserved: Collection[str] = ()
) -> AsyncIterator[McpTools]:
    """Connect to every server of ``config`` (all at once) and yield their tools; close them
    all on exit.

    A server that fails to start, refuses, answers too slowly (``connect_timeout``) or speaks
    no MCP is left out and named in ``tools.failures``; the others work. A server that dies
    later fails only its own calls, each with a message saying so; so does one that sends a
    message its SDK cannot parse (the calls waiting on it fail at once), and a call that takes
    longer than its server's ``timeout`` (120 s by default).

    Args:
        config: ``{"mcpServers": {...}}`` (or the inner mapping); see `parse_config`.
        reserved: Names the tools must not take (the caller's own tools): a tool whose name
            is one of them is renamed like any clash (see `McpTools`).

    Raises:
        ConfigurationError: a malformed config (before anything connects), no ``mcp`` SDK, or
            tool names that could not be told apart.
    """
    servers = parse_config(config)
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise MissingExtraError("MCP tools (the mcp SDK)", "mcp") from exc
    tools = McpTools(reserved)
    links = [_Link(server) for server in servers]
    try:
        listings = await asyncio.gather(*(link.tools() for link in links), return_exceptions=True)
        for link, listed in zip(links, listings, strict=True):
            if isinstance(listed, BaseException):
                why = link.secrets.redact(_why(listed))
                tools.failures[link.server.name] = why
                logger.warning("MCP server %r did not connect: %s", link.server.name, why)
                continue
            tools._add(link, listed)
            tools.protocols[link.server.name] = link.protocol or "unknown"
            link.watch(functools.partial(tools._replace, link))
        yield tools
    finally:
        await asyncio.gather(*(link.close() for link in links))
