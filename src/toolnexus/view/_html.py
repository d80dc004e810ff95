"""The HTML report: one self-contained file, the run embedded as JSON and drawn by inline script."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from toolnexus.errors import ViewError
from toolnexus.view._model import RunSource, build
from toolnexus.view._page import page

__all__ = ["embed_json", "render"]

_SCRIPT_SAFE = (
    ("<", "\\u003c"),
    (">", "\\u003e"),
    ("&", "\\u0026"),
    ("\u2028", "\\u2028"),
    ("\u2029", "\\u2029"),
)
"""What is escaped, one ``str.replace`` each: ``str.translate`` with a mapping looks every
character up in it, some thirty times slower on a large run."""


def embed_json(value: Any) -> str:
    """``value`` as JSON that can sit inside a ``<script>`` element: ``<``, ``>``, ``&`` and the
    two JavaScript line separators are escaped, so no text in it can end the element or open
    another one.

    Raises:
        ViewError: ``value`` holds what strict JSON cannot (``NaN``, an infinity): the page's
            ``JSON.parse`` would refuse it and draw nothing.
    """
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError as exc:
        raise ViewError(f"the report cannot embed the run as JSON ({exc})") from None
    for mark, escaped in _SCRIPT_SAFE:
        text = text.replace(mark, escaped)
    return text


def render(session: RunSource | Mapping[str, RunSource]) -> str:
    """The run as one self-contained HTML page (inline CSS, script and SVG; no network).

    It draws a time axis with one row per concurrent slot, each call as a bar coloured by
    class (safe, unsafe, failed, refused, timed out), what each call waited for (a hatched
    segment and a dashed link to that call), Code Mode programs as bands holding their
    sub-calls, model requests with their tokens, and a summary. Click a bar for its arguments
    and result. Everything from the run is shown as text, never as markup.

    Args:
        session: A [`Session`][toolnexus.session.Session], its events, the path of a saved
            session or gateway audit log, or a mapping of group name (a sub-agent) to any of
            these.

    Returns:
        The page, to write to a ``.html`` file (or show in a notebook).

    Raises:
        ViewError: a file that is not a session log, a source of another kind, or an event
            the report cannot draw (naming the line or the event).

    Example::

        Path("run.html").write_text(toolnexus.view.render(result.session), encoding="utf-8")
    """
    return page(embed_json(build(session)))
