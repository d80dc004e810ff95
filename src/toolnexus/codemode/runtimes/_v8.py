"""``V8Runtime``: JavaScript programs in V8, in a Deno subprocess with no permissions.

Why a subprocess and not embedded V8 (``mini-racer``): measured before this was built, an
in-process V8 cannot stop a loop that starts after an
``await``, a V8 fatal out-of-memory kills the host, and ArrayBuffers ignore its memory limit.
A Deno child with no ``--allow-*`` flags has no file system, network, environment or
subprocess access; ``--no-remote``/``--no-npm`` stop imports from fetching code.

One process serves one run, so every run starts from fresh global state, and stopping a
runaway is ``SIGKILL``. To keep starts fast, a spare process is started ahead of time and
kept waiting for its program (``spares``). Memory: ``--max-old-space-size`` bounds the V8 heap
and ``RLIMIT_DATA`` on the child bounds everything else (ArrayBuffers included).
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import contextlib
import contextvars
import functools
import json
import logging
import os
import resource
import shutil
import subprocess
import tempfile
import weakref
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from importlib import resources
from typing import Any

from toolnexus._checks import int_at_least, positive_int
from toolnexus._json import dumps_plain, encodable_text, json_problem, loads_strict
from toolnexus.codemode.runtimes._base import (
    Budgets,
    FailureKind,
    HostCaller,
    LogCapture,
    ProgramFailure,
    RunReport,
    RunSlots,
    ToolCaller,
    out_of_memory,
    patience_deadline,
    run_deadline,
)
from toolnexus.codemode.runtimes._pinning import CallerPins, Pins
from toolnexus.errors import ConfigurationError, MissingExtraError
from toolnexus.scheduling import Outcome, snapshot

__all__ = ["V8Runtime"]

logger = logging.getLogger("toolnexus.codemode")

DATA_HEADROOM = 768 * 1024 * 1024
"""What Deno itself needs beyond the program's budget (code, the runtime's own heaps)."""

STREAM_LIMIT = 64 * 1024 * 1024
"""The longest protocol line accepted from the child (a result, a log line, call arguments)."""


def _deno_binary() -> str:
    try:
        from deno import find_deno_bin  # type: ignore[import-untyped]  # ships no py.typed
    except ImportError as exc:  # pragma: no cover - the test extra installs it
        raise MissingExtraError(
            "V8Runtime (the deno binary)", "v8", ", or pass deno_path="
        ) from exc
    path: str = find_deno_bin()
    return path


@functools.cache
def _deno_cache_dir() -> str:
    """One private ``DENO_DIR`` per host process (Deno caches the compiled host script there),
    removed at exit: nothing is written to the user's own Deno cache."""
    path = tempfile.mkdtemp(prefix="toolnexus-deno-")
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


@functools.cache
def _host_script() -> str:
    """The host script as a ``data:`` URL.

    Why not its file path: stack traces and module-resolution errors would show the program
    where toolnexus is installed (a home directory, a user name). A ``data:`` module has no
    location on disk, and its stack frames are renamed ``toolnexus-host`` by the script itself.
    """
    source = (resources.files("toolnexus.codemode.runtimes") / "_v8_host.js").read_bytes()
    return "data:application/javascript;base64," + base64.b64encode(source).decode("ascii")


