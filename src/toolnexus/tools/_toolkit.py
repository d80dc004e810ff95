"""``Toolkit``: the ordered, name-unique set of tools one agent or batch works with."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import Any

from toolnexus.errors import ConfigurationError
from toolnexus.tools._tool import Tool

__all__ = ["Toolkit"]

logger = logging.getLogger("toolnexus.tools")


class Toolkit:
    """An ordered collection of tools with unique names.

    Order is insertion order (it is the order definitions are sent to the model). When two tools
    share a name the first one wins and the later one is dropped with a warning: a model can only
    address one tool per name, and silently replacing an earlier tool would change what a
    transcript's calls meant.

    Example::

        kit = Toolkit([read_file, write_file])
        kit.get("read_file")        # -> Tool | None
        client_tools = kit.to_openai()
    """

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for t in tools:
            self.add(t)

    def add(self, tool: Tool) -> bool:
        """Add ``tool`` unless one of that name is already present.

        Returns:
            Whether the tool was added (``False`` for a duplicate name, which is logged).

        Raises:
            ConfigurationError: ``tool`` is not a [`Tool`][toolnexus.tools.Tool].
        """
        if not isinstance(tool, Tool):
            raise ConfigurationError(
                f"Toolkit accepts Tool objects, got {tool!r}; decorate functions with @tool."
            )
        if tool.name in self._tools:
            logger.warning(
                "duplicate tool name %r: keeping the first tool (source %s), dropping the one "
                "from source %s",
                tool.name,
                self._tools[tool.name].source,
                tool.source,
            )
            return False
        self._tools[tool.name] = tool
        return True

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or ``None``."""
        return self._tools.get(name)

    @property
    def names(self) -> list[str]:
        """Tool names, in order."""
        return list(self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(list(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __repr__(self) -> str:
        return f"Toolkit({self.names!r})"

    def to_openai(self) -> list[dict[str, Any]]:
        """Tool definitions in the OpenAI Chat Completions ``tools`` format."""
        return [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.input_schema,
                },
            }
            for t in self._tools.values()
        ]

    def to_anthropic(self) -> list[dict[str, Any]]:
        """Tool definitions in the Anthropic Messages ``tools`` format."""
        return [t.definition() for t in self._tools.values()]
