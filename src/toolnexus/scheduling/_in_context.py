"""Await a coroutine inside a given ``contextvars.Context``, without a task of its own.

Why: asyncio runs each task's steps inside the task's context, so the usual way to give a call
its own context is a task per call. Creating a task is the largest fixed cost of a tool call
(several microseconds, plus a loop iteration to start it), and the scheduler reuses one worker
task for many calls instead. Wrapping each call's coroutine in `InContext` keeps the
per-call semantics: every step of the coroutine (``send``, ``throw``, ``close``) runs inside the
call's own context copy, so contextvars set by the scheduler's creator are visible and a call's
own ``ContextVar.set()`` never leaks into the next call the worker runs.

A worker takes the first step of a call's coroutine itself, inside the context; only a call
that suspends is wrapped, with the value its first step yielded (``first``). Most tool calls
finish in their first step, and the wrapper (three method calls) was then pure overhead.
"""

from __future__ import annotations

import contextvars
from collections.abc import Coroutine, Generator
from typing import Any

__all__ = ["InContext"]


_NOT_STARTED = object()


class InContext:
    """An awaitable that steps ``coro`` inside ``context``: ``await InContext(ctx, coro)``.

    ``first``: what the coroutine's first step yielded, when the caller took that step
    itself (inside the same context); it is handed on before any further step.
    """

    __slots__ = ("_context", "_coro", "_first")

    def __init__(
        self,
        context: contextvars.Context,
        coro: Coroutine[Any, Any, Any],
        first: Any = _NOT_STARTED,
    ) -> None:
        self._context = context
        self._coro = coro
        self._first = first

    def __await__(self) -> Generator[Any, Any, Any]:
        return self  # a generator-compatible iterator (send, throw, close)

    def __iter__(self) -> InContext:
        return self

    def __next__(self) -> Any:
        first = self._first
        if first is not _NOT_STARTED:
            self._first = _NOT_STARTED
            return first
        return self._context.run(self._coro.send, None)

    def send(self, value: Any) -> Any:
        """Resume the coroutine with ``value``, inside the context."""
        return self._context.run(self._coro.send, value)

    def throw(self, *exc_info: Any) -> Any:
        """Raise an exception (a cancellation, usually) inside the coroutine and context."""
        return self._context.run(self._coro.throw, *exc_info)

    def close(self) -> None:
        """Close the coroutine inside the context."""
        self._context.run(self._coro.close)
