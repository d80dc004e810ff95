"""The ``toolnexus`` command: run a Code Mode program, print an SDK, chat with a model, or
draw a saved run.

    toolnexus [--version] [-v] [--debug] COMMAND ...
    toolnexus run-code FILE|--model test [--language python|javascript] [--max-parallel N]
                            [--timeout S] [--html REPORT] [--yes] [TOOL OPTIONS]
    toolnexus sdk [--language L] [--full] [--sdk-threshold BYTES] [TOOL OPTIONS]
    toolnexus chat --model M [--base-url URL] [--style S] [--code-mode MODE] [--max-tokens N]
                   [--param KEY=VALUE] [--timeout S] [--turn-timeout S] [--html REPORT]
                   [TOOL OPTIONS]
    toolnexus mcp serve --config mcp.json [--transport stdio|http] [--host H] [--port P]
                        [--language L] [--mode code|both] [--audit-log FILE] [--tools SPEC]
    toolnexus view FILE... [-o REPORT.html] [--trace TRACE.json]

TOOL OPTIONS: every command offers the built-in tools rooted at the current directory
(``--no-builtins`` leaves them out), the tools named by ``--tools`` (a list of tools, a
``Toolkit`` or a function returning either, as ``package.module:ATTR`` or ``file.py:ATTR``), and
those of the MCP servers in ``--mcp FILE`` (a JSON ``mcpServers`` mapping). Errors are one line
on stderr and exit status 2 (usage or configuration) or 1 (the run failed); never a traceback
unless ``--debug``. A bare ``toolnexus`` or ``toolnexus mcp`` prints its help. ``chat`` takes a
model name with a provider (``openai:gpt-4.1-mini``, ``anthropic:…``, ``openrouter:…``; no
``--base-url`` needed) or ``test`` (offline: `toolnexus.testing.TestModel`), and goes on after
a failed prompt, saying why.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import importlib
import importlib.util
import json
import logging
import sys
import time
import traceback
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, NoReturn, cast

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from toolnexus.codemode import DEFAULT_SDK_THRESHOLD, disclosed_sdk, render_sdk, run_program
from toolnexus.errors import ConfigurationError, MissingExtraError, ToolnexusError
from toolnexus.scheduling import EVERYTHING
from toolnexus.session import Session
from toolnexus.session.events import ToolCallData, code_run, tool_result
from toolnexus.tools import Tool, Toolkit

__all__ = ["main"]

LANGUAGE_OF_SUFFIX = {".py": "python", ".js": "javascript", ".mjs": "javascript"}


class UsageError(Exception):
    """A bad command line; reported in one line, exit status 2."""


# -- loading tools -----------------------------------------------------------------------------


def load_tools(spec: str | None) -> list[Tool]:
    """The tools named by ``MODULE:ATTR`` or ``FILE.py:ATTR`` (none when ``spec`` is None)."""
    if spec is None:
        return []
    target, _, attribute = spec.rpartition(":")
    if not target or not attribute:
        raise UsageError(
            f"--tools must look like package.module:TOOLS or file.py:TOOLS, got {spec!r}"
        )
    module = _import(target)
    try:
        value = getattr(module, attribute)
    except AttributeError:
        raise UsageError(f"--tools: {target} has no attribute {attribute!r}") from None
    if callable(value) and not isinstance(value, Tool):
        try:
            value = value()
        except Exception as exc:
            raise UsageError(f"--tools: calling {spec} failed: {_described(exc)}") from None
    items = list(value) if isinstance(value, (list, tuple, Toolkit)) else [value]
    bad = [item for item in items if not isinstance(item, Tool)]
    if bad:
        raise UsageError(f"--tools: {spec} must be toolnexus Tools, found {bad[0]!r}")
    return items


def _import(target: str) -> Any:
    if target.endswith(".py"):
        path = Path(target)
        if not path.is_file():
            raise UsageError(f"--tools: no file {target}")
        loaded = importlib.util.spec_from_file_location(path.stem, path)
        if loaded is None or loaded.loader is None:
            raise UsageError(f"--tools: cannot import {target}")
        module = importlib.util.module_from_spec(loaded)
        sys.modules[path.stem] = module
        try:
            loaded.loader.exec_module(module)
        except Exception as exc:
            raise UsageError(f"--tools: importing {target} failed: {_described(exc)}") from None
        return module
    try:
        return importlib.import_module(target)
    except ImportError as exc:
        raise UsageError(f"--tools: cannot import {target}: {exc}") from None
    except Exception as exc:
        raise UsageError(f"--tools: importing {target} failed: {_described(exc)}") from None


def _described(exc: Exception) -> str:
    """``exc`` in one line, with where it was raised: the user's own code, so say where."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"


