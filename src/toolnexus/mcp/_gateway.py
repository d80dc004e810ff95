"""The gateway: toolnexus as an MCP server that offers ``run_code`` over any tools.

An MCP client (Claude Desktop, Claude Code, Cursor, ...) gets one tool, ``run_code``, whose
description is the typed SDK of every tool behind the gateway (its own MCP servers' tools and
any toolnexus tools). A program's sub-calls go through the scheduling rule (reads overlap up to
the cap, anything else runs alone, commits in order), approvals are asked of the human through
MCP elicitation, progress is reported as calls start and finish, the client's cancellation stops
the program, and every sub-call is in the audit log.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import logging
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from mcp import types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError

from toolnexus._checks import positive_int, refuse_unknown
from toolnexus._version import __version__
from toolnexus.codemode import (
    RUN_CODE_BASE_DESCRIPTION,
    RUN_CODE_NAME,
    Execution,
    PermissionPolicy,
    RunContext,
    check_always_loaded,
    check_threshold,
    default_runtime,
    direct_dispatch,
    disclosed_sdk,
    disclosure_from,
    execution_from,
    filter_tools,
    render_sdk,
    run_program,
)
from toolnexus.codemode.runtimes import CodeRuntime, MontyRuntime
from toolnexus.errors import ConfigurationError
from toolnexus.mcp._config import BUDGET_KEYS
from toolnexus.mcp._lane import SessionLanes
from toolnexus.mcp._proxy import RAW_RESULT, Upstreams
from toolnexus.mcp._relay import CallScope, Parked, Refused, Relay, call_digest, current_call
from toolnexus.mcp._tasks import TaskSupport
from toolnexus.scheduling import max_tool_concurrency
from toolnexus.session import Session, events
from toolnexus.tools import Guards, Tool, ToolHooks, guards_from
from toolnexus.tools.tiers import DEFAULT_THRESHOLD, SEARCH_SCHEMA, TOOL_SEARCH, search_tools

__all__ = ["RESERVED_NAMES", "Gateway", "GatewayMode"]

logger = logging.getLogger("toolnexus.mcp")

GatewayMode = Literal["code", "both"]

RUN_CODE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "code": {"type": "string", "description": "The program to run."},
        "description": {"type": "string", "description": "One sentence saying what it does."},
    },
    "required": ["code"],
}

_LOGS: dict[str, Any] = {
    "type": "array",
    "description": "What the program printed: a string per stdout line, {stderr} per stderr line",
    "items": {"anyOf": [{"type": "string"}, {"type": "object"}]},
}
RUN_CODE_OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "{result, logs} when the program finished, {error, logs, calls} when not",
    "anyOf": [
        {
            "properties": {"result": {"description": "The program's last value"}, "logs": _LOGS},
            "required": ["result", "logs"],
        },
        {
            "properties": {
                "error": {
                    "type": "object",
                    "properties": {"kind": {"type": "string"}, "message": {"type": "string"}},
                    "required": ["kind", "message"],
                },
                "logs": _LOGS,
                "calls": {"type": "array", "items": {"type": "object"}},
            },
            "required": ["error", "logs"],
        },
    ],
}
"""What ``run_code`` answers, as its ``structuredContent`` (every answer, failures included)."""

RUN_CODE_TOOL = Tool(
    RUN_CODE_NAME,
    "A program (its class in the lane: no hints, so it runs alone)",
    RUN_CODE_SCHEMA,
    execute=lambda args: None,
    source="codemode",
)
"""``run_code`` as the client session's lane classifies it: as in-process, a tool without
hints (unsafe: it waits for the calls before it and runs alone)."""

RESERVED_NAMES = frozenset({RUN_CODE_NAME, TOOL_SEARCH})
"""The gateway's own tools: no tool behind it may take these names."""

MAX_SHOWN = 2000
"""The most characters of a call's arguments shown in an approval question; the rest is cut
with a marker saying how many characters were left out."""

MAX_NAMED = 50
"""The most tool names an unknown-tool error lists (then how many more there are)."""

DEFAULT_BUDGET = 120.0
"""Seconds a direct call's questions (approval, relayed requests) may wait for the client
when its tool sets no timeout; a program's are bounded by its sandbox's ``timeout``."""

APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"approve": {"type": "boolean", "description": "Run this call?"}},
    "required": ["approve"],
}


class Gateway:
    """``run_code`` (and, in ``"both"`` mode, the tools themselves) as an MCP server.

    Args:
        tools: The tools behind the gateway (MCP tools from ``mcp_servers``, ``@tool``
            functions, built-ins).
        language: ``"python"`` (Monty) or ``"javascript"`` (V8) programs.
        mode: ``"code"`` offers ``run_code`` only; ``"both"`` offers the tools as well.
        max_parallel: The most sub-calls of one program running at once (``None``: the
            ``TOOLNEXUS_MAX_TOOL_CONCURRENCY`` environment variable, else 10).
        policy: Which tools may be called at all (a denied tool is left out of the SDK and
            fails if called); `approval` adds to its ``approval_required``.
        budgets: The sandbox's limits (``timeout``, ``max_memory``, ``max_output``,
            ``max_sub_calls``) when no ``runtime`` is given.
        approval: Names of tools whose every call needs the human's consent (asked through
            MCP elicitation; a client without elicitation gets the call refused, never run).
            Programs' sub-calls and direct calls (``"both"`` mode) take the same approval
            path, the policy's included; only an accepted boolean ``true`` is consent.
        audit_log: A JSON-lines file that receives every session event (each program's
            ``code_run``, its sub-calls' ``tool_call`` events, direct calls, cancellations) as
            it happens; opened at once, so a path that cannot be written is refused here.
        runtime: The sandbox (the shared default for ``language`` otherwise).
        failures: Upstream servers that could not be reached, by name, with why: said in the
            ``run_code`` description, so the model knows what is missing.
        tier_threshold: With more tools than this (default 40), a ``tool_search`` tool is
            offered beside ``run_code``: it returns the typed SDK of the tools matching a
            query, for a client that looks tools up before writing the program.
        sdk_threshold: Bytes of rendered SDK above which the ``run_code`` description holds a
            compact index of the tools instead of their declarations (default 6,144), exactly
            as ``create_client``'s; programs look tools up with ``search_tools`` and
            ``describe_tool``, may call any tool, and the type checker still knows them all.
        always_loaded: Tool names declared in full beside the index.
        name: The server's name, as MCP clients show it.
        upstreams: The MCP servers behind the gateway as a proxy (`Upstreams`): their tools
            are listed and answered verbatim, and their resources, prompts, completion and
            logging are served (see ``toolnexus.mcp._proxy``).
        relay: Where the upstream servers' requests (sampling, elicitation, roots, progress)
            find the client call they belong to (see `Relay.handlers`); a fresh one by
            default.
        execution: An [`Execution`][toolnexus.codemode.Execution] giving ``max_parallel``
            (its ``max_tool_concurrency``), ``runtime``, ``sdk_threshold`` and
            ``always_loaded``; a keyword that says otherwise is refused.
        guards: A [`Guards`][toolnexus.tools.Guards] giving ``policy`` (its ``permissions``).
            Only permissions: the gateway asks its MCP client for consent (``approval``), so a
            Guards with an ``approval_handler`` or ``hooks`` is refused.

    Raises:
        ConfigurationError: a bad ``mode``, ``language`` or ``max_parallel``; an
            ``audit_log`` that cannot be opened for appending; two tools of one name, or one
            named like the gateway's own (`RESERVED_NAMES`).
    """

    def __init__(
        self,
        tools: Sequence[Tool],
        *,
        language: str = "python",
        mode: GatewayMode = "code",
        max_parallel: int | None = None,
        approval: Sequence[str] = (),
        policy: PermissionPolicy | None = None,
        budgets: Mapping[str, Any] | None = None,
        audit_log: str | Path | None = None,
        runtime: CodeRuntime | None = None,
        failures: dict[str, str] | None = None,
        tier_threshold: int = DEFAULT_THRESHOLD,
        sdk_threshold: int | None = None,
        always_loaded: Sequence[str] | None = None,
        name: str = "toolnexus",
        upstreams: Upstreams | None = None,
        relay: Relay | None = None,
        execution: Execution | None = None,
        guards: Guards | None = None,
    ) -> None:
        given = execution_from(execution, "Gateway", runtime=runtime, max_parallel=max_parallel)
        if given is not None:
            runtime = runtime if runtime is not None else given.runtime
            max_parallel = given.max_tool_concurrency
        sdk_threshold, always_loaded = disclosure_from(
            given, "Gateway", sdk_threshold, always_loaded
        )
        policy = _gateway_policy(guards, policy)
        if mode not in ("code", "both"):
            raise ConfigurationError(f"gateway mode must be 'code' or 'both', got {mode!r}.")
        if max_parallel is not None:
            positive_int("max_parallel", max_parallel)
        if policy is not None and not isinstance(policy, PermissionPolicy):
            raise ConfigurationError(f"policy must be a PermissionPolicy, got {policy!r}.")
        self.runtime = runtime if runtime is not None else _runtime(language, budgets)
        self.mode = mode
        self.max_parallel = max_tool_concurrency(max_parallel)
        self.policy = policy
        self.session = Session()
        self.audit_log = _writable(audit_log)
        self._audited = 0  # session events already written to the audit log
        self._ids = itertools.count(1)  # audit ids, unique across every client of the gateway
        self._approval = frozenset(approval)
        self._failures = dict(failures or {})
        self._tier_threshold = tier_threshold
        self._sdk_threshold = check_threshold(sdk_threshold)
        self._always_loaded = check_always_loaded(always_loaded)
        self._clients: weakref.WeakSet[Any] = weakref.WeakSet()  # connections, see _remember
        self.upstreams = upstreams
        self.lanes = SessionLanes(self.max_parallel)  # one per client session (`_lane`)
        self.relay = relay if relay is not None else Relay()
        self._parked = Parked()
        self._bus = InMemorySubscriptionBus()  # 2026-07-28 clients listen for list changes
        self._offer(tools)
        self.server: Server[Any] = _Server(
            name,
            version=__version__,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=ListenHandler(self._bus),
        )
        # request states (InputRequiredResult rounds) sealed under a key of this process
        self.server.middleware.append(
            RequestStateBoundary(RequestStateSecurity.ephemeral(), default_audience=name)
        )
        if upstreams is not None:
            upstreams.install(self.server, lambda: list(self._clients), self._bus.publish)
        self.tasks = TaskSupport(self)  # tools/call as MCP tasks, tasks/* (see _tasks.py)

    def _offer(self, tools: Sequence[Tool]) -> None:
        """Take ``tools`` as the gateway's tools, and render the description they give.

        Raises:
            ConfigurationError: two tools share a name, or one takes a name of the gateway's
                own tools (``run_code``, ``tool_search``): one of them could not be reached.
        """
        _check_names(tools)
        self.tools = [
            dataclasses.replace(t, requires_approval=True) if t.name in self._approval else t
            for t in tools
        ]
        self.granted = filter_tools(self.tools, self.policy)
        self.tiered = len(self.granted) > self._tier_threshold
        sdk = disclosed_sdk(
            self.runtime.language,
            self.granted,
            threshold=self._sdk_threshold,
            always_loaded=self._always_loaded,
        )
        self.description = _description(sdk, self._failures)

    async def update(self, tools: Sequence[Tool]) -> None:
        """Offer ``tools`` from now on (an upstream server's tool list changed): the SDK is
        rendered again and every connected client is sent ``notifications/tools/list_changed``
        (clients re-list; a client that went away is skipped)."""
        self._offer(tools)
        await self._bus.publish(ToolsListChanged())
        for client in list(self._clients):
            try:
                await client.send_tool_list_changed()
            except Exception:
                logger.debug("could not tell a client that the tools changed", exc_info=True)

    def _remember(self, session: ServerSession) -> None:
        """Keep the client's connection, to tell it later that the tools changed.

        Why the connection: a ``ServerSession`` is made per request in this SDK version and its
        notifications ride that request's stream; the connection outlives both and has a
        channel of its own. The SDK offers no public accessor for it.
        """
        connection = getattr(session, "_connection", None)
        if connection is not None:
            self._clients.add(connection)

    # -- MCP handlers ----------------------------------------------------------------------------

    async def _list_tools(
        self, ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        self._remember(ctx.session)
        offered = [
            types.Tool(
                name=RUN_CODE_NAME,
                description=self.description,
                input_schema=RUN_CODE_SCHEMA,
                output_schema=RUN_CODE_OUTPUT_SCHEMA,
            )
        ]
        if self.tiered:
            offered.append(
                types.Tool(
                    name=TOOL_SEARCH,
                    description="Find tools for run_code programs by what they do; returns "
                    "the typed SDK of the best matches.",
                    input_schema=SEARCH_SCHEMA,
                    annotations=types.ToolAnnotations(read_only_hint=True),
                )
            )
        if self.mode == "both":
            offered += [self._listing(t) for t in self.granted]
        return types.ListToolsResult(tools=offered)

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> Any:
        """One ``tools/call``: ``run_code``, ``tool_search`` or a tool itself.

        The call runs in a `CallScope`, which carries its questions (approvals, relayed
        upstream requests) to this client: inline before 2026-07-28, as
        ``InputRequiredResult`` rounds on it (a round's ``requestState`` resumes the call).

        Raises:
            MCPError: (-32602) an unknown tool, naming the tools there are; a
                ``requestState`` this gateway did not issue, or one answered already.
        """
        self._remember(ctx.session)
        call = call_digest(params.name, params.arguments)
        if params.request_state is not None:
            responses = params.input_responses
            return await self._parked.resume(ctx, params.request_state, responses, call)
        arguments = dict(params.arguments or {})
        if params.name == TOOL_SEARCH and self.tiered:
            return self._search(arguments)
        lane = _client_session(ctx)
        if params.name == RUN_CODE_NAME:
            budget = _budget(self.runtime)

            def work(scope: CallScope) -> Any:
                return self._run_code(scope, arguments)

            return await self.lanes.run(
                lane,
                RUN_CODE_TOOL,
                arguments,
                lambda: self._in_scope(CallScope(ctx, budget=budget, call=call), work),
            )
        tool = next((t for t in self.granted if t.name == params.name), None)
        if self.mode != "both" or tool is None:
            raise MCPError(code=types.INVALID_PARAMS, message=self._unknown(params.name))
        found = tool

        def direct(scope: CallScope) -> Any:
            return self._direct(scope, found, arguments)

        budget = tool.timeout or DEFAULT_BUDGET
        scope = CallScope(ctx, budget=budget, forward_progress=True, call=call)
        return await self.lanes.run(lane, tool, arguments, lambda: self._in_scope(scope, direct))

    def _listing(self, tool: Tool) -> types.Tool:
        """A tool as the client sees it listed: an upstream's as its server listed it."""
        listed = self.upstreams.listing(tool) if self.upstreams is not None else None
        return listed if listed is not None else _listed(tool)

    def _unknown(self, name: str) -> str:
        offered = [RUN_CODE_NAME, *([TOOL_SEARCH] if self.tiered else [])]
        if self.mode == "both":
            offered += [t.name for t in self.granted]
        shown = ", ".join(offered[:MAX_NAMED])
        if len(offered) > MAX_NAMED:
            shown += f" and {len(offered) - MAX_NAMED} more (see tools/list)"
        return f"Unknown tool {name!r}; the tools are: {shown}"

    async def _in_scope(self, scope: CallScope, work: Callable[[CallScope], Any]) -> Any:
        """Run ``work`` for one call, known to the relay while it runs (see `CallScope`)."""

        async def tracked(scope: CallScope) -> Any:
            self.relay.active.add(scope)
            try:
                return await work(scope)
            finally:
                self.relay.active.discard(scope)

        if scope.modern:
            return await self._parked.start(scope, tracked)
        token = current_call.set(scope)
        try:
            return await tracked(scope)
        finally:
            current_call.reset(token)

    # -- run_code --------------------------------------------------------------------------------

    async def _run_code(self, scope: CallScope, arguments: dict[str, Any]) -> types.CallToolResult:
        code = arguments.get("code")
        if not isinstance(code, str) or not code.strip():
            return _program_failed("run_code needs the program as a non-empty string in 'code'")
        call_id = self._audit_id()
        progress = _Progress(scope, self.relay, self.flush_audit)
        try:
            output = await run_program(
                code,
                self.tools,
                runtime=self.runtime,
                policy=self.policy,
                session=self.session,
                max_parallel=self.max_parallel,
                approval_handler=self._approver(scope, "A program", call_id),
                hooks=ToolHooks(before=[progress.started], after=[progress.finished]),
                call_id=call_id,
                description=_text(arguments.get("description")) or "a program",
            )
        except BaseException:  # the client cancelled (or the server is going down)
            self.session.log_event(*events.code_run_cancelled(call_id))
            raise
        finally:
            self.flush_audit()
        await progress.ended_run()
        text = json.dumps(output, ensure_ascii=False)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content=output,
            is_error="error" in output,
        )

    def _search(self, arguments: dict[str, Any]) -> types.CallToolResult:
        query = arguments.get("query")
        limit = arguments.get("limit", 10)
        if not isinstance(query, str) or not isinstance(limit, int) or isinstance(limit, bool):
            return _failed("tool_search needs a query (a string) and an optional limit (an int)")
        hits = search_tools(self.granted, query, max(1, min(limit, 50)))
        if not hits:
            return _failed(f"no tool matches {query!r}; try other words")
        sdk = render_sdk(self.runtime.language, hits)
        declarations = "\n".join(
            line for line in sdk.splitlines() if not line.startswith(("# ", "// "))
        )
        return types.CallToolResult(content=[types.TextContent(type="text", text=declarations)])

    def _audit_id(self) -> str:
        """A fresh audit id (``mcp-<n>``): request ids repeat across clients, these do not."""
        return f"mcp-{next(self._ids)}"

    async def _direct(self, scope: CallScope, tool: Tool, arguments: dict[str, Any]) -> Any:
        """One tool called directly (``"both"`` mode), by the path a program's sub-call takes
        (`direct_dispatch`: the policy's ``approval_required`` and ``strict`` mode, the
        ``approval`` option, elicitation), and in the audit log as it starts and ends."""
        call_id = self._audit_id()
        started = events.ToolCallData(
            id=call_id, name=tool.name, arguments=arguments, source="mcp_direct"
        )
        self.session.log_event(events.TOOL_CALL, started)
        self.flush_audit()
        run_ctx: RunContext[Any] = RunContext(
            policy=self.policy,
            approval_handler=self._approver(scope, "The client", call_id),
            session=self.session,
            call_id=call_id,
        )
        called = tool if self.upstreams is None else self.upstreams.verbatim(tool)
        flight = (
            self.upstreams.in_flight(tool, scope.session, scope.request_id)
            if self.upstreams is not None
            else contextlib.nullcontext()
        )
        self.relay.enter(scope, tool.name)
        try:
            with flight:
                outcome = await direct_dispatch(called, arguments, run_ctx)
        except BaseException:  # the client cancelled (or the server is going down)
            self.session.log_event(*events.tool_call_cancelled(call_id))
            self.flush_audit()
            raise
        finally:
            self.relay.leave(scope, tool.name)
        self.session.append(*events.tool_result(call_id, tool.name, outcome.text, not outcome.ok))
        self.flush_audit()
        raw = (outcome.metadata or {}).get(RAW_RESULT)
        if isinstance(raw, types.CallToolResult):
            return raw  # the upstream's answer, verbatim
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=outcome.text)], is_error=not outcome.ok
        )

    def _approver(self, scope: CallScope, who: str, call_id: str) -> Any:
        """An approval handler asking ``scope``'s client (see `ask_approval`), each outcome in
        the audit log (``approval_answer``: the call, the tool and how it was answered)."""

        async def approve(name: str, args: dict[str, Any]) -> bool:
            outcome = await ask_approval(scope, who, name, args)
            answer = events.ApprovalAnswerData(id=call_id, tool=name, outcome=outcome)
            self.session.log_event(events.APPROVAL_ANSWER, answer)
            self.flush_audit()
            return outcome == "approved"

        return approve

    def flush_audit(self) -> None:
        """Append the session events not yet in the audit log (called as calls start and end,
        so the log is current while a program runs, and a crash loses nothing before it).

        A write that fails (the disk filled, the file was removed with its folder) is logged,
        never raised into a program or call (which would show it the host path); the events
        stay queued and are written by the next flush that succeeds.
        """
        if self.audit_log is None:
            return
        events = self.session.events[self._audited :]
        if not events:
            return
        try:
            # backslashreplace: a lone surrogate in an argument is written escaped, not refused
            with self.audit_log.open("a", encoding="utf-8", errors="backslashreplace") as log:
                log.write("".join(event.json_line() for event in events))
        except OSError as exc:
            logger.error("could not write the audit log: %s", exc.strerror or exc)
            return
        self._audited += len(events)


