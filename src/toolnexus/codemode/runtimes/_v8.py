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
from toolnexus._json import json_problem, loads_strict
from toolnexus.codemode.runtimes._base import (
    Budgets,
    FailureKind,
    LogCapture,
    ProgramFailure,
    RunReport,
    RunSlots,
    ToolCaller,
    out_of_memory,
    patience_deadline,
    run_deadline,
)
from toolnexus.errors import ConfigurationError
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
        raise ConfigurationError(
            "V8Runtime needs the deno binary: pip install deno (the v8 extra of toolnexus), "
            "or pass deno_path=."
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
        self._stdout: asyncio.StreamReader | None = None
        self._stdin: asyncio.StreamWriter | None = None
        self._read_transport: asyncio.BaseTransport | None = None
        self.stderr_tail = b""

    @classmethod
    def start(cls, argv: list[str], env: dict[str, str], data_limit: int) -> _Child:
        """Start the process. Blocking (a fork): call it in a worker thread."""

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
            preexec_fn=limit_memory,
        )
        return cls(process, stderr)

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    @property
    def stdout(self) -> asyncio.StreamReader:
        """The process's protocol lines (connected by `attach`)."""
        if self._stdout is None:
            raise RuntimeError("the Deno process is not attached to an event loop")
        return self._stdout

    async def attach(self) -> None:
        """Connect the pipes to the running loop and wait for the process to be ready.

        Raises:
            ConfigurationError: the process died before it was ready.
        """
        loop = asyncio.get_running_loop()
        reader = self._stdout = asyncio.StreamReader(limit=STREAM_LIMIT)
        self._read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), self.process.stdout
        )
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, self.process.stdin
        )
        self._stdin = asyncio.StreamWriter(transport, protocol, None, loop)
        line = await reader.readline()
        if not line.startswith(b'{"t":"ready"'):
            self.detach()
            await asyncio.get_running_loop().run_in_executor(None, self.finish)
            detail = self.stderr_tail.decode(errors="replace").strip()
            raise ConfigurationError(f"the Deno process did not start: {detail or line!r}")

    async def send(self, message: dict[str, Any]) -> None:
        stdin = self._stdin
        if stdin is None or stdin.is_closing():
            return
        # ASCII: a lone surrogate in a program's code must not fail the write
        stdin.write(json.dumps(message).encode() + b"\n")
        with contextlib.suppress(ConnectionError):
            await stdin.drain()

    def kill(self) -> None:
        if self.alive:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()

    def detach(self) -> None:
        """Close the pipes' transports (on the loop that opened them)."""
        if self._stdin is not None:
            self._stdin.close()
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
            return await self._run(code, tool_names, call_tool, deadline, late)
        finally:
            self._slots.release()

    async def _run(
        self,
        code: str,
        tool_names: Sequence[str],
        call_tool: ToolCaller,
        deadline: float,
        late: ProgramFailure,
    ) -> RunReport:
        logs = LogCapture(self.budgets.max_output)
        child = await self._take_child()
        self._active[child] = None
        calls: dict[int, asyncio.Task[None]] = {}
        try:
            await child.send(
                {
                    "t": "run",
                    "code": code,
                    "tools": list(tool_names),
                    "max_output": self.budgets.max_output,
                }
            )
            report: RunReport | None = None
            try:
                async with asyncio.timeout_at(deadline):
                    report = await self._converse(child, call_tool, logs, calls)
            except TimeoutError:
                self._active[child] = self._active[child] or late
        finally:
            for task in calls.values():
                task.cancel()
            stopped = self._active.pop(child, None)
            finished = self._retire(child)
        if stopped is not None:
            return RunReport(failure=stopped, logs=logs.finish())
        if report is None:
            await asyncio.wrap_future(finished)  # it is gone already: quick, and gives stderr
            return RunReport(failure=self._exit_failure(child), logs=logs.finish())
        return RunReport(report.value, report.failure, logs.finish())

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

    # -- the conversation ----------------------------------------------------------------------

    async def _converse(
        self,
        child: _Child,
        call_tool: ToolCaller,
        logs: LogCapture,
        calls: dict[int, asyncio.Task[None]],
    ) -> RunReport | None:
        """Serve the program's messages until it is done; ``None`` if the process died first.

        Every line is untrusted: the program shares its realm with the host script and may have
        broken it, or may write lines of its own. A line that is not JSON is program output; a
        JSON message of the wrong shape ends the run as ``invalid_output``, never as an
        exception here.
        """
        stdout = child.stdout
        sub_calls = 0
        while True:
            try:
                line = await stdout.readline()
            except ValueError:  # a line past STREAM_LIMIT
                return _malformed(f"the program sent more than {STREAM_LIMIT} bytes at once")
            if not line:
                return None  # the process is gone: killed, crashed, or out of memory
            try:
                message = loads_strict(line)
            except ValueError:
                logs.write("stdout", line.decode(errors="replace"))
                continue
            problem = _message_problem(message, calls)
            if problem:
                return _malformed(problem)
            kind = message["t"]
            if kind == "log":
                if message["truncated"]:
                    logs.mark_truncated()
                else:
                    logs.write(message["stream"], f"{message['text']}\n")
            elif kind == "call":
                sub_calls += 1
                if sub_calls > self.budgets.max_sub_calls:
                    limit = self.budgets.max_sub_calls
                    return RunReport(
                        failure=ProgramFailure(
                            "abort",
                            f"the program made more than {limit} tool calls (max_sub_calls)",
                        )
                    )
                call_id = message["id"]
                calls[call_id] = asyncio.ensure_future(
                    self._call(child, call_tool, call_id, message["name"], message["args"])
                )
            else:
                return self._done(message)

    def _done(self, message: dict[str, Any]) -> RunReport:
        if message["ok"]:
            return RunReport(value=message["value"])
        kind: FailureKind = "invalid_output" if message["kind"] == "invalid_output" else "exception"
        text = message["message"]
        if "Array buffer allocation failed" in text:  # RLIMIT_DATA refused the memory
            return RunReport(failure=out_of_memory(self.budgets))
        return RunReport(failure=ProgramFailure(kind, text))

    async def _call(
        self, child: _Child, call_tool: ToolCaller, call_id: int, name: str, args: Any
    ) -> None:
        outcome: Outcome = await call_tool(name, args)
        value = None if outcome.error is not None else snapshot(outcome.value)
        problem = None if outcome.error is not None else json_problem(value, "the result")
        if problem:
            outcome = Outcome.failure(name, f"{problem}, so it cannot be passed to the program")
        if outcome.error is not None:
            reply = {"t": "result", "id": call_id, "ok": False, **outcome.error}
        else:
            reply = {"t": "result", "id": call_id, "ok": True, "value": value}
        await child.send(reply)


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
    "call": {"id": int, "name": str, "args": dict},
    "done": {"ok": bool},
}
_FAILED_DONE: dict[str, type | tuple[type, ...]] = {"kind": str, "message": str}


def _message_problem(message: Any, calls: dict[int, Any]) -> str | None:
    """What is wrong with a message from the sandbox, or ``None`` when it is well formed."""
    if not isinstance(message, dict) or message.get("t") not in _FIELDS:
        return "not a log, call or done message"
    kind = message["t"]
    fields = dict(_FIELDS[kind])
    if kind == "done":
        fields.update({"value": object} if message.get("ok") is True else _FAILED_DONE)
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
    if kind == "call" and message["id"] in calls:
        return f"a second call with the id {message['id']}"
    return None