@contextlib.asynccontextmanager
async def tool_set(args: argparse.Namespace) -> AsyncIterator[list[Tool]]:
    """The tools of a command: the built-ins rooted here (unless --no-builtins), --tools, and
    the tools of the MCP servers in --mcp (connected for the command's lifetime)."""
    from toolnexus.tools.builtins import builtin_tools

    keys = args.resource_keys
    tools = [] if args.no_builtins else builtin_tools(Path.cwd(), resource_keys=keys)
    tools += load_tools(args.tools)
    if not args.mcp:
        yield tools
        return
    from toolnexus.tools.mcp import mcp_servers

    try:
        text = await asyncio.to_thread(Path(args.mcp).read_text, encoding="utf-8")
        config = json.loads(text)
    except (OSError, ValueError) as exc:
        raise UsageError(f"--mcp: cannot read {args.mcp}: {exc}") from None
    async with contextlib.AsyncExitStack() as stack:
        try:  # a malformed entry, or no mcp extra: the command line's fault
            remote = await stack.enter_async_context(mcp_servers(config))
        except ConfigurationError as exc:
            raise UsageError(f"--mcp {args.mcp}: {exc}") from None
        for name, problem in remote.failures.items():
            print(f"toolnexus: MCP server {name!r} is left out: {problem}", file=sys.stderr)
        yield tools + list(remote)


# -- run-code: watching calls -----------------------------------------------------------------


@dataclasses.dataclass
class CallSpan:
    """One tool call as the timeline shows it (times in seconds since the run started)."""

    seq: int
    name: str
    arguments: dict[str, Any]
    start: float
    end: float | None = None
    failed: bool = False
    waited_for: str = ""  # the call and resource it waited for, as the timeline shows it
    result: Any = None  # what it returned, or its error's message
    event_id: str | None = None  # its id in the session log (its tool_call event's)


class Watch:
    """Records when each tool call ran, for the live view and the timeline.

    Times count from ``origin`` (``time.time()``, the session log's clock): the run's
    ``code_run`` event, which is where the HTML report's axis starts too.
    """

    def __init__(self, origin: float | None = None) -> None:
        self.origin = time.time() if origin is None else origin
        self.spans: list[CallSpan] = []

    def now(self) -> float:
        return time.time() - self.origin

    def wrap(self, tool: Tool) -> Tool:
        """``tool``, reporting its starts and ends here."""

        async def execute(args: dict[str, Any], ctx: Any) -> Any:
            span = CallSpan(len(self.spans) + 1, tool.name, args, self.now())
            self.spans.append(span)
            try:
                span.result = await tool.invoke(args, ctx)
                return span.result
            except BaseException as exc:
                span.failed = True
                span.result = str(exc)
                raise
            finally:
                span.end = self.now()

        return dataclasses.replace(tool, execute=execute)

    def in_flight(self) -> Table:
        table = Table(title="tool calls in flight", expand=False)
        for column in ("#", "tool", "arguments", "running for"):
            table.add_column(column)
        for span in self.spans:
            if span.end is None:
                args = json.dumps(span.arguments, ensure_ascii=False)
                running = f"{(self.now() - span.start) * 1000:.0f} ms"
                table.add_row(str(span.seq), escape(span.name), escape(args[:60]), running)
        return table

    def note_waits(self, session: Session) -> None:
        """Mark each call that waited for an earlier one with that call and the resource.

        The lane logs one ``tool_call`` event per started call, with its lane number and, when
        it waited, ``waited_for``; each event is matched to the span with its tool and
        arguments (spans are numbered in start order, lane numbers in submission order).
        """
        unmatched = list(self.spans)
        span_of: dict[int, CallSpan] = {}
        for event in session.events:
            if event.type != "tool_call":
                continue
            data = cast(ToolCallData, event.data)
            for span in unmatched:
                if span.name == data.get("name") and span.arguments == data.get("arguments"):
                    unmatched.remove(span)
                    span_of[data["seq"]] = span
                    span.event_id = data.get("id")
                    waited = data.get("waited_for")
                    if waited is not None and waited["seq"] in span_of:
                        resource = waited["resource"]
                        shown = "everything" if resource == EVERYTHING else _shown(resource)
                        span.waited_for = f"#{span_of[waited['seq']].seq} ({shown})"
                    break

    def timeline(self, width: int = 40) -> Table:
        total = max([s.end or s.start for s in self.spans], default=0.0) or 1.0
        table = Table(title="timeline (each bar: when the call ran)")
        waits = any(s.waited_for for s in self.spans)
        for column in ("#", "tool", "start", "end", "", *(["waited for"] if waits else [])):
            table.add_column(column)
        for span in self.spans:
            end = span.end if span.end is not None else total
            left = int(span.start / total * width)
            length = max(int((end - span.start) / total * width), 1)
            bar = " " * left + ("x" if span.failed else "█") * length
            table.add_row(
                str(span.seq),
                escape(span.name),
                f"{span.start * 1000:.0f} ms",
                f"{end * 1000:.0f} ms",
                bar,
                *([escape(span.waited_for)] if waits else []),
            )
        return table

    def interrupted(self) -> str:
        """What had happened when the run was interrupted: each call, finished or not."""
        finished = [s for s in self.spans if s.end is not None]
        lines = [
            f"interrupted: {len(self.spans)} tool calls had started, {len(finished)} had "
            "finished (their side effects happened)"
        ]
        for span in self.spans:
            state = "running" if span.end is None else "failed" if span.failed else "finished"
            arguments = json.dumps(span.arguments, ensure_ascii=False)[:80]
            lines.append(f"  #{span.seq} {span.name} {arguments}: {state}")
        return "\n".join(lines)

    def overlapping(self) -> list[list[int]]:
        """Groups of calls that ran at the same time, in start order."""
        groups: list[list[int]] = []
        group_end = -1.0
        for span in sorted(self.spans, key=lambda s: s.start):
            end = span.end if span.end is not None else float("inf")
            if groups and span.start < group_end:
                groups[-1].append(span.seq)
                group_end = max(group_end, end)
            else:
                groups.append([span.seq])
                group_end = end
        return groups


