"""``run_program`` and the ``run_code`` tool: one program, one scheduler lane, one report.

A run: render the SDK of the granted tools, start a [`Scheduler`][toolnexus.scheduling.Scheduler]
for this run alone (``call_id`` = the model's tool-call id), bind every tool (denied ones as
stubs) with the lane as their dispatch, hand the program to the runtime, and stop the lane when
the run ends, whatever happened. Sub-call audit events land in the caller's ``Session`` as
bookkeeping events: the model's messages do not change. See ``docs/codemode.md``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from toolnexus._checks import positive_number
from toolnexus._json import encodable_data, json_problem
from toolnexus._snapshot import safe_repr
from toolnexus._text import clip_middle_bytes
from toolnexus._tracing import code_run_span, record_code_run
from toolnexus.codemode._bindings import Binding, bindings
from toolnexus.codemode._discovery import (
    DESCRIBE_TOOL,
    MAX_QUERY_CHARS,
    SEARCH_TOOLS,
    ToolIndex,
    check_always_loaded,
    check_threshold,
    checker_sdk,
    disclosed_sdk,
)
from toolnexus.codemode._execution import Execution, disclosure_from, execution_from
from toolnexus.codemode._modes import RUN_CODE_NAME, parse_mode
from toolnexus.codemode._sdk import render_sdk
from toolnexus.codemode.runtimes._base import MAX_LOOKUPS
from toolnexus.errors import ConfigurationError
from toolnexus.scheduling import AuditNaming, Outcome, Scheduler, snapshot
from toolnexus.session import Session, events
from toolnexus.tools import (
    ApprovalHandler,
    Guards,
    PermissionPolicy,
    RunContext,
    Tool,
    ToolHooks,
    ToolResult,
    dispatch_call,
    filter_tools,
    guards_from,
)

if TYPE_CHECKING:
    from toolnexus.codemode.runtimes import CodeRuntime, RunReport

__all__ = [
    "ENV_CODE_RUN_TIMEOUT",
    "RUN_CODE_BASE_DESCRIPTION",
    "await_timeout",
    "default_runtime",
    "program_output",
    "run_code_tool",
    "run_program",
    "runtime_available",
    "visible_tools",
]

logger = logging.getLogger("toolnexus.codemode")

ENV_CODE_RUN_TIMEOUT = "TOOLNEXUS_CODE_RUN_TIMEOUT"
DEFAULT_AWAIT_TIMEOUT = 120.0
MAX_FAILURE_BYTES = 4000
"""The most bytes (UTF-8) of a failed run's message handed to the model; the middle of a
longer one is cut, and the marker says how many bytes."""
PATIENCE_GRACE_SECONDS = 5.0
"""How long past ``await_timeout`` to wait for a runtime that does not stop its run itself."""

RUN_CODE_BASE_DESCRIPTION = (
    "Run a program that calls tools as functions: loops, branches, fan-out in one step. Only "
    'what it prints or returns comes back: {"result", "logs"}, or {"error": {"kind", '
    '"message"}, "logs", "calls"}, where calls says which tool calls already ran. A failed '
    "program is never re-run for you."
)

_LANGUAGES = ("python", "javascript")
"""The languages a runtime may run; each is also the language of the SDK its programs see."""

CODE_MODE_NAMING = AuditNaming("code_mode", "code")
"""How Code Mode's lanes audit a program's sub-calls: ``"source": "code_mode"``, ids
``"<run_code call id>:code:<n>"`` (the durable program workflow names them the same)."""

_DEFAULT_RUNTIMES: dict[str, CodeRuntime] = {}


def await_timeout(explicit: float | None = None) -> float:
    """How long a caller waits for one run, in seconds: the caller's patience, not a budget.

    Sources: ``explicit``, then ``TOOLNEXUS_CODE_RUN_TIMEOUT``, then 120. Past it the run is
    cancelled and reported as ``timeout``.

    Raises:
        ConfigurationError: a value that is not a positive number, naming its source.
    """
    if explicit is not None:
        if not positive_number(explicit):
            raise ConfigurationError(
                f"await_timeout must be a positive number of seconds, got {explicit!r}."
            )
        return float(explicit)
    raw = os.environ.get(ENV_CODE_RUN_TIMEOUT)
    if raw is None or not raw.strip():
        return DEFAULT_AWAIT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not positive_number(value):
        raise ConfigurationError(
            f"{ENV_CODE_RUN_TIMEOUT}={raw!r} is not a positive number of seconds; fix or unset it."
        )
    return value


_patience = await_timeout  # run_program's parameter of the same name shadows the function


def default_runtime(language: str = "python") -> CodeRuntime:
    """The process-wide runtime for ``language`` (``MontyRuntime`` / ``V8Runtime``), shared.

    Raises:
        ConfigurationError: an unknown language, or a runtime whose package is not installed.
    """
    if language not in _LANGUAGES:
        raise ConfigurationError(
            f"Code Mode language must be 'python' or 'javascript', got {language!r}."
        )
    runtime = _DEFAULT_RUNTIMES.get(language)
    if runtime is None:
        from toolnexus.codemode.runtimes import MontyRuntime, V8Runtime

        runtime = MontyRuntime() if language == "python" else V8Runtime()
        _DEFAULT_RUNTIMES[language] = runtime
    return runtime


def runtime_available(runtime: CodeRuntime | None = None) -> bool:
    """Whether ``run_code`` can run: a runtime was given, or the default one is installed."""
    if runtime is not None:
        return True
    try:
        import pydantic_monty  # noqa: F401
    except ImportError:
        return False
    return True


class _CallLog:
    """Every sub-call the program started, in order, with its status."""

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []

    def started(self, name: str, args: Any) -> dict[str, Any]:
        entry: dict[str, Any] = {"name": name, "arguments": snapshot(args), "status": "abandoned"}
        self.entries.append(entry)
        return entry

    @staticmethod
    def finished(entry: dict[str, Any], outcome: Outcome) -> None:
        if outcome.error is None:
            entry["status"] = "ok"
        elif outcome.reason in ("abandoned", "gone"):
            entry["status"] = "abandoned"
        else:
            entry["status"] = "error"
            entry["message"] = outcome.error["message"]


def _tool_caller(named: dict[str, Binding], log: _CallLog) -> Any:
    async def call_tool(name: str, args: Any) -> Outcome:
        entry = log.started(name, args)
        binding = named.get(name)
        problem = json_problem(args, "arguments", foreign_ok=True)
        if binding is None:
            outcome = Outcome.failure(name, f"no tool named '{name}'")
        elif problem:
            outcome = Outcome.failure(name, f"{problem}; nothing was run")
        else:
            outcome = _deliverable(name, await binding.call(args))
        log.finished(entry, outcome)
        return outcome

    return call_tool


def _hosts(runtime: CodeRuntime) -> bool:
    """Whether ``runtime.run`` takes ``call_host`` (a runtime written before the host functions
    existed does not: its programs get no ``search_tools``, and it still runs). Asked once per
    runtime class."""
    kind = type(runtime)
    known = _HOSTS.get(kind)
    if known is None:
        try:
            parameters = inspect.signature(runtime.run).parameters
        except (TypeError, ValueError):
            parameters = {}  # type: ignore[assignment]  # nothing known: no host functions
        known = _HOSTS[kind] = "call_host" in parameters or any(
            p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
        )
    return known


_HOSTS: dict[type, bool] = {}


def _host_caller(index: ToolIndex, session: Session | None, call_id: str | None) -> Any:
    """``call_host`` for one run: ``search_tools`` and ``describe_tool`` answered from
    ``index`` (the granted tools only), each logged in ``session`` as a bookkeeping event
    (``tool_search`` / ``tool_describe``), never as a tool call or a message. At most
    `MAX_LOOKUPS` per run are answered."""

    lookups = 0

    def call_host(function: str, args: Any) -> Outcome:
        nonlocal lookups
        lookups += 1
        if lookups > MAX_LOOKUPS:  # not logged: the bound is what keeps the session small
            return Outcome.failure(
                function,
                f"the program made more than {MAX_LOOKUPS} lookups (search_tools, "
                "describe_tool) in this run; use what it found",
            )
        fields = args if isinstance(args, dict) else {}
        try:
            if function == SEARCH_TOOLS:
                query, limit = fields.get("query"), fields.get("limit", 5)
                value: Any = index.search(query, limit)  # type: ignore[arg-type]
                found = [hit["name"] for hit in value]
                event: Mapping[str, Any] = events.ToolSearchData(
                    id=call_id, query=_cut(query), limit=limit, found=found
                )
                kind = events.TOOL_SEARCH
            elif function == DESCRIBE_TOOL:
                name = fields.get("name")
                value = index.describe(name)  # type: ignore[arg-type]
                event, kind = events.ToolDescribeData(id=call_id, name=name), events.TOOL_DESCRIBE
            else:
                return Outcome.failure(function, f"no host function named {function!r}")
        except (ValueError, LookupError) as exc:
            message = _cut(str(exc))
            if session is not None:
                session.log_event(*_failed_lookup(call_id, function, fields, message))
            return Outcome.failure(function, message)
        if session is not None:
            session.log_event(kind, encodable_data(event))
        return Outcome(value=value)

    return call_host


def _cut(value: Any) -> Any:
    """What an audit line keeps of a program's value: a string cut to the `MAX_QUERY_CHARS` a
    search reads (a program can pass megabytes, every lookup of a run is logged); an int as it
    is; anything else the short ``repr()`` of it."""
    if isinstance(value, str):
        return value if len(value) <= MAX_QUERY_CHARS else value[:MAX_QUERY_CHARS] + "..."
    if value is None or (isinstance(value, int) and abs(value) < 10**18):
        return value
    return _cut(safe_repr(value)[:100])


def _failed_lookup(
    call_id: str | None, function: str, fields: Mapping[str, Any], message: str
) -> tuple[str, Mapping[str, Any]]:
    """A failed lookup's audit line. Why built field by field: the program chose ``fields``; a
    line holds only what the host decided (the call id, the function, the error) and the
    bounded arguments the lookup reads, never keys the program adds."""
    wanted = ("query", "limit") if function == SEARCH_TOOLS else ("name",)
    line: dict[str, Any] = {"id": call_id, "function": function, "error": message}
    line.update({key: _cut(fields[key]) for key in wanted if key in fields})
    kind = events.TOOL_SEARCH if function == SEARCH_TOOLS else events.TOOL_DESCRIBE
    return kind, encodable_data(line)


def _deliverable(name: str, outcome: Outcome) -> Outcome:
    """``outcome``, or a failure when its value cannot be handed to a program as it is.

    Why fail rather than mend: a program that gets a lone surrogate, a huge integer or a
    structure cut off at some depth would compute on a value the tool never returned. Host
    objects (a ``datetime``, say) still arrive as their ``repr()``, as documented.
    """
    if outcome.error is not None:
        return outcome
    problem = json_problem(outcome.value, "the result", foreign_ok=True)
    if problem is None:
        return outcome
    return Outcome.failure(name, f"{problem}, so it cannot be passed to the program")


def _check_program(code: object, runtime: CodeRuntime) -> None:
    if not isinstance(code, str):
        raise ConfigurationError(f"code must be a string, got {type(code).__name__}.")
    if not hasattr(runtime, "run") or getattr(runtime, "language", None) not in _LANGUAGES:
        raise ConfigurationError(
            f"runtime must be a CodeRuntime (MontyRuntime, V8Runtime), got {runtime!r}."
        )


async def run_program(
    code: str,
    tools: Sequence[Tool],
    *,
    language: str = "python",
    runtime: CodeRuntime | None = None,
    policy: PermissionPolicy | None = None,
    session: Session | None = None,
    max_parallel: int | None = None,
    approval_handler: ApprovalHandler | None = None,
    hooks: ToolHooks | None = None,
    call_id: str | None = None,
    deps: Any = None,
    await_timeout: float | None = None,
    description: str | None = None,
    execution: Execution | None = None,
    guards: Guards | None = None,
) -> dict[str, Any]:
    """Run one program exactly as the ``run_code`` tool does, and return its output.

    Args:
        code: The program (Python for ``MontyRuntime``, JavaScript for ``V8Runtime``).
        tools: Every tool; the policy decides which the program may call (the rest are stubs).
        language: ``"python"`` or ``"javascript"``, used to pick the default runtime when
            ``runtime`` is not given (a given runtime's own language wins).
        runtime: The sandbox to run in; the shared default for ``language`` otherwise.
        policy: The permission policy; ``None`` grants every tool.
        session: Receives one bookkeeping ``tool_call`` event per sub-call.
        max_parallel: The most sub-calls executing at once (default 10).
        approval_handler: Consulted for every sub-call that needs approval.
        hooks: Before/after hooks run around every sub-call.
        call_id: The model's tool-call id, stamped into the audit events' ids.
        deps: What tools taking a ``ctx`` see as ``ctx.deps``.
        await_timeout: The caller's patience in seconds (see
            [`await_timeout`][toolnexus.codemode.await_timeout]).
        description: What the program does, in one sentence; with a ``session``, logged as a
            bookkeeping ``code_run`` event ahead of the run's ``tool_call`` events.
        execution: An [`Execution`][toolnexus.codemode.Execution] giving the cap (its
            ``cap``: the environment's, else 10, when it leaves it out) and the runtime.
        guards: A [`Guards`][toolnexus.tools.Guards] instead of ``policy``,
            ``approval_handler`` and ``hooks``.

    Returns:
        ``{"result": value, "logs": [...]}``, or ``{"error": {"kind", "message"}, "logs": [...],
        "calls": [...]}``; never raises for anything the program does.

    Raises:
        ConfigurationError: bad arguments (not a program's fault), or an object and a keyword
            setting the same option differently, before anything runs.

    Example::

        out = await run_program("await tools.add({'a': 1, 'b': 2})", [add])
        out["result"]   # 3
    """
    given = execution_from(execution, "run_program", runtime=runtime, max_parallel=max_parallel)
    guarded = guards_from(
        guards, "run_program", policy=policy, approval_handler=approval_handler, hooks=hooks
    )
    runtime = runtime if given is None or runtime is not None else given.runtime
    chosen = runtime if runtime is not None else default_runtime(language)
    _check_program(code, chosen)
    granted = filter_tools(tools, guarded.permissions)
    sdk = checker_sdk(chosen.language, render_sdk(chosen.language, granted))
    return await _execute(
        code,
        tools,
        chosen,
        sdk,
        ToolIndex(granted, chosen.language),
        guarded,
        session=session,
        max_parallel=_program_cap(given, max_parallel),
        call_id=call_id,
        deps=deps,
        patience=_patience(await_timeout),
        description=description,
    )


def _program_cap(execution: Execution | None, max_parallel: int | None) -> int:
    """A program's cap: ``execution``'s, else ``max_parallel``, else 10."""
    if execution is not None:
        return execution.cap
    return 10 if max_parallel is None else max_parallel


async def _execute(
    code: str,
    tools: Sequence[Tool],
    chosen: CodeRuntime,
    sdk: str,
    index: ToolIndex,
    guards: Guards,
    *,
    session: Session | None,
    max_parallel: int,
    call_id: str | None,
    deps: Any,
    patience: float,
    description: str | None,
) -> dict[str, Any]:
    """One run against an SDK already rendered (``run_code`` renders it once, when built)."""
    log = _CallLog()
    ctx = guards.context(deps, session=session, call_id=call_id)
    if session is not None and description is not None:
        kind, event = events.code_run(call_id, chosen.language, description)
        session.log_event(kind, encodable_data(event))  # the model's text, mended
    # The span is current while the lane is made, so the sub-calls' spans nest under it.
    with code_run_span(chosen.language, call_id) as span:
        lane = Scheduler(
            dispatch_call,
            session=session,
            max_parallel=max_parallel,
            call_id=call_id,
            naming=CODE_MODE_NAMING,
        )
        try:
            binds = bindings(tools, guards.permissions, ctx, dispatch=lane.dispatch_fun())
            call_tool = _tool_caller({b.name: b for b in binds}, log)
            host = {"call_host": _host_caller(index, session, call_id)} if _hosts(chosen) else {}
            run = chosen.run(
                code,
                tool_names=[b.name for b in binds],
                call_tool=call_tool,
                sdk=sdk,
                patience=patience,
                **host,
            )
            report: RunReport | None
            # The runtime honours patience itself; this guards against one that does not. Why
            # asyncio.timeout and not wait_for: wait_for (3.11) runs the run in a task of its
            # own, a task and two loop turns more per run.
            try:
                async with asyncio.timeout(patience + PATIENCE_GRACE_SECONDS):
                    report = await run
            except TimeoutError:
                report = None
        finally:
            await lane.stop()
        output = _output(report, patience, log)
        record_code_run(span, output)
        return output


def _output(report: RunReport | None, patience: float, log: _CallLog) -> dict[str, Any]:
    """What ``run_program`` returns for a runtime's report (``None``: the guard cut it off)."""
    if report is None:
        message = f"the run took longer than {patience:g} s (the caller's await_timeout)"
        return {"error": {"kind": "timeout", "message": message}, "logs": [], "calls": log.entries}
    return program_output(report, log.entries)


def program_output(report: RunReport, calls: list[dict[str, Any]]) -> dict[str, Any]:
    """The output of a finished run: ``{"result", "logs"}``, or ``{"error": {"kind",
    "message"}, "logs", "calls"}`` with the failure message clipped to `MAX_FAILURE_BYTES`
    (UTF-8).
    ``calls`` lists the sub-calls the program started, with their status."""
    if report.failure is None:
        return {"result": report.value, "logs": report.logs}
    failure = {
        "kind": report.failure.kind,
        "message": clip_middle_bytes(report.failure.message, MAX_FAILURE_BYTES),
    }
    return {"error": failure, "logs": report.logs, "calls": calls}


def run_code_tool(
    all_tools: Sequence[Tool],
    granted: Sequence[Tool] | None = None,
    *,
    policy: PermissionPolicy | None = None,
    runtime: CodeRuntime | None = None,
    max_parallel: int | None = None,
    approval_handler: ApprovalHandler | None = None,
    hooks: ToolHooks | None = None,
    session: Session | None = None,
    await_timeout: float | None = None,
    sdk_threshold: int | None = None,
    always_loaded: Sequence[str] | None = None,
    execution: Execution | None = None,
    guards: Guards | None = None,
) -> Tool:
    """The ``run_code`` tool for this request.

    Its description is a fixed base text, a blank line, then the SDK of ``granted`` (under
    ``"code"`` mode the only declaration of the tools the model ever sees, and part of the
    prompt prefix of every request, hence byte-stable). Its bindings cover ``all_tools``
    (denied ones as stubs). A failed program is never re-run for the model.

    When the SDK is larger than ``sdk_threshold`` bytes (default 6 KiB), the description holds
    an index of the granted tools instead (and the full declarations of the ``always_loaded``
    ones); programs look the others up with ``search_tools`` and ``describe_tool``. Every
    granted tool stays callable, and the type checker still checks every call against the
    full SDK. See "Many tools" in ``docs/codemode.md``.

    Arguments the model sends: ``code`` and ``description`` (one sentence for the approval
    prompt and the audit log); a blank description is refused before anything runs.

    When the tool is called with a [`RunContext`][toolnexus.codemode.RunContext] as its ``ctx``,
    that context's session, call id, approval handler, hooks and deps are used where the arguments
    here are ``None``.

    ``execution=`` (an [`Execution`][toolnexus.codemode.Execution]) gives the cap (default 10
    without it), runtime, ``sdk_threshold`` and ``always_loaded``; ``guards=`` (a
    [`Guards`][toolnexus.tools.Guards]) ``policy``, ``approval_handler`` and ``hooks``. A keyword
    that says otherwise than the object is a ConfigurationError.
    """
    given = execution_from(execution, "run_code_tool", runtime=runtime, max_parallel=max_parallel)
    guarded = guards_from(
        guards, "run_code_tool", policy=policy, approval_handler=approval_handler, hooks=hooks
    )
    policy, approval_handler, hooks = guarded.permissions, guarded.approval_handler, guarded.hooks
    max_parallel = _program_cap(given, max_parallel)
    sdk_threshold, always_loaded = disclosure_from(
        given, "run_code_tool", sdk_threshold, always_loaded
    )
    runtime = runtime if given is None or runtime is not None else given.runtime
    chosen = runtime if runtime is not None else default_runtime("python")
    granted_tools = list(granted) if granted is not None else filter_tools(all_tools, policy)
    language = chosen.language if chosen.language in _LANGUAGES else "python"
    full_sdk = render_sdk(language, granted_tools)
    index = ToolIndex(granted_tools, language)
    shown = disclosed_sdk(
        language,
        granted_tools,
        threshold=check_threshold(sdk_threshold),
        always_loaded=check_always_loaded(always_loaded),
        sdk=full_sdk,
        index=index,
    )
    sdk = checker_sdk(language, full_sdk)
    tools_for_run = list(all_tools)
    patience = _patience(await_timeout)  # validate now, not mid-conversation
    prepare = getattr(chosen, "prepare", None)
    if callable(prepare):  # warm the sandbox while the model writes its program
        prepare(sdk)

    async def execute(args: dict[str, Any], ctx: Any = None) -> Any:
        description = args.get("description")
        if not isinstance(description, str) or not description.strip():
            raise ValueError(
                "description is blank: say in one sentence what the program does "
                "(it is shown in the approval prompt and the audit log); nothing was run"
            )
        run_ctx = ctx if isinstance(ctx, RunContext) else RunContext(deps=ctx)
        code = args["code"]
        _check_program(code, chosen)
        out = await _execute(
            code,
            tools_for_run,
            chosen,
            sdk,
            index,
            Guards(
                policy if policy is not None else run_ctx.policy,
                approval_handler or run_ctx.approval_handler,
                hooks or run_ctx.hooks,
            ),
            session=session if session is not None else run_ctx.session,
            max_parallel=max_parallel,
            call_id=run_ctx.call_id,
            deps=run_ctx.deps,
            patience=patience,
            description=description.strip(),
        )
        return ToolResult(output=out, is_error="error" in out)

    return Tool(
        RUN_CODE_NAME,
        f"{RUN_CODE_BASE_DESCRIPTION}\n\n{shown}",
        {
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "The program to run."},
                "description": {
                    "type": "string",
                    "description": "One sentence saying what the program does.",
                },
            },
            "required": ["code", "description"],
            "additionalProperties": False,
        },
        execute=execute,
        source="codemode",
    )


