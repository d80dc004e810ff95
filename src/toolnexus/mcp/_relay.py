"""What the gateway asks of its client on behalf of a call: approvals (its own questions) and
whatever an upstream MCP server asks (sampling, elicitation in form and URL mode, roots).

Every question belongs to one client call in progress, a `CallScope`, and goes to the client
session that made that call, on the protocol generation that session negotiated:

* before 2026-07-28, as a server-initiated request riding that call's stream
  (``elicitation/create``, ``sampling/createMessage``, ``roots/list``);
* on 2026-07-28, where servers may not send requests, as SEP-2322 ``InputRequiredResult``
  rounds: the call keeps running, parked (see `Parked`), its questions go back as the
  round's ``inputRequests`` and its answers arrive with the client's retry.

A question is bounded by the call's budget; a client that did not declare the capability a
question needs gets a `Refused` saying so, which the caller turns into a failed call (data,
never a crash). The requesting upstream is named in the question (``_meta`` key
`UPSTREAM_META`, and the elicitation's message).
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import hashlib
import itertools
import json
import logging
import math
import secrets
from collections import Counter
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, cast

from mcp import types
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ValidationError

__all__ = [
    "UPSTREAM_META",
    "CallScope",
    "Parked",
    "Refused",
    "Relay",
    "call_digest",
    "current_call",
]

logger = logging.getLogger("toolnexus.mcp")

UPSTREAM_META = "io.toolnexus/upstream"
"""The ``_meta`` key naming the upstream MCP server a relayed question comes from."""

RESULT_GRACE = 120.0
"""Seconds a parked call's result is kept for the client's next round after it finished."""

current_call: contextvars.ContextVar[CallScope | None] = contextvars.ContextVar(
    "toolnexus_mcp_call", default=None
)
"""The client call the running code works for (set by the gateway around each call)."""


class Refused(Exception):
    """A question that could not be put to the client, or got no usable answer.

    ``kind`` says which, for the audit log: ``"no_capability"``, ``"timeout"``, ``"error"``
    (the client answered with an error) or ``"malformed"`` (an answer of the wrong shape).
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def _missing_capability(capabilities: types.ClientCapabilities | None, request: Any) -> str | None:
    """The capability the client lacks for ``request``, or ``None`` when it declared it."""
    caps = capabilities or types.ClientCapabilities()
    if isinstance(request, types.ElicitRequest):
        elicitation = caps.elicitation
        if isinstance(request.params, types.ElicitRequestURLParams):
            declared = elicitation is not None and elicitation.url is not None
            return None if declared else "URL elicitation"
        # a bare ``elicitation: {}`` (before modes existed) means form support
        if elicitation is not None and (elicitation.form is not None or elicitation.url is None):
            return None
        return "form elicitation"
    if isinstance(request, types.CreateMessageRequest):
        if caps.sampling is None:
            return "sampling"
        if (request.params.tools or request.params.tool_choice) and caps.sampling.tools is None:
            return "sampling.tools"
        return None
    return None if caps.roots is not None else "roots"


class CallScope:
    """One client call in progress (a ``tools/call``), and the questions it asks.

    Args:
        ctx: The request context of the call's first round.
        budget: Seconds every question of the call must be answered within (the call's budget).
        call: The call's `call_digest` (2026-07-28: each round's state is bound to it).
        forward_progress: Whether upstream progress is passed to the client (a direct call:
            the upstream's own numbers, those that do not increase dropped, see
            `report_progress`); a program reports its own steps.
    """

    def __init__(
        self, ctx: Any, *, budget: float, call: str, forward_progress: bool = False
    ) -> None:
        self.call = call
        self.session = ctx.session
        self.request_id = ctx.request_id
        self.modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        self.budget = budget
        self.deadline = asyncio.get_running_loop().time() + budget
        self.forward_progress = forward_progress
        self.progressed = -math.inf  # the last progress sent
        self.calling: Counter[str] = Counter()  # the upstream servers it is waiting on
        self.pending: dict[str, tuple[Any, type[BaseModel], asyncio.Future[Any]]] = {}
        self.asked = asyncio.Event()  # a question was added (2026-07-28: a round is due)
        self._keys = itertools.count(1)

    def follow(self, ctx: Any) -> None:
        """A later round of the call (2026-07-28): its progress rides this request."""
        self.session = ctx.session
        self.request_id = ctx.request_id

    @property
    def capabilities(self) -> types.ClientCapabilities | None:
        return self.session.client_capabilities  # type: ignore[no-any-return]

    async def ask(self, request: Any, result_type: type[BaseModel]) -> Any:
        """The client's answer to ``request`` (validated as ``result_type``).

        Raises:
            Refused: the client lacks the capability, did not answer within the budget,
                answered with an error, or answered something of the wrong shape.
        """
        missing = _missing_capability(self.capabilities, request)
        if missing is not None:
            raise Refused(
                "no_capability",
                f"the gateway's client did not declare the {missing} capability, so it cannot "
                "be asked",
            )
        remaining = self.deadline - asyncio.get_running_loop().time()
        if remaining <= 0:
            raise Refused("timeout", f"the call's budget of {self.budget:g} s is spent")
        try:
            if not self.modern:
                sent = self.session.send_request(
                    request,
                    result_type,
                    metadata=ServerMessageMetadata(related_request_id=self.request_id),
                )
                return await asyncio.wait_for(sent, remaining)
            return await asyncio.wait_for(self._parked_question(request, result_type), remaining)
        except TimeoutError:
            raise Refused(
                "timeout", f"the client did not answer within the call's budget ({self.budget:g} s)"
            ) from None
        except MCPError as exc:
            why = f"the client answered with an error: {exc.error.message}"
            raise Refused("error", why) from None
        except ValidationError:
            why = f"the client's answer is not a {result_type.__name__}"
            raise Refused("malformed", why) from None

    async def _parked_question(self, request: Any, result_type: type[BaseModel]) -> Any:
        # numbered, and random: no client can answer a question before it has seen its key
        # (a 2026-07-28 task's tasks/update names no round, only keys)
        key = f"q{next(self._keys)}-{secrets.token_urlsafe(9)}"
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[key] = (request, result_type, future)
        self.asked.set()
        try:
            return await future
        finally:
            self.pending.pop(key, None)

    def open_questions(self) -> dict[str, Any]:
        """The questions not answered yet, by key (a round's ``inputRequests``)."""
        pending = self.pending.items()
        return {key: request for key, (request, _, future) in pending if not future.done()}

    def answer(self, responses: Mapping[str, Any] | None, asked: frozenset[str]) -> None:
        """Deliver a round's ``inputResponses``: each to its question, checked against the
        answer type that question needs (one of another shape refuses it as malformed).
        Only the questions of that round (``asked``) take an answer: other keys (never asked,
        or asked since, which the client has not seen) are ignored; questions left unanswered
        are asked again."""
        for key, value in (responses or {}).items():
            entry = self.pending.get(key)
            if key not in asked or entry is None or entry[2].done():
                logger.info("an input response for %r, which was not asked, was ignored", key)
                continue
            _, result_type, future = entry
            wire = (
                value.model_dump(by_alias=True, mode="json", exclude_none=True)
                if isinstance(value, BaseModel)
                else value
            )
            try:
                future.set_result(result_type.model_validate(wire, by_name=False))
            except ValidationError:
                future.set_exception(
                    Refused("malformed", f"the client's answer is not a {result_type.__name__}")
                )

    async def report_progress(
        self, progress: float, total: float | None, message: str | None
    ) -> None:
        """A progress notification for the call, on its current round (never raises); one
        whose ``progress`` is not above the last one sent is dropped, so the client sees it
        increase whatever an upstream sends (the spec's MUST)."""
        if not progress > self.progressed:  # NaN, too, is not above
            logger.debug("dropped progress %r: not above %r", progress, self.progressed)
            return
        self.progressed = progress
        try:
            await self.session.report_progress(progress, total, message)
        except Exception:  # a client that went away must not fail the call
            logger.debug("could not send a progress notification", exc_info=True)


Work = Callable[[CallScope], Coroutine[Any, Any, Any]]


