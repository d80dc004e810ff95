"""One scheduling lane per MCP client session: the calls a client sends, in arrival order.

An MCP client sends a model's parallel tool calls as concurrent ``tools/call`` requests. The
gateway puts every direct upstream call and every ``run_code`` of one client session into one
[`Scheduler`][toolnexus.scheduling.Scheduler] lane, as ``client.run`` does with one model
response's calls: reads overlap up to the cap, an unsafe call waits for everything before it,
runs alone and holds the barrier until it has committed, and answers are given in arrival
order. ``run_code`` takes its in-process class (a tool without hints: it runs alone).

The session is the client's connection (one per stdio client, one per streamable HTTP
session id). A client on the stateless 2026-07-28 revision has no session: each of its
requests is a connection of its own, so its calls are ordered only within each request.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from toolnexus.scheduling import Outcome, Scheduler
from toolnexus.tools import Tool

__all__ = ["CANCELLED", "SessionLanes"]

CANCELLED = "the client cancelled this call"


class _Pending:
    """One request's call as the lane sees it: the work to run once the rule starts it, and
    what became of it (the request handler reads the result from here, unchanged)."""

    __slots__ = ("cancelled", "task", "work")

    def __init__(self, work: Callable[[], Awaitable[Any]]) -> None:
        self.work = work
        self.task: asyncio.Future[Any] | None = None
        self.cancelled = False

    def cancel(self) -> None:
        """The client cancelled: a call not started never runs, a running one is cancelled."""
        self.cancelled = True
        if self.task is not None:
            self.task.cancel()


async def _dispatch(tool: Tool, args: dict[str, Any], pending: _Pending) -> Outcome:
    """Run the request's work when the lane starts the call; never raises.

    Why a task of its own: the client may cancel its request while the call runs in one of
    the lane's workers; cancelling that task stops the call and the lane goes on (a worker
    must never see a cancellation that is not its own).
    """
    if pending.cancelled:
        return Outcome.failure(tool.name, CANCELLED)
    task = asyncio.ensure_future(pending.work())
    pending.task = task
    await asyncio.wait({task})
    if task.cancelled():
        return Outcome.failure(tool.name, CANCELLED)
    failure = task.exception()
    if failure is not None:
        return Outcome.failure(tool.name, str(failure) or type(failure).__name__)
    return Outcome(value=None)


class SessionLanes:
    """A [`Scheduler`][toolnexus.scheduling.Scheduler] lane per client session, made on the
    session's first call and dropped with the session (weakly held)."""

    def __init__(self, max_parallel: int) -> None:
        self.max_parallel = max_parallel
        self._lanes: weakref.WeakKeyDictionary[Any, Scheduler] = weakref.WeakKeyDictionary()

    def lane(self, session: Any) -> Scheduler:
        """The lane of ``session`` (made now when it has none)."""
        lane = self._lanes.get(session)
        if lane is None or lane.stopped:
            lane = Scheduler(_dispatch, max_parallel=self.max_parallel, audit=False)
            self._lanes[session] = lane
        return lane

    async def run(
        self,
        session: Any,
        tool: Tool,
        arguments: dict[str, Any],
        work: Callable[[], Awaitable[Any]],
    ) -> Any:
        """``await work()`` as a call of ``tool`` in ``session``'s lane, when the rule starts
        it, and its result once the call has committed (in arrival order).

        ``tool`` and ``arguments`` classify the call (its hints and declared resources);
        ``work`` does it. The work's own exception is raised here; cancelling the awaiting
        request cancels the work (or keeps it from starting) and the lane goes on.
        """
        pending = _Pending(work)
        lane = self.lane(session)
        ticket = lane.submit(tool, arguments, pending)
        try:
            outcome = await lane.wait(ticket)
        except BaseException:
            pending.cancel()
            raise
        task = pending.task
        if task is None:  # the lane answered without running it (it was stopped)
            raise RuntimeError((outcome.error or {}).get("message", "the call did not run"))
        if task.cancelled():
            raise asyncio.CancelledError
        return task.result()