class _Progress:
    """Progress notifications for one program: one step each time a sub-call starts or ends,
    so the progress strictly increases; the total is given once known (the program ended).
    Each message names the sub-call (its tool and its number in the program)."""

    def __init__(self, scope: CallScope, relay: Relay, flush: Callable[[], None]) -> None:
        self.scope = scope
        self.relay = relay
        self.flush = flush
        self.step = 0
        self.begun = 0
        self.ended = 0
        self.numbers: dict[int, int] = {}  # id of a call's args -> its number

    async def started(self, name: str, args: dict[str, Any], ctx: Any) -> None:
        self.begun += 1
        self.numbers[id(args)] = self.begun
        self.relay.enter(self.scope, name)
        self.flush()
        await self._report(f"call {self.begun} ({name}) started")

    async def finished(self, name: str, args: dict[str, Any], outcome: Any, ctx: Any) -> None:
        self.ended += 1
        self.relay.leave(self.scope, name)
        self.flush()
        number = self.numbers.pop(id(args), self.ended)
        await self._report(f"call {number} ({name}) finished")

    async def ended_run(self) -> None:
        """The last step: the program ended, so the total is known."""
        self.step += 1
        await self.scope.report_progress(
            self.step, self.step, f"the program ended ({self.ended} of {self.begun} calls done)"
        )

    async def _report(self, message: str) -> None:
        self.step += 1
        await self.scope.report_progress(
            self.step, None, f"{message} ({self.ended} of {self.begun} calls done)"
        )