class _Child:
    """One Deno process, for one program.

    Why ``subprocess.Popen`` in a worker thread, with pipes connected only when the process is
    taken for a run: a spare must not belong to any event loop (a runtime outlives the loop it
    was first used in, and ``asyncio`` subprocesses cannot even be cancelled safely while
    starting). stderr goes to a temporary file, so it can never fill a pipe and stall the child;
    its tail says why a child died (a V8 out-of-memory, say).
    """

    def __init__(self, process: subprocess.Popen[bytes], stderr: Any) -> None:
        self.process = process
        self._stderr = stderr
        self._conversation: _Conversation | None = None
        self._read_transport: asyncio.BaseTransport | None = None
        self._write_transport: asyncio.WriteTransport | None = None
        self.stderr_tail = b""

    @classmethod
    def start(cls, argv: list[str], env: dict[str, str], data_limit: int) -> _Child:
        """Start the process. Blocking (a fork): call it in a worker thread.

        Where the system can set another process's limits (Linux), the process is spawned
        plainly and ``RLIMIT_DATA`` set on it at once, before it can be sent a program: a
        ``preexec_fn`` forces a full ``fork()`` of this process (about 4 ms here, holding the
        GIL, so the event loop stalls with it) where a plain spawn takes 0.15 ms. Elsewhere the
        limit is set in the child before ``exec``. If the limit cannot be set, the process is
        killed: no program runs without it.
        """
        late = hasattr(resource, "prlimit")

        def limit_memory() -> None:  # runs in the child, before exec
            resource.setrlimit(resource.RLIMIT_DATA, (data_limit, data_limit))

        stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in finish()
        # argv is ours (the deno binary, our script); preexec_fn only calls setrlimit
        process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
            cwd=env["DENO_DIR"],  # nothing of the caller's working directory
            preexec_fn=None if late else limit_memory,
        )
        child = cls(process, stderr)
        if late:
            try:
                resource.prlimit(process.pid, resource.RLIMIT_DATA, (data_limit, data_limit))
            except OSError:
                child.finish()
                raise
        return child

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    @property
    def conversation(self) -> _Conversation:
        """The process's protocol lines, served as they arrive (connected by `attach`)."""
        if self._conversation is None:
            raise RuntimeError("the Deno process is not attached to an event loop")
        return self._conversation

    async def attach(self) -> None:
        """Connect the pipes to the running loop and wait for the process to be ready.

        Raises:
            ConfigurationError: the process died before it was ready.
        """
        loop = asyncio.get_running_loop()
        write_transport, _ = await loop.connect_write_pipe(asyncio.Protocol, self.process.stdin)
        assert isinstance(write_transport, asyncio.WriteTransport)
        self._write_transport = write_transport
        conversation = self._conversation = _Conversation(loop, write_transport)
        self._read_transport, _ = await loop.connect_read_pipe(
            lambda: conversation, self.process.stdout
        )
        line = await conversation.ready
        if not line.startswith(b'{"t":"ready"'):
            self.detach()
            await asyncio.get_running_loop().run_in_executor(None, self.finish)
            detail = self.stderr_tail.decode(errors="replace").strip()
            raise ConfigurationError(f"the Deno process did not start: {detail or line!r}")

    def kill(self) -> None:
        if self.alive:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()

    def detach(self) -> None:
        """Stop serving the process and close the pipes' transports (on the loop that opened
        them)."""
        if self._conversation is not None:
            self._conversation.close()
        if self._write_transport is not None:
            self._write_transport.close()
        if self._read_transport is not None:
            self._read_transport.close()

    def finish(self) -> None:
        """Kill, wait, and keep the tail of stderr. Blocking: call it in a worker thread."""
        self.kill()
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        with contextlib.suppress(OSError, ValueError):
            self._stderr.seek(0, os.SEEK_END)
            self._stderr.seek(max(self._stderr.tell() - 4000, 0))
            self.stderr_tail = self._stderr.read()
            self._stderr.close()


def _finish_all(spares: list[Future[_Child]]) -> None:
    """Stop spare processes (blocking); also run when a runtime is garbage-collected."""
    for spare in spares:
        with contextlib.suppress(Exception):
            spare.result(timeout=30).finish()


