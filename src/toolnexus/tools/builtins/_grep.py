"""``grep``: regular-expression search over the files under a `Root`."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

import pathspec
import re2  # type: ignore[import-untyped]  # google-re2 ships no type hints
from pydantic import Field

from toolnexus.tools._decorator import tool
from toolnexus.tools._tool import Tool
from toolnexus.tools.builtins._files import READ_ONLY, is_binary
from toolnexus.tools.builtins._root import Root

__all__ = ["SKIPPED_FOLDERS", "grep_tool", "walk_files"]

SKIPPED_FOLDERS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv"})
MAX_FILE_BYTES = 5 * 1024 * 1024
REGEX_MEMORY = 64 * 1024 * 1024
"""What one compiled pattern may use (RE2 refuses a pattern whose automaton needs more)."""


def compile_pattern(pattern: str) -> Any:
    """``pattern`` compiled by RE2, whose matching time is linear in the text's length.

    Why RE2 and not ``re``: the pattern comes from a model, and a backtracking engine can spin
    forever on one like ``(a+)+$`` (a thread that no timeout can stop). RE2 has no backtracking,
    so it also has no lookarounds or backreferences; those are refused with a message saying so.

    Raises:
        ValueError: the pattern is invalid, or uses syntax RE2 does not support.
    """
    options = re2.Options()
    options.log_errors = False  # the error becomes our message, not a line on stderr
    options.max_mem = REGEX_MEMORY
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        raw = exc.args[0] if exc.args else ""
        detail = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
        raise ValueError(
            f"pattern is not a valid regular expression for grep ({detail}); grep's engine "
            "(RE2) runs in linear time and so has no lookarounds (?=, ?!, ?<=) or "
            "backreferences (\\1)"
        ) from None


_Ignores = tuple[tuple[str, pathspec.GitIgnoreSpec], ...]
"""The ``.gitignore`` files that apply in a folder: (their folder with a trailing separator,
their patterns), outermost first."""


def _with_own_gitignore(ignores: _Ignores, folder: str) -> _Ignores:
    file = os.path.join(folder, ".gitignore")
    if not os.path.isfile(file):
        return ignores
    with open(file, encoding="utf-8", errors="replace") as lines:
        spec = pathspec.GitIgnoreSpec.from_lines(lines.read().splitlines())
    return (*ignores, (os.path.join(folder, ""), spec))


def _ignored(ignores: _Ignores, path: str, *, is_dir: bool) -> bool:
    """Whether git ignores ``path``: the deepest ``.gitignore`` with a matching pattern decides,
    so a folder's file can add patterns or re-include (``!name``) what a parent's excludes."""
    for folder, spec in reversed(ignores):
        name = path[len(folder) :] + ("/" if is_dir else "")
        decided = spec.check_file(name).include
        if decided is not None:
            return decided
    return False


def walk_files(root: Root, base: Path) -> Iterator[Path]:
    """Files under ``base`` that grep should read, folder by folder, in name order.

    Skips VCS and dependency folders, what the ``.gitignore`` files list (those of the folders
    between the root and ``base`` included), and links that lead outside the root unless the
    root allows it: a link must not let grep read what ``read`` would refuse.
    """
    ignores: _Ignores = ()
    if base.is_relative_to(root.path):
        for above in reversed(base.relative_to(root.path).parents):
            ignores = _with_own_gitignore(ignores, str(root.path / above))
    pending = [(str(base), ignores)]
    while pending:
        folder, ignores = pending.pop()
        ignores = _with_own_gitignore(ignores, folder)
        try:
            entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
        except OSError:
            continue
        subfolders = []
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in SKIPPED_FOLDERS and not _ignored(
                    ignores, entry.path, is_dir=True
                ):
                    subfolders.append((entry.path, ignores))
            elif entry.is_file() and not _ignored(ignores, entry.path, is_dir=False):
                path = Path(entry.path)
                if (
                    not entry.is_symlink()
                    or root.allow_outside
                    or path.resolve().is_relative_to(root.path)
                ):
                    yield path
        pending.extend(reversed(subfolders))


def file_screen(pattern: str) -> Any:
    """A regex that finds a match in a file's lines joined by ``\\n`` whenever any single line
    matches ``pattern``, or ``None`` when there is no such shortcut.

    Why: one search per file instead of one per line (the RE2 wrapper's cost is per call, so
    most files, which do not match, cost one call). In multi-line mode ``^`` and ``$`` match at
    the joins exactly as at the ends of a line; a match that spans a join only lets a file
    through to the line-by-line search, which decides. ``\\A`` and ``\\z`` mean the whole
    text there, not each line, and a flag group could turn multi-line mode off, so such
    patterns are searched line by line only.
    """
    if "\\A" in pattern or "\\z" in pattern or ("(?" in pattern and "-" in pattern):
        return None  # whole-text anchors, or flags that might turn multi-line mode off
    try:
        return compile_pattern("(?m)" + pattern)
    except ValueError:
        return None


def grep_tool(root: Root) -> Tool:
    """``grep`` working under ``root``."""

    @tool(name="grep", hints=READ_ONLY)
    def grep(
        pattern: str,
        path: str = ".",
        glob: str | None = None,
        output_mode: Literal["content", "files", "count"] = "files",
        limit: Annotated[int, Field(ge=1)] = 100,
    ) -> str:
        """Search file contents with a regular expression.

        Skips binary files, VCS and dependency folders, and what .gitignore files list.

        Args:
            pattern: A regular expression (RE2 syntax: like Python's, without lookarounds or
                backreferences).
            path: A file or folder to search, relative to the working directory.
            glob: Only files whose name matches this pattern (like "*.py").
            output_mode: "files" (names of matching files), "content" (matching lines with
                file and line number) or "count" (matches per file).
            limit: How many result lines to return at most.
        """
        regex = compile_pattern(pattern)
        screen = file_screen(pattern)
        base = root.resolve(path)
        if not base.exists():
            raise FileNotFoundError(f"no file or folder {path}")
        candidates = [base] if base.is_file() else walk_files(root, base)
        results: list[str] = []
        more = 0
        for file in candidates:
            if glob and not fnmatch.fnmatch(file.name, glob):
                continue
            try:
                if file.stat().st_size > MAX_FILE_BYTES:
                    continue
                data = file.read_bytes()
            except OSError:
                continue
            if is_binary(data[:8192]):
                continue
            lines = data.decode("utf-8", errors="replace").splitlines()
            if screen is not None and screen.search("\n".join(lines)) is None:
                continue  # no line can match: skip the line-by-line search
            hits = [(n, line) for n, line in enumerate(lines, start=1) if regex.search(line)]
            if not hits:
                continue
            shown = root.show(file)
            rows = (
                [f"{shown}:{n}:{line[:500]}" for n, line in hits]
                if output_mode == "content"
                else [f"{shown}: {len(hits)}"]
                if output_mode == "count"
                else [shown]
            )
            for row in rows:
                if len(results) < limit:
                    results.append(row)
                else:
                    more += 1
        if more:
            results.append(f"… ({more} more results; narrow the pattern or raise limit)")
        return "\n".join(results) if results else f"no matches for {pattern!r}"

    return grep
