"""Tool hooks: code that runs before and after every tool call, direct or from a program."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolnexus.errors import ConfigurationError

__all__ = ["AfterHook", "BeforeHook", "ToolHooks", "maybe_await"]

BeforeHook = Callable[[str, dict[str, Any], Any], Any]
"""``before(tool_name, args, run_ctx)``, sync or async.

Return ``None`` to let the call go on, a dict to replace its arguments, or an ``Outcome`` /
``ToolResult`` to answer the call yourself (the tool does not run); raise to refuse the call (the
exception's message becomes the call's failure message; the tool never runs).
"""

AfterHook = Callable[[str, dict[str, Any], Any, Any], Any]
"""``after(tool_name, args, outcome, run_ctx)``, sync or async.

Return ``None`` to keep the [`Outcome`][toolnexus.scheduling.Outcome], or an ``Outcome`` to
replace it (to redact a value, say). A raising after-hook turns the outcome into a failure.
"""


async def maybe_await(value: Any) -> Any:
    """``value``, awaited first when it is awaitable (for callbacks that may be sync or async)."""
    if inspect.isawaitable(value):
        return await value
    return value


@dataclass(frozen=True)
class ToolHooks:
    """Before/after hooks run around every tool call, in the order given.

    The same hooks run for a model's direct calls and for every sub-call a Code Mode program
    makes, so a guard cannot be bypassed by asking for the tool from code.

    Example::

        def no_rm(tool, args, ctx):
            if tool == "bash" and "rm -rf" in args.get("command", ""):
                raise PermissionError("rm -rf is not allowed here")

        hooks = ToolHooks(before=[no_rm])
    """

    before: Sequence[BeforeHook] = field(default_factory=tuple)
    after: Sequence[AfterHook] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        for option in ("before", "after"):
            hooks = tuple(getattr(self, option))
            bad = [h for h in hooks if not callable(h)]
            if bad:
                raise ConfigurationError(f"ToolHooks {option} must hold callables, got {bad[0]!r}.")
            object.__setattr__(self, option, hooks)