def _shown(resource: str) -> str:
    """A resource key as the timeline shows it: a path under this directory, relative."""
    try:
        return str(Path(resource).relative_to(Path.cwd()))
    except ValueError:
        return resource


def read_program(name: str) -> tuple[str, str]:
    """The program's source and language (from the file name unless ``--language`` says)."""
    path = Path(name)
    if not path.is_file():
        raise UsageError(f"no program file {name}")
    try:
        code = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"program file {name} is not UTF-8 text ({exc.reason})") from None
    return code, LANGUAGE_OF_SUFFIX.get(path.suffix, "python")


async def run_code_command(
    args: argparse.Namespace, code: str | None, language: str, console: Console, errors: Console
) -> int:
    session = Session()
    runtime = _runtime(language, args.timeout)
    async with tool_set(args) as found:
        if code is None:  # --model test: TestModel writes the program
            code = _test_program(found, language, args.yes, console)
        description = f"the program in {args.file}" if args.file else "by TestModel"
        program = code_run(  # the program, as the report shows it
            PROGRAM_ID, runtime.language, description, type(runtime).__name__, code
        )
        started = session.log_event(*program)
        watch = Watch(started.time)  # one time origin: the terminal's and the report's
        tools = [watch.wrap(t) for t in found]
        run = asyncio.ensure_future(
            run_program(
                code,
                tools,
                runtime=runtime,
                max_parallel=args.max_parallel,
                await_timeout=args.timeout,
                session=session,
                call_id=PROGRAM_ID,
            )
        )
        try:
            with Live(
                watch.in_flight(), console=console, refresh_per_second=12, transient=True
            ) as live:
                while not run.done():
                    live.update(watch.in_flight())
                    await asyncio.wait({run}, timeout=0.05)
        except asyncio.CancelledError:  # Ctrl-C: say what had happened, then stop
            run.cancel()
            console.print(watch.interrupted(), markup=False, highlight=False)
            raise
        finally:
            await runtime.aclose()
        out = run.result()
    watch.note_waits(session)
    _record_results(session, watch, out)
    # written first (a report even if printing fails), said last (where the eye ends up)
    report = _write_report(args.html, session.events) if args.html else None
    if watch.spans:
        console.print(watch.timeline())
        console.print(f"what ran together: {_together(session, watch)}")
    for line in out.get("logs", []):
        shown = f"log: {line}" if isinstance(line, str) else f"stderr: {line['stderr']}"
        console.print(shown, markup=False, highlight=False)
    if "error" in out:  # on stderr, one line per line (never wrapped): scripts read it
        error = out["error"]
        errors.print(f"error ({error['kind']}): {error['message']}", style="red", markup=False)
        if error["kind"] == "type_error" and args.tools is None:
            errors.print(
                "hint: no --tools were given, so the program can call only the built-in tools; "
                "give yours with --tools FILE.py:TOOLS (or package.module:TOOLS), and see what "
                "a program may call with: toolnexus sdk --tools FILE.py:TOOLS",
                markup=False,
            )
        errors.print("tool calls the program started, and how each ended:", markup=False)
        errors.print(json.dumps(out["calls"], ensure_ascii=False), markup=False)
    else:
        console.print("result:")
        console.print_json(json.dumps(out["result"]))
    if report is not None:
        console.print(report, markup=False, highlight=False)
    return 1 if "error" in out else 0