class V8Runtime:
    """Runs JavaScript programs in V8 (a Deno subprocess with no permissions).

    Args:
        timeout: Seconds of wall clock per run (tool waits included). Default 30.
        max_memory: Bytes for the program: V8 heap and, with headroom for Deno itself, the
            process's data segment (ArrayBuffers included). Default 256 MiB.
        max_output: Bytes of logs kept per run. Default 1,000,000.
        max_sub_calls: Tool calls per run. Default 1,000.
        spares: Processes kept booted and waiting, so a run need not wait for one (default 2:
            with one, a run right after another waits for the spare started as the first
            ended; with two, back-to-back runs took a third of one Deno boot on a 2-CPU
            machine, see ``docs/performance.md``).
        max_concurrent: Runs at once (one Deno process each); later runs wait their turn,
            first come, first served. Default: twice the CPU count, at least 4.
        deno_path: The ``deno`` binary; by default the one the ``deno`` package installed.
        pin_cpu: Pin each run, for its duration, to the CPU its event loop is on when it starts:
            the loop's thread and every thread of the run's Deno process (Linux; elsewhere
            ignored). A sub-call is a pipe round trip between the two, and one within a CPU
            is cheaper than one across CPUs on a loaded machine; the price is that they share
            one CPU. Off by default; ``docs/performance.md`` has the figures both ways.

    Raises:
        ConfigurationError: a budget or option that is not a positive number, named.
    """

    language = "javascript"

    def __init__(
        self,
        *,
        timeout: float = 30.0,
        max_memory: int = 256 * 1024 * 1024,
        max_output: int = 1_000_000,
        max_sub_calls: int = 1000,
        spares: int = 2,
        deno_path: str | None = None,
        max_concurrent: int | None = None,
        pin_cpu: bool = False,
    ) -> None:
        self.budgets = Budgets(timeout, max_memory, max_output, max_sub_calls)
        if not int_at_least(spares, 0):
            raise ConfigurationError(f"V8Runtime spares must be 0 or more, got {spares!r}.")
        if max_concurrent is None:
            max_concurrent = max(4, 2 * (os.cpu_count() or 2))
        self._slots = RunSlots(positive_int("V8Runtime max_concurrent", max_concurrent))
        self._spares_wanted = spares
        self._deno = deno_path
        self._threads = ThreadPoolExecutor(4, thread_name_prefix="toolnexus-deno")
        self._spares: list[Future[_Child]] = []
        self._active: dict[_Child, ProgramFailure | None] = {}
        self._finalizer = weakref.finalize(self, _finish_all, self._spares)
        self._pin_cpu = bool(pin_cpu)
        self._caller_pins = CallerPins()

    def __repr__(self) -> str:
        return f"<V8Runtime {self.budgets}>"

    async def run(
        self,
        code: str,
        *,
        tool_names: Sequence[str],
        call_tool: ToolCaller,
        sdk: str,
        patience: float | None = None,
        call_host: HostCaller | None = None,
    ) -> RunReport:
        """Run one JavaScript program; see [`CodeRuntime`][toolnexus.codemode.runtimes.CodeRuntime].

        Cancelling the awaiting task kills the process.
        """
        loop = asyncio.get_running_loop()
        waited_for = patience_deadline(loop.time(), patience)
        try:  # waiting for a slot counts against the caller's patience, not the budget
            async with asyncio.timeout_at(None if waited_for is None else waited_for[0]):
                await self._slots.acquire()
        except TimeoutError:
            assert waited_for is not None
            return RunReport(failure=waited_for[1])
        try:
            deadline, late = run_deadline(self.budgets, loop.time(), waited_for)
            return await self._run(code, tool_names, call_tool, deadline, late, call_host)
        finally:
            self._slots.release()

    async def _run(
        self,
        code: str,
        tool_names: Sequence[str],
        call_tool: ToolCaller,
        deadline: float,
        late: ProgramFailure,
        call_host: HostCaller | None = None,
    ) -> RunReport:
        logs = LogCapture(self.budgets.max_output)
        child = await self._take_child()
        self._active[child] = None
        pins = self._pin(child)
        try:
            conversation = child.conversation
            conversation.begin(call_tool, logs, self.budgets, call_host)
            run = {"t": "run", "code": code, "tools": list(tool_names)}
            conversation.send({**run, "max_output": self.budgets.max_output})
            report: RunReport | None = None
            try:
                async with asyncio.timeout_at(deadline):
                    report = await conversation.done
            except TimeoutError:
                self._active[child] = self._active[child] or late
        finally:
            if pins is not None:
                pins.release()
                self._caller_pins.release()
            stopped = self._active.pop(child, None)
            finished = self._retire(child)
        if stopped is not None:
            return RunReport(failure=stopped, logs=logs.finish())
        if report is None:
            await asyncio.wrap_future(finished)  # it is gone already: quick, and gives stderr
            return RunReport(failure=self._exit_failure(child), logs=logs.finish())
        return RunReport(report.value, report.failure, logs.finish())

    def _pin(self, child: _Child) -> Pins | None:
        """With ``pin_cpu``: the loop's thread and the child's threads on the loop's CPU."""
        if not self._pin_cpu:
            return None
        cpu = self._caller_pins.acquire()
        if cpu is None:
            return None
        pins = Pins(cpu)
        pins.pin_process(child.process.pid)
        return pins

    async def cancel(self) -> None:
        """Kill every run in progress; each reports kind ``abort``."""
        for child in list(self._active):
            self._active[child] = self._active[child] or ProgramFailure(
                "abort", "the run was cancelled"
            )
            child.kill()

    async def aclose(self) -> None:
        """Kill running programs and spare processes; a later run starts new ones."""
        await self.cancel()
        spares = list(self._spares)
        self._spares.clear()
        await asyncio.get_running_loop().run_in_executor(self._threads, _finish_all, spares)

    # -- processes -----------------------------------------------------------------------------

    async def _take_child(self) -> _Child:
        while self._spares:
            spare = self._spares.pop(0)
            try:
                child = await asyncio.wrap_future(spare)
            except OSError:
                logger.warning("a spare Deno process failed to start", exc_info=True)
                continue
            if not child.alive:
                self._threads.submit(child.finish)
                continue
            try:
                await child.attach()
            except ConfigurationError:
                logger.warning("a spare Deno process failed to start", exc_info=True)
                continue
            return child
        child = await asyncio.wrap_future(self._threads.submit(self._start))
        await child.attach()
        return child

    def _retire(self, child: _Child) -> Future[None]:
        """Kill a used process, reap it in a thread, and start its replacement spare.

        Why after the run and not when the spare is taken: starting Deno costs ~45 ms of CPU,
        which would compete with the run it is meant to make fast.
        """
        child.kill()
        child.detach()
        finished = self._threads.submit(child.finish)
        while len(self._spares) < self._spares_wanted:
            self._spares.append(self._threads.submit(self._start))
        return finished

    def _start(self) -> _Child:
        heap_mb = max(self.budgets.max_memory // (1024 * 1024), 16)
        argv = [
            self._deno or _deno_binary(),
            "run",
            "--no-prompt",
            "--no-remote",
            "--no-npm",
            "--no-config",
            "--no-lock",
            "--quiet",
            f"--v8-flags=--max-old-space-size={heap_mb}",
            _host_script(),
        ]
        env = {"DENO_DIR": _deno_cache_dir(), "NO_COLOR": "1", "DENO_NO_UPDATE_CHECK": "1"}
        return _Child.start(argv, env, self.budgets.max_memory + DATA_HEADROOM)

    def _exit_failure(self, child: _Child) -> ProgramFailure:
        tail = child.stderr_tail.decode(errors="replace")
        if "out of memory" in tail.lower() or "heap limit" in tail.lower():
            return out_of_memory(self.budgets)
        code = child.process.returncode
        return ProgramFailure("substrate_exit", f"the JavaScript process exited (status {code})")


class _Conversation(asyncio.Protocol):
    """The host's side of one Deno process's protocol, driven by its pipes' callbacks.

    Why callbacks and not a reading task: each hop through the loop's ready queue is a
    wake-up on the way from a call to its reply. Lines are split and served in `data_received`
    as they arrive, each call gets a task that runs it (see `_Call`), and replies go straight
    to the pipe's transport (no writer task, no ``drain``: what a program's calls can queue
    there is bounded by ``max_sub_calls``). A reply leaves at once when no other call is
    unanswered; replies that become ready in one loop turn while others are still out (several
    calls committing at once) leave in one write, at the start of the next turn.

    Every line is untrusted: the program shares its realm with the host script and may have
    broken it, or may write lines of its own. A line that is not JSON is program output; a
    JSON message of the wrong shape ends the run as ``invalid_output``, never as an exception.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, writer: asyncio.WriteTransport) -> None:
        self._loop = loop
        self._writer = writer
        self.ready: asyncio.Future[bytes] = loop.create_future()
        """The process's first line (empty if it died first)."""
        self.done: asyncio.Future[RunReport | None] = loop.create_future()
        """The run's report, or ``None`` when the process ended first."""
        self._partial: list[bytes] = []
        self._partial_size = 0
        self._early: list[bytes] | None = []  # lines that came before `begin`
        self._outbox: list[bytes] = []
        self._unanswered = 0  # calls started and not answered yet
        self._call_tool: ToolCaller | None = None
        self._call_host: HostCaller | None = None
        self._host_ids: set[int] = set()  # the ids of host-function calls, answered at once
        self._logs: LogCapture | None = None
        self._budgets = Budgets()
        self._context = contextvars.Context()
        self.calls: dict[int, _Call] = {}
        """Every call of the run by its id, answered or not (an id is never reused)."""

    def begin(
        self,
        call_tool: ToolCaller,
        logs: LogCapture,
        budgets: Budgets,
        call_host: HostCaller | None = None,
    ) -> None:
        """Serve a run: from now on, lines are the program's messages (``call_host`` answers
        its ``search_tools`` and ``describe_tool``).

        Must be called in the run's task: each call's coroutine runs in a copy of its context,
        as a task created there would.
        """
        self._call_tool, self._logs, self._budgets = call_tool, logs, budgets
        self._call_host = call_host
        self._context = contextvars.copy_context()
        early, self._early = self._early or [], None
        for line in early:
            if self.done.done():
                return
            self._line(line)

    def send(self, message: dict[str, Any]) -> None:
        """Write one message now (the ``run`` message)."""
        # ASCII: a lone surrogate in a program's code must not fail the write
        self._write(dumps_plain(message).encode() + b"\n")

    def close(self) -> None:
        """Stop serving: drop unanswered calls (the lane answers them when it stops)."""
        self._finish(None)
        for call in self.calls.values():
            call.drop()
        self._outbox.clear()

    # -- the pipe's callbacks ------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        start = 0
        while not self.done.done():
            end = data.find(b"\n", start)
            if end < 0:
                break
            if self._partial:
                self._partial.append(data[start:end])
                line = b"".join(self._partial)
                self._partial.clear()
                self._partial_size = 0
            else:
                line = data[start:end]
            start = end + 1
            if len(line) > STREAM_LIMIT:
                self._too_long()
                return
            self._serve(line)
        if start < len(data) and not self.done.done():
            self._partial.append(data[start:])
            self._partial_size += len(data) - start
            if self._partial_size > STREAM_LIMIT:
                self._too_long()

    def eof_received(self) -> bool:
        if self._partial and not self.done.done():  # a last line without its line break
            line = b"".join(self._partial)
            self._partial.clear()
            self._serve(line)
        self._finish(None)  # the process is gone: killed, crashed, or out of memory
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._finish(None)

    # -- serving lines -------------------------------------------------------------------------

    def _serve(self, line: bytes) -> None:
        if not self.ready.done():
            self.ready.set_result(line)
        elif self._early is not None:
            self._early.append(line)
        else:
            try:
                self._line(line)
            except Exception as exc:  # a defect here must end the run, never hang it
                if not self.done.done():
                    self.done.set_exception(exc)

    def _too_long(self) -> None:
        self._finish(_malformed(f"the program sent more than {STREAM_LIMIT} bytes at once"))

    def _finish(self, report: RunReport | None) -> None:
        if not self.ready.done():
            self.ready.set_result(b"")
        if not self.done.done():
            self.done.set_result(report)

    def _line(self, line: bytes) -> None:
        assert self._logs is not None
        try:  # decoded here: bytes would cost loads_strict a decoder per line
            message = loads_strict(line.decode())
        except ValueError as exc:  # not UTF-8, not JSON, or JSON no call can pass on
            if not self._refuse(line, str(exc)):
                self._logs.write("stdout", line.decode(errors="replace") + "\n")
            return
        problem = _message_problem(message, self.calls, self._host_ids)
        if problem:
            self._finish(_malformed(problem))
            return
        kind = message["t"]
        if kind == "log":
            if message["truncated"]:
                self._logs.mark_truncated()
            else:
                self._logs.write(message["stream"], f"{message['text']}\n")
        elif kind == "call":
            limit = self._budgets.max_sub_calls
            if len(self.calls) >= limit:
                failure = ProgramFailure(
                    "abort", f"the program made more than {limit} tool calls (max_sub_calls)"
                )
                self._finish(RunReport(failure=failure))
                return
            assert self._call_tool is not None
            name = message["name"]
            call = _Call(self, message["id"], name)
            self.calls[call.id] = call
            self._unanswered += 1
            call.start(self._call_tool, message["args"], self._context.copy())
        elif kind == "host":
            self._host(message["id"], message["fn"], message["args"])
        else:
            self._finish(_done(message, self._budgets))

    def _refuse(self, line: bytes, problem: str) -> bool:
        """Fail the call or lookup ``line`` asks for, when its arguments are JSON that cannot be
        passed on (a lone surrogate, say), and say whether it was one.

        Why fail just that call: the program then gets a ToolError it can catch, as Monty's
        would, instead of waiting out its budget for an answer that never comes.
        """
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            return False
        if type(message) is not dict or message.get("t") not in ("call", "host"):
            return False
        call_id, name = message.get("id"), message.get("name", message.get("fn"))
        if type(call_id) is not int or call_id in self.calls or call_id in self._host_ids:
            return False
        self._host_ids.add(call_id)  # answered now, like a lookup: no task, no lane
        tool = encodable_text(name) if isinstance(name, str) else "?"
        problem = json_problem(message.get("args"), "the arguments") or problem
        reason = f"{encodable_text(problem)}, so they cannot be passed on"
        error = {"t": "result", "id": call_id, "ok": False, "tool": tool, "message": reason}
        self._outbox.append(dumps_plain(error).encode() + b"\n")
        self._flush()
        return True

    def _host(self, call_id: int, function: str, args: Any) -> None:
        """Answer a host function now (it is no tool call: no task, no lane)."""
        self._host_ids.add(call_id)
        call_host = self._call_host
        if call_host is None:
            outcome = Outcome.failure(function, f"{function} is not available in this run")
        else:
            try:
                outcome = call_host(function, args)
            except Exception:
                logger.exception("call_host raised for %r", function)
                outcome = Outcome.failure(function, f"{function} failed")
        if outcome.error is not None:
            line = dumps_plain({"t": "result", "id": call_id, "ok": False, **outcome.error})
        else:
            line = dumps_plain({"t": "result", "id": call_id, "ok": True, "value": outcome.value})
        self._outbox.append(line.encode() + b"\n")
        self._flush()

    # -- replies -------------------------------------------------------------------------------

    def answer(self, call: _Call, outcome: Outcome) -> None:
        """Write the reply to ``call``: now when no other call is unanswered, else with the
        other replies of this loop turn, in one write at the start of the next.

        Why now: with no call left unanswered, no other reply can join this one in the loop
        turn, and waiting for the next turn would only add one to the round trip.
        """
        self._unanswered -= 1
        if self.done.done():
            return
        name = call.name
        value = None if outcome.error is not None else snapshot(outcome.value)
        problem = None if outcome.error is not None else json_problem(value, "the result")
        if problem:
            outcome = Outcome.failure(name, f"{problem}, so it cannot be passed to the program")
        if outcome.error is not None:
            error = {"t": "result", "id": call.id, "ok": False, **outcome.error}
            line = dumps_plain(error).encode() + b"\n"
        else:  # the envelope as json.dumps would write it, around the value alone
            line = b'{"t": "result", "id": %d, "ok": true, "value": %b}\n' % (
                call.id,
                dumps_plain(value).encode(),
            )
        if not self._unanswered:
            if self._outbox:
                self._outbox.append(line)
                self._flush()
            else:
                self._write(line)
            return
        if not self._outbox:
            self._loop.call_soon(self._flush)
        self._outbox.append(line)

    def _flush(self) -> None:
        if self._outbox:
            data = b"".join(self._outbox)
            self._outbox.clear()
            self._write(data)

    def _write(self, data: bytes) -> None:
        if not self._writer.is_closing():
            self._writer.write(data)


class _Call:
    """One sub-call: its ``call_tool`` coroutine, in a task of its own that writes its reply.

    Why a task per call: a tool must run inside a task (``asyncio.timeout``, ``current_task``
    and the HTTP clients that look their loop up through it fail outside one), and the lane
    runs a call that may start at once right in the task that awaits it
    (`Scheduler.call_in_task`). A call stepped by hand outside any task made the lane start a
    worker task for it anyway, and the outcome came back through a future's callbacks: three
    loop turns more per call than this task, whose one step runs the tool, commits it and
    writes the reply. The task runs in its own copy of the run's context.
    """

    __slots__ = ("_conversation", "_task", "id", "name")

    def __init__(self, conversation: _Conversation, call_id: int, name: str) -> None:
        self._conversation = conversation
        self.id = call_id
        self.name = name
        self._task: asyncio.Task[None] | None = None

    def start(self, call_tool: ToolCaller, args: Any, context: contextvars.Context) -> None:
        """Start the task; ``call_tool`` is called in it (a task cancelled before it ran
        leaves no coroutine never awaited)."""
        run = self._run(call_tool, args)
        self._task = self._conversation._loop.create_task(run, context=context)

    def drop(self) -> None:
        """Abandon the call (the run is over): its task is cancelled where it waits."""
        if self._task is not None:
            self._task.cancel()

    async def _run(self, call_tool: ToolCaller, args: Any) -> None:
        conversation = self._conversation
        try:
            outcome = await call_tool(self.name, args)
        except asyncio.CancelledError:
            cancelled = Outcome.failure(self.name, "the call was cancelled", "cancelled")
            conversation.answer(self, cancelled)
            raise
        except Exception:
            logger.exception("call_tool raised for the tool %r", self.name)
            outcome = Outcome.failure(self.name, "the call failed")
        conversation.answer(self, outcome)


def _done(message: dict[str, Any], budgets: Budgets) -> RunReport:
    if message["ok"]:
        return RunReport(value=message["value"])
    kind: FailureKind = "invalid_output" if message["kind"] == "invalid_output" else "exception"
    text = message["message"]
    if "Array buffer allocation failed" in text:  # RLIMIT_DATA refused the memory
        return RunReport(failure=out_of_memory(budgets))
    return RunReport(failure=ProgramFailure(kind, text))


def _malformed(problem: str) -> RunReport:
    return RunReport(
        failure=ProgramFailure(
            "invalid_output",
            f"the sandbox sent a malformed message ({problem}); a program cannot speak the "
            "host's protocol itself",
        )
    )


_FIELDS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "log": {"stream": str, "text": str, "truncated": bool},
    "call": {"id": int, "name": str, "args": object},  # the lane refuses args not an object,
    "host": {"id": int, "fn": str, "args": object},  # as it does a Python program's
    "done": {"ok": bool},
}
_FAILED_DONE: dict[str, type | tuple[type, ...]] = {"kind": str, "message": str}