async def ask_approval(scope: CallScope, who: str, name: str, args: dict[str, Any]) -> str:
    """Ask ``scope``'s client's human whether ``who`` (``"A program"``, ``"The client"``)
    may call ``name`` with ``args``, by form elicitation on the generation the client
    negotiated; how it was answered: ``"approved"`` or why not (``"denied"``,
    ``"declined"``, ``"cancelled"``, ``"timeout"``, ``"malformed"``, ``"no_capability"``,
    ``"error"``).

    Consent is only an accepted answer whose ``approve`` is the boolean ``true`` of
    `APPROVAL_SCHEMA` (``"false"``, ``1`` or a missing key are malformed). The arguments are
    shown whole up to `MAX_SHOWN` characters, else cut with a marker saying how much was
    left out (so padding cannot push the part that matters out of sight unnoticed).
    """
    request = types.ElicitRequest(
        params=types.ElicitRequestFormParams(
            message=f"{who} wants to call {name} with {shown(args)}. Allow it?",
            requested_schema=APPROVAL_SCHEMA,
        )
    )
    try:
        answer = await scope.ask(request, types.ElicitResult)
    except Refused as refused:
        return refused.kind
    if answer.action == "decline":
        return "declined"
    if answer.action == "cancel":
        return "cancelled"
    content = answer.content if isinstance(answer.content, dict) else {}
    approve = content.get("approve")
    if approve is True:
        return "approved"
    return "denied" if approve is False else "malformed"


