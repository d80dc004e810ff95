"""``bash``, ``bash_output``, ``kill_shell``: shell commands in the working directory.

Each command runs in its own process group (a new session), so a timeout or ``kill_shell`` ends
the command *and* everything it started. Output is captured (stdout and stderr together) and
capped; a background shell keeps its output until ``bash_output`` reads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import weakref
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


def _kill_group(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


class _Background:
    """One background shell: its process and the output not yet read."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.unread: list[str] = []
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        assert self.process.stdout is not None
        while chunk := await self.process.stdout.read(65536):
            self.unread.append(chunk.decode("utf-8", errors="replace"))
        await self.process.wait()

    def take(self) -> str:
        text, self.unread = "".join(self.unread), []
        return text


def _kill_all(shells: dict[str, _Background]) -> None:
    for shell in shells.values():
        if shell.process.returncode is None:
            _kill_group(shell.process)


class Shells:
    """The background shells of one tool set, by id.

    Shells still running when the tool set is garbage-collected (or at exit) are killed with
    everything they started: a background command never outlives the tools that started it.
    """

    def __init__(self) -> None:
        self._shells: dict[str, _Background] = {}
        self._ids = itertools.count(1)
        weakref.finalize(self, _kill_all, self._shells)

    def add(self, process: asyncio.subprocess.Process) -> str:
        shell_id = f"shell_{next(self._ids)}"
        self._shells[shell_id] = _Background(process)
        return shell_id

    def get(self, shell_id: str) -> _Background:
        shell = self._shells.get(shell_id)
        if shell is None:
            known = ", ".join(self._shells) or "none"
            raise KeyError(f"no background shell {shell_id!r} (known: {known})")
        return shell

    async def close(self) -> None:
        """Kill every background shell (and its children)."""
        for shell in self._shells.values():
            _kill_group(shell.process)
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(shell.reader, KILL_GRACE)


def shell_tools(root: Root, shells: Shells) -> list[Tool]:
    """``bash``, ``bash_output`` and ``kill_shell``, running in ``root``."""

    async def start(command: str) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            "/bin/bash",
            "-c",
            command,
            cwd=root.path,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,  # its own process group: killed as a whole
        )

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
        process = await start(command)
        if run_in_background:
            return f"started {shells.add(process)} in the background"
        try:
            output, _ = await asyncio.wait_for(process.communicate(), timeout)
        except TimeoutError:
            _kill_group(process)
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(process.wait(), KILL_GRACE)
            raise TimeoutError(
                f"the command ran past its {timeout:g} s timeout and was killed; raise timeout "
                "or use run_in_background"
            ) from None
        except asyncio.CancelledError:
            _kill_group(process)
            raise
        text = clip_middle(output.decode("utf-8", errors="replace"), MAX_OUTPUT_CHARS)
        if process.returncode != 0:
            return f"{text}\n(exit status {process.returncode})"
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
        return f"{clip_middle(shell.take(), MAX_OUTPUT_CHARS)}\n[{shell_id}: {state}]"

    @tool(name="kill_shell", hints=WRITES)
    async def kill_shell(shell_id: str) -> str:
        """Stop a background shell and everything it started.

        Args:
            shell_id: The id bash returned.
        """
        shell = shells.get(shell_id)
        if shell.process.returncode is not None:
            return f"{shell_id} had already finished (exit status {shell.process.returncode})"
        _kill_group(shell.process)
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(shell.reader, KILL_GRACE)
        return f"killed {shell_id}"

    return [bash, bash_output, kill_shell]
