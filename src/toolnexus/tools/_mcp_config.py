"""The ``mcpServers`` config: each server entry checked against a schema, as a `ServerConfig`.

Why a schema: the file is hand-written JSON, and a loosely read setting does the opposite of
what it says (``"trust_annotations": "false"`` is a true string; ``"read_only_tools":
"lookup"`` is six one-letter names). Every key is checked strictly (no coercion) before any
server starts, and a wrong one is a one-line `ConfigurationError` naming the key and what it
must be. Keys toolnexus does not know are left alone: MCP clients put their own keys beside
the standard ones (``disabled``, ``autoApprove``, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolnexus.errors import ConfigurationError

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_CONNECT_TIMEOUT",
    "LONG_CALL_SECONDS",
    "ServerConfig",
    "calls_as_task",
    "config_error",
    "parse_config",
]

DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_HANDLER_TIMEOUT = 300.0
"""Seconds a user's elicitation or sampling handler may take (a person may be answering)."""
DEFAULT_CALL_TIMEOUT = 120.0
"""Seconds an upstream call may take when its server sets no ``timeout``: a server that
never answers fails the call instead of holding it (and its program) forever."""
LONG_CALL_SECONDS = DEFAULT_CALL_TIMEOUT
"""A server whose ``timeout`` is above this (or ``None``, no limit) has long calls: with
``task_calls: "auto"`` its tools that allow tasks (``taskSupport: "optional"``) are called as
tasks, so a call outlives no HTTP request (a task is polled, its result fetched at the end)."""
PROTOCOLS = ("auto", "legacy")
"""``protocol`` values besides a modern revision (``"2026-07-28"``)."""
TASK_CALLS = ("auto", "required", "optional")


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
        timeout: Seconds each call of its tools may take (default 120; ``None``: no limit,
            from Python only); a call past it fails with a message saying so.
        connect_timeout: Seconds to connect, initialise and list the tools (default 10): a
            server that takes longer is reported as failed, not waited for.
        resources: Per tool (the server's own name), the arguments whose values are the keys
            it reads and writes: ``{"edit_file": {"writes_arg": "path"}}`` (a name or a list
            of names; an argument holding a list of strings gives one key per item). Calls on
            different keys overlap; see [`Resources`][toolnexus.tools.Resources].
        elicitation_handler: ``await handler(context, params)`` answering the server's
            ``elicitation/create`` (the SDK's ``ElicitationFnT``: an ``ElicitResult`` or an
            ``ErrorData``). Given: the elicitation capability is declared (URL mode too when
            its ``params`` annotation admits ``ElicitRequestURLParams``).
        sampling_handler: ``await handler(context, params)`` answering the server's
            ``sampling/createMessage`` (the SDK's ``SamplingFnT``). Given: sampling is declared.
        roots: The roots offered to the server (``file://`` URIs, or the SDK's ``Root``), or
            (from Python) ``await roots(context)`` returning the SDK's ``ListRootsResult``
            each time the server asks (how the gateway relays its client's roots). Given
            (even empty): the roots capability is declared.
        handler_timeout: Seconds a handler may take before the server is answered with an
            error (default 300).
        on_progress: ``await on_progress(server, tool, progress, total, message)`` for each
            progress notification of a call.
        task_calls: Which tools are called as tasks (SEP-1686): always those whose
            ``execution.taskSupport`` is ``"required"``; those whose is ``"optional"`` with
            ``"optional"``, and with ``"auto"`` (the default) when the server's calls are long
            (its ``timeout`` above `LONG_CALL_SECONDS`, 120 s, or ``None``); ``"required"``:
            only the first.
        protocol: How the protocol revision is chosen: ``"auto"`` (default; the SDK's
            ``mode="auto"``: ``server/discover`` at the newest revision, 2026-07-28, and the
            ``initialize`` handshake, 2025-11-25 or older, when the server does not speak it),
            ``"legacy"`` (the handshake only), or a modern revision (``"2026-07-28"``: that one
            or a failed connection).
        auth: For an HTTP server: an ``httpx2.Auth`` (the SDK's ``OAuthClientProvider``), or
            OAuth settings that build one (see ``toolnexus.tools.mcp.oauth_provider``).
        prefix: Whether its tools (and, behind the gateway, its prompts) are named
            ``<server>_<name>`` (default) or by their own names (``false``: for one server
            whose names a client expects as they are; a clash with another tool still gets
            a digest suffix, see ``McpTools``).
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
    timeout: float | None = DEFAULT_CALL_TIMEOUT
    transport: str = "stdio"
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    resources: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)
    elicitation_handler: Callable[..., Any] | None = field(default=None, compare=False)
    sampling_handler: Callable[..., Any] | None = field(default=None, compare=False)
    roots: tuple[Any, ...] | Callable[..., Any] | None = None
    handler_timeout: float | None = DEFAULT_HANDLER_TIMEOUT
    on_progress: Callable[..., Any] | None = field(default=None, compare=False)
    task_calls: str = "auto"
    auth: Any = field(default=None, repr=False, compare=False)
    protocol: str = "auto"
    prefix: bool = True

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{name}={getattr(self, name)!r}"
            for name in ("name", "transport", "command", "args", "url")
            if getattr(self, name) not in (None, ())
        )
        hidden = [f"{name}=..." for name in ("headers", "env", "auth") if getattr(self, name)]
        return f"ServerConfig({', '.join([shown, *hidden]) if shown else ', '.join(hidden)})"


TRANSPORTS = {"stdio": "stdio", "http": "http", "streamable-http": "http",
              "streamable_http": "http", "sse": "sse"}  # fmt: skip
"""Transport names as MCP clients write them, and what toolnexus calls each."""

Seconds = Field(default=None, gt=0, allow_inf_nan=False)


class _Entry(BaseModel):
    """The schema of one ``mcpServers`` entry (strict: no value is converted)."""

    model_config = ConfigDict(strict=True, extra="ignore")

    command: str | None = None
    args: list[str] = []
    env: dict[str, str] | None = None
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = {}
    trust_annotations: bool = True
    read_only_tools: list[str] = []
    timeout: float | None = Seconds
    connect_timeout: float | None = Seconds
    transport: str | None = None
    type: str | None = None
    resources: dict[str, Any] = {}
    elicitation_handler: Any = None
    sampling_handler: Any = None
    roots: Any = None
    handler_timeout: float | None = Seconds
    on_progress: Any = None
    task_calls: str = "auto"
    auth: Any = None
    protocol: str = "auto"
    prefix: bool = True


MUST_BE = {
    "command": "a string (the program that starts the server)",
    "args": 'a list of strings, like ["server.py", "--verbose"]',
    "env": 'an object of strings, like {"HOME": "/home/me"}',
    "cwd": "a string (the folder the server starts in)",
    "url": "a string (the server's http(s) URL)",
    "headers": 'an object of strings, like {"authorization": "Bearer ..."}',
    "trust_annotations": "true or false (a JSON boolean, not a string)",
    "read_only_tools": 'a list of the server\'s tool names, like ["lookup"]',
    "timeout": "a positive number of seconds",
    "connect_timeout": "a positive number of seconds",
    "transport": f"one of {', '.join(TRANSPORTS)}",
    "type": f"one of {', '.join(TRANSPORTS)}",
    "resources": 'an object, like {"edit_file": {"writes_arg": "path"}}',
    "elicitation_handler": "an async callable (context, params) (Python only)",
    "sampling_handler": "an async callable (context, params) (Python only)",
    "roots": 'a list of file:// URIs, like ["file:///home/me/project"]',
    "handler_timeout": "a positive number of seconds",
    "on_progress": "an async callable (server, tool, progress, total, message) (Python only)",
    "task_calls": '"auto", "required" or "optional"',
    "protocol": '"auto", "legacy" or a modern revision ("2026-07-28")',
    "auth": "OAuth settings (an object) or an httpx2.Auth (Python only)",
    "prefix": "true or false (a JSON boolean: false names its tools without the server)",
}
"""What each key must be, said in the error when it is not."""


def config_error(
    prefix: str, exc: ValidationError, must_be: Mapping[str, str]
) -> ConfigurationError:
    """A one-line error for the first problem pydantic found, after ``prefix`` (which says
    where: ``"MCP server 'up': "``).

    Names the key, what it must be (from ``must_be``, by top-level key, else pydantic's own
    words) and, briefly, what it was.
    """
    problem = exc.errors(include_url=False)[0]
    location = [str(part) for part in problem["loc"]]
    key = ".".join(location)
    wanted = must_be.get(location[0]) if location else None
    if problem["type"] == "extra_forbidden":
        return ConfigurationError(
            f"{prefix}{key} is not a known setting; known: {', '.join(must_be)}."
        )
    if problem["type"] == "missing":
        return ConfigurationError(f"{prefix}{key} is missing; it must be {wanted or 'given'}.")
    got = repr(problem.get("input"))
    got = got if len(got) <= 60 else got[:57] + "..."
    if wanted is None:
        said = problem["msg"]
        return ConfigurationError(f"{prefix}{key}: {said[:1].lower()}{said[1:]}, got {got}.")
    return ConfigurationError(f"{prefix}{key} must be {wanted}, got {got}.")


def parse_config(config: Mapping[str, Any]) -> list[ServerConfig]:
    """The servers of ``config`` (``{"mcpServers": {...}}`` or the inner mapping), each checked
    against the schema of a server entry (strictly: ``"false"`` is not a boolean).

    Raises:
        ConfigurationError: a server with neither ``command`` nor ``url``, or a key of the
            wrong type or value (one line naming the key and what it must be).
    """
    servers = config.get("mcpServers", config)
    if not isinstance(servers, Mapping):
        raise ConfigurationError(
            f"mcpServers must be an object mapping server names to their settings, got "
            f"{type(servers).__name__}."
        )
    parsed = []
    for name, spec in servers.items():
        if not isinstance(spec, Mapping):
            raise ConfigurationError(
                f"mcpServers.{name} must be an object with a command (stdio) or a url "
                f"(streamable HTTP), got {type(spec).__name__}."
            )
        try:
            entry = _Entry.model_validate(dict(spec))
        except ValidationError as exc:
            raise config_error(f"MCP server {name!r}: ", exc, MUST_BE) from None
        if not (entry.command or entry.url):
            raise ConfigurationError(
                f"MCP server {name!r} needs a command (stdio) or a url (streamable HTTP)."
            )
        transport = entry.transport if entry.transport is not None else entry.type
        if transport is None:
            transport = "stdio" if entry.command else "http"
        if transport not in TRANSPORTS:
            raise ConfigurationError(
                f"MCP server {name!r}: transport must be one of {', '.join(TRANSPORTS)}, got "
                f"{transport!r}."
            )
        _check_extras(str(name), entry)
        parsed.append(
            ServerConfig(
                name=str(name),
                command=entry.command,
                args=tuple(entry.args),
                env=dict(entry.env) if entry.env else None,
                cwd=entry.cwd,
                url=entry.url,
                headers=dict(entry.headers),
                trust_annotations=entry.trust_annotations,
                read_only_tools=tuple(entry.read_only_tools),
                timeout=entry.timeout if entry.timeout is not None else DEFAULT_CALL_TIMEOUT,
                transport=TRANSPORTS[transport],
                connect_timeout=entry.connect_timeout or DEFAULT_CONNECT_TIMEOUT,
                resources=_resource_args(str(name), entry.resources),
                elicitation_handler=entry.elicitation_handler,
                sampling_handler=entry.sampling_handler,
                roots=tuple(entry.roots) if isinstance(entry.roots, list) else entry.roots,
                handler_timeout=entry.handler_timeout or DEFAULT_HANDLER_TIMEOUT,
                on_progress=entry.on_progress,
                task_calls=entry.task_calls,
                auth=entry.auth,
                protocol=entry.protocol,
                prefix=entry.prefix,
            )
        )
    return parsed


def _check_extras(server: str, entry: _Entry) -> None:
    """The handler, roots, task and auth settings of one entry, checked.

    Raises:
        ConfigurationError: a setting of the wrong kind, named with what it must be.
    """
    where = f"MCP server {server!r}: "
    for key in ("elicitation_handler", "sampling_handler", "on_progress"):
        value = getattr(entry, key)
        if value is not None and not callable(value):
            raise ConfigurationError(f"{where}{key} must be {MUST_BE[key]}, got {value!r:.60}.")
    if entry.roots is not None and not isinstance(entry.roots, list) and not callable(entry.roots):
        raise ConfigurationError(
            f"{where}roots must be {MUST_BE['roots']}, got {entry.roots!r:.60}."
        )
    for root in entry.roots if isinstance(entry.roots, list) else []:
        uri = root if isinstance(root, str) else getattr(root, "uri", None)
        if not str(uri or "").startswith("file://"):
            raise ConfigurationError(f"{where}roots must be {MUST_BE['roots']}, got {root!r:.60}.")
    if entry.protocol not in (*PROTOCOLS, *_modern_versions()):
        raise ConfigurationError(
            f"{where}protocol must be {MUST_BE['protocol']}, got {entry.protocol!r:.60}."
        )
    if entry.task_calls not in TASK_CALLS:
        raise ConfigurationError(
            f"{where}task_calls must be {MUST_BE['task_calls']}, got {entry.task_calls!r:.60}."
        )
    if entry.auth is not None:
        if entry.url is None:
            raise ConfigurationError(f"{where}auth needs a url: OAuth is for HTTP servers.")
        if not isinstance(entry.auth, Mapping) and not hasattr(entry.auth, "async_auth_flow"):
            raise ConfigurationError(
                f"{where}auth must be {MUST_BE['auth']}, got a {type(entry.auth).__name__}."
            )


def _modern_versions() -> tuple[str, ...]:
    """The per-request (2026-07-28 and later) revisions the installed ``mcp`` SDK speaks."""
    try:
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS
    except ImportError:  # no SDK: mcp_servers says so
        return ("2026-07-28",)
    return tuple(MODERN_PROTOCOL_VERSIONS)


def calls_as_task(server: ServerConfig, task_support: str) -> bool:
    """Whether a tool of ``server`` whose ``execution.taskSupport`` is ``task_support`` is
    called as a task (see ``ServerConfig.task_calls``)."""
    if task_support == "required":
        return True
    if task_support != "optional":
        return False
    if server.task_calls == "optional":
        return True
    long = server.timeout is None or server.timeout > LONG_CALL_SECONDS
    return server.task_calls == "auto" and long


RESOURCE_ARGS = ("reads_arg", "writes_arg")


def _resource_args(server: str, spec: Mapping[str, Any]) -> dict[str, dict[str, tuple[str, ...]]]:
    """A server's ``resources`` setting, checked: tool -> {"reads_arg"/"writes_arg": names}."""
    example = '{"edit_file": {"writes_arg": "path"}}'
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
