"""File tools: ``read``, ``write``, ``edit``, ``glob`` (all under a :class:`Root`)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from toolnexus.tools._decorator import tool
from toolnexus.tools._tool import Tool, ToolHints
from toolnexus.tools.builtins._root import Root

__all__ = ["MAX_LINE_CHARS", "file_tools", "is_binary"]

MAX_LINE_CHARS = 2000
"""Longer lines are cut in ``read`` output (and marked)."""
DEFAULT_READ_LIMIT = 2000
READ_ONLY = ToolHints(read_only=True, destructive=False, idempotent=True, open_world=False)
WRITES = ToolHints(read_only=False, destructive=True, idempotent=False, open_world=False)


def is_binary(data: bytes) -> bool:
    """Whether ``data`` (a file's first bytes) looks binary: a NUL byte, or not UTF-8."""
    if b"\0" in data:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start < len(data) - 4  # a multi-byte character cut at the sample's end is fine
    return False


def file_tools(root: Root) -> list[Tool]:
    """``read``, ``write``, ``edit`` and ``glob`` working under ``root``."""

    @tool(name="read", hints=READ_ONLY)
    def read(
        path: str,
        offset: Annotated[int, Field(ge=1)] = 1,
        limit: Annotated[int, Field(ge=1)] = DEFAULT_READ_LIMIT,
    ) -> str:
        """Read a text file, with line numbers.

        Args:
            path: The file, relative to the working directory.
            offset: The first line to show (1-based).
            limit: How many lines to show at most.
        """
        target = root.resolve(path)
        if target.is_dir():
            raise IsADirectoryError(f"{path} is a directory; use glob to list it")
        if not target.exists():
            raise FileNotFoundError(f"no file {path}")
        data = target.read_bytes()
        if is_binary(data[:8192]):
            raise ValueError(f"{path} is a binary file; read only reads text")
        lines = data.decode("utf-8", errors="replace").splitlines()
        chosen = lines[offset - 1 : offset - 1 + limit]
        out = []
        for number, line in enumerate(chosen, start=offset):
            if len(line) > MAX_LINE_CHARS:
                line = line[:MAX_LINE_CHARS] + " … (line cut)"
            out.append(f"{number:6}\t{line}")
        shown_end = offset - 1 + len(chosen)
        if shown_end < len(lines):
            out.append(f"… ({len(lines) - shown_end} more lines; read with offset={shown_end + 1})")
        return "\n".join(out) if out else f"({path} has no lines at offset {offset})"

    @tool(name="write", hints=WRITES)
    def write(path: str, content: str) -> str:
        """Write a file (replacing it), creating parent folders as needed.

        Args:
            path: The file, relative to the working directory.
            content: The whole new content.
        """
        target = root.resolve(path)
        if target.is_dir():
            raise IsADirectoryError(f"{path} is a directory")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        return f"wrote {len(content.encode('utf-8'))} bytes to {root.show(target)}"

    @tool(name="edit", hints=WRITES)
    def edit(path: str, old_string: str, new_string: str, replace_all: bool = False) -> str:
        """Replace an exact string in a file.

        Args:
            path: The file, relative to the working directory.
            old_string: The exact text to replace; it must occur exactly once unless replace_all.
            new_string: The replacement.
            replace_all: Replace every occurrence.
        """
        target = root.resolve(path)
        if not target.is_file():
            raise FileNotFoundError(f"no file {path}")
        if old_string == new_string:
            raise ValueError("old_string and new_string are the same; nothing to change")
        text = target.read_text(encoding="utf-8")
        count = text.count(old_string) if old_string else 0
        if count == 0:
            raise ValueError(
                f"old_string was not found in {path}; read the file and copy it exactly"
            )
        if count > 1 and not replace_all:
            raise ValueError(
                f"old_string occurs {count} times in {path}; add surrounding lines to make it "
                "unique, or set replace_all"
            )
        target.write_text(text.replace(old_string, new_string), encoding="utf-8")
        return f"replaced {count if replace_all else 1} occurrence(s) in {root.show(target)}"

    @tool(name="glob", hints=READ_ONLY)
    def glob(pattern: str, path: str = ".", limit: Annotated[int, Field(ge=1)] = 100) -> str:
        """Find files by name pattern (like ``src/**/*.py``), newest first.

        Args:
            pattern: A glob pattern, relative to path.
            path: The folder to search from.
            limit: How many paths to return at most.
        """
        base = root.resolve(path)
        if not base.is_dir():
            raise NotADirectoryError(f"{path} is not a folder")
        found = []
        for match in base.glob(pattern):
            if match.is_file() and (
                root.allow_outside or match.resolve().is_relative_to(root.path)
            ):
                found.append(match)
        found.sort(key=lambda p: p.stat().st_mtime, reverse=True)
        shown = [root.show(p) for p in found[:limit]]
        if len(found) > limit:
            shown.append(f"… ({len(found) - limit} more; narrow the pattern)")
        return "\n".join(shown) if shown else f"no files match {pattern!r} under {path}"

    return [read, write, edit, glob]