def shown(args: dict[str, Any]) -> str:
    """A call's arguments as the human sees them: JSON, whole, or cut at `MAX_SHOWN`
    characters with a marker saying how many more there were."""
    text = json.dumps(args, ensure_ascii=False)
    if len(text) <= MAX_SHOWN:
        return text
    left_out = len(text) - MAX_SHOWN
    return (
        f"{text[:MAX_SHOWN]} [... CUT: {left_out:,} more characters of the arguments are not "
        "shown; refuse unless you know what they hold]"
    )


def _writable(audit_log: str | Path | None) -> Path | None:
    """The audit log's path, once it is known to be writable (opened to append, created if
    need be), so a bad path stops the gateway at start rather than failing each program.

    Raises:
        ConfigurationError: the file cannot be opened for appending, saying why.
    """
    if audit_log is None:
        return None
    if not isinstance(audit_log, (str, Path)) or not str(audit_log):
        raise ConfigurationError(f"audit_log must be a file path, got {audit_log!r}.")
    path = Path(audit_log)
    try:
        with path.open("a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise ConfigurationError(
            f"the audit log {path} cannot be written ({exc.strerror or exc}); give a file in a "
            "folder this process may write to."
        ) from None
    return path


def _check_names(tools: Sequence[Tool]) -> None:
    """Refuse tools that could not all be reached by name.

    Raises:
        ConfigurationError: a name given twice, or one of `RESERVED_NAMES`, naming it.
    """
    seen: set[str] = set()
    for tool in tools:
        if tool.name in RESERVED_NAMES:
            raise ConfigurationError(
                f"a tool is named {tool.name!r}, a name of the gateway's own tools "
                f"({', '.join(sorted(RESERVED_NAMES))}); rename it."
            )
        if tool.name in seen:
            raise ConfigurationError(
                f"two tools are named {tool.name!r}; only one could be called: rename one."
            )
        seen.add(tool.name)