def visible_tools(
    mode: str,
    all_tools: Sequence[Tool],
    granted: Sequence[Tool],
    *,
    runtime: CodeRuntime | None = None,
    policy: PermissionPolicy | None = None,
    **run_code_options: Any,
) -> list[Tool]:
    """The tools the model is shown under ``mode``.

    ``"native"``: ``granted``. ``"code"``: ``run_code`` alone. ``"both"``: ``granted`` plus
    ``run_code`` when a runtime can run it (never advertise a tool that cannot run).
    ``run_code`` is added after the permission filter, so its SDK declares ``granted`` and its
    bindings cover ``all_tools``. Extra keyword arguments go to
    [`run_code_tool`][toolnexus.codemode.run_code_tool].

    Raises:
        ConfigurationError: an invalid mode, or ``"code"`` with no runtime installed.
    """
    chosen = parse_mode(mode)
    if chosen == "native":
        return list(granted)
    if not runtime_available(runtime):
        if chosen == "code":
            raise ConfigurationError(
                "code mode needs a Code Mode runtime and none is installed: "
                "pip install pydantic-monty (or pass runtime=V8Runtime())."
            )
        return list(granted)
    run_code = run_code_tool(all_tools, granted, policy=policy, runtime=runtime, **run_code_options)
    if chosen == "code":
        return [run_code]
    return [*[t for t in granted if t.name != RUN_CODE_NAME], run_code]
