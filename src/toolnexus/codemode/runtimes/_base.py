"""What every Code Mode runtime shares: the protocol, budgets, the run report, log capture.

A runtime runs one program and knows nothing of tools beyond their names: each call the program
makes is handed to ``call_tool(name, args)``, an awaitable that resolves to the call's
:class:`~toolnexus.scheduling.Outcome` once it has committed (the run's scheduler lane sits behind
it). The runtime turns that outcome into a value or a ``ToolError`` inside the sandbox.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from toolnexus._checks import int_at_least, positive_number
from toolnexus.errors import ConfigurationError
from toolnexus.scheduling import Outcome

__all__ = [
    "Budgets",
    "CodeRuntime",
    "FailureKind",
    "LogCapture",
    "ProgramFailure",
    "RunReport",
    "ToolCaller",
    "budget_timeout",
    "json_shape_problem",
    "out_of_memory",
    "time_limit",
]

FailureKind = Literal[
    "exception", "timeout", "abort", "substrate_exit", "invalid_output", "type_error"
]

ToolCaller = Callable[[str, Any], Awaitable[Outcome]]
"""``await call_tool(name, args) -> Outcome``: one sub-call, resolved when it has committed."""

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


def time_limit(budgets: Budgets, patience: float | None) -> tuple[float, ProgramFailure]:
    """How long a run may take, and the failure to report when it takes longer.

    The runtime's budget, or the caller's patience when that is shorter (a caller may shorten
    a run, never extend it).
    """
    if patience is not None and patience < budgets.timeout:
        message = f"the run took longer than {patience:g} s (the caller's await_timeout)"
        return patience, ProgramFailure("timeout", message)
    return budgets.timeout, budget_timeout(budgets)


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

    Implementations: :class:`~toolnexus.codemode.runtimes.MontyRuntime` (Python) and
    :class:`~toolnexus.codemode.runtimes.V8Runtime` (JavaScript).
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
    ) -> RunReport:
        """Run ``code`` to the end and report; never raises for anything the program does.

        ``tool_names`` are every binding (granted and stubbed); ``sdk`` is the declaration the
        program was written against (the Python runtime type-checks against it). ``patience``
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


class LogCapture:
    """A run's logs, in order: stdout lines as strings, stderr lines as ``{"stderr": line}``.

    Text arrives in chunks that need not end at line breaks; each stream keeps its partial line
    until the next break or :meth:`finish`. Past ``max_output`` bytes, later lines are dropped
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


def json_shape_problem(value: Any, path: str = "result", depth: int = 0) -> str | None:
    """``None`` when ``value`` is JSON-shaped, else what is wrong and where."""
    if depth > 200:
        return f"{path} is nested too deeply"
    if value is None or isinstance(value, (bool, str, int)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{path} is {value!r}, which JSON cannot hold"
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            problem = json_shape_problem(item, f"{path}[{i}]", depth + 1)
            if problem:
                return problem
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{path} has a non-string key {key!r}"
            problem = json_shape_problem(item, f"{path}[{json.dumps(key)}]", depth + 1)
            if problem:
                return problem
        return None
    return f"{path} is a {type(value).__name__}, which is not JSON"