class _Server(Server[Any]):
    """The SDK's server, announcing ``listChanged`` to handshake clients on every transport
    for each list it serves (the SDK declares a capability only for a list it has a handler
    of): ``tools`` (sent when an upstream's tools change), ``resources`` and ``prompts``
    (the upstreams' changes passed on, see `Upstreams.install`); 2026-07-28 clients get
    these from ``subscriptions/listen``."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        changes = NotificationOptions(
            tools_changed=True, prompts_changed=True, resources_changed=True
        )
        return super().create_initialization_options(
            notification_options or changes,
            experimental_capabilities,
            extensions,
        )


def _gateway_policy(
    guards: Guards | None, policy: PermissionPolicy | None
) -> PermissionPolicy | None:
    """The gateway's policy: ``policy``, or ``guards``' permissions.

    Raises:
        ConfigurationError: both disagree, or ``guards`` holds what a gateway cannot run.
    """
    if guards is None:
        return policy
    guarded = guards_from(guards, "Gateway", policy=policy)
    if guarded.approval_handler is not None or guarded.hooks is not None:
        raise ConfigurationError(
            "Gateway guards= takes permissions only: the gateway asks its MCP client for "
            "consent (approval=[tool names]) and runs no hooks of its own; leave "
            "approval_handler and hooks out of the Guards."
        )
    return guarded.permissions


def _budget(runtime: CodeRuntime) -> float:
    """Seconds a program's questions may wait: its sandbox's time budget."""
    timeout = getattr(getattr(runtime, "budgets", None), "timeout", None)
    return float(timeout) if isinstance(timeout, (int, float)) else DEFAULT_BUDGET


def _runtime(language: str, budgets: Mapping[str, Any] | None) -> CodeRuntime:
    """The shared runtime for ``language``, or a runtime of its own with ``budgets``."""
    if not budgets:
        return default_runtime(language)
    refuse_unknown(budgets, BUDGET_KEYS, "budget(s)")
    if language == "javascript":
        from toolnexus.codemode.runtimes import V8Runtime

        return V8Runtime(**budgets)
    if language != "python":
        raise ConfigurationError(f"language must be 'python' or 'javascript', got {language!r}.")
    return MontyRuntime(**budgets)


def _description(sdk: str, failures: dict[str, str] | None) -> str:
    text = f"{RUN_CODE_BASE_DESCRIPTION}\n\n{sdk}"
    if failures:
        missing = "; ".join(f"{name}: {why}" for name, why in sorted(failures.items()))
        text += f"\n\nUnavailable servers (their tools are not above): {missing}"
    return text


def _listed(tool: Tool) -> types.Tool:
    hints = tool.hints
    annotations = None
    if hints is not None:
        annotations = types.ToolAnnotations(
            read_only_hint=hints.read_only,
            destructive_hint=hints.destructive,
            idempotent_hint=hints.idempotent,
            open_world_hint=hints.open_world,
        )
    return types.Tool(
        name=tool.name,
        description=tool.description,
        input_schema=tool.input_schema,
        annotations=annotations,
    )


def _client_session(ctx: Any) -> Any:
    """What one client session's lane is keyed on: its connection (see `_remember`)."""
    return getattr(ctx.session, "_connection", None) or ctx.session


def _program_failed(message: str) -> types.CallToolResult:
    """A ``run_code`` call refused before anything ran, in `RUN_CODE_OUTPUT_SCHEMA`'s shape."""
    output = {"error": {"kind": "invalid_arguments", "message": message}, "logs": [], "calls": []}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(output))],
        structured_content=output,
        is_error=True,
    )


def _failed(message: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)], is_error=True
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
