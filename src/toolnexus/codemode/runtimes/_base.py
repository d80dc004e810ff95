"""What every Code Mode runtime shares: the protocol, budgets, the run report, log capture.

A runtime runs one program and knows nothing of tools beyond their names: each call the program
makes is handed to ``call_tool(name, args)``, an awaitable that resolves to the call's
[`Outcome`][toolnexus.scheduling.Outcome] once it has committed (the run's scheduler lane sits
behind it). The runtime turns that outcome into a value or a ``ToolError`` inside the sandbox.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from toolnexus._checks import int_at_least, positive_number
from toolnexus._json import json_problem
from toolnexus.errors import ConfigurationError
from toolnexus.scheduling import Outcome

__all__ = [
    "MAX_LOOKUPS",
    "Budgets",
    "CodeRuntime",
    "FailureKind",
    "HostCaller",
    "LogCapture",
    "Patience",
    "ProgramFailure",
    "RunReport",
    "RunSlots",
    "ToolCaller",
    "budget_timeout",
    "json_shape_problem",
    "out_of_memory",
    "patience_deadline",
    "run_deadline",
]

FailureKind = Literal[
    "exception", "timeout", "abort", "substrate_exit", "invalid_output", "type_error"
]

ToolCaller = Callable[[str, Any], Awaitable[Outcome]]
"""``await call_tool(name, args) -> Outcome``: one sub-call, resolved when it has committed."""

HostCaller = Callable[[str, Any], Outcome]
"""``call_host(function, args) -> Outcome``: a host function of the program (``search_tools``,
``describe_tool``), answered at once and called on the event loop. Not a tool call: it takes
no scheduler slot and counts against no sub-call budget, only `MAX_LOOKUPS`."""

MAX_LOOKUPS = 1000
"""The most host-function calls (lookups) one program run may make, whatever its
``max_sub_calls``: each is answered and logged, so a program looping on ``search_tools`` must
meet an end. The host answers the next one with a failure the program can catch."""

DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_MEMORY = 256 * 1024 * 1024
DEFAULT_MAX_OUTPUT = 1_000_000
DEFAULT_MAX_SUB_CALLS = 1000


def _positive(option: str, value: object, *, integer: bool) -> None:
    if not (int_at_least(value, 1) if integer else positive_number(value)):
        kind = "a positive integer" if integer else "a positive number"
        raise ConfigurationError(
            f"runtime option {option} must be {kind}, got {value!r}; leave it out for the default."
        )


@dataclass(frozen=True)
class Budgets:
    """A runtime's limits for every program it runs; a program cannot extend them.

    Attributes:
        timeout: Seconds of wall clock per run, time spent waiting on tool calls included.
        max_memory: Bytes of memory the program may use.
        max_output: Bytes of logs kept; later lines are replaced by one truncation marker (the
            run does not fail).
        max_sub_calls: Tool calls per run; the call past it aborts the run.

    Raises:
        ConfigurationError: a value that is not positive (or not a number), naming the option.
    """

    timeout: float = DEFAULT_TIMEOUT
    max_memory: int = DEFAULT_MAX_MEMORY
    max_output: int = DEFAULT_MAX_OUTPUT
    max_sub_calls: int = DEFAULT_MAX_SUB_CALLS

    def __post_init__(self) -> None:
        _positive("timeout", self.timeout, integer=False)
        _positive("max_memory", self.max_memory, integer=True)
        _positive("max_output", self.max_output, integer=True)
        _positive("max_sub_calls", self.max_sub_calls, integer=True)


Patience = tuple[float, "ProgramFailure"]
"""The caller's patience: the loop time it runs out, and the failure to report then."""


def patience_deadline(loop_time: float, patience: float | None) -> Patience | None:
    """The caller's patience as a deadline counted from ``loop_time`` (the call)."""
    if patience is None:
        return None
    message = f"the run took longer than {patience:g} s (the caller's await_timeout)"
    return loop_time + patience, ProgramFailure("timeout", message)


def run_deadline(
    budgets: Budgets, started: float, patience: Patience | None
) -> tuple[float, ProgramFailure]:
    """When a run that got its worker at ``started`` must stop, and the failure to report then.

    The runtime's time budget counts from ``started``, not from the call: a run queued behind
    busy workers does not spend its budget waiting. The caller's patience, counted from the
    call, ends it earlier when it runs out first (a caller may shorten a run, never extend it).
    """
    deadline = started + budgets.timeout
    if patience is not None and patience[0] < deadline:
        return patience
    return deadline, budget_timeout(budgets)


def budget_timeout(budgets: Budgets) -> ProgramFailure:
    """The failure of a run that ran past the runtime's own time budget."""
    return ProgramFailure("timeout", f"the program ran past its {budgets.timeout:g} s time budget")


def out_of_memory(budgets: Budgets) -> ProgramFailure:
    """The failure of a run that hit the runtime's memory budget."""
    return ProgramFailure(
        "abort", f"the program ran out of memory (limit {budgets.max_memory} bytes)"
    )


@dataclass(frozen=True)
class ProgramFailure:
    """Why a run failed: one of the failure kinds and a message for the model."""

    kind: FailureKind
    message: str


