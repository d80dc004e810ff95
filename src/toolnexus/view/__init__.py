"""See a run: an HTML timeline of what ran together and what waited, and a Chrome trace.

``toolnexus.view`` reads the session log only (a `Session`, a saved session, a gateway audit
log, or a durable run's events) and draws it:

* `render` returns one self-contained HTML page (``toolnexus view FILE -o report.html``);
* `trace` returns the Chrome Trace Event Format, which Perfetto UI and ``chrome://tracing``
  open (``toolnexus view FILE --trace trace.json``).

See ``docs/viewer.md``.
"""

from __future__ import annotations

from toolnexus.view._html import render
from toolnexus.view._model import build, read_events
from toolnexus.view._trace import trace

__all__ = ["build", "read_events", "render", "trace"]