def _test_program(tools: list[Tool], language: str, everything: bool, console: Console) -> str:
    """The program ``TestModel`` writes over ``tools``, in the order given. Without ``--yes``
    it leaves out the built-ins that change this machine (``ASK_BEFORE``), as ``chat`` asks
    before them: nobody asked for ``bash -c a`` or a file named ``a``."""
    from toolnexus.testing import program_for

    called = [t for t in tools if everything or t.name not in ASK_BEFORE]
    left_out = sorted({t.name for t in tools} - {t.name for t in called})
    offered = [{"name": t.name, "input_schema": t.input_schema} for t in called]
    code = program_for(offered, language)
    console.print("program (written by TestModel):", style="dim")
    console.print(code, markup=False, highlight=False)
    if left_out:
        console.print(
            f"not called (they change this machine; --yes calls them too): {', '.join(left_out)}",
            style="dim",
            markup=False,
        )
    return code


PROGRAM_ID = "run-code"
"""The program's id in a ``run-code`` session log (its sub-calls are ``run-code:code:N``)."""


def _record_results(session: Session, watch: Watch, out: dict[str, Any]) -> None:
    """Log what each sub-call returned and what the program gave, as ``tool_result`` events,
    so the saved run (and its report) holds the whole of it, not only when calls ran."""
    for span in watch.spans:
        if span.event_id is None or span.end is None:
            continue
        result = span.result
        output = getattr(result, "output", result)  # a ToolResult's output
        text = output if isinstance(output, str) else json.dumps(output, default=str)
        is_error = span.failed or bool(getattr(result, "is_error", False))
        session.append(*tool_result(span.event_id, span.name, text, is_error))
    output = json.dumps(out, ensure_ascii=False, default=str)
    session.append(*tool_result(PROGRAM_ID, "run_code", output, "error" in out))


def _together(session: Session, watch: Watch) -> str:
    """The "what ran together" line, from the session log as the HTML report draws it (the
    same line on the page), or from the watch when the log cannot say."""
    from toolnexus.view import build

    for group in build(session)["groups"]:
        for program in group["programs"]:
            if program["id"] == PROGRAM_ID and program["calls"] == len(watch.spans):
                return str(program["together"])
    return "  ->  ".join("[" + " ".join(map(str, g)) + "]" for g in watch.overlapping())


def mcp_serve_command(args: argparse.Namespace) -> int:
    """``toolnexus mcp serve``: the gateway, until the client hangs up (or Ctrl-C)."""
    try:
        from toolnexus.mcp import load_config, serve_config
    except ImportError as exc:
        raise UsageError(str(MissingExtraError("toolnexus mcp serve", "mcp"))) from exc
    try:
        config = load_config(args.config)
    except ConfigurationError as exc:
        raise UsageError(f"--config: {exc}") from None
    extra_tools = load_tools(args.tools)
    try:
        _serve(
            serve_config(
                config,
                transport=args.transport,
                host=args.host,
                port=args.port,
                extra_tools=extra_tools,
                language=args.language,
                mode=args.mode,
                max_parallel=args.max_parallel,
                audit_log=args.audit_log,
                durable=args.durable,
            )
        )
    except ConfigurationError as exc:  # an option the gateway refuses: the command line's
        raise UsageError(str(exc)) from None
    return 0


def _serve(serving: Any) -> None:
    asyncio.run(serving)


def _runtime(language: str, timeout: float | None) -> Any:
    """A runtime of its own for this command, with ``--timeout`` as its time budget."""
    from toolnexus.codemode.runtimes import MontyRuntime, V8Runtime

    seconds = timeout if timeout is not None else 30.0
    try:
        if language == "python":
            return MontyRuntime(timeout=seconds)
        return V8Runtime(timeout=seconds)
    except ConfigurationError as exc:
        raise UsageError(str(exc)) from None