@dataclass(frozen=True)
class RunReport:
    """What a runtime reports of one run: the result or the failure, and the logs."""

    value: Any = None
    failure: ProgramFailure | None = None
    logs: list[Any] = field(default_factory=list)


@runtime_checkable
class CodeRuntime(Protocol):
    """A sandbox that runs model-written programs.

    Implementations: [`MontyRuntime`][toolnexus.codemode.runtimes.MontyRuntime] (Python) and
    [`V8Runtime`][toolnexus.codemode.runtimes.V8Runtime] (JavaScript).
    """

    language: str
    """``"python"`` or ``"javascript"``: the SDK language programs are written in."""

    budgets: Budgets

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
        """Run ``code`` to the end and report; never raises for anything the program does.

        ``tool_names`` are every binding (granted and stubbed); ``sdk`` is the declaration the
        program was written against (the Python runtime type-checks against it). ``call_host``
        answers the program's ``search_tools`` and ``describe_tool`` (without it they fail as
        unavailable). ``patience``
        (seconds) may shorten the time budget for this run, never extend it; the run is then
        stopped and reported as ``timeout`` with its logs so far. Cancelling the awaiting task
        kills the program.
        """
        ...

    async def cancel(self) -> None:
        """Abort every run in progress on this runtime (reported as kind ``abort``)."""
        ...

    async def aclose(self) -> None:
        """Release the runtime's workers; a later run starts them again."""
        ...


class RunSlots:
    """At most ``limit`` runs at once; later runs wait their turn, first come, first served.

    Why not ``asyncio.Semaphore``: a runtime outlives the event loop it was first used in (a
    test, a CLI command, a notebook cell each run their own), and an asyncio primitive is bound
    to one loop. Here the count is guarded by a thread lock and each waiter is a future of its
    own loop, woken through that loop.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._free = limit
        self._lock = threading.Lock()
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    async def acquire(self) -> None:
        """Wait for a slot. Cancelling the wait gives back a slot it may have been handed."""
        with self._lock:
            if self._free > 0 and not self._waiters:
                self._free -= 1
                return
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            with self._lock:
                handed = waiter.done() and not waiter.cancelled()
                if waiter in self._waiters:  # not yet picked by release()
                    self._waiters.remove(waiter)
            if handed:
                self.release()
            raise

    def release(self) -> None:
        """Give a slot back: to the first waiter still waiting, else to the pool."""
        with self._lock:
            while self._waiters:
                waiter = self._waiters.popleft()
                if not waiter.done():
                    waiter.get_loop().call_soon_threadsafe(_hand_over, waiter, self)
                    return
            self._free += 1


def _hand_over(waiter: asyncio.Future[None], slots: RunSlots) -> None:
    """On the waiter's loop: wake it, or, if it was cancelled meanwhile, pass the slot on."""
    if waiter.done():
        slots.release()
    else:
        waiter.set_result(None)


class LogCapture:
    """A run's logs, in order: stdout lines as strings, stderr lines as ``{"stderr": line}``.

    Text arrives in chunks that need not end at line breaks; each stream keeps its partial line
    until the next break or `finish`. Past ``max_output`` bytes, later lines are dropped
    and one marker says so. Thread-safe: a sandbox's driver thread writes while the event loop
    may read the logs of a run it has just killed.
    """

    def __init__(self, max_output: int) -> None:
        self._lock = threading.Lock()
        self._max = max_output
        self._used = 0
        self._partial: dict[str, str] = {"stdout": "", "stderr": ""}
        self.truncated = False
        self.lines: list[Any] = []

    def write(self, stream: str, text: str) -> None:
        """Add ``text`` printed to ``stream`` (``"stdout"`` or ``"stderr"``)."""
        with self._lock:
            self._write(stream, text)

    def _write(self, stream: str, text: str) -> None:
        key = "stderr" if stream == "stderr" else "stdout"
        pending = self._partial[key] + text
        *complete, rest = pending.split("\n")
        self._partial[key] = rest
        for line in complete:
            self._add(key, line)
        if len(rest) > self._max:  # a line that never ends must not grow without bound
            self._partial[key] = ""
            self._add(key, rest)

    def finish(self) -> list[Any]:
        """Flush partial lines and return (a copy of) the logs."""
        with self._lock:
            for key in ("stdout", "stderr"):
                if self._partial[key]:
                    self._add(key, self._partial[key])
                    self._partial[key] = ""
            return list(self.lines)

    def mark_truncated(self) -> None:
        """Drop every later line, and say so once."""
        with self._lock:
            self._mark_truncated()

    def _mark_truncated(self) -> None:
        if not self.truncated:
            self.truncated = True
            self.lines.append(
                f"[toolnexus: output truncated: the program printed more than {self._max} bytes]"
            )

    def _add(self, stream: str, line: str) -> None:
        if self.truncated:
            return
        size = len(line.encode("utf-8", "replace")) + 1
        if self._used + size > self._max:
            self._mark_truncated()
            return
        self._used += size
        self.lines.append(line if stream == "stdout" else {"stderr": line})


def json_shape_problem(value: Any) -> str | None:
    """``None`` when a program's result is plain JSON data, else what is wrong and where.

    Strict: nesting past 64 levels, non-finite numbers, integers past Python's digit limit and
    lone surrogates are refused (the result would otherwise reach the model altered).
    """
    return json_problem(value, "result")
