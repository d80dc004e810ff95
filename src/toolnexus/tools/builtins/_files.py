"""File tools: ``read``, ``write``, ``edit``, ``glob`` (all under a `Root`)."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, BinaryIO

from pydantic import Field

from toolnexus.tools._decorator import tool
from toolnexus.tools._tool import Tool, ToolHints
from toolnexus.tools.builtins._root import Root

__all__ = ["MAX_LINE_CHARS", "file_tools", "is_binary", "open_regular_file"]

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


def open_regular_file(target: Path, shown: str) -> BinaryIO:
    """``target`` opened for reading in binary, if it is a regular file.

    Why check first: opening a FIFO blocks until a writer appears (forever), and a device or
    socket is no text to read. ``O_NONBLOCK`` keeps the open itself from blocking on a FIFO
    that appears between the check and the open.

    Raises:
        FileNotFoundError / IsADirectoryError / ValueError: saying what the path is instead.
    """
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise FileNotFoundError(f"no file {shown}") from None
    except IsADirectoryError:
        raise IsADirectoryError(f"{shown} is a directory; use glob to list it") from None
    kind = os.fstat(fd).st_mode
    if not stat.S_ISREG(kind):
        os.close(fd)
        if stat.S_ISDIR(kind):
            raise IsADirectoryError(f"{shown} is a directory; use glob to list it")
        raise ValueError(f"{shown} is not a regular file (a pipe, device or socket); not read")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def _read_lines(file: BinaryIO, offset: int, limit: int) -> tuple[list[str], int]:
    """Lines ``offset .. offset + limit - 1`` (1-based, each cut to `MAX_LINE_CHARS`),
    and how many lines follow them.

    Streams: memory stays bounded by the lines shown, however large the file or long a line.
    """
    shown: list[str] = []
    number = 0
    cap = MAX_LINE_CHARS * 4 + 4  # bytes enough for MAX_LINE_CHARS characters of UTF-8
    while True:
        piece = file.readline(cap)
        if not piece:
            return shown, 0
        long = len(piece) == cap and not piece.endswith(b"\n")
        if long:  # skip the rest of the line without keeping it
            while (rest := file.readline(1 << 20)) and not rest.endswith(b"\n"):
                pass
        number += 1
        if number >= offset:
            line = piece.decode("utf-8", errors="replace").rstrip("\r\n")
            if long or len(line) > MAX_LINE_CHARS:
                line = line[:MAX_LINE_CHARS] + " … (line cut)"
            shown.append(line)
            if len(shown) == limit:
                return shown, _count_lines(file)


def _count_lines(file: BinaryIO) -> int:
    """The lines left in ``file`` from where it stands (a last line without a newline counts)."""
    count = 0
    last = b"\n"
    while chunk := file.read(1 << 20):
        count += chunk.count(b"\n")
        last = chunk[-1:]
    return count + (last != b"\n")


def _modified(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:  # gone since it was listed
        return 0.0


def glob_pattern(pattern: str) -> Callable[[str], bool]:
    """A matcher for ``/``-separated relative paths: ``*`` and ``?`` stay within one folder,
    ``[...]`` is a character class, and a ``**`` segment matches any number of folders."""
    parts = [part for part in pattern.strip("/").split("/") if part not in ("", ".")]
    regex = ""
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            regex += ".*" if last else "(?:[^/]+/)*"
            continue
        regex += _segment_regex(part) + ("" if last else "/")
    compiled = re.compile(regex or ".*")
    return lambda relative: compiled.fullmatch(relative) is not None


def _segment_regex(segment: str) -> str:
    out = ""
    i = 0
    while i < len(segment):
        char = segment[i]
        if char == "*":
            out += "[^/]*"
        elif char == "?":
            out += "[^/]"
        elif char == "[" and (end := segment.find("]", i + 2)) > 0:
            inner = segment[i + 1 : end]
            negate = inner[:1] in ("!", "^")
            body = re.escape(inner[1:] if negate else inner).replace("\\-", "-")
            out += f"[{'^' if negate else ''}{body}]"
            i = end
        else:
            out += re.escape(char)
        i += 1
    return out


def walk_tree(root: Root, base: Path, max_depth: int | None = None) -> Iterator[tuple[str, Path]]:
    """Every file under ``base`` as ``(path relative to base, path)``, never leaving the root
    (and no deeper than ``max_depth`` path segments, when given).

    A link to a folder is followed only when its target is inside the root (and not a folder
    already walked, so loops end); a link to a file only when the file is inside the root.
    ``allow_outside`` on the root lifts both checks, not the loop guard.
    """
    seen = {base.resolve()}
    pending: list[tuple[str, Path, int]] = [("", base, 1)]
    while pending:
        prefix, folder, depth = pending.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
        except OSError:
            continue
        for entry in entries:
            relative = prefix + entry.name
            path = Path(entry.path)
            try:
                is_dir = entry.is_dir()
                target = path.resolve() if entry.is_symlink() else path
            except (OSError, RuntimeError):  # a broken or looping link
                continue
            if entry.is_symlink() and not (root.allow_outside or target.is_relative_to(root.path)):
                continue
            if is_dir:
                if target not in seen and (max_depth is None or depth < max_depth):
                    seen.add(target)
                    pending.append((relative + "/", path, depth + 1))
            elif entry.is_file():
                yield relative, path


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
        with open_regular_file(target, path) as file:
            if is_binary(file.read(8192)):
                raise ValueError(f"{path} is a binary file; read only reads text")
            file.seek(0)
            shown, remaining = _read_lines(file, offset, limit)
        out = [f"{number:6}\t{line}" for number, line in enumerate(shown, start=offset)]
        if remaining:
            last = offset - 1 + len(shown)
            out.append(f"… ({remaining} more lines; read with offset={last + 1})")
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
        matches = glob_pattern(pattern)
        depth = None if "**" in pattern else pattern.strip("/").count("/") + 1
        found = [file for relative, file in walk_tree(root, base, depth) if matches(relative)]
        found.sort(key=_modified, reverse=True)
        shown = [root.show(p) for p in found[:limit]]
        if len(found) > limit:
            shown.append(f"… ({len(found) - limit} more; narrow the pattern)")
        return "\n".join(shown) if shown else f"no files match {pattern!r} under {path}"

    return [read, write, edit, glob]
