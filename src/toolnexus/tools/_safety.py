"""Classification: may this call overlap others (``parallel``) or must it run alone, and
which resources does it declare?

The safety class of a call is a property of the tool (its predicate, else its hints), so it
lives with the tools; the scheduler asks it for every call it submits.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any, Literal

from toolnexus._snapshot import snapshot
from toolnexus.tools._resources import Resources
from toolnexus.tools._tool import Tool

__all__ = ["Mode", "classify", "concurrency_mode"]

logger = logging.getLogger("toolnexus.scheduling")

Mode = Literal["parallel", "exclusive"]
"""A call's safety class: ``parallel`` calls overlap, ``exclusive`` ones run alone."""


def concurrency_mode(tool: Tool, args: dict[str, Any]) -> Mode:
    """Whether one call of ``tool`` with ``args`` is ``"parallel"`` or ``"exclusive"``.

    The rule is fail-safe, not fail-open: guessing "safe" wrongly interleaves side effects on
    someone else's data, guessing "unsafe" wrongly only costs time. So:

    1. a tool with a ``concurrency_safe`` predicate is parallel only when the predicate returns
       a value that ``is True``; a raise, a non-bool (``"yes"``, ``1``), an awaitable or any
       other value means exclusive, and the reason is logged at warning level;
    2. without a predicate, ``hints.read_only is True`` means parallel;
    3. anything else, including no hints at all, means exclusive.

    ``args`` should be the same normalised snapshot the tool will receive (the scheduler passes
    exactly that); the predicate gets a copy of its own, so one that mutates its argument
    cannot change what the tool receives. See ``docs/scheduling.md``.
    """
    predicate = tool.concurrency_safe
    if predicate is None:
        hints = tool.hints
        return "parallel" if hints is not None and hints.read_only is True else "exclusive"
    try:
        verdict = predicate(snapshot(args))  # its own copy: a predicate cannot change the call
    except Exception as exc:
        logger.warning(
            "concurrency_safe predicate of tool %r raised %s: %s; running the call exclusively",
            tool.name,
            type(exc).__name__,
            exc,
        )
        return "exclusive"
    if verdict is True:
        return "parallel"
    if verdict is not False:
        if inspect.iscoroutine(verdict):
            verdict.close()  # never awaited on purpose: the predicate must be synchronous
        logger.warning(
            "concurrency_safe predicate of tool %r returned %r, not a bool; running the call "
            "exclusively (only True marks a call safe; the predicate must be synchronous)",
            tool.name,
            verdict,
        )
    return "exclusive"


def classify(tool: Tool, args: dict[str, Any]) -> tuple[Mode, Resources | None]:
    """One call's safety class, and the resources it declares (``None``: no declaration).

    A tool without a ``resources`` function, or whose function returns ``None`` for these
    arguments, declares nothing. A function that raises or returns anything but
    ``Resources``/``None`` makes the call write everything (``"exclusive"``, no declaration),
    with a warning: fail-safe, like a failing ``concurrency_safe`` predicate. The function gets
    a copy of the arguments, so it cannot change what the tool receives.
    """
    declare = tool.resources
    if declare is None and tool.concurrency_safe is None:  # most tools: their hints decide
        hints = tool.hints
        return ("parallel" if hints is not None and hints.read_only is True else "exclusive"), None
    mode = concurrency_mode(tool, args)
    if declare is None:
        return mode, None
    try:
        declared = declare(snapshot(args))
    except Exception as exc:
        logger.warning(
            "resources declaration of tool %r raised %s: %s; the call writes everything",
            tool.name,
            type(exc).__name__,
            exc,
        )
        return "exclusive", None
    if declared is None or isinstance(declared, Resources):
        return mode, declared
    logger.warning(
        "resources declaration of tool %r returned %r, not Resources or None; the call "
        "writes everything",
        tool.name,
        declared,
    )
    return "exclusive", None
