"""How many calls of one batch may run at once."""

from __future__ import annotations

import logging
import os

__all__ = ["DEFAULT_MAX_TOOL_CONCURRENCY", "ENV_MAX_TOOL_CONCURRENCY", "max_tool_concurrency"]

logger = logging.getLogger("toolnexus.scheduling")

DEFAULT_MAX_TOOL_CONCURRENCY = 10
ENV_MAX_TOOL_CONCURRENCY = "TOOLNEXUS_MAX_TOOL_CONCURRENCY"


def _positive_int(value: object) -> int | None:
    """``value`` as a positive int, or ``None`` when it is not one (bools are not numbers)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if isinstance(value, str):
        text = value.strip()
        if text.isascii() and text.isdigit():
            number = int(text)
            return number if number > 0 else None
    return None


def max_tool_concurrency(explicit: int | str | None = None) -> int:
    """The cap on concurrently running calls of one batch.

    Sources in order: ``explicit`` (an option), the ``TOOLNEXUS_MAX_TOOL_CONCURRENCY``
    environment variable, then 10. A zero, negative or non-numeric value at any source falls back
    to the next one, with a warning naming it, rather than failing a model's turn.

    Example::

        max_tool_concurrency()     # 10, or the environment's value
        max_tool_concurrency(4)    # 4
        max_tool_concurrency(0)    # falls back: environment, else 10
    """
    if explicit is not None:
        value = _positive_int(explicit)
        if value is not None:
            return value
        logger.warning(
            "max_tool_concurrency=%r is not a positive integer; falling back to %s or %d",
            explicit,
            ENV_MAX_TOOL_CONCURRENCY,
            DEFAULT_MAX_TOOL_CONCURRENCY,
        )
    raw = os.environ.get(ENV_MAX_TOOL_CONCURRENCY)
    if raw is not None and raw.strip():
        value = _positive_int(raw)
        if value is not None:
            return value
        logger.warning(
            "%s=%r is not a positive integer; using the default %d",
            ENV_MAX_TOOL_CONCURRENCY,
            raw,
            DEFAULT_MAX_TOOL_CONCURRENCY,
        )
    return DEFAULT_MAX_TOOL_CONCURRENCY
