"""``bash``, ``bash_output``, ``kill_shell``: shell commands in the working directory.

Each command runs in its own process group (a new session), and carries a marker in its
environment that every process it starts inherits. A timeout, a cancellation or ``kill_shell``
kills the group *and* every process carrying the marker, so a descendant that moved to a
session of its own (``setsid``, a daemon) dies too; only one that also cleared its environment
escapes (use a container for hostile commands). Output (stdout and stderr together) is kept
while it streams, bounded: the first and last part, with a note of what was cut between them;
a background shell keeps its unread output the same way until ``bash_output`` reads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import uuid
import weakref
from collections.abc import Iterator
from typing import Annotated

from pydantic import Field

from toolnexus._text import clip_middle
from toolnexus.tools._decorator import tool
from toolnexus.tools._tool import Tool
from toolnexus.tools.builtins._files import READ_ONLY, WRITES
from toolnexus.tools.builtins._root import Root

__all__ = ["DEFAULT_TIMEOUT", "MAX_OUTPUT_CHARS", "Shells", "shell_tools"]

DEFAULT_TIMEOUT = 120.0
MAX_OUTPUT_CHARS = 30_000
KILL_GRACE = 2.0


KEEP_BYTES = 4 * MAX_OUTPUT_CHARS
"""Bytes of output kept at each end while a command runs (the text is cut to
`MAX_OUTPUT_CHARS` characters when it is read)."""
MARKER = "TOOLNEXUS_SHELL_ID"


class BoundedOutput:
    """A command's output while it streams: its first and last `KEEP_BYTES` bytes."""

    def __init__(self, keep: int = KEEP_BYTES) -> None:
        self._keep = keep
        self._head = bytearray()
        self._tail = bytearray()
        self._dropped = 0

    def add(self, chunk: bytes) -> None:
        """Keep what fits at the head, the rest at the tail, dropping the tail's oldest bytes."""
        room = self._keep - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self._tail += chunk
            excess = len(self._tail) - self._keep
            if excess > 0:
                del self._tail[:excess]
                self._dropped += excess

    def take(self) -> str:
        """The text so far, at most `MAX_OUTPUT_CHARS` characters: its start and end,
        with a note of how much was cut between them. Starts afresh."""
        head = self._head.decode("utf-8", errors="replace")
        tail = self._tail.decode("utf-8", errors="replace")
        dropped = self._dropped
        self._head, self._tail, self._dropped = bytearray(), bytearray(), 0
        if not dropped:
            return clip_middle(head + tail, MAX_OUTPUT_CHARS)
        half = MAX_OUTPUT_CHARS // 2
        cut = dropped + len(head[half:].encode()) + len(tail[:-half].encode())
        return f"{head[:half]}\n… ({cut} bytes cut) …\n{tail[-half:]}"


class _Shell:
    """One running command: its process and the marker its descendants inherit."""

    def __init__(self, process: asyncio.subprocess.Process, marker: str) -> None:
        self.process = process
        self.marker = f"{MARKER}={marker}".encode()

    def kill(self) -> None:
        """Kill the command's process group and every process carrying its marker."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        for _ in range(3):  # a process may fork while we kill: look again
            marked = list(_marked(self.marker))
            for pid in marked:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            if not marked:
                return

    async def read_into(self, output: BoundedOutput) -> None:
        """Read the output until it ends and the process has exited."""
        assert self.process.stdout is not None
        while chunk := await self.process.stdout.read(65536):
            output.add(chunk)
        await self.process.wait()


def _marked(marker: bytes) -> Iterator[int]:
    """The processes whose environment holds ``marker`` (Linux ``/proc``; elsewhere none)."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as environ:
                entries = environ.read().split(b"\0")
        except OSError:  # gone, or not ours to read
            continue
        if marker in entries:
            yield int(name)


class _Background:
    """One background shell: its command and the output not yet read."""

    def __init__(self, shell: _Shell) -> None:
        self.shell = shell
        self.process = shell.process
        self.unread = BoundedOutput()
        self.reader = asyncio.ensure_future(shell.read_into(self.unread))

    def take(self) -> str:
        return self.unread.take()