# -- sdk, chat --------------------------------------------------------------------------------


async def sdk_command(args: argparse.Namespace, console: Console) -> int:
    """Print what ``run_code``'s description shows of the tools: their SDK, or above the
    threshold the index (as a model sees it); ``--full`` prints the whole SDK regardless."""
    async with tool_set(args) as tools:
        if args.full:
            print(render_sdk(args.language, tools))
        else:
            print(disclosed_sdk(args.language, tools, threshold=args.sdk_threshold))
    return 0


ASK_BEFORE = ("bash", "write", "edit", "apply_patch", "notebook_edit", "kill_shell")
"""Built-ins that change this machine: ``chat`` asks before each call unless ``--yes``;
``run-code --model test`` leaves them out of TestModel's program unless ``--yes``."""


def _terminal_approval(console: Console) -> Any:
    async def approve(name: str, args: dict[str, Any]) -> bool:
        shown = json.dumps(args, ensure_ascii=False)[:300]
        console.print(f"\n[yellow]allow {escape(name)} {escape(shown)}?[/] \\[y/N] ", end="")
        try:
            answer = await asyncio.to_thread(input, "")
        except EOFError:
            return False
        return answer.strip().lower() in ("y", "yes")

    return approve


async def chat_command(args: argparse.Namespace, console: Console) -> int:
    from toolnexus.client import create_client
    from toolnexus.codemode import PermissionPolicy

    guarded = not args.yes
    if args.base_url is None and args.model != "test" and ":" not in args.model:
        raise UsageError(
            f"chat needs --base-url for the model {args.model!r}, or a model name with a "
            "provider: openai:gpt-4.1-mini, anthropic:claude-sonnet-4-5, "
            "openrouter:openai/gpt-4o-mini (or --model test, offline)"
        )
    try:
        client = create_client(
            base_url=args.base_url,
            model=args.model,
            style=args.style,
            api_key=args.api_key,
            code_mode=args.code_mode,
            max_parallel=args.max_parallel,
            permissions=PermissionPolicy(approval_required=ASK_BEFORE if guarded else ()),
            approval_handler=_terminal_approval(console) if guarded else None,
            request_params=_request_params(args),
            max_turns=args.max_turns,
            tool_choice=args.tool_choice,
            **({"timeout": args.timeout} if args.timeout is not None else {}),
            **({"turn_timeout": args.turn_timeout} if args.turn_timeout is not None else {}),
        )
    except ConfigurationError as exc:  # a bad --base-url, no key: the command line's fault
        raise UsageError(str(exc)) from None
    async with tool_set(args) as tools:
        return await _chat(client, tools, console, args.html, _errors_console())


def _request_params(args: argparse.Namespace) -> dict[str, Any]:
    params = dict(args.param)
    if args.max_tokens is not None:
        params["max_tokens"] = args.max_tokens
    return params


