"""The tool value: what a tool is, how it is described to a model, how it is invoked."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from toolnexus._checks import int_at_least, positive_number
from toolnexus.errors import ConfigurationError
from toolnexus.tools._arguments import ArgumentsValidator, schema_validator
from toolnexus.tools._resources import ResourcesFunction
from toolnexus.tools._threads import TOOL_THREADS, run_in_context

__all__ = ["CALLERS", "ConcurrencyPredicate", "Tool", "ToolHints", "ToolResult"]

CALLERS = ("direct", "hosted")
"""Who may call a tool: the model itself, or a program the provider hosts (`Tool.callers`)."""

ConcurrencyPredicate = Callable[[dict[str, Any]], object]
"""A per-call safety predicate: only a return value that ``is True`` marks the call parallel."""


@dataclass(frozen=True, slots=True)
class ToolHints:
    """What a tool promises about its side effects; mirrors MCP tool annotations.

    The defaults are MCP's pessimistic ones: a tool that says nothing is assumed to write,
    destroy, repeat badly and reach the outside world. Only ``read_only=True`` lets the
    scheduler overlap a tool's calls (see ``docs/scheduling.md``).

    Attributes:
        read_only: The tool does not modify its environment.
        destructive: The tool may perform destructive updates (meaningful when not read-only).
        idempotent: Calling it again with the same arguments has no additional effect.
        open_world: The tool interacts with an open world of external entities.
    """

    read_only: bool = False
    destructive: bool = True
    idempotent: bool = False
    open_world: bool = True


@dataclass(frozen=True, slots=True)
class ToolResult:
    """An explicit tool result, for a tool that needs to report failure without raising.

    A tool may return any JSON-shaped value directly; return a ``ToolResult`` when the call
    should count as failed (``is_error=True``): the scheduler then turns it into an error
    outcome whose message is ``output`` (rendered as text when it is not a string).

    Attributes:
        output: The result the model (or program) reads.
        is_error: Whether the call failed.
        metadata: Facts for the host, not the model (a sub-agent's status and usage, say); they
            travel with the outcome to ``RunResult.tool_calls``.
    """

    output: Any
    is_error: bool = False
    metadata: dict[str, Any] | None = None


def _default_schema() -> dict[str, Any]:
    return {"type": "object", "properties": {}}


def _accepts_context(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` can be called as ``fn(args, ctx)`` rather than ``fn(args)``."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # builtins without a signature: call with args only
        return False
    positional = [
        p
        for p in params
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    has_var = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)
    return has_var or len(positional) >= 2


def _is_async(fn: Callable[..., Any]) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - we want the method, not callable()
    return call is not None and inspect.iscoroutinefunction(call)


class ValidatingCall:
    """A typed function as ``execute(args, ctx)``: ``model`` validates the arguments, then
    ``run_parsed(parsed, ctx)`` calls the function with them (``@tool`` builds these).

    A [`Tool`][toolnexus.tools.Tool] whose ``execute`` is one, with the same model as its
    ``arguments_model``, hands ``run_parsed`` the arguments its own validation parsed, so
    a call's arguments are validated once, not once more inside ``execute``.
    """

    def __init__(self, model: type[BaseModel], run_parsed: Callable[[BaseModel, Any], Any]):
        self.model = model
        self.run_parsed = run_parsed

    def __call__(self, args: dict[str, Any], ctx: Any) -> Any:
        return self.run_parsed(self.model.model_validate(args), ctx)


class AsyncValidatingCall(ValidatingCall):
    """A `ValidatingCall` of an async function."""

    async def __call__(self, args: dict[str, Any], ctx: Any) -> Any:
        return await self.run_parsed(self.model.model_validate(args), ctx)


@dataclass(frozen=True, eq=False)
class Tool:
    """A tool a model can call.

    Build one with the [`tool`][toolnexus.tools.tool] decorator from a typed function, or directly
    when you already have a JSON Schema (an MCP tool, a relay)::

        Tool(
            "get_weather",
            "Current weather for a city.",
            {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            execute=get_weather,  # (args) or (args, ctx); sync or async
            hints=ToolHints(read_only=True),
        )

    Attributes:
        name: The name the model calls the tool by. Any non-empty string.
        description: What the tool does, for the model.
        input_schema: JSON Schema (``"type": "object"``) of the arguments.
        execute: ``execute(args)`` or ``execute(args, ctx)``, sync or async. It returns any
            JSON-shaped value or a [`ToolResult`][toolnexus.tools.ToolResult], or raises. Sync
            functions run in a worker thread so they never block the event loop.
        hints: Side-effect hints; ``None`` means "nothing promised" (treated as unsafe).
        concurrency_safe: Optional per-call predicate; it decides parallel vs exclusive for
            each call, and only a return value that ``is True`` counts as safe.
        source: Where the tool comes from (``"native"``, ``"mcp"``, ...), for logs and tiers.
        requires_approval: Whether every call needs an approval handler's consent.
        arguments_model: Set by ``@tool``: the pydantic model that validates arguments in place
            of the JSON Schema (same rules, plus pydantic's coercions and custom validators).
        retries: How often in one run the model may try this tool again after a call asked
            for it (the tool raised [`ModelRetry`][toolnexus.errors.ModelRetry], or the arguments
            did not validate); past it the run stops as ``"incomplete"``. ``None``: 1.
        timeout: Seconds a call may take before it fails with "did not finish within N s"
            (``None``: no limit). It frees the call's place in the lane, so a hung tool cannot
            hold a turn forever. An async tool is cancelled; a sync tool's thread cannot be
            interrupted and finishes on its own, its result discarded.
        output_schema: JSON Schema of what a call returns, when known (``@tool`` derives it
            from the return annotation, MCP tools take their ``outputSchema``): the Code Mode
            SDK then types the result, so a program can chain calls without guessing.
        resources: ``resources(args) -> Resources | None``: the resources one call reads and
            writes. Calls on disjoint resources overlap; calls sharing a resource that one of
            them writes run one at a time, in emitted order. ``None`` (or a function returning
            ``None``): the call keeps its safety class (safe reads everything, unsafe writes
            everything). A function that raises or returns anything else: writes everything.
        callers: Who may call the tool: ``"direct"`` (the model, as a native tool call) and/or
            ``"hosted"`` (a program the provider runs in its own sandbox, with
            ``create_client(hosted_code=True)``: Anthropic's code execution, OpenAI's
            programmatic tool calling). Default ``("direct",)``. A hosted program's calls run
            through the same lane as native calls (the cap, the barrier, approvals, hooks,
            timeouts); relay tools cannot be hosted (a paused program cannot wait for the host).
    """

    name: str
    description: str = ""
    input_schema: dict[str, Any] = field(default_factory=_default_schema)
    execute: Callable[..., Any] = field(kw_only=True)
    hints: ToolHints | None = field(default=None, kw_only=True)
    concurrency_safe: ConcurrencyPredicate | None = field(default=None, kw_only=True)
    source: str = field(default="native", kw_only=True)
    requires_approval: bool = field(default=False, kw_only=True)
    arguments_model: type[BaseModel] | None = field(default=None, kw_only=True, repr=False)
    retries: int | None = field(default=None, kw_only=True)
    timeout: float | None = field(default=None, kw_only=True)
    resources: ResourcesFunction | None = field(default=None, kw_only=True)
    output_schema: dict[str, Any] | None = field(default=None, kw_only=True, repr=False)
    callers: Sequence[str] = field(default=("direct",), kw_only=True)
    _validator: ArgumentsValidator = field(init=False, repr=False)
    _run_parsed: Callable[[BaseModel, Any], Any] | None = field(init=False, repr=False)
    _takes_context: bool = field(init=False, repr=False)
    _is_async: bool = field(init=False, repr=False)
    _direct: bool = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigurationError(
                f"Tool name must be a non-empty string, got {self.name!r}; "
                "pass the name the model should call the tool by."
            )
        if not isinstance(self.description, str):
            raise ConfigurationError(
                f"Tool '{self.name}': description must be a string, "
                f"got {type(self.description).__name__}."
            )
        if not callable(self.execute):
            raise ConfigurationError(
                f"Tool '{self.name}': execute must be callable as execute(args) or "
                f"execute(args, ctx), got {self.execute!r}."
            )
        if self.hints is not None and not isinstance(self.hints, ToolHints):
            raise ConfigurationError(
                f"Tool '{self.name}': hints must be a ToolHints or None, got {self.hints!r}; "
                "use hints=ToolHints(read_only=True) for a tool without side effects."
            )
        if self.concurrency_safe is not None and not callable(self.concurrency_safe):
            raise ConfigurationError(
                f"Tool '{self.name}': concurrency_safe must be a callable taking the "
                f"arguments dict, got {self.concurrency_safe!r}."
            )
        if self.output_schema is not None and not isinstance(self.output_schema, Mapping):
            raise ConfigurationError(
                f"Tool '{self.name}': output_schema must be a JSON Schema object or None, "
                f"got {type(self.output_schema).__name__}."
            )
        if self.resources is not None and not callable(self.resources):
            raise ConfigurationError(
                f"Tool '{self.name}': resources must be a function of the arguments returning "
                f"Resources or None, got {self.resources!r}."
            )
        if self.retries is not None and not int_at_least(self.retries, 0):
            raise ConfigurationError(
                f"Tool '{self.name}': retries must be None or an int >= 0, got {self.retries!r}."
            )
        if self.timeout is not None and not positive_number(self.timeout):
            raise ConfigurationError(
                f"Tool '{self.name}': timeout must be None or a positive number of seconds, "
                f"got {self.timeout!r}."
            )
        callers = self.callers
        if (
            isinstance(callers, str)
            or not isinstance(callers, Sequence)
            or not callers
            or any(c not in CALLERS for c in callers)
        ):
            raise ConfigurationError(
                f"Tool '{self.name}': callers must be a non-empty tuple of {CALLERS}, got "
                f"{callers!r}; e.g. callers=('direct', 'hosted') to let a provider-hosted "
                "program call it too."
            )
        object.__setattr__(self, "callers", tuple(dict.fromkeys(callers)))
        if not isinstance(self.input_schema, Mapping):
            raise ConfigurationError(
                f"Tool '{self.name}': input_schema must be a JSON Schema object, "
                f"got {type(self.input_schema).__name__}."
            )
        validator = schema_validator(self.name, dict(self.input_schema), self.arguments_model)
        object.__setattr__(self, "input_schema", dict(self.input_schema))
        object.__setattr__(self, "_validator", validator)
        execute = self.execute
        run_parsed = None
        if isinstance(execute, ValidatingCall) and execute.model is self.arguments_model:
            run_parsed = execute.run_parsed  # validated once, by invoke; not again by execute
        object.__setattr__(self, "_run_parsed", run_parsed)
        object.__setattr__(self, "_takes_context", _accepts_context(self.execute))
        object.__setattr__(self, "_is_async", _is_async(self.execute))
        # async, no timeout, nothing parsed: a checked call is the execute coroutine itself
        direct = run_parsed is None and self.timeout is None and self._is_async
        object.__setattr__(self, "_direct", direct)

    def validate_arguments(self, args: Mapping[str, Any]) -> None:
        """Check ``args`` against the tool's schema.

        Raises:
            ToolArgumentsError: naming each offending field and its problem.
        """
        self._validator(args)

    async def invoke(self, args: dict[str, Any], ctx: Any = None) -> Any:
        """Validate ``args``, then run ``execute`` and return what it returned.

        Sync ``execute`` functions run in a worker thread (with the caller's contextvars);
        cancelling the awaiting task stops waiting but cannot interrupt a thread already running.

        Raises:
            ToolArgumentsError: the arguments do not match the schema; ``execute`` never ran.
            TimeoutError: the call took longer than `timeout`.
            Exception: whatever ``execute`` raised.
        """
        return await self._run(self._validator(args), args, ctx)

    async def _invoke_checked(self, args: dict[str, Any], ctx: Any = None) -> Any:
        """`invoke` for arguments that passed `validate_arguments` already (``run_batch``
        checks each call before it takes a place in the lane): a JSON Schema is not checked a
        second time; a tool whose function takes a parsed model still parses them."""
        parsed = self._validator(args) if self._run_parsed is not None else None
        return await self._run(parsed, args, ctx)

    def _start_checked(self, args: dict[str, Any], ctx: Any = None) -> Awaitable[Any]:
        """`_invoke_checked`, without coroutines of its own when they would only pass the
        call on: an async ``execute`` with no timeout and no parsed model is called here and
        its coroutine handed back, for a scheduler lane to await directly (three coroutine
        frames fewer per call)."""
        if self._direct:
            started: Awaitable[Any] = (
                self.execute(args, ctx) if self._takes_context else self.execute(args)
            )
            return started
        return self._invoke_checked(args, ctx)

    async def _run(self, parsed: Any, args: dict[str, Any], ctx: Any) -> Any:
        target: Callable[..., Any]
        call_args: tuple[Any, ...]
        if parsed is not None and self._run_parsed is not None:
            target, call_args = self._run_parsed, (parsed, ctx)
        else:
            target = self.execute
            call_args = (args, ctx) if self._takes_context else (args,)
        if self.timeout is None:
            return await self._execute(target, call_args)
        try:
            async with asyncio.timeout(self.timeout):
                return await self._execute(target, call_args)
        except TimeoutError:
            raise TimeoutError(
                f"tool '{self.name}' did not finish within {self.timeout:g} s (its timeout)"
            ) from None

    async def _execute(self, target: Callable[..., Any], call_args: tuple[Any, ...]) -> Any:
        if self._is_async:
            return await target(*call_args)
        job = TOOL_THREADS.submit(run_in_context(target, *call_args))
        try:
            result = await asyncio.wrap_future(job.future)
        except asyncio.CancelledError:  # a timeout or a cancel: the thread may never return
            TOOL_THREADS.write_off(job)
            raise
        if inspect.isawaitable(result):  # a sync callable that returned a coroutine
            return await result
        return result

    def definition(self) -> dict[str, Any]:
        """The provider-neutral definition: ``{"name", "description", "input_schema"}``."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }
