"""The scheduler lane: drives the pure rule with asyncio tasks, snapshots, audit events, futures.

One ``Scheduler`` orders the tool calls of one batch (native calls of a model response) or one
Code Mode run (the sub-calls of a program, arriving while it runs). Every ordering decision is
made by [`SchedulingRule`][toolnexus.scheduling.SchedulingRule]; this module only carries them out.

Why no locks: all state is touched on the event-loop thread only (``submit`` is synchronous and
workers report back between awaits), so the loop itself serialises the lane, the way a
GenServer's mailbox does in the Elixir original.

Why workers: a call does not get a task of its own. Started calls wait in one queue, in the order
they started; a worker task takes the front call, runs it, settles it, and takes the next front
call at once (no loop turn in between), and workers are spawned only for the calls nobody will
take. Calls begin in the order they started because they are taken from one queue in order. A
fan-out of ten thousand calls under a cap of ten therefore costs ten tasks, not ten thousand,
and no loop turn per call, which is most of the difference between the lane and a bare
``asyncio.gather`` (``bench/scheduler.py``). Each call still runs in its own copy
of the creator's context (see ``_in_context.py``), so per-call semantics are unchanged.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import itertools
import logging
import time
import types
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol

from opentelemetry.trace import INVALID_SPAN, Span

from toolnexus._snapshot import snapshot
from toolnexus._tracing import end_tool_span, tool_span, tool_spans_needed
from toolnexus.errors import ConfigurationError
from toolnexus.scheduling._in_context import InContext
from toolnexus.scheduling._rule import Mode, SchedulingRule, Wait
from toolnexus.session import Event, Session, events
from toolnexus.tools import (
    HostReason,
    Outcome,
    Resources,
    Tool,
    classify,
    outcome_from_exception,
    outcome_of,
    resolves_paths,
)

__all__ = [
    "ABANDONED",
    "DID_NOT_COMPLETE",
    "SCHEDULER_GONE",
    "Dispatch",
    "Scheduler",
    "Ticket",
    "invoke_tool",
]

logger = logging.getLogger("toolnexus.scheduling")

ABANDONED = "code run is over; tool call abandoned"
SCHEDULER_GONE = "code run is over; scheduler is gone"
DID_NOT_COMPLETE = "tool call did not complete"

YIELD_EVERY = 16
"""A worker running back-to-back calls that never suspend yields to the loop this often."""

STOP_GRACE_SECONDS = 5.0
"""How long ``stop()`` waits for cancelled tool tasks to finish before leaving them behind."""

_lane_numbers = itertools.count(1)
"""Each lane's number in ``call_timing`` events (a waited-for ``seq`` is one of its lane's)."""


class Dispatch(Protocol):
    """How a call reaches its tool: ``await dispatch(tool, args, run_ctx)``.

    Return the call's value, or an [`Outcome`][toolnexus.scheduling.Outcome] (taken as is), or
    raise. The scheduler never calls tools itself, so it can be driven by a stub with no tools
    behind it.
    """

    def __call__(self, tool: Tool, args: dict[str, Any], run_ctx: Any, /) -> Awaitable[Any]: ...


async def _raise(exc: Exception) -> Any:
    raise exc


async def _resolve(result: Any) -> Any:
    return (await result) if inspect.isawaitable(result) else result


async def invoke_tool(tool: Tool, args: dict[str, Any], run_ctx: Any) -> Any:
    """The default dispatch: validate the arguments and run ``tool.execute``."""
    return await tool.invoke(args, run_ctx)


class Ticket:
    """Handle for one submitted call; pass it to
    [`Scheduler.wait`][toolnexus.scheduling.Scheduler.wait].

    Opaque apart from ``tool`` (the tool's name, so an answer can name the tool even when the
    scheduler is gone) and ``seq`` (the call's place in submission order, from 1; 0 for a
    submission that was answered at once and never entered the lane).
    """

    __slots__ = ("_answer", "_future", "_owner", "seq", "tool")

    def __init__(
        self,
        owner: Scheduler,
        seq: int,
        tool: str,
        future: asyncio.Future[Outcome] | None = None,
        answer: Outcome | None = None,
    ) -> None:
        self._owner = owner
        self._future = future
        self._answer = answer
        self.seq = seq
        self.tool = tool

    @property
    def done(self) -> bool:
        """Whether the outcome is available (the call committed, or was answered at once)."""
        return self._future is None or self._future.done()

    def __repr__(self) -> str:
        return f"<Ticket seq={self.seq} tool={self.tool!r}>"


class _Call:
    """The lane's record of one call, from submission to commit."""

    __slots__ = (
        "admitted",
        "args",
        "finished",
        "future",
        "logged_args",
        "mode",
        "model_call_id",
        "outcome",
        "resources",
        "run_ctx",
        "seq",
        "span",
        "started",
        "tool",
        "waited",
    )

    def __init__(
        self,
        seq: int,
        tool: Tool,
        args: dict[str, Any],
        logged_args: Any,
        mode: Mode,
        run_ctx: Any,
        future: asyncio.Future[Outcome],
        model_call_id: str | None,
        resources: Resources | None = None,
        admitted: float = 0.0,
    ) -> None:
        self.seq = seq
        self.tool = tool
        self.args = args
        self.resources = resources  # what it declared it touches (None: its safety class)
        self.waited: Wait | None = None  # the conflict it waited for before it started
        self.logged_args = logged_args
        self.mode = mode
        self.run_ctx = run_ctx
        self.future = future
        self.model_call_id = model_call_id
        self.outcome: Outcome | None = None
        self.span: Span = INVALID_SPAN  # its trace span, while it runs
        # when it entered the lane, started and settled (time.time(); see Scheduler._log_timing)
        self.admitted = admitted
        self.started = 0.0
        self.finished = 0.0


class _Slot:
    """What one worker task is doing: the call it runs (``None`` between calls)."""

    __slots__ = ("call", "took")

    def __init__(self) -> None:
        self.call: _Call | None = None
        self.took = False  # whether it has taken a call from the queue yet


def _tool_name(tool: object) -> str:
    name = getattr(tool, "name", None)
    return name if isinstance(name, str) else repr(tool)


@dataclass(frozen=True)
class AuditNaming:
    """How a lane's audit names its calls: the ``source`` of each ``tool_call`` event, and the
    ``kind`` of a lane with no outer call, whose calls are ``"<kind>:<seq>"``.

    A lane given an outer call id (a ``run_code`` call's) names its calls
    ``"<call_id>:code:<seq>"`` whatever its kind, as docs/scheduling.md states: they are that
    call's sub-calls. Why the owner says the rest: the scheduler sits below Code Mode and must
    not speak for it. Code Mode tells its lanes ``AuditNaming("code_mode", "code")``; a
    `Scheduler` used directly names its calls as itself (`SCHEDULER_NAMING`).
    """

    source: str
    kind: str

    def prefix(self, call_id: str | None) -> str:
        """The id of a call of this lane, less its ``seq``."""
        return f"{call_id}:code:" if call_id else f"{self.kind}:"


SCHEDULER_NAMING = AuditNaming("scheduler", "call")
"""The audit naming of a `Scheduler` used directly."""


class Scheduler:
    """One scheduler lane: classifies, starts and commits tool calls by the scheduling rule.

    * ``parallel`` calls overlap, at most ``max_parallel`` at once;
    * an ``exclusive`` call waits for everything before it to commit, runs alone, and holds the
      lane until it has committed itself;
    * outcomes are delivered strictly in submission order, however the work raced.

    See ``docs/scheduling.md`` for the rule and its diagram. Failure is always data: ``submit``
    and ``wait`` never raise; a failed call is ``Outcome(error={"tool", "message"})``.

    Args:
        dispatch: ``async (tool, args, run_ctx) -> value | Outcome``; defaults to running
            ``tool.invoke`` (validate, then execute).
        session: The [`Session`][toolnexus.session.Session] that receives one bookkeeping
            ``tool_call`` event per started call; a fresh one by default. A session given here
            also receives one ``call_timing`` event per call as it commits: when it entered
            the lane, started and finished (``admitted``, ``started``, ``finished``, seconds
            since the epoch), whether it failed, and what it declared and waited for.
        max_parallel: The most calls executing at once (positive int, default 10).
        call_id: The outer call's id (a ``run_code`` tool-call id), used to build each event's
            ``"<call_id>:code:<seq>"`` id; without it, ids are ``"<naming.kind>:<seq>"``.
        naming: How the lane's audit names its calls (`AuditNaming`): told by whoever owns the
            lane (Code Mode passes its own, ``"code_mode"`` and ``code``); a lane used
            directly is ``"scheduler"`` and ``call``.
        audit: Whether to log ``tool_call`` events at all. Batches of native calls turn it off:
            those calls are already in the transcript's assistant message.

    Raises:
        ConfigurationError: a misconfigured option, named, before anything starts.

    Example::

        async with Scheduler(max_parallel=4) as lane:
            tickets = [lane.submit(read_file, {"path": p}) for p in paths]
            outcomes = [await lane.wait(t) for t in tickets]
    """

    def __init__(
        self,
        dispatch: Dispatch | Callable[..., Any] | None = None,
        *,
        session: Session | None = None,
        max_parallel: int = 10,
        call_id: str | None = None,
        audit: bool = True,
        naming: AuditNaming | None = None,
    ) -> None:
        if dispatch is not None and not callable(dispatch):
            raise ConfigurationError(
                f"Scheduler dispatch must be an async callable (tool, args, run_ctx), got "
                f"{dispatch!r}; omit it to run each tool's own execute function."
            )
        if session is not None and not isinstance(session, Session):
            raise ConfigurationError(
                f"Scheduler session must be a toolnexus.session.Session, got "
                f"{type(session).__name__}; omit it to get a fresh Session."
            )
        if call_id is not None and not isinstance(call_id, str):
            raise ConfigurationError(f"Scheduler call_id must be a string, got {call_id!r}.")
        self._dispatch: Callable[..., Any] = dispatch if dispatch is not None else invoke_tool
        try:
            self._rule = SchedulingRule(max_parallel)
        except ValueError as exc:  # the rule owns the check; this is the configuration boundary
            raise ConfigurationError(
                f"Scheduler {exc}; use 1 to run calls one at a time, or leave the default of 10."
            ) from exc
        self._session = session if session is not None else Session()
        self._call_id = call_id
        self._naming = naming if naming is not None else SCHEDULER_NAMING
        self._event_prefix = self._naming.prefix(call_id)
        self._audit = audit
        self._timing = session is not None  # nobody reads a fresh session's timings
        self._lane = next(_lane_numbers)
        self._calls: dict[int, _Call] = {}
        self._events: list[Event] = []
        self._workers: set[asyncio.Task[None]] = set()
        self._here: set[asyncio.Task[Any]] = set()  # tasks running a call of call_in_task
        self._ready: deque[_Call] = deque()  # started, not yet taken by a worker, in order
        self._context = contextvars.copy_context()
        self._traced = tool_spans_needed(self._context)  # else no span work per call at all
        self._stopped = False

    # -- public API ----------------------------------------------------------------------------

    @property
    def session(self) -> Session:
        """The session log that receives this lane's ``tool_call`` events."""
        return self._session

    @property
    def max_parallel(self) -> int:
        """The most calls this lane runs at once."""
        return self._rule.max_parallel

    @property
    def stopped(self) -> bool:
        """Whether `stop` has been called."""
        return self._stopped

    def submit(
        self, tool: Tool, args: Any, run_ctx: Any = None, *, call_id: str | None = None
    ) -> Ticket:
        """Queue one call and return at once; never raises.

        ``call_id`` is the model's id for this call, when it has one; it is put on the call's
        trace span (``gen_ai.tool.call.id``).

        ``args`` is snapshotted twice here (dispatched and audited copies) and the call is
        classified on the dispatched copy. ``None`` counts as no arguments. A submission that
        cannot be a call (not a ``Tool``, arguments that are not an object, no running event
        loop, a stopped lane) is answered at once with an error outcome and takes no place in
        the lane.
        """
        ticket, started = self._admit(tool, args, run_ctx, call_id)
        if started:
            self._carry_out([], started, take=False)
        return ticket

    def _admit(
        self, tool: Tool, args: Any, run_ctx: Any, call_id: str | None
    ) -> tuple[Ticket, list[int]]:
        """`submit` up to the rule's answer: the ticket, and the calls the rule started now
        (not yet carried out)."""
        name = tool.name if isinstance(tool, Tool) else _tool_name(tool)
        if self._stopped:
            return self._answered(name, SCHEDULER_GONE, "gone"), []
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return self._answered(name, "submit() needs a running event loop; call it from one"), []
        if not isinstance(tool, Tool):
            return self._answered(name, f"{name} is not a toolnexus Tool"), []
        raw = {} if args is None else args
        dispatched = snapshot(raw)
        if not isinstance(dispatched, dict):
            problem = f"arguments must be an object, got {type(args).__name__}"
            return self._answered(name, problem), []
        logged = snapshot(raw) if self._audit else None  # only an audit event shows it
        mode, resources = classify(tool, dispatched)
        if (
            resources is not None
            and self._rule.writes_everything is not None
            and resolves_paths(tool.resources)
        ):
            resources = None  # resolved before a call that may relink paths: keep the class
        future: asyncio.Future[Outcome] = loop.create_future()
        seq, started = self._rule.submit(mode, resources)
        self._calls[seq] = _Call(
            seq,
            tool,
            dispatched,
            logged,
            mode,
            run_ctx,
            future,
            call_id,
            resources,
            time.time() if self._timing else 0.0,
        )
        return Ticket(self, seq, name, future), started

    async def wait(self, ticket: Ticket, timeout: float | None = None) -> Outcome:  # noqa: ASYNC109
        """The outcome of ``ticket``, once the call has committed; never raises.

        Waits for as long as it takes when ``timeout`` is ``None``: bounding a run is the
        runtime's job, and the lane must not invent a second, shorter deadline. With a timeout,
        an unanswered ticket yields an error outcome, and the call carries on (wait again to
        get its outcome). Cancelling the waiter does not cancel the call. A stopped lane has
        answered every ticket, so this never hangs on one.
        """
        if not isinstance(ticket, Ticket) or ticket._owner is not self:
            name = ticket.tool if isinstance(ticket, Ticket) else repr(ticket)
            return Outcome.failure(name, "this ticket was not issued by this scheduler")
        future = ticket._future
        if future is None:
            return ticket._answer or Outcome.failure(ticket.tool, SCHEDULER_GONE, "gone")
        if future.done():
            return future.result()
        try:
            if timeout is None:
                return await asyncio.shield(future)
            return await asyncio.wait_for(asyncio.shield(future), max(timeout, 0))
        except TimeoutError:
            return Outcome.failure(
                ticket.tool, f"no outcome within {timeout} s; the call may still be running"
            )

    def _known(self, ticket: Ticket) -> Outcome | None:
        """What `wait` would return at once for a done ``ticket`` of this lane (without a
        coroutine to await), else ``None``."""
        if ticket._owner is not self:
            return None
        future = ticket._future
        if future is None:
            return ticket._answer
        return future.result() if future.done() else None

    async def call(self, tool: Tool, args: Any, run_ctx: Any = None) -> Outcome:
        """Submit one call and wait for its outcome; never raises (cancellation aside).

        Awaits the call's own future, unshielded (`wait` shields it: a ticket may have other
        waiters): no one else holds this ticket, and cancelling the waiter only cancels the
        future, which the lane then leaves unanswered while the call itself carries on, as
        `wait` promises. A shield would cost one more loop turn per call.
        """
        ticket = self.submit(tool, args, run_ctx)
        future = ticket._future
        if future is None:
            return ticket._answer or Outcome.failure(ticket.tool, SCHEDULER_GONE, "gone")
        return await future

    async def call_in_task(self, tool: Tool, args: Any, run_ctx: Any = None) -> Outcome:
        """`call` for a caller that awaits each call from a task of its own (a Code Mode
        runtime does): a call the rule lets start at once, with no started call still waiting
        for a worker, runs right here, in the awaiting task.

        Why: a call handed to a worker task costs the worker's start and a hand-back through
        ``asyncio.shield``, three loop turns before the caller resumes; here a call that never
        suspends (a lookup, a cached answer) commits and returns within the caller's step. The
        lane's guarantees hold: the rule started the call (it counts against ``max_parallel``),
        it begins after every call that started before it, it is audited when it starts, and
        its outcome is delivered in submission order (a call that finishes before an earlier
        one waits for it, as with `wait`). Unlike `call`, cancelling the awaiting task cancels
        a call that runs here; it is answered "code run is over; tool call abandoned", and
        `stop` cancels such tasks as it cancels its workers.
        """
        ticket, started = self._admit(tool, args, run_ctx, None)
        future = ticket._future  # its loop: current_task() would look it up again (getpid())
        task = None if future is None else asyncio.current_task(future.get_loop())
        if task is None or started != [ticket.seq] or self._ready:
            if started:
                self._carry_out([], started, take=False)
            return await self.wait(ticket)
        call = self._calls[ticket.seq]
        self._mark_started(call)
        self._here.add(task)
        try:
            outcome = await self._run_here(call, task)
        finally:
            self._here.discard(task)
        if self._stopped:  # stop() answered it (it had not committed), or it already had
            return await self.wait(ticket)
        self._settle(call, outcome, take=False)
        assert future is not None
        if future.done():  # it committed: its outcome, without a coroutine to await
            return future.result()
        return await self.wait(ticket)  # an earlier call has yet to commit

    async def _run_here(self, call: _Call, task: asyncio.Task[Any]) -> Outcome:
        """Run one started call in the awaiting ``task`` (see `call_in_task`); its outcome.

        Why the lane has two call runners, this one and `_work`: they differ in whose task a
        cancellation belongs to, and so in what it means. Stated once, for both:

        * **the tool cancels itself** (its own ``CancelledError``, nobody cancelled the
          task): the call is answered "cancelled" (``DID_NOT_COMPLETE``) and the lane goes on.
          Here the outcome is returned and the caller carries on; a worker settles it and
          ends, since its task is marked cancelled;
        * **the task is cancelled from outside**: here that task is the program's (its
          caller, or `stop`), so the call is answered "abandoned" and the cancellation goes
          on up; a worker's task belongs to the lane, which cancels it only in `stop`, which
          answers every call itself;
        * **KeyboardInterrupt / SystemExit**: the host's, in both: the call is answered with
          it, and it goes on up;
        * **any other exception**, a tool's own ``BaseException`` included: a failure outcome.

        One runner with a switch would put a branch and a frame into the path of every call
        (``bench/all.py``'s per-call rows count them): a worker runs call after call in one
        task without a coroutine per call, and this runner exists to finish a call inside
        its caller's step. The lines they share are the ones a call needs either way
        (`_start`, `outcome_of`, `outcome_from_exception`, the span's end).
        """
        if self._timing:
            call.started = time.time()
        name, traced = call.tool.name, self._traced
        try:
            value, rest = self._start(call)
            if rest is not None:
                value = await rest
        except asyncio.CancelledError:
            if traced:
                end_tool_span(call.span, {"message": DID_NOT_COMPLETE})
            if task.cancelling():  # the caller's (or stop()'s) cancellation: abandoned
                if not self._stopped:
                    self._settle(call, Outcome.failure(name, ABANDONED, "abandoned"), take=False)
                raise
            logger.warning("tool %r: its call was cancelled before it finished", name)
            return Outcome.failure(name, DID_NOT_COMPLETE, "cancelled")
        except (KeyboardInterrupt, SystemExit) as exc:  # the host's: answer, then let it go
            outcome = outcome_from_exception(name, exc)
            if traced:
                end_tool_span(call.span, outcome.error)
            if not self._stopped:
                self._settle(call, outcome, take=False)
            raise
        except BaseException as exc:  # any other, a tool's own BaseException too: a failure
            outcome = outcome_from_exception(name, exc)
        else:
            outcome = outcome_of(name, value)
        if traced:
            end_tool_span(call.span, outcome.error)
        return outcome

    def dispatch_fun(self) -> Callable[[Tool, Any, Any], Awaitable[Outcome]]:
        """This lane as a dispatch function ``(tool, args, run_ctx) -> Outcome``.

        Hand it to Code Mode bindings so that every tool function of a program routes through
        the lane: ordering, ``max_parallel``, snapshots and audit events all live behind it.
        It is `call_in_task`: await each call from a task of its own, as Code Mode runtimes
        do (cancelling that task abandons a call it runs).
        """
        return self.call_in_task

    def logged_events(self) -> list[tuple[str, dict[str, Any]]]:
        """The ``(type, data)`` pairs this lane appended to its session, in order."""
        return [(e.type, e.data) for e in self._events]

    async def stop(self) -> None:
        """Tear the lane down, answering every outstanding ticket; safe to call twice.

        In submission order: a call that already produced its outcome still delivers it; every
        other one (queued or running) is answered with "code run is over; tool call
        abandoned". Running tasks are then cancelled, and ``stop`` waits briefly for them to
        finish. Later submissions are answered with "code run is over; scheduler is gone".
        """
        if self._stopped:
            return
        self._stopped = True
        self._ready.clear()  # started calls no worker took: answered below, never run
        for seq, settled in self._rule.close():
            call = self._calls.pop(seq)
            outcome = (call.outcome if settled else None) or Outcome.failure(
                call.tool.name, ABANDONED, "abandoned"
            )
            if self._timing:
                call.finished = call.finished or time.time()
                self._log_timing(call, outcome)
            self._deliver(call, outcome)
        current = asyncio.current_task()
        here = [t for t in self._here if t is not current and not t.done()]
        workers = [w for w in self._workers if not w.done()] + here
        for worker in workers:
            worker.cancel()
        if workers:
            _, still = await asyncio.wait(workers, timeout=STOP_GRACE_SECONDS)
            for worker in still:
                logger.warning(
                    "a tool ignored cancellation for %.1f s after stop(); leaving it behind: %r",
                    STOP_GRACE_SECONDS,
                    worker,
                )

    async def __aenter__(self) -> Scheduler:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else f"{len(self._calls)} outstanding"
        return f"<Scheduler max_parallel={self.max_parallel} {state}>"

    # -- driving the rule ----------------------------------------------------------------------

    def _answered(self, name: str, message: str, reason: HostReason | None = None) -> Ticket:
        return Ticket(self, 0, name, answer=Outcome.failure(name, message, reason))

    def _carry_out(self, committed: list[int], started: list[int], *, take: bool) -> _Call | None:
        """Deliver ``committed`` in order, then queue ``started`` in order.

        With ``take``, the caller is a worker that has just finished a call: it gets the front
        of the queue back to run itself at once, and workers are spawned for the calls left
        over. Each spawned worker takes the front call when it first runs, so every call
        begins in the order it started.
        """
        calls = self._calls
        for seq in committed:
            call = calls.pop(seq)
            assert call.outcome is not None  # the rule commits settled calls only
            if self._timing:
                self._log_timing(call, call.outcome)
            if not call.future.done():  # _deliver, inline: once per call
                call.future.set_result(call.outcome)
        if not started:
            return self._ready.popleft() if take and self._ready else None
        ready = self._ready
        for seq in started:
            call = calls[seq]
            self._mark_started(call)
            ready.append(call)
        for _ in range(len(started) - 1 if take else len(started)):
            self._spawn()
        return ready.popleft() if take else None

    def _mark_started(self, call: _Call) -> None:
        """A call the rule has started: what it waited for (looked up only when some call
        waited at all: mostly none did), and its audit event."""
        rule = self._rule
        call.waited = rule.waited_for(call.seq) if rule._waits else None
        if self._audit:
            self._log_start(call)
        elif call.resources is not None:
            self._log_resources(call)

    def _spawn(self) -> None:
        slot = _Slot()
        worker = asyncio.get_running_loop().create_task(self._work(slot), context=self._context)
        self._workers.add(worker)
        worker.add_done_callback(functools.partial(self._worker_done, slot))

    async def _work(self, slot: _Slot) -> None:
        """A worker: run ready calls one after another until none is left (the other call
        runner; `_run_here` says why there are two and what a cancellation means in each)."""
        slot.took = True
        call = slot.call = self._ready.popleft() if self._ready else None
        handled = 0
        timing, traced = self._timing, self._traced
        while call is not None:
            if timing:
                call.started = time.time()  # when it begins running, not when the rule let it
            name = call.tool.name
            try:
                value, rest = self._start(call)
                if rest is not None:
                    value = await rest
            except asyncio.CancelledError:
                if traced:
                    end_tool_span(call.span, {"message": DID_NOT_COMPLETE})
                slot.call = None
                if not self._stopped:  # the tool's own cancellation, not stop(): carry on
                    logger.warning("tool %r: its call was cancelled before it finished", name)
                    self._settle(
                        call, Outcome.failure(name, DID_NOT_COMPLETE, "cancelled"), take=False
                    )
                raise
            except (KeyboardInterrupt, SystemExit) as exc:  # the host's: answer, then let go
                outcome = outcome_from_exception(name, exc)
                if traced:
                    end_tool_span(call.span, outcome.error)
                slot.call = None
                if not self._stopped:
                    self._settle(call, outcome, take=False)
                raise
            except BaseException as exc:  # any other, a tool's own BaseException too: a failure
                outcome = outcome_from_exception(name, exc)
            else:
                outcome = outcome_of(name, value)
            if traced:
                end_tool_span(call.span, outcome.error)
            if self._stopped:
                return  # stop() has answered this call already
            slot.call = None
            call = slot.call = self._settle(call, outcome, take=True)
            handled += 1
            if call is not None and handled % YIELD_EVERY == 0:
                # A worker whose calls never suspend must not hog the loop: one loop turn,
                # with its next call back at the front of the queue (so that calls still
                # begin in order), then the front call, whoever took the one it put back.
                slot.call, slot.took = None, False
                self._ready.appendleft(call)
                await asyncio.sleep(0)
                slot.took = True
                if self._stopped:
                    return
                call = slot.call = self._ready.popleft() if self._ready else None

    def _span_attributes(self, call: _Call) -> dict[str, Any]:
        attributes: dict[str, Any] = {
            "gen_ai.tool.call.id": call.model_call_id,
            "toolnexus.call.seq": call.seq,
            "toolnexus.call.mode": call.mode,
            "toolnexus.lane.call_id": self._call_id,
        }
        if call.resources is not None:
            attributes["toolnexus.call.reads"] = sorted(call.resources.reads)
            attributes["toolnexus.call.writes"] = sorted(call.resources.writes)
        if call.waited is not None:
            attributes["toolnexus.call.waited_for.seq"] = call.waited.call
            attributes["toolnexus.call.waited_for.resource"] = call.waited.resource
        return attributes

    def _start(self, call: _Call) -> tuple[Any, InContext | None]:
        """Start ``call`` in its own copy of the lane's context: ``(its value, None)`` when it
        finished in its first step (most calls do: nothing to wrap or await), else ``(None,
        the rest of it to await)``. Raises what its first step raised."""
        context = self._context.copy()
        try:
            coro, first = context.run(self._begin, call)
        except StopIteration as finished:
            return finished.value, None
        return None, InContext(context, coro, first)

    def _begin(self, call: _Call) -> tuple[Coroutine[Any, Any, Any], Any]:
        """The call's coroutine and what its first step yielded; raises ``StopIteration``
        (carrying the value) when it finished in that step.

        The coroutine is the dispatch's own, or one that returns (or raises) what the dispatch
        did. Runs inside the call's own context (`_start` calls it through ``context.run``),
        where the call's trace span is made current (when spans are needed at all).
        """
        if self._traced:
            call.span = tool_span(call.tool.name, functools.partial(self._span_attributes, call))
        try:
            result = self._dispatch(call.tool, call.args, call.run_ctx)
        except Exception as exc:
            coro = _raise(exc)  # raised in its first step, never as StopIteration
        else:
            is_coroutine = type(result) is types.CoroutineType or asyncio.iscoroutine(result)
            coro = result if is_coroutine else _resolve(result)
        return coro, coro.send(None)

    def _settle(self, call: _Call, outcome: Outcome, *, take: bool) -> _Call | None:
        call.outcome = outcome
        if self._timing:
            call.finished = time.time()
        committed, started = self._rule.settle(call.seq)
        return self._carry_out(committed, started, take=take)

    def _worker_done(self, slot: _Slot, worker: asyncio.Task[None]) -> None:
        self._workers.discard(worker)
        if not worker.cancelled():
            worker.exception()  # mark it retrieved: its call was answered already
        if self._stopped:
            return
        # Cancelled from outside the lane before it could run its call: answer that call
        # (the one it held, or, before it took one, the last queued call, which it would
        # have taken after the others).
        call = slot.call
        if call is None and not slot.took and self._ready:
            call = self._ready.pop()
        if call is not None:
            slot.call = None
            failed = Outcome.failure(call.tool.name, DID_NOT_COMPLETE, "cancelled")
            self._settle(call, failed, take=False)

    def _log_start(self, call: _Call) -> None:
        data = events.ToolCallData(
            id=f"{self._event_prefix}{call.seq}",
            name=call.tool.name,
            arguments=call.logged_args,
            mode=call.mode,
            seq=call.seq,
            source=self._naming.source,
            **self._scheduling_facts(call),
        )
        # The data is built from this lane's own snapshot, so it is JSON-shaped by construction.
        self._events.append(self._session._append_json(events.TOOL_CALL, data))

    def _log_resources(self, call: _Call) -> None:
        """A native call's declared resources (its ``tool_call`` is the model's own message)."""
        data = events.CallResourcesData(
            id=call.model_call_id, name=call.tool.name, **self._scheduling_facts(call)
        )
        self._events.append(self._session._append_json(events.CALL_RESOURCES, data))

    def _scheduling_facts(self, call: _Call) -> events.SchedulingFacts:
        """What a call declared it touches, and which call and resource it waited for."""
        facts = events.SchedulingFacts()
        self._add_facts(call, facts)
        return facts

    def _add_facts(self, call: _Call, facts: events.SchedulingFacts) -> None:
        """Add `_scheduling_facts` to an event's data."""
        if call.resources is not None:
            facts["resources"] = call.resources.to_json()
        if call.waited is not None:
            waited = call.waited
            facts["waited_for"] = {"seq": waited.call, "resource": waited.resource}

    def _log_timing(self, call: _Call, outcome: Outcome) -> None:
        """The ``call_timing`` event of a call as it commits (or is abandoned by ``stop``).

        ``id`` is the call's event id (a sub-call's ``tool_call`` id, a native call's model id);
        ``lane`` and ``seq`` place it in its lane, where ``waited_for.seq`` names another call.
        """
        data = events.CallTimingData(
            id=call.model_call_id
            if self._call_id is None and call.model_call_id is not None
            else f"{self._event_prefix}{call.seq}",
            name=call.tool.name,
            lane=self._lane,
            seq=call.seq,
            mode=call.mode,
            admitted=call.admitted,
            started=call.started or call.finished,
            finished=call.finished,
            ok=outcome.error is None,
        )
        if call.resources is not None or call.waited is not None:
            self._add_facts(call, data)
        if outcome.error is not None:
            data["error"] = outcome.error.get("message", "")
        if self._audit:  # a Code Mode lane: its program's call id
            data["program"] = self._call_id
        self._events.append(self._session._append_json(events.CALL_TIMING, data))

    def _deliver(self, call: _Call, outcome: Outcome) -> None:
        if not call.future.done():
            call.future.set_result(outcome)