def _message_problem(
    message: Any, calls: dict[int, Any], host_ids: set[int] | None = None
) -> str | None:
    """What is wrong with a message from the sandbox, or ``None`` when it is well formed."""
    if (  # the common case, a well-formed call, at a glance (JSON gives exact types)
        type(message) is dict
        and message.get("t") == "call"
        and type(message.get("id")) is int
        and type(message.get("name")) is str
        and type(message.get("args")) is dict
        and message["id"] not in calls
        and (not host_ids or message["id"] not in host_ids)
    ):
        return None
    if not isinstance(message, dict) or message.get("t") not in _FIELDS:
        return "not a log, call, host or done message"
    kind = message["t"]
    fields = _FIELDS[kind]
    if kind == "done":
        fields = {**fields, **({"value": object} if message.get("ok") is True else _FAILED_DONE)}
    for name, expected in fields.items():
        if name not in message:
            return f"a {kind} message without {name!r}"
        value = message[name]
        if isinstance(value, bool) and expected is not bool and expected is not object:
            return f"{name!r} of a {kind} message is a boolean"
        if not isinstance(value, expected):
            return f"{name!r} of a {kind} message is a {type(value).__name__}"
    if kind == "log" and message["stream"] not in ("stdout", "stderr"):
        return f"a log message for the stream {message['stream']!r}"
    if kind in ("call", "host") and (message["id"] in calls or message["id"] in (host_ids or ())):
        return f"a second call with the id {message['id']}"
    if kind == "host" and message["fn"] not in ("search_tools", "describe_tool"):
        return f"a host call of the unknown function {message['fn']!r}"
    return None
