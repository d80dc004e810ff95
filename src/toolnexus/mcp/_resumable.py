"""Streamable HTTP resumability (SEP-1699): an event store bounded by size and age, one per
client session, so a client whose stream drops resumes with ``Last-Event-ID`` and loses no
progress and no result.

Why one store per session: the SDK names a request's stream by its JSON-RPC id, which every
client counts from the same start; a store shared by the sessions would mix their streams,
and a resumption could replay another client's events. Event ids are random (not
guessable), and an id the store does not hold (forged, another session's, expired) replays
nothing.
"""

from __future__ import annotations

import itertools
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.types import JSONRPCMessage

__all__ = ["MAX_EVENTS", "MAX_EVENT_AGE", "RETRY_MS", "BoundedEventStore", "ResumableSessions"]

MAX_EVENTS = 2000
"""The most events one session's store keeps (the oldest go first)."""

MAX_EVENT_BYTES = 8 * 1024 * 1024
"""The most bytes of messages one session's store keeps (the oldest go first)."""

MAX_EVENT_AGE = 300.0
"""Seconds an event is kept for a resumption."""

RETRY_MS = 1000
"""The SSE ``retry`` a client is told to wait before reconnecting (milliseconds)."""


@dataclass(slots=True)
class _Event:
    stream: StreamId
    message: JSONRPCMessage | None
    at: float
    size: int
    order: int


class BoundedEventStore(EventStore):
    """The SDK's `EventStore`, in memory, bounded by count, bytes and age.

    Args:
        max_events: The most events kept.
        max_bytes: The most bytes of messages kept.
        max_age: Seconds an event is kept.
    """

    def __init__(
        self,
        max_events: int = MAX_EVENTS,
        max_bytes: int = MAX_EVENT_BYTES,
        max_age: float = MAX_EVENT_AGE,
    ) -> None:
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.max_age = max_age
        self._events: OrderedDict[EventId, _Event] = OrderedDict()
        self._bytes = 0
        self._order = itertools.count()

    @property
    def size(self) -> int:
        """How many events are kept (no ``__len__``: the SDK tests a store's truth)."""
        return len(self._events)

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        size = 0 if message is None else len(message.model_dump_json(by_alias=True))
        event_id = secrets.token_urlsafe(12)
        self._events[event_id] = _Event(
            stream_id, message, time.monotonic(), size, next(self._order)
        )
        self._bytes += size
        self._evict()
        return event_id

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        self._evict()
        last = self._events.get(last_event_id)
        if last is None:
            return None  # forged, another session's, or expired: nothing to replay
        later = [
            (event_id, event)
            for event_id, event in self._events.items()
            if event.stream == last.stream and event.order > last.order
        ]
        for event_id, event in later:
            if event.message is not None:
                await send_callback(EventMessage(event.message, event_id))
        return last.stream

    def _evict(self) -> None:
        oldest = time.monotonic() - self.max_age
        while self._events:
            event = next(iter(self._events.values()))
            full = len(self._events) > self.max_events or self._bytes > self.max_bytes
            if not full and event.at >= oldest:
                return
            self._events.popitem(last=False)
            self._bytes -= event.size


class ResumableSessions(StreamableHTTPSessionManager):
    """The SDK's session manager, giving each session a `BoundedEventStore` of its own (the
    SDK reads ``event_store`` once per session it opens) and the ``retry`` of `RETRY_MS`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("retry_interval", RETRY_MS)
        super().__init__(*args, **kwargs)

    @property
    def event_store(self) -> EventStore:
        return BoundedEventStore()

    @event_store.setter
    def event_store(self, value: EventStore | None) -> None:
        """Ignored: every session gets a store of its own."""