def call_digest(name: str, arguments: Mapping[str, Any] | None) -> str:
    """A digest of one ``tools/call``'s tool and arguments (what a round's state is bound to)."""
    text = json.dumps([name, dict(arguments or {})], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclasses.dataclass
class _Call:
    """A parked call: its task, and its latest round (its number; whether it still waits
    for its answer; the keys of its questions)."""

    scope: CallScope
    task: asyncio.Task[Any]
    round: int = 0
    open: bool = False
    asked: frozenset[str] = frozenset()


class Parked:
    """The 2026-07-28 calls that asked the client something and wait for its next round.

    A call runs in a task of its own; each round returns either its result or an
    ``InputRequiredResult`` whose ``requestState`` names the call (a random id), the
    round's number (1, 2, ...) and the digest of the call's tool and arguments
    (`call_digest`). That state is sealed by the SDK's `RequestStateBoundary` (AES-GCM under
    a key of this process, bound to the method, the tool and its arguments): the gateway only
    ever sees states it issued. A state answers its own round, once, and only that round's
    questions: a state of an earlier round, of a round answered already, or of another call
    is refused.
    """

    def __init__(self) -> None:
        self._calls: dict[str, _Call] = {}

    async def start(self, scope: CallScope, work: Work) -> Any:
        """Run ``work`` for a new call; its result, or the first ``InputRequiredResult``."""
        context = contextvars.copy_context()
        context.run(current_call.set, scope)
        task: asyncio.Task[Any] = asyncio.get_running_loop().create_task(
            work(scope), context=context
        )
        call_id = secrets.token_urlsafe(16)
        task.add_done_callback(lambda _: self._expire(call_id))
        self._calls[call_id] = _Call(scope, task)
        return await self._round(call_id)

    async def unanswerable(self, state: str) -> None:
        """Returns once the call of ``state`` no longer waits for an answer to that round: a
        question of it was dropped (past the call's budget, refused as timed out) or answered
        some other way, or the call ended. A task, which has no client round to wait for,
        then takes the next round with no answers (see `toolnexus.mcp._tasks`)."""
        decoded = _decoded(state)
        entry = self._calls.get(decoded["call"]) if decoded is not None else None
        if entry is None:
            return
        waiting = [future for _, _, future in entry.scope.pending.values() if not future.done()]
        await asyncio.wait({entry.task, *waiting}, return_when=asyncio.FIRST_COMPLETED)

    def cancel(self, state: str) -> None:
        """Stop the call of ``state`` (its task was cancelled while the call was parked)."""
        decoded = _decoded(state)
        entry = self._calls.pop(decoded["call"], None) if decoded is not None else None
        if entry is not None:
            entry.task.cancel()

    async def resume(
        self, ctx: Any, state: str, responses: Mapping[str, Any] | None, call: str
    ) -> Any:
        """The next round of a parked call, with the client's answers to the round of
        ``state``; ``call`` is the `call_digest` of the request that carries them.

        Raises:
            MCPError: (-32602) a state naming no call in progress, a round answered
                already, or a state of another round or call than the one it answers.
        """
        decoded = _decoded(state)
        if decoded is None:
            raise _invalid("the requestState is not one this gateway issued")
        entry = self._calls.get(decoded["call"])
        if entry is None:
            raise _invalid(
                "the requestState names no call in progress (it finished and its result was "
                "fetched, or it expired)"
            )
        if decoded["args"] != call:
            raise _invalid(
                "the requestState is of another call (another tool or other arguments): "
                "send it with the call whose round it came with"
            )
        if decoded["round"] < entry.round or not entry.open:
            raise _invalid(
                f"round {decoded['round']} of this call was answered already; a round takes "
                f"one answer (answer round {entry.round} with its own requestState)"
            )
        if decoded["round"] != entry.round:
            raise _invalid(f"the requestState names round {decoded['round']}, not yet asked")
        entry.open = False  # answered: a second answer is refused
        entry.scope.follow(ctx)
        entry.scope.asked.clear()
        entry.scope.answer(responses, entry.asked)
        return await self._round(decoded["call"])

    async def _round(self, call_id: str) -> Any:
        entry = self._calls[call_id]
        scope, task = entry.scope, entry.task
        if not scope.open_questions():
            asked = asyncio.ensure_future(scope.asked.wait())
            try:
                await asyncio.wait({task, asked}, return_when=asyncio.FIRST_COMPLETED)
            except asyncio.CancelledError:  # the client cancelled the round: the call stops
                task.cancel()
                self._calls.pop(call_id, None)
                raise
            finally:
                asked.cancel()
        questions = scope.open_questions()
        if task.done() and not questions:
            self._calls.pop(call_id, None)
            return task.result()
        entry.round += 1
        entry.open = True
        entry.asked = frozenset(questions)
        state = {"call": call_id, "round": entry.round, "args": scope.call}
        return types.InputRequiredResult(input_requests=questions, request_state=json.dumps(state))

    def _expire(self, call_id: str) -> None:
        """A finished call's result waits `RESULT_GRACE` seconds for the client's round."""
        asyncio.get_running_loop().call_later(RESULT_GRACE, self._calls.pop, call_id, None)


def _decoded(state: str) -> dict[str, Any] | None:
    """The call, round and call digest a ``requestState`` of this gateway's names, else
    ``None``."""
    try:
        decoded = json.loads(state)
        fields = {key: decoded[key] for key in ("call", "round", "args")}
    except (ValueError, KeyError, TypeError):
        return None
    texts = isinstance(fields["call"], str) and isinstance(fields["args"], str)
    return fields if texts and type(fields["round"]) is int else None


def _invalid(message: str) -> MCPError:
    return MCPError(code=types.INVALID_PARAMS, message=message)


class Relay:
    """The gateway's side of the upstream servers' requests: each server's handlers find the
    client call it works for and ask that call's client.

    The call is the one the handler runs for (`current_call`, set when the upstream speaks
    2026-07-28 and its questions come back as the call's own results), else the one call in
    progress that waits on that server (an older upstream's request arrives on its own; with
    several client calls waiting on one server, it cannot be told which asked, so it is
    refused, saying so).
    """

    def __init__(self) -> None:
        self.active: set[CallScope] = set()
        self.server_of: Callable[[str], str | None] = lambda name: None

    def scope_for(self, server: str) -> CallScope | None:
        scope = current_call.get()
        if scope is not None:
            return scope
        waiting = [s for s in self.active if s.calling[server] > 0]
        return waiting[0] if len(waiting) == 1 else None

    def enter(self, scope: CallScope, tool: str) -> None:
        """``scope`` starts a call of ``tool`` (on an upstream server, when it is one)."""
        server = self.server_of(tool)
        if server is not None:
            scope.calling[server] += 1

    def leave(self, scope: CallScope, tool: str) -> None:
        server = self.server_of(tool)
        if server is not None:
            scope.calling[server] -= 1

    def handlers(self, server: str) -> dict[str, Any]:
        """``server``'s ``elicitation_handler``, ``sampling_handler``, ``roots`` and
        ``on_progress`` (see `toolnexus.tools.mcp.ServerConfig`), relaying to the client."""

        async def relay(request: Any, result_type: type[BaseModel]) -> Any:
            scope = self.scope_for(server)
            if scope is None:
                return types.ErrorData(
                    code=types.INTERNAL_ERROR,
                    message=f"the gateway cannot tell which of its clients' calls MCP server "
                    f"{server!r} asks for (none, or several, wait on it)",
                )
            try:
                return await scope.ask(request, result_type)
            except Refused as refused:
                code = types.INTERNAL_ERROR
                if refused.kind == "no_capability":
                    code = types.MISSING_REQUIRED_CLIENT_CAPABILITY
                return types.ErrorData(code=code, message=str(refused))

        async def elicit(context: Any, params: types.ElicitRequestParams) -> Any:
            named = _named(params, server).model_copy(
                update={"message": f"[MCP server {server!r}] {params.message}"}
            )
            return await relay(types.ElicitRequest(params=named), types.ElicitResult)

        async def sample(context: Any, params: types.CreateMessageRequestParams) -> Any:
            wanted: type[BaseModel] = types.CreateMessageResult
            if params.tools or params.tool_choice:
                wanted = types.CreateMessageResultWithTools
            return await relay(types.CreateMessageRequest(params=_named(params, server)), wanted)

        async def roots(context: Any) -> Any:
            meta = cast(types.RequestParamsMeta, {UPSTREAM_META: server})
            request = types.ListRootsRequest(params=types.RequestParams(_meta=meta))
            return await relay(request, types.ListRootsResult)

        async def progressed(
            name: str, tool: str, progress: float, total: float | None, message: str | None
        ) -> None:
            scope = self.scope_for(server)
            if scope is not None and scope.forward_progress:
                await scope.report_progress(progress, total, message)

        return {
            "elicitation_handler": elicit,
            "sampling_handler": sample,
            "roots": roots,
            "on_progress": progressed,
        }


def _named(params: Any, server: str) -> Any:
    """``params`` with the requesting upstream named in its ``_meta``."""
    meta = (
        params.meta.model_dump(by_alias=True, exclude_none=True)
        if isinstance(params.meta, BaseModel)
        else dict(params.meta or {})
    )
    return params.model_copy(update={"meta": {**meta, UPSTREAM_META: server}})
