"""``run_batch``: the tool calls of one model response, run by the scheduling rule."""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolnexus._json import encodable_text, json_problem, loads_strict
from toolnexus._snapshot import snapshot
from toolnexus.errors import ConfigurationError, ToolArgumentsError
from toolnexus.scheduling._limits import max_tool_concurrency
from toolnexus.scheduling._scheduler import Scheduler, Ticket
from toolnexus.session import Session, events
from toolnexus.tools import Outcome, Tool, Toolkit, refuse_caller, retry_outcome, start_prechecked

__all__ = ["ToolCall", "caller_id", "precheck", "run_batch"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call as a model emitted it.

    Attributes:
        id: The provider's call id (``call_abc…`` / ``toolu_…``); may be empty.
        name: The tool the model asked for.
        arguments: The arguments: a dict, or the raw JSON text a provider sends (an empty
            string counts as no arguments).
        parent_token: Set only on a call a running Code Mode program synthesised (see
            [`toolnexus.codemode.tag_transport`][toolnexus.codemode.tag_transport]); ``None`` for a
            call the model sent.
        caller: Who made the call when it was not the model itself: the provider's own
            record of a hosted program (Anthropic ``{"type": "code_execution_20260120",
            "tool_id": ...}``, OpenAI ``{"type": "program", "caller_id": ...}``), sent back
            with the result; ``None`` for a call the model made directly.
    """

    id: str
    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    parent_token: str | None = None
    caller: Mapping[str, Any] | None = None


def caller_id(caller: Mapping[str, Any] | None) -> str | None:
    """The id of the hosted program that made a call, from its ``ToolCall.caller`` record
    (``None``: the model made it)."""
    if caller is None:
        return None
    found = caller.get("tool_id") or caller.get("caller_id") or caller.get("type")
    return str(found) if found is not None else None


def parse_arguments(raw: Mapping[str, Any] | str) -> dict[str, Any] | str:
    """The call's arguments as a JSON-shaped dict, or a message saying why they are not.

    Text is decoded strictly (`loads_strict`): nesting past 64 levels,
    ``NaN``, integers past Python's digit limit and lone surrogates are refused, never raised.
    A mapping (a provider that decoded the JSON itself) must hold finite numbers and be nested
    no deeper either.
    """
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            decoded = loads_strict(raw)
        except ValueError as exc:
            return f"{exc}; send the arguments as one JSON object"
        if type(decoded) is dict:
            return decoded  # plain JSON, checked by loads_strict, and a fresh object: as is
        raw = decoded
    if not isinstance(raw, Mapping):
        return f"arguments must be a JSON object, got {_json_kind(raw)}"
    # a mapping a provider decoded itself: same limits (host objects are left to the snapshot)
    problem = json_problem(raw, "arguments", foreign_ok=True)
    if problem:
        return f"{problem}; send the arguments as plain JSON"
    args = snapshot(raw)
    assert isinstance(args, dict)  # snapshot keeps a mapping a mapping
    return args


def transcript_arguments(call: ToolCall) -> Any:
    """The call's arguments for the transcript and the records: the decoded JSON, else the raw
    text; never anything the session log would refuse (see `parse_arguments` for what runs)."""
    raw = call.arguments
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            return loads_strict(raw)
        except ValueError:
            return encodable_text(raw)
    return snapshot(raw)


def _json_kind(value: object) -> str:
    kinds = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return "a number"
    return kinds.get(type(value), type(value).__name__)


def precheck(
    call: ToolCall,
    kit: Toolkit,
    decoded: dict[str, Any] | None = None,
    session: Session | None = None,
    *,
    hosting: bool = False,
) -> tuple[Tool, dict[str, Any]] | Outcome:
    """The tool and arguments of a call that may run, or the error outcome of one that may not:
    an unknown tool, a caller the tool does not allow (audited in ``session``, see
    `refuse_caller`; ``hosting``: the run offers tools to provider-hosted programs), arguments
    that are not JSON or do not match the schema.

    ``decoded``: the call's arguments already decoded by `parse_arguments` (the agent
    loop decodes each call once, for its transcript too); they are then not parsed again.
    """
    tool = kit.get(call.name)
    if tool is None:
        available = ", ".join(kit.names) or "none"
        return Outcome.failure(
            call.name, f"unknown tool '{call.name}'; available tools: {available}"
        )
    if call.caller is not None or (hosting and "direct" not in tool.callers):  # else allowed
        refused = refuse_caller(tool, caller_id(call.caller), session, call.id, hosting=hosting)
        if refused is not None:
            return refused
    args = decoded if decoded is not None else parse_arguments(call.arguments)
    if isinstance(args, str):
        return retry_outcome(call.name, f"invalid arguments for tool '{call.name}': {args}")
    try:
        tool.validate_arguments(args)
    except ToolArgumentsError as exc:
        return retry_outcome(call.name, str(exc))
    return tool, args


def check_calls(calls: Iterable[object]) -> None:
    """Raise unless every item of ``calls`` is a ``ToolCall`` (what a batch takes).

    Raises:
        ConfigurationError: naming the first item that is not, and how to build one.
    """
    for call in calls:
        if not isinstance(call, ToolCall):
            raise ConfigurationError(
                f"run_batch takes ToolCall objects, got {call!r}; build them with "
                "ToolCall(id, name, arguments)."
            )


def _cap_argument(max_parallel: int | None, max_concurrency: int | None) -> int | None:
    """The cap given to `run_batch`: ``max_parallel``, or the deprecated ``max_concurrency``."""
    if max_concurrency is None:
        return max_parallel
    if max_parallel is not None:
        raise ConfigurationError(
            "run_batch got both max_parallel and max_concurrency; pass only max_parallel "
            "(max_concurrency is its old name)."
        )
    warnings.warn(
        "run_batch(max_concurrency=...) is deprecated; pass max_parallel=... (the same cap, "
        "under the name the durable run_batch uses too)",
        DeprecationWarning,
        stacklevel=3,
    )
    return max_concurrency


def record_tool_result(
    session: Session, call: ToolCall, outcome: Outcome, at: float | None = None
) -> None:
    """Append the ``tool_result`` surface event of ``call`` (what the model is handed back),
    at time ``at`` (now by default).

    The data is built here from strings and a bool, so the log's check-and-copy is skipped.
    """
    data = events.ToolResultData(
        tool_call_id=call.id,
        name=call.name,
        content=outcome.text,
        is_error=outcome.error is not None,
    )
    session._append_json(events.TOOL_RESULT, data, at)


async def run_batch(
    calls: Sequence[ToolCall],
    tools: Toolkit | Iterable[Tool],
    *,
    max_parallel: int | None = None,
    run_ctx: Any = None,
    session: Session | None = None,
    max_concurrency: int | None = None,
) -> list[Outcome]:
    """Run the tool calls of one model response and return one outcome per call, in order.

    Calls run by the scheduling rule (``docs/scheduling.md``): a run of safe calls overlaps, at
    most ``max_tool_concurrency(max_parallel)`` at once; an unsafe call waits for everything
    before it, runs alone, and nothing after it starts until it has finished. For example
    ``read, read, write, read, read`` runs the two reads together, then the write alone, then
    the last two reads together.

    A call to an unknown tool, or with arguments that are not valid JSON or do not match the
    tool's schema, gets an error outcome without running anything. A failing call never cancels
    its siblings. Cancelling ``run_batch`` abandons the calls still queued or running.

    Args:
        calls: The calls, in the order the model emitted them.
        tools: The tools the model was offered.
        max_parallel: The cap on overlapping calls (else the environment, else 10); the
            same name as the durable ``toolnexus.temporal.run_batch``'s.
        run_ctx: Passed to every tool that takes a ``ctx``.
        session: When given, one ``tool_result`` event per call is appended, in order.
        max_concurrency: The old name of ``max_parallel``: still accepted, with a
            ``DeprecationWarning``.

    Returns:
        One [`Outcome`][toolnexus.scheduling.Outcome] per call, in the order given.

    Raises:
        ConfigurationError: ``calls`` holds something that is not a
            [`ToolCall`][toolnexus.scheduling.ToolCall], or both ``max_parallel`` and
            ``max_concurrency`` are given.
    """
    check_calls(calls)
    kit = tools if isinstance(tools, Toolkit) else Toolkit(tools)
    cap = max_tool_concurrency(_cap_argument(max_parallel, max_concurrency))
    async with Scheduler(start_prechecked, max_parallel=cap, audit=False, session=session) as lane:
        queued: list[Ticket | Outcome] = []
        for call in calls:
            checked = precheck(call, kit, session=session)
            if isinstance(checked, Outcome):
                queued.append(checked)
            else:
                queued.append(lane.submit(*checked, run_ctx, call_id=call.id))
        outcomes: list[Outcome] = []
        for call, item in zip(calls, queued, strict=True):
            outcome = item if isinstance(item, Outcome) else await lane.wait(item)
            if session is not None:
                record_tool_result(session, call, outcome)
            outcomes.append(outcome)
    return outcomes
