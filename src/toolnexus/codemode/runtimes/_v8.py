"""``V8Runtime``: JavaScript programs in V8, in a Deno subprocess with no permissions.

Why a subprocess and not embedded V8 (``mini-racer``): measured in
``../shared/design/RUNTIMES.md``: an in-process V8 cannot stop a loop that starts after an
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
import contextlib
import json
import logging
import os
import resource
import subprocess
import tempfile
from collections.abc import Coroutine, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from toolnexus.codemode.runtimes._base import (
    Budgets,
    FailureKind,
    LogCapture,
    ProgramFailure,
    RunReport,
    ToolCaller,
)
from toolnexus.errors import ConfigurationError
from toolnexus.scheduling import Outcome, snapshot

__all__ = ["V8Runtime"]

T = TypeVar("T")

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
            "V8Runtime needs the deno binary: pip install 'toolnexus[v8]' (the deno package), "
            "or pass deno_path=."
        ) from exc
    path: str = find_deno_bin()
    return path


def _host_script() -> Path:
    return Path(str(resources.files("toolnexus.codemode.runtimes") / "_v8_host.js"))


class _Child:
    """One Deno process, for one program.

    Why ``subprocess.Popen`` in a thread plus connected pipes, not ``asyncio`` subprocesses:
    cancelling ``create_subprocess_exec`` at the wrong moment (interpreter shutdown with a spare
    starting) waits for a child that is never reported gone; a plain ``Popen`` has no child
    watcher to wait on. stderr goes to a temporary file, so it can never fill a pipe and stall
    the child, and its tail says why a child died (a V8 out-of-memory, say).
    """

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        stdout: asyncio.StreamReader,
        stdin: asyncio.StreamWriter,
        stderr: Any,
    ) -> None:
        self.process = process
        self.stdout = stdout
        self._stdin = stdin
        self._stderr = stderr
        self.stderr_tail = b""
        self._ready = False

    @classmethod
    async def spawn(cls, argv: list[str], env: dict[str, str], data_limit: int) -> _Child:
        """Start a process (in a thread: forking is not free) and connect its pipes."""

        def limit_memory() -> None:  # runs in the child, before exec
            resource.setrlimit(resource.RLIMIT_DATA, (data_limit, data_limit))

        loop = asyncio.get_running_loop()
        stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in reap()

        def start() -> subprocess.Popen[bytes]:
            return subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=env,
                preexec_fn=limit_memory,
            )

        process = await loop.run_in_executor(None, start)
        reader = asyncio.StreamReader(limit=STREAM_LIMIT)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), process.stdout)
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, process.stdin
        )
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
        return cls(process, reader, writer, stderr)

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    async def ready(self) -> None:
        """Wait for the process to say it is ready; raises ConfigurationError if it died."""
        if self._ready:
            return
        line = await self.stdout.readline()
        if not line.startswith(b'{"t":"ready"'):
            await self.reap()
            detail = self.stderr_tail.decode(errors="replace").strip()
            raise ConfigurationError(f"the Deno process did not start: {detail or line!r}")
        self._ready = True

    async def send(self, message: dict[str, Any]) -> None:
        if self._stdin.is_closing():
            return
        self._stdin.write(json.dumps(message, ensure_ascii=False).encode() + b"\n")
        with contextlib.suppress(ConnectionError):
            await self._stdin.drain()

    def kill(self) -> None:
        if self.alive:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()

    async def reap(self) -> None:
        """Kill the process if needed, wait for it, and keep the tail of its stderr."""
        self.kill()
        self._stdin.close()
        await asyncio.get_running_loop().run_in_executor(None, self.process.wait)
        with contextlib.suppress(OSError, ValueError):
            self._stderr.seek(0, os.SEEK_END)
            self._stderr.seek(max(self._stderr.tell() - 4000, 0))
            self.stderr_tail = self._stderr.read()
            self._stderr.close()


class V8Runtime:
    """Runs JavaScript programs in V8 (a Deno subprocess with no permissions).

    Args:
        timeout: Seconds of wall clock per run (tool waits included). Default 30.
        max_memory: Bytes for the program: V8 heap and, with headroom for Deno itself, the
            process's data segment (ArrayBuffers included). Default 256 MiB.
        max_output: Bytes of logs kept per run. Default 1,000,000.
        max_sub_calls: Tool calls per run. Default 1,000.
        spares: Processes kept started and waiting, so a run need not wait for one (default 1).
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
        spares: int = 1,
        deno_path: str | None = None,
    ) -> None:
        self.budgets = Budgets(timeout, max_memory, max_output, max_sub_calls)
        if isinstance(spares, bool) or not isinstance(spares, int) or spares < 0:
            raise ConfigurationError(f"V8Runtime spares must be 0 or more, got {spares!r}.")
        self._spares_wanted = spares
        self._deno = deno_path
        self._spares: list[asyncio.Task[_Child]] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._active: dict[_Child, ProgramFailure | None] = {}
        self._cache_dir = tempfile.mkdtemp(prefix="toolnexus-deno-")

    def __repr__(self) -> str:
        return f"<V8Runtime {self.budgets}>"

    async def run(
        self, code: str, *, tool_names: Sequence[str], call_tool: ToolCaller, sdk: str
    ) -> RunReport:
        """Run one JavaScript program; see :class:`~toolnexus.codemode.runtimes.CodeRuntime`.

        Cancelling the awaiting task kills the process.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.budgets.timeout
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
            try:
                async with asyncio.timeout_at(deadline):
                    report = await self._converse(child, call_tool, logs, calls)
            except TimeoutError:
                self._active[child] = self._active[child] or ProgramFailure(
                    "timeout", f"the program ran past its {self.budgets.timeout:g} s time budget"
                )
                report = RunReport()
        finally:
            for task in calls.values():
                task.cancel()
            stopped = self._active.pop(child, None)
            self._retire(child)
        if stopped is not None:
            return RunReport(failure=stopped, logs=logs.finish())
        if report.failure is None and report.value is _EXITED:
            await asyncio.shield(child.reap())  # it is gone already: cheap, and gives stderr
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
        """Kill running programs and spare processes."""
        await self.cancel()
        spares, self._spares = self._spares, []
        for spare in spares:
            with contextlib.suppress(Exception):
                await (await spare).reap()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- processes -----------------------------------------------------------------------------

    async def _take_child(self) -> _Child:
        loop = asyncio.get_running_loop()
        while self._spares:
            spare = self._spares.pop(0)
            if spare.get_loop() is not loop:  # started under an event loop that is gone
                _discard(spare)
                continue
            try:
                child = await spare
                await child.ready()
            except (ConfigurationError, OSError):
                logger.warning("a spare Deno process failed to start", exc_info=True)
                continue
            if child.alive:
                return child
        child = await self._spawn()
        await child.ready()
        return child

    def _retire(self, child: _Child) -> None:
        """Kill a used process, reap it in the background, and start its replacement spare.

        Why after the run and not when the spare is taken: starting Deno costs ~45 ms of CPU,
        which would compete with the run it is meant to make fast.
        """
        child.kill()
        self._background(child.reap())
        while len(self._spares) < self._spares_wanted:
            self._spares.append(self._background(self._spawn()))

    def _background(self, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _spawn(self) -> _Child:
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
            str(_host_script()),
        ]
        env = {"DENO_DIR": self._cache_dir, "NO_COLOR": "1", "DENO_NO_UPDATE_CHECK": "1"}
        return await _Child.spawn(argv, env, self.budgets.max_memory + DATA_HEADROOM)

    def _out_of_memory(self) -> ProgramFailure:
        limit = self.budgets.max_memory
        return ProgramFailure("abort", f"the program ran out of memory (limit {limit} bytes)")

    def _exit_failure(self, child: _Child) -> ProgramFailure:
        tail = child.stderr_tail.decode(errors="replace")
        if "out of memory" in tail.lower() or "heap limit" in tail.lower():
            return self._out_of_memory()
        code = child.process.returncode
        return ProgramFailure("substrate_exit", f"the JavaScript process exited (status {code})")

    # -- the conversation ----------------------------------------------------------------------

    async def _converse(
        self,
        child: _Child,
        call_tool: ToolCaller,
        logs: LogCapture,
        calls: dict[int, asyncio.Task[None]],
    ) -> RunReport:
        stdout = child.stdout
        assert stdout is not None
        sub_calls = 0
        while True:
            try:
                line = await stdout.readline()
            except ValueError:  # a line past STREAM_LIMIT
                return RunReport(
                    failure=ProgramFailure(
                        "invalid_output", f"the program sent more than {STREAM_LIMIT} bytes at once"
                    )
                )
            if not line:
                return RunReport(value=_EXITED)
            try:
                message = json.loads(line)
            except ValueError:
                logs.write("stdout", line.decode(errors="replace"))
                continue
            kind = message.get("t") if isinstance(message, dict) else None
            if kind == "log":
                if message.get("truncated"):
                    logs.mark_truncated()
                else:
                    logs.write(str(message.get("stream")), f"{message.get('text', '')}\n")
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
                call_id = message.get("id")
                calls[call_id] = asyncio.ensure_future(
                    self._call(child, call_tool, call_id, message.get("name"), message.get("args"))
                )
            elif kind == "done":
                if message.get("ok"):
                    return RunReport(value=snapshot(message.get("value")))
                failure_kind: FailureKind = (
                    "invalid_output" if message.get("kind") == "invalid_output" else "exception"
                )
                text = str(message.get("message", ""))
                if "Array buffer allocation failed" in text:  # RLIMIT_DATA refused the memory
                    return RunReport(failure=self._out_of_memory())
                return RunReport(failure=ProgramFailure(failure_kind, text))

    async def _call(
        self, child: _Child, call_tool: ToolCaller, call_id: Any, name: Any, args: Any
    ) -> None:
        outcome: Outcome = await call_tool(str(name), args)
        if outcome.error is not None:
            reply = {"t": "result", "id": call_id, "ok": False, **outcome.error}
        else:
            reply = {"t": "result", "id": call_id, "ok": True, "value": snapshot(outcome.value)}
        await child.send(reply)


def _discard(spare: asyncio.Task[_Child]) -> None:
    """Kill the process of a spare from another event loop (it cannot be awaited here)."""
    if spare.done() and not spare.cancelled() and spare.exception() is None:
        spare.result().kill()
    else:
        spare.cancel()


_EXITED: Any = object()
"""Marks a conversation that ended because the process did (killed, crashed, out of memory)."""
