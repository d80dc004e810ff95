"""MCP tools: the tools of Model Context Protocol servers, through the official ``mcp`` SDK.

    async with mcp_servers({"mcpServers": {
        "files": {"command": "uvx", "args": ["mcp-server-filesystem", "."]},
        "docs": {"url": "https://example.com/mcp", "headers": {"authorization": "Bearer …"}},
    }}) as tools:
        result = await client.run("…", tools=[*tools, *builtin_tools()])

Each server's tools are named ``<server>_<tool>`` (sanitised) with their schemas passed through.
Annotations become [`ToolHints`][toolnexus.tools.ToolHints]: a ``readOnlyHint`` makes a tool safe,
so it overlaps (the scheduling rule's safe class). Per server, ``trust_annotations: false`` makes
every tool unsafe and ``read_only_tools: [...]`` marks named ones safe. A server that fails to start
is reported (in ``tools.failures`` and the log) and left out; the others work.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from toolnexus._checks import positive_number
from toolnexus.errors import ConfigurationError
from toolnexus.tools._resources import Resources, ResourcesFunction
from toolnexus.tools._tool import Tool, ToolHints, ToolResult

__all__ = ["McpTools", "ServerConfig", "mcp_servers", "parse_config"]

logger = logging.getLogger("toolnexus.mcp")

MAX_NAME = 64
DEFAULT_CONNECT_TIMEOUT = 10.0


@dataclass(frozen=True)
class ServerConfig:
    """One server of an ``mcpServers`` mapping.

    Attributes:
        name: The key in ``mcpServers`` (the tools' name prefix).
        command, args, env, cwd: A server started as a subprocess, spoken to over stdio.
        url, headers: A server reached over HTTP: streamable HTTP, or the older SSE transport
            when ``transport`` (or ``type``) is ``"sse"``.
        transport: ``"stdio"``, ``"http"`` (streamable HTTP) or ``"sse"``; from the command or
            url when not given.
        trust_annotations: Whether its tools' annotations decide their safety.
        read_only_tools: Tool names (the server's own) to treat as read-only regardless.
        timeout: Seconds each call of its tools may take (``None``: no limit); see
            `timeout`.
        connect_timeout: Seconds to connect, initialise and list the tools (default 10): a
            server that takes longer is reported as failed, not waited for.
        resources: Per tool (the server's own name), the arguments whose values are the keys
            it reads and writes: ``{"edit_file": {"writes_arg": "path"}}`` (a name or a list
            of names; an argument holding a list of strings gives one key per item). Calls on
            different keys overlap; see [`Resources`][toolnexus.tools.Resources].
    """

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] | None = None
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    trust_annotations: bool = True
    read_only_tools: tuple[str, ...] = ()
    timeout: float | None = None
    transport: str = "stdio"
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    resources: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)


TRANSPORTS = {"stdio": "stdio", "http": "http", "streamable-http": "http",
              "streamable_http": "http", "sse": "sse"}  # fmt: skip
"""Transport names as MCP clients write them, and what toolnexus calls each."""


def parse_config(config: Mapping[str, Any]) -> list[ServerConfig]:
    """The servers of ``config`` (``{"mcpServers": {...}}`` or the inner mapping).

    Raises:
        ConfigurationError: a server with neither ``command`` nor ``url``, or a bad field.
    """
    servers = config.get("mcpServers", config)
    if not isinstance(servers, Mapping):
        raise ConfigurationError("mcpServers must map server names to their settings.")
    parsed = []
    for name, spec in servers.items():
        if not isinstance(spec, Mapping) or not (spec.get("command") or spec.get("url")):
            raise ConfigurationError(
                f"MCP server {name!r} needs a command (stdio) or a url (streamable HTTP)."
            )
        transport = spec.get("transport", spec.get("type"))
        if transport is None:
            transport = "stdio" if spec.get("command") else "http"
        if transport not in TRANSPORTS:
            raise ConfigurationError(
                f"MCP server {name!r}: transport must be one of {', '.join(TRANSPORTS)}, got "
                f"{transport!r}."
            )
        connect = _timeout(name, spec.get("connect_timeout"), "connect_timeout")
        parsed.append(
            ServerConfig(
                name=str(name),
                command=spec.get("command"),
                args=tuple(str(a) for a in spec.get("args", ())),
                env=dict(spec["env"]) if spec.get("env") else None,
                cwd=spec.get("cwd"),
                url=spec.get("url"),
                headers=dict(spec.get("headers", {})),
                trust_annotations=bool(spec.get("trust_annotations", True)),
                read_only_tools=tuple(spec.get("read_only_tools", ())),
                timeout=_timeout(name, spec.get("timeout")),
                transport=TRANSPORTS[transport],
                connect_timeout=connect if connect is not None else DEFAULT_CONNECT_TIMEOUT,
                resources=_resource_args(name, spec.get("resources", {})),
            )
        )
    return parsed


RESOURCE_ARGS = ("reads_arg", "writes_arg")


def _resource_args(server: str, spec: Any) -> dict[str, dict[str, tuple[str, ...]]]:
    """A server's ``resources`` setting, checked: tool -> {"reads_arg"/"writes_arg": names}."""
    example = '{"edit_file": {"writes_arg": "path"}}'
    if not isinstance(spec, Mapping):
        raise ConfigurationError(
            f"MCP server {server!r}: resources must map tool names to argument names, "
            f"like {example}."
        )
    parsed: dict[str, dict[str, tuple[str, ...]]] = {}
    for tool, args in spec.items():
        if not isinstance(args, Mapping) or not set(args) <= set(RESOURCE_ARGS) or not args:
            raise ConfigurationError(
                f"MCP server {server!r}: resources of {tool!r} must use the keys "
                f"{' and/or '.join(RESOURCE_ARGS)}, like {example}; got {args!r}."
            )
        parsed[str(tool)] = {}
        for kind, names in args.items():
            listed = [names] if isinstance(names, str) else names
            if not isinstance(listed, list) or not all(isinstance(n, str) for n in listed):
                raise ConfigurationError(
                    f"MCP server {server!r}: resources.{tool}.{kind} must be an argument name "
                    f"or a list of them, got {names!r}."
                )
            parsed[str(tool)][kind] = tuple(listed)
    return parsed


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


def _timeout(server: str, value: Any, key: str = "timeout") -> float | None:
    if value is None:
        return None
    if not positive_number(value):
        raise ConfigurationError(
            f"MCP server {server!r}: {key} must be a positive number of seconds, got {value!r}."
        )
    return float(value)


ToolsChanged = Callable[["McpTools"], Awaitable[None]]
"""``await listener(tools)``: called after a server's tool list changed (``tools`` is updated)."""


class McpTools(list[Tool]):
    """The tools of every server that connected; ``failures`` names those that did not.

    When a server announces that its tools changed (``notifications/tools/list_changed``), its
    tools are listed again and replaced here, in place; listeners added with `on_change` are
    then called.
    """

    def __init__(self) -> None:
        super().__init__()
        self.failures: dict[str, str] = {}
        self._listeners: list[ToolsChanged] = []
        self._by_server: dict[str, list[Tool]] = {}

    def on_change(self, listener: ToolsChanged) -> None:
        """Call ``await listener(tools)`` each time a server's tool list changed."""
        self._listeners.append(listener)

    def _add(self, server: str, tools: list[Tool]) -> None:
        self._by_server[server] = tools
        self.extend(tools)

    async def _replace(self, server: str, fresh: list[Tool]) -> None:
        """``server``'s tools, listed again: swapped in place, then the listeners told."""
        old = {id(t) for t in self._by_server.get(server, [])}
        self[:] = [*(t for t in self if id(t) not in old), *fresh]
        self._by_server[server] = fresh
        for listener in self._listeners:
            try:
                await listener(self)
            except Exception:
                logger.exception("a listener of MCP tool changes failed")


def tool_name(server: str, name: str) -> str:
    """``<server>_<tool>``, with characters providers refuse replaced, at most 64 long."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", f"{server}_{name}")[:MAX_NAME]


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
    """A ``CallToolResult`` as a value (or a failing ToolResult)."""
    texts = [getattr(part, "text", None) for part in result.content or []]
    text = "\n".join(t for t in texts if t is not None)
    if result.is_error:
        return ToolResult(output=text or "the MCP tool reported an error", is_error=True)
    structured = result.structured_content
    if structured is not None:
        # a tool returning a plain value has it wrapped as {"result": value}: unwrap it
        if isinstance(structured, dict) and list(structured) == ["result"]:
            return structured["result"]
        return structured
    others = [p for p in result.content or [] if getattr(p, "text", None) is None]
    if others and not text:
        return [p.model_dump(mode="json", exclude_none=True) for p in others]
    return text


def _output_schema(schema: Any) -> dict[str, Any] | None:
    """The type of what a call returns, from the tool's ``outputSchema``: a plain value is sent
    wrapped as ``{"result": value}`` and unwrapped by `_result`, so its type is unwrapped too."""
    if not isinstance(schema, dict):
        return None
    properties = schema.get("properties")
    if isinstance(properties, dict) and list(properties) == ["result"]:
        inner = properties["result"]
        return dict(inner) if isinstance(inner, dict) else None
    return dict(schema)


def _wrap(server: ServerConfig, link: _Link, tool: Any) -> Tool:
    remote = tool.name

    async def execute(args: dict[str, Any]) -> Any:
        return _result(await link.call(remote, args))

    schema = dict(tool.input_schema or {"type": "object"})
    schema.setdefault("type", "object")
    return Tool(
        tool_name(server.name, remote),
        tool.description or tool.title or "",
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
    stack: contextlib.AsyncExitStack, server: ServerConfig, on_message: Any = None
) -> Any:
    """Enter the server's transport and session; the initialised session. ``on_message``
    receives the server's notifications."""
    from mcp import ClientSession, StdioServerParameters

    if server.transport == "stdio":
        from mcp.client.stdio import stdio_client

        parameters = StdioServerParameters(
            command=server.command or "", args=list(server.args), env=server.env, cwd=server.cwd
        )
        read, write = await stack.enter_async_context(stdio_client(parameters, _server_log()))
    elif server.transport == "sse":
        from mcp.client.sse import sse_client

        assert server.url is not None
        read, write = await stack.enter_async_context(
            sse_client(server.url, headers=server.headers, timeout=server.connect_timeout)
        )
    else:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        assert server.url is not None
        http = await stack.enter_async_context(httpx2.AsyncClient(headers=server.headers))
        read, write = await stack.enter_async_context(
            streamable_http_client(server.url, http_client=http)
        )
    session = await stack.enter_async_context(
        ClientSession(read, write, message_handler=on_message)
    )
    await session.initialize()
    return session


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
        self.session: Any = None
        self.on_tools_changed: Callable[[], Awaitable[None]] | None = None
        self._relisting: set[asyncio.Task[None]] = set()
        self.gone: str | None = None  # why the connection ended, once it has
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

    async def call(self, name: str, args: dict[str, Any]) -> Any:
        if self.gone is not None:
            raise ConnectionError(f"MCP server {self.server.name!r} is gone: {self.gone}")
        return await self.session.call_tool(name, args)

    async def _notified(self, message: Any) -> None:
        """A message from the server: a changed tool list is listed again, in a task of its
        own (the session's reader delivers the answer, so it must not wait here)."""
        from mcp.types import ToolListChangedNotification

        if isinstance(message, ToolListChangedNotification) and self.on_tools_changed:
            task = asyncio.ensure_future(self.on_tools_changed())
            self._relisting.add(task)
            task.add_done_callback(self._relisting.discard)

    async def close(self) -> None:
        self._close.set()
        try:
            await asyncio.wait_for(asyncio.shield(self._task), self.server.connect_timeout)
        except (TimeoutError, Exception):
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task

    async def _hold(self) -> None:
        try:
            async with contextlib.AsyncExitStack() as stack:
                self.session = await _open(stack, self.server, self._notified)
                listed = await self.session.list_tools()
                self._ready.set_result(listed.tools)
                await self._close.wait()
        except BaseException as exc:
            self.gone = _why(exc)
            if not self._ready.done():
                self._ready.set_exception(ConnectionError(self.gone))
                self._ready.exception()  # retrieved: tools() reports it
            if not isinstance(exc, (Exception, asyncio.CancelledError)):
                raise
        else:
            self.gone = "closed"


def _relister(tools: McpTools, link: _Link) -> Callable[[], Awaitable[None]]:
    async def relist() -> None:
        try:
            listed = await link.session.list_tools()
        except Exception as exc:
            logger.warning(
                "MCP server %r: listing its changed tools failed: %s", link.server.name, exc
            )
            return
        await tools._replace(link.server.name, [_wrap(link.server, link, t) for t in listed.tools])

    return relist


def _why(exc: BaseException) -> str:
    """One line for a failed connection, from the innermost real error of a group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, asyncio.CancelledError):
        return "the connection was cancelled (the server went away)"
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@contextlib.asynccontextmanager
async def mcp_servers(config: Mapping[str, Any]) -> AsyncIterator[McpTools]:
    """Connect to every server of ``config`` (all at once) and yield their tools; close them
    all on exit.

    A server that fails to start, refuses, answers too slowly (``connect_timeout``) or speaks
    no MCP is left out and named in ``tools.failures``; the others work. A server that dies
    later fails only its own calls, each with a message saying so.

    Raises:
        ConfigurationError: a malformed config (before anything connects), or no ``mcp`` SDK.
    """
    servers = parse_config(config)
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise ConfigurationError(
            "MCP tools need the mcp SDK: pip install mcp (the mcp extra of toolnexus)."
        ) from exc
    tools = McpTools()
    links = [_Link(server) for server in servers]
    try:
        listings = await asyncio.gather(*(link.tools() for link in links), return_exceptions=True)
        for link, listed in zip(links, listings, strict=True):
            if isinstance(listed, BaseException):
                tools.failures[link.server.name] = _why(listed)
                logger.warning("MCP server %r did not connect: %s", link.server.name, listed)
                continue
            tools._add(link.server.name, [_wrap(link.server, link, t) for t in listed])
            link.on_tools_changed = _relister(tools, link)
        yield tools
    finally:
        await asyncio.gather(*(link.close() for link in links))
