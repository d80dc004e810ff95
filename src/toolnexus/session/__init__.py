"""The session log: an append-only list of events, from which model messages are derived.

Two kinds of event share one log:

* **surface** events (``system_message``, ``user_message``, ``assistant_message``,
  ``tool_result``) are the transcript; [`Session.messages`][toolnexus.session.Session.messages]
  projects each to one message;
* **bookkeeping** events (``tool_call``, ``call_timing``, ``turn_start``, ``turn_end``, the
  other types of `BOOKKEEPING_TYPES`, and any other type you log) project to nothing.

Every type toolnexus writes has one builder in
[`toolnexus.session.events`][toolnexus.session.events], the log's vocabulary (in the manner of
h11, whose events are its protocol), and a TypedDict of its data: a writer builds an event
with its builder, a reader reads its data as the TypedDict says, and `BOOKKEEPING_TYPES` is
derived from the builders, so the list of types and what is written cannot drift apart.

Why one log with two kinds: a Code Mode program may make hundreds of tool calls, and each must
be audited, but none of them may enter the model's history: only what the program returns does.
Logging them as bookkeeping keeps the audit trail and the transcript in one ordered record while
``messages()`` stays exactly what the model said and was told.

Example::

    session = Session()
    session.append("user_message", {"content": "hi"})
    session.log_event("turn_start", {"turn": 1})
    session.messages()  # [{"role": "user", "content": "hi"}]
"""

from toolnexus.session import events
from toolnexus.session._log import MAX_DEPTH, Event, Session
from toolnexus.session.events import BOOKKEEPING_TYPES, SURFACE_TYPES

__all__ = ["BOOKKEEPING_TYPES", "MAX_DEPTH", "SURFACE_TYPES", "Event", "Session", "events"]