def _write_report(path: str, source: Any) -> str:
    """Write the HTML report of ``source`` (see toolnexus.view) to ``path``; say where."""
    from toolnexus.view import render

    target = Path(path)
    try:
        target.write_text(render(source), encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--html: cannot write {path}: {exc.strerror or exc}") from None
    return f"report: {target.resolve()}  (open it in a browser)"


def view_command(args: argparse.Namespace, console: Console) -> int:
    """``toolnexus view FILE``: the HTML report (and the Chrome trace) of saved session logs."""
    from toolnexus.view import render, trace

    sources = args.files
    if len(sources) == 1:
        source: Any = sources[0]
    else:  # one group per file (sub-agents' sessions, say), named by the file
        source = {Path(name).name: name for name in sources}
    try:  # a file that cannot be drawn is a ViewError naming its line: one line, status 1
        page = render(source)
        exported = json.dumps(trace(source), allow_nan=False) if args.trace else None
    except OSError as exc:
        raise UsageError(f"cannot read {exc.filename}: {exc.strerror or exc}") from None
    out = Path(args.output or Path(sources[0]).with_suffix(".html").name)
    try:
        out.write_text(page, encoding="utf-8")
        console.print(f"report: {out.resolve()}", markup=False, highlight=False)
        if exported is not None:
            Path(args.trace).write_text(exported, encoding="utf-8")
            console.print(
                f"trace: {args.trace}  (open it in https://ui.perfetto.dev)",
                markup=False,
                highlight=False,
            )
    except OSError as exc:
        raise UsageError(f"cannot write {exc.filename}: {exc.strerror or exc}") from None
    return 0


async def _chat(
    client: Any,
    tools: list[Tool],
    console: Console,
    html: str | None = None,
    errors: Console | None = None,
) -> int:
    history: list[dict[str, Any]] = []
    events: list[Any] = []  # every exchange's session events, for the --html report
    console.print("[dim]toolnexus chat: an empty line or end of input quits[/]")
    while True:
        try:
            prompt = (await asyncio.to_thread(input, "> ")).strip()
        except EOFError:
            break
        if not prompt:
            break
        try:
            history, events = await _exchange(client, prompt, tools, history, events, console, html)
        except ConfigurationError as exc:  # every prompt would fail so: the command line's
            raise UsageError(str(exc)) from None
        except ToolnexusError as exc:  # a failed turn: say why, and keep the chat open
            console.print()
            (errors or console).print(
                f"toolnexus: this prompt failed: {_one_line(exc)} (the chat goes on; an empty "
                "line quits)",
                style="red",
                markup=False,
            )
    return 0


async def _exchange(
    client: Any,
    prompt: str,
    tools: list[Tool],
    history: list[dict[str, Any]],
    events: list[Any],
    console: Console,
    html: str | None,
) -> tuple[list[dict[str, Any]], list[Any]]:
    """One prompt and its answer, streamed; the conversation and the report's events after it."""
    async for event in client.stream(prompt, tools=tools, history=history):
        if event.type == "text":
            console.print(event.text, end="", markup=False, highlight=False)
        elif event.type == "tool_call":
            call = event.call
            console.print(f"\n[cyan]→ {escape(call.name)}[/] {escape(str(call.arguments))}")
        elif event.type == "tool_result":
            mark = "[red]✗[/]" if event.record.is_error else "[green]✓[/]"
            record = event.record
            console.print(f"{mark} {escape(record.name)}: {escape(record.output[:200])}")
        elif event.type == "done":
            history = event.result.messages
            console.print()
            _say_how_it_ended(event.result, console)
            if html is not None:  # rewritten after each exchange: a crash loses little
                events = [*events, *event.result.session.events]
                console.print(_write_report(html, events), markup=False, highlight=False)
    return history, events


def _one_line(exc: BaseException) -> str:
    """``exc``'s message on one line (its first line says what went wrong)."""
    return " ".join(str(exc).split()) or type(exc).__name__


def _say_how_it_ended(result: Any, console: Console) -> None:
    """A run that did not simply answer says so, and why (the next prompt carries on)."""
    if result.status == "done":
        return
    why = result.stopped_by or (
        f"the turn limit ({result.turns} model turns, --max-turns) was reached"
        if result.status == "incomplete"
        else "relay calls wait for an answer"
    )
    console.print(f"[yellow]the run ended {result.status}: {escape(why)}[/]")


# -- entry point -------------------------------------------------------------------------------


PARALLEL_HELP = "the most safe tool calls running at once (default 10)"


def _at_least_one(text: str) -> int:
    """``--max-parallel``: a whole number of at least 1 (argparse reports anything else)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"must be at least 1 (1 runs calls one at a time), got {value}"
        )
    return value


def _seconds(text: str) -> float:
    """A positive number of seconds (argparse reports anything else)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def _byte_count(text: str) -> int:
    """A number of bytes, 0 or more (argparse reports anything else)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of bytes, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more bytes, got {text!r}")
    return value


def _param(text: str) -> tuple[str, Any]:
    """``--param KEY=VALUE``: VALUE as JSON when it parses (``0.2``, ``true``, ``[...]``), else
    as text."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"must look like KEY=VALUE, got {text!r}")
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    return key.strip(), value


TOOLS_HELP = "MODULE:ATTR or FILE.py:ATTR naming a list of tools (or a function returning one)"


DESCRIPTION = (
    "Run a Code Mode program against your tools, print the SDK a model sees, chat with a model "
    "that calls tools, offer Code Mode to any MCP client, or draw a saved run as an HTML "
    "timeline. Errors are one line; a bad command line exits 2, a failed run 1."
)


class _Parser(argparse.ArgumentParser):
    """argparse, with a bad command line reported as one line (`UsageError`, exit 2) instead
    of the usage block and an error."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see {self.prog} --help)")


def _parser() -> argparse.ArgumentParser:
    from toolnexus._version import __version__

    parser = _Parser(prog="toolnexus", description=DESCRIPTION)
    parser.set_defaults(help_of=parser)
    parser.add_argument("--version", action="version", version=f"toolnexus {__version__}")
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="log what the library does to stderr (-v: info, -vv: debug, tool failures included)",
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        help="on an error, also print its traceback, with the exceptions it came from",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    run = commands.add_parser("run-code", help="run a Code Mode program against a tool set")
    run.add_argument(
        "file", nargs="?", help="the program (.py runs in Monty, .js in V8); see also --model"
    )
    run.add_argument(
        "--model",
        choices=["test"],
        help="test: instead of FILE, TestModel writes a program calling every tool once",
    )
    run.add_argument(
        "--language", choices=["python", "javascript"], help="override the file name's language"
    )
    run.add_argument("--tools", help=TOOLS_HELP)
    run.add_argument("--max-parallel", type=_at_least_one, default=10, help=PARALLEL_HELP)
    run.add_argument(
        "--timeout",
        type=_seconds,
        help="seconds the program may run, tool calls included (default 30)",
    )
    run.add_argument("--html", help="write an HTML report of the run here (see toolnexus view)")
    run.add_argument(
        "--yes",
        action="store_true",
        help="with --model test: call bash, write, edit, ... too (left out otherwise)",
    )
    _tool_options(run)
    sdk = commands.add_parser("sdk", help="print the SDK a model would see")
    sdk.add_argument(
        "--language",
        default="python",
        choices=["python", "javascript", "typescript"],
        help="the SDK's language (default python)",
    )
    sdk.add_argument("--tools", help=TOOLS_HELP)
    sdk.add_argument(
        "--full",
        action="store_true",
        help="print every declaration, even above the threshold (default: what run_code's "
        "description shows: the SDK, or above the threshold an index of the tools)",
    )
    sdk.add_argument(
        "--sdk-threshold",
        type=_byte_count,
        default=DEFAULT_SDK_THRESHOLD,
        help=f"bytes of SDK above which the index is printed (default {DEFAULT_SDK_THRESHOLD})",
    )
    _tool_options(sdk)
    chat = commands.add_parser("chat", help="chat with a model that can call tools")
    chat.add_argument(
        "--base-url",
        help="the endpoint, e.g. http://127.0.0.1:8080/v1 (not needed for a model name with a "
        "provider, or test)",
    )
    chat.add_argument(
        "--model",
        required=True,
        help="the model name the endpoint knows; or openai:NAME, anthropic:NAME, "
        "openrouter:NAME (the provider's endpoint and key variable); or test (offline: "
        "TestModel calls every tool once)",
    )
    chat.add_argument(
        "--style",
        choices=["openai", "anthropic", "responses"],
        help="the wire format: Chat Completions (openai, the default), Messages (anthropic) or "
        "the Responses API (responses); a provider prefix picks its own",
    )
    chat.add_argument(
        "--code-mode",
        choices=["native", "code", "both"],
        help="how the model calls tools (default: TOOLNEXUS_CODE_MODE, else both)",
    )
    chat.add_argument(
        "--api-key", help="else OPENROUTER_API_KEY, OPENAI_API_KEY, ANTHROPIC_API_KEY"
    )
    chat.add_argument("--tools", help=TOOLS_HELP)
    chat.add_argument("--html", help="write an HTML report of the chat here after each answer")
    chat.add_argument("--max-parallel", type=_at_least_one, help=PARALLEL_HELP)
    chat.add_argument(
        "--max-tokens", type=_at_least_one, help="the most tokens the model may write per turn"
    )
    chat.add_argument(
        "--param",
        type=_param,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a request body field, e.g. temperature=0.2 (repeatable; JSON values)",
    )
    chat.add_argument(
        "--timeout", type=_seconds, help="seconds to wait for the server (default 120)"
    )
    chat.add_argument(
        "--turn-timeout",
        type=_seconds,
        help="seconds one model turn may take in all, streaming included (default 600)",
    )
    chat.add_argument(
        "--max-turns",
        type=_at_least_one,
        default=10,
        help="model turns per prompt before the run stops as incomplete (default 10)",
    )
    chat.add_argument(
        "--tool-choice",
        help="auto, none, required, or a tool's name: applied to the first turn of each prompt",
    )
    chat.add_argument(
        "--yes", action="store_true", help="run bash, write, edit, ... without asking first"
    )
    _tool_options(chat)
    view = commands.add_parser(
        "view", help="draw saved session logs: an HTML timeline and a Chrome trace"
    )
    view.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="a saved session (Session.save) or gateway audit log; several: one group each",
    )
    view.add_argument("-o", "--output", help="the HTML report (default: FILE's name, .html)")
    view.add_argument("--trace", help="also write the Chrome Trace Event Format JSON here")
    mcp = commands.add_parser("mcp", help="toolnexus as an MCP server")
    mcp.set_defaults(help_of=mcp)
    serving = mcp.add_subparsers(dest="mcp_command", metavar="COMMAND")
    serve = serving.add_parser(
        "serve", help="offer run_code over the MCP servers of a config, to any MCP client"
    )
    serve.set_defaults(help_of=serve)
    serve.add_argument("--config", required=True, help="an mcpServers JSON file (as clients use)")
    serve.add_argument(
        "--transport",
        choices=["stdio", "http"],
        default="stdio",
        help="stdio (the client starts this process) or streamable HTTP (default: stdio)",
    )
    serve.add_argument("--host", default="127.0.0.1", help="HTTP only (default: loopback)")
    serve.add_argument("--port", type=int, default=8000, help="HTTP only (default 8000)")
    serve.add_argument(
        "--language", choices=["python", "javascript"], help="the programs' language (python)"
    )
    serve.add_argument("--mode", choices=["code", "both"], help="both: the tools as well")
    serve.add_argument("--max-parallel", type=_at_least_one, help=PARALLEL_HELP)
    serve.add_argument("--audit-log", help="append every session event to this JSON-lines file")
    serve.add_argument("--tools", help=TOOLS_HELP)
    serve.add_argument(
        "--durable",
        action="store_true",
        help="run_code tasks as Temporal workflows that survive a restart: at the config's "
        "toolnexus.durable address and task queue, else 127.0.0.1:7233, queue "
        "toolnexus-gateway (needs toolnexus[temporal])",
    )
    return parser


def _tool_options(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--mcp", help="a JSON file with an mcpServers mapping: their tools are added"
    )
    command.add_argument(
        "--no-builtins",
        action="store_true",
        help="leave out the built-in tools (read, grep, bash, ...) rooted at this directory",
    )
    command.add_argument(
        "--resource-keys",
        action="store_true",
        help="let the built-in file tools declare the files they read and write, so edits "
        "of different files run together and calls on one file run in order",
    )


def _log_to_stderr(verbosity: int) -> None:
    """``-v``: the library's info messages on stderr; ``-vv``: debug (every tool failure)."""
    if verbosity <= 0:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("toolnexus: %(levelname)s %(name)s: %(message)s"))
    library = logging.getLogger("toolnexus")
    library.addHandler(handler)
    library.setLevel(logging.INFO if verbosity == 1 else logging.DEBUG)


