"""``Execution``: how a run's tool calls execute (the cap, Code Mode, the sandbox, tiers and
the calls' time budgets), as one frozen, checked value."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from toolnexus._checks import positive_number
from toolnexus.codemode._discovery import (
    DEFAULT_SDK_THRESHOLD,
    check_always_loaded,
    check_threshold,
)
from toolnexus.codemode._modes import CodeMode, parse_mode, resolve_mode
from toolnexus.codemode.runtimes import CodeRuntime
from toolnexus.errors import ConfigurationError
from toolnexus.scheduling import max_tool_concurrency as resolve_concurrency

__all__ = ["Execution", "disclosure_from", "execution_from"]


@dataclass(frozen=True)
class Execution:
    """How tool calls execute: what a client, ``run_program``, ``run_code_tool``, the MCP
    gateway and the Temporal entry points share.

    Example::

        execution = Execution(max_tool_concurrency=4, code_mode="native")
        client = Client(Endpoint.parse("openai:gpt-4.1-mini"), execution=execution)

    ``None`` for ``max_tool_concurrency`` and ``code_mode`` means "decide when used": the
    ``TOOLNEXUS_MAX_TOOL_CONCURRENCY`` / ``TOOLNEXUS_CODE_MODE`` environment variables, else 10
    and ``"both"`` (see `cap` and `mode`). A cap that is not a positive int falls back the same
    way, with a warning naming it, as it always has (a bad cap never fails a model's turn).

    Attributes:
        max_tool_concurrency: The cap on overlapping safe calls.
        code_mode: ``"native"``, ``"code"`` or ``"both"``.
        runtime: The Code Mode sandbox (default: the shared one for the language).
        tool_tiers: In ``"native"`` mode, show ``tool_search`` + ``call_tool`` instead of the
            tools (``True``), never (``False``), or above 40 tools (``None``).
        hosted_call_timeout: Seconds the calls of a hosted program's step may take in all.
        calls_timeout: Seconds the tool calls of one model turn may take in all.
        sdk_threshold: Bytes of rendered SDK above which ``run_code`` shows an index.
        always_loaded: Tool names whose declarations stay beside the index.
    """

    max_tool_concurrency: int | None = None
    code_mode: CodeMode | None = None
    runtime: CodeRuntime | None = None
    tool_tiers: bool | None = None
    hosted_call_timeout: float | None = 240.0
    calls_timeout: float | None = 600.0
    sdk_threshold: int = DEFAULT_SDK_THRESHOLD
    always_loaded: Sequence[str] = ()

    def __post_init__(self) -> None:
        if self.code_mode is not None:
            parse_mode(self.code_mode)
        if self.tool_tiers is not None and not isinstance(self.tool_tiers, bool):
            raise ConfigurationError(
                f"Execution tool_tiers must be True, False or None, got {self.tool_tiers!r}."
            )
        for name, value in (
            ("hosted_call_timeout", self.hosted_call_timeout),
            ("calls_timeout", self.calls_timeout),
        ):
            if value is not None and not positive_number(value):
                raise ConfigurationError(
                    f"Execution {name} must be a positive number of seconds or None, got {value!r}."
                )
        check_threshold(self.sdk_threshold)
        object.__setattr__(self, "always_loaded", check_always_loaded(self.always_loaded))

    @property
    def cap(self) -> int:
        """The cap in force: ``max_tool_concurrency``, else the environment's, else 10."""
        return resolve_concurrency(self.max_tool_concurrency)

    @property
    def mode(self) -> CodeMode:
        """The Code Mode in force: ``code_mode``, else ``TOOLNEXUS_CODE_MODE``, else ``"both"``."""
        return parse_mode(self.code_mode) if self.code_mode is not None else resolve_mode(None)


def execution_from(
    execution: Execution | None,
    owner: str,
    *,
    runtime: CodeRuntime | None = None,
    max_parallel: int | None = None,
) -> Execution | None:
    """``execution`` checked against the keyword spellings of its knobs (``owner`` names the
    function in the error); ``None`` when no ``execution=`` was given.

    Raises:
        ConfigurationError: ``execution=`` and a keyword give the same knob different values.
    """
    if execution is None:
        return None
    if not isinstance(execution, Execution):
        raise ConfigurationError(
            f"{owner} execution must be a toolnexus Execution, got {execution!r}."
        )
    for name, keyword, held in (
        ("runtime", runtime, execution.runtime),
        ("max_parallel", max_parallel, execution.max_tool_concurrency),
    ):
        if keyword is not None and keyword != held:
            raise ConfigurationError(
                f"{owner} got execution= and {name}={keyword!r}: they set the same knob; give "
                "it in one place (execution=Execution(...) or the keyword)."
            )
    return execution


def disclosure_from(
    execution: Execution | None,
    owner: str,
    threshold: int | None,
    always_loaded: Sequence[str] | None,
) -> tuple[int, tuple[str, ...]]:
    """``sdk_threshold`` and ``always_loaded`` in force: the keywords, else ``execution``'s,
    else the defaults (``owner`` names the function in the error).

    Raises:
        ConfigurationError: a keyword and ``execution`` disagree, or a value is bad.
    """
    if execution is None:
        return (
            check_threshold(DEFAULT_SDK_THRESHOLD if threshold is None else threshold),
            check_always_loaded(() if always_loaded is None else always_loaded),
        )
    for name, keyword, held in (
        ("sdk_threshold", threshold, execution.sdk_threshold),
        ("always_loaded", always_loaded, execution.always_loaded),
    ):
        if keyword is not None and _as_held(keyword) != held:
            raise ConfigurationError(
                f"{owner} got execution= and {name}={keyword!r}: they set the same knob; give "
                "it in one place (execution=Execution(...) or the keyword)."
            )
    return execution.sdk_threshold, tuple(execution.always_loaded)


def _as_held(value: object) -> object:
    """A list of names as the tuple an ``Execution`` holds; anything else as it is."""
    return tuple(value) if isinstance(value, list) else value