def _kill_all(shells: dict[str, _Background]) -> None:
    for background in shells.values():
        if background.process.returncode is None:
            background.shell.kill()


class Shells:
    """The background shells of one tool set, by id.

    Shells still running when the tool set is garbage-collected (or at exit) are killed with
    everything they started: a background command never outlives the tools that started it.
    """

    def __init__(self) -> None:
        self._shells: dict[str, _Background] = {}
        self._ids = itertools.count(1)
        weakref.finalize(self, _kill_all, self._shells)

    def add(self, shell: _Shell) -> str:
        shell_id = f"shell_{next(self._ids)}"
        self._shells[shell_id] = _Background(shell)
        return shell_id

    def get(self, shell_id: str) -> _Background:
        shell = self._shells.get(shell_id)
        if shell is None:
            known = ", ".join(self._shells) or "none"
            raise KeyError(f"no background shell {shell_id!r} (known: {known})")
        return shell

    async def close(self) -> None:
        """Kill every background shell (and its children)."""
        for background in self._shells.values():
            background.shell.kill()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(background.reader, KILL_GRACE)


def shell_tools(root: Root, shells: Shells) -> list[Tool]:
    """``bash``, ``bash_output`` and ``kill_shell``, running in ``root``."""

    async def start(command: str) -> _Shell:
        marker = uuid.uuid4().hex
        process = await asyncio.create_subprocess_exec(
            "/bin/bash",
            "-c",
            command,
            cwd=root.path,
            env={**os.environ, MARKER: marker},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,  # its own process group: killed as a whole
        )
        return _Shell(process, marker)

    @tool(name="bash", hints=WRITES)
    async def bash(
        command: str,
        timeout: Annotated[float, Field(gt=0, le=600)] = DEFAULT_TIMEOUT,  # noqa: ASYNC109
        run_in_background: bool = False,
        description: str | None = None,
    ) -> str:
        """Run a shell command in the working directory (stdout and stderr together).

        Args:
            command: The command, run with bash -c.
            timeout: Seconds before the command and everything it started are killed.
            run_in_background: Return a shell id at once; read with bash_output, stop with
                kill_shell.
            description: What the command does, in a few words (for logs and approvals).
        """
        shell = await start(command)
        if run_in_background:
            return f"started {shells.add(shell)} in the background"
        output = BoundedOutput()
        try:
            await asyncio.wait_for(shell.read_into(output), timeout)
        except TimeoutError:
            shell.kill()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(shell.process.wait(), KILL_GRACE)
            raise TimeoutError(
                f"the command ran past its {timeout:g} s timeout and was killed; raise timeout "
                "or use run_in_background"
            ) from None
        except asyncio.CancelledError:
            shell.kill()
            raise
        text = output.take()
        if shell.process.returncode != 0:
            return f"{text}\n(exit status {shell.process.returncode})"
        return text

    @tool(name="bash_output", hints=READ_ONLY)
    async def bash_output(shell_id: str) -> str:
        """What a background shell printed since the last read, and whether it still runs.

        Args:
            shell_id: The id bash returned.
        """
        shell = shells.get(shell_id)
        await asyncio.sleep(0)  # let the reader take what is already in the pipe
        code = shell.process.returncode
        state = "running" if code is None else f"finished (exit status {code})"
        return f"{shell.take()}\n[{shell_id}: {state}]"

    @tool(name="kill_shell", hints=WRITES)
    async def kill_shell(shell_id: str) -> str:
        """Stop a background shell and everything it started.

        Args:
            shell_id: The id bash returned.
        """
        shell = shells.get(shell_id)
        if shell.process.returncode is not None:
            return f"{shell_id} had already finished (exit status {shell.process.returncode})"
        shell.shell.kill()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(shell.reader, KILL_GRACE)
        return f"killed {shell_id}"

    return [bash, bash_output, kill_shell]