def _errors_console() -> Console:
    """stderr, each message on one line whatever the terminal width: scripts grep them."""
    return Console(stderr=True, soft_wrap=True, highlight=False)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    errors = _errors_console()
    debug = "--debug" in (sys.argv[1:] if argv is None else argv)
    try:
        args = _parser().parse_args(argv)
        _log_to_stderr(args.verbose)
        console = Console(soft_wrap=True)  # paths and logs on one line, piped or not
        if args.command is None or (args.command == "mcp" and args.mcp_command is None):
            args.help_of.print_help()  # a bare command: what it can do
            return 2
        if args.command == "run-code":
            if args.file is None and args.model is None:
                raise UsageError(
                    "run-code needs a program FILE, or --model test to have TestModel write one"
                )
            if args.file is not None:
                code, language = read_program(args.file)
            else:
                code, language = None, "python"
            chosen = args.language or language
            return asyncio.run(run_code_command(args, code, chosen, console, errors))
        if args.command == "sdk":
            return asyncio.run(sdk_command(args, console))
        if args.command == "mcp":
            return mcp_serve_command(args)
        if args.command == "view":
            return view_command(args, console)
        return asyncio.run(chat_command(args, console))
    except UsageError as exc:
        _report(errors, exc, debug)
        return 2
    except ToolnexusError as exc:
        _report(errors, exc, debug)
        return 1
    except KeyboardInterrupt:
        return 130


def _report(errors: Console, exc: BaseException, debug: bool) -> None:
    """``exc`` in one line (``--debug``: its traceback first, with what it came from)."""
    if debug:
        traceback.print_exception(exc, file=sys.stderr)
    errors.print(f"toolnexus: {_one_line(exc)}", style="red", markup=False)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
