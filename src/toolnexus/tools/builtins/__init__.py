"""Built-in coding tools: the fourteen a coding agent uses all day, with their safety classes.

Safe (read-only hints, they overlap): ``read``, ``grep``, ``glob``, ``webfetch``, ``websearch``,
``question``, ``todowrite``, ``bash_output``. Unsafe (they run alone, in order): ``bash``,
``write``, ``edit``, ``apply_patch``, ``notebook_edit``, ``kill_shell``. See ``docs/builtins.md``.
"""

from __future__ import annotations

import os

from toolnexus.tools._tool import Tool
from toolnexus.tools.builtins._files import file_tools
from toolnexus.tools.builtins._grep import grep_tool
from toolnexus.tools.builtins._notebook import notebook_tool
from toolnexus.tools.builtins._patch import PatchError, apply_patch_tool
from toolnexus.tools.builtins._resources import with_resource_keys
from toolnexus.tools.builtins._root import Root
from toolnexus.tools.builtins._session import QuestionHandler, Todo, session_tools
from toolnexus.tools.builtins._shell import Shells, shell_tools
from toolnexus.tools.builtins._web import PrivateNetwork, SearchBackend, web_tools

__all__ = [
    "PatchError",
    "PrivateNetwork",
    "QuestionHandler",
    "SearchBackend",
    "Todo",
    "builtin_tools",
]


def builtin_tools(
    root: str | os.PathLike[str] = ".",
    *,
    question_handler: QuestionHandler | None = None,
    search_backend: SearchBackend | None = None,
    allow_outside_root: bool = False,
    allow_private_network: PrivateNetwork = False,
    resource_keys: bool = False,
) -> list[Tool]:
    """The fourteen built-in tools, working under ``root``.

    Args:
        root: The working directory; file paths resolve against it and may not leave it.
        question_handler: ``(questions) -> answers`` for the ``question`` tool (sync or async);
            without one, ``question`` fails with a message saying so.
        search_backend: For ``websearch``: a function ``(query, limit) -> results`` or a SearXNG
            URL; without one, ``websearch`` fails with a message saying how to configure it.
        allow_outside_root: Let file tools reach paths outside ``root`` (trusted local use).
        allow_private_network: Let ``webfetch`` reach loopback, private and link-local
            addresses: ``True`` for all, or a collection of addresses and networks
            (``{"127.0.0.1", "10.0.0.0/8"}``). By default it fetches public addresses only.
        resource_keys: Let the file tools declare the resolved paths they read and write, so
            edits of different files overlap and calls on one file run in order (``read``
            reads its path; ``write``, ``edit``, ``notebook_edit`` write theirs;
            ``apply_patch`` writes every path in the patch; ``grep``/``glob`` read their
            folder). Off by default: then reads overlap and every write runs alone.

    Raises:
        ConfigurationError: ``root`` is not an existing directory.
    """
    where = Root(root, allow_outside=allow_outside_root)
    reading, writing, editing, finding = file_tools(where)
    bash, bash_output, kill_shell = shell_tools(where, Shells())
    todowrite, question = session_tools(question_handler)
    webfetch, websearch = web_tools(search_backend, allow_private_network=allow_private_network)
    tools = [
        reading,
        grep_tool(where),
        finding,
        webfetch,
        websearch,
        question,
        todowrite,
        bash_output,
        bash,
        writing,
        editing,
        apply_patch_tool(where),
        notebook_tool(where),
        kill_shell,
    ]
    return with_resource_keys(tools, where) if resource_keys else tools
