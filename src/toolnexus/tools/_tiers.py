"""Tool tiers: a large tool set behind two tools, ``tool_search`` and ``call_tool``.

Declaring hundreds of tools costs prompt space on every request and confuses models. With tiers
the model sees two tools: ``tool_search(query, limit)`` (safe) finds tools by name, description
and parameter names and returns their schemas; ``call_tool(name, arguments)`` calls one, with
the concurrency class of the tool it calls, for those arguments (a tool's safety may depend on
its arguments). The called tool still goes through approval and hooks: the run's context, handed
in from above with each call, dispatches it (see `TierDispatch`); this module knows nothing of
how. Native mode only: Code Mode programs call tools directly.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Sequence
from typing import Any, Protocol, runtime_checkable

from toolnexus._checks import positive_int
from toolnexus.tools._safety import concurrency_mode
from toolnexus.tools._tool import Tool, ToolHints

__all__ = ["CALL_TOOL", "DEFAULT_THRESHOLD", "SEARCH_SCHEMA", "TOOL_SEARCH", "TierDispatch",
           "search_tools", "tool_tiers"]  # fmt: skip

TOOL_SEARCH = "tool_search"
CALL_TOOL = "call_tool"
DEFAULT_THRESHOLD = 40


@runtime_checkable
class TierDispatch(Protocol):
    """A run context that dispatches a call itself, with its approval and hooks.

    ``call_tool`` hands the tool it calls to the context it was called with
    (``toolnexus.codemode.RunContext`` is one), so the called tool gets exactly the approval and
    hooks a direct call gets, while the tools layer imports nothing above it.
    """

    def dispatch_tool_call(self, tool: Tool, args: dict[str, Any], /) -> Awaitable[Any]:
        """Run one call of ``tool`` with ``args``: approval, hooks, the tool."""
        ...


SEARCH_SCHEMA = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "Words describing what the tool should do."},
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": 50,
            "default": 10,
            "description": "How many tools to return at most.",
        },
    },
    "required": ["query"],
    "additionalProperties": False,
}
_CALL_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "The exact name tool_search returned."},
        "arguments": {"type": "object", "description": "The tool's arguments, per its schema."},
    },
    "required": ["name", "arguments"],
    "additionalProperties": False,
}


_UNSPACED = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
"""Scripts written without spaces between words (Chinese, Japanese, Korean)."""


def _words(text: str) -> set[str]:
    """The searchable words of ``text``: Unicode words, case-folded.

    Why bigrams for Chinese, Japanese and Korean: those scripts put no spaces between words,
    so "查询天气预报" is one run of characters; its overlapping pairs of characters let the
    query "天气预报" find it (the usual approach of search engines without a dictionary).
    """
    words: set[str] = set()
    for word in re.findall(r"[^\W_]+", text.casefold()):  # letters and digits, no "_"
        if _UNSPACED.search(word) and len(word) > 1:
            words.update(word[i : i + 2] for i in range(len(word) - 1))
        else:
            words.add(word)
    return words


def _score(tool: Tool, words: set[str]) -> float:
    name = _words(tool.name)
    params = _words(" ".join(tool.input_schema.get("properties", {}) or {}))
    description = _words(tool.description)
    return sum(3.0 * (w in name) + 1.5 * (w in params) + 1.0 * (w in description) for w in words)


def search_tools(tools: Sequence[Tool], query: str, limit: int = 10) -> list[Tool]:
    """The tools best matching ``query`` (by name, parameter names, description), best first;
    only tools that match at least one word."""
    words = _words(query)
    scored = [(_score(t, words), t) for t in tools]
    ranked = sorted((pair for pair in scored if pair[0] > 0), key=lambda p: (-p[0], p[1].name))
    return [t for _, t in ranked[:limit]]


def tool_tiers(
    tools: Sequence[Tool], *, enabled: bool | None = None, threshold: int = DEFAULT_THRESHOLD
) -> list[Tool]:
    """The tools the model sees: ``tools`` as they are, or ``tool_search`` + ``call_tool``.

    Args:
        tools: The tools the model may use (already filtered by the permission policy: a tool
            left out here is unknown to ``call_tool``).
        enabled: ``True``/``False`` forces tiers on or off; ``None`` turns them on when there
            are more than ``threshold`` tools.
        threshold: The tool count above which tiers turn on by themselves (default 40).

    Raises:
        ConfigurationError: a threshold that is not a positive integer.
    """
    positive_int("tool_tiers threshold", threshold)
    on = enabled if enabled is not None else len(tools) > threshold
    if not on:
        return list(tools)
    registry: dict[str, Tool] = {}
    for t in tools:
        registry.setdefault(t.name, t)

    def search(args: dict[str, Any]) -> list[dict[str, Any]]:
        hits = search_tools(list(registry.values()), str(args["query"]), int(args.get("limit", 10)))
        return [t.definition() for t in hits]

    def target(name: object) -> Tool:
        tool = registry.get(name) if isinstance(name, str) else None
        if tool is None:
            raise LookupError(
                f"unknown tool {name!r} (or not allowed here); use {TOOL_SEARCH} to find tools"
            )
        return tool

    def safe(args: dict[str, Any]) -> bool:
        tool = registry.get(args.get("name"))  # type: ignore[arg-type]
        arguments = args.get("arguments")
        if tool is None or not isinstance(arguments, dict):
            return False
        return concurrency_mode(tool, arguments) == "parallel"

    async def call(args: dict[str, Any], ctx: Any) -> Any:
        tool, arguments = target(args["name"]), dict(args["arguments"])
        if isinstance(ctx, TierDispatch):  # the run's own approval and hooks
            return await ctx.dispatch_tool_call(tool, arguments)
        # No run context (a bare run_batch): no hooks, and no one to ask for an approval.
        if tool.requires_approval:
            raise PermissionError(
                f"call to '{tool.name}' needs approval and no approval handler is configured; "
                "it was not run"
            )
        return await tool.invoke(arguments, ctx)

    search_tool = Tool(
        TOOL_SEARCH,
        f"Search the {len(registry)} available tools by what they do; returns names, "
        f"descriptions and input schemas. Then call one with {CALL_TOOL}.",
        SEARCH_SCHEMA,
        execute=search,
        hints=ToolHints(read_only=True, destructive=False, idempotent=True, open_world=False),
        source="tiers",
    )
    call_tool = Tool(
        CALL_TOOL,
        f"Call a tool found with {TOOL_SEARCH}, by its exact name, with its arguments.",
        _CALL_SCHEMA,
        execute=call,
        concurrency_safe=safe,
        source="tiers",
    )
    return [search_tool, call_tool]
