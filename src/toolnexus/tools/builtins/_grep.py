"""``grep``: regular-expression search over the files under a :class:`Root`."""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Literal

import pathspec
from pydantic import Field

from toolnexus.tools._decorator import tool
from toolnexus.tools._tool import Tool
from toolnexus.tools.builtins._files import READ_ONLY, is_binary
from toolnexus.tools.builtins._root import Root

__all__ = ["SKIPPED_FOLDERS", "grep_tool", "walk_files"]

SKIPPED_FOLDERS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv"})
MAX_FILE_BYTES = 5 * 1024 * 1024


class _GitIgnores:
    """The ``.gitignore`` files under a root, read once each, applied as git applies them.

    Each file's patterns are relative to its own folder, and the deepest file with a matching
    pattern decides, so ``sub/.gitignore`` can add patterns or re-include (``!name``) what a
    parent folder's file excludes.
    """

    def __init__(self, root: Path) -> None:
        self._root = root
        self._specs: dict[Path, pathspec.GitIgnoreSpec | None] = {}

    def _spec(self, folder: Path) -> pathspec.GitIgnoreSpec | None:
        if folder not in self._specs:
            file = folder / ".gitignore"
            self._specs[folder] = (
                pathspec.GitIgnoreSpec.from_lines(
                    file.read_text(encoding="utf-8", errors="replace").splitlines()
                )
                if file.is_file()
                else None
            )
        return self._specs[folder]

    def ignored(self, path: Path, *, is_dir: bool) -> bool:
        """Whether ``path`` (a file, or a folder when ``is_dir``) is git-ignored."""
        folder = path.parent
        while folder.is_relative_to(self._root):
            spec = self._spec(folder)
            if spec is not None:
                name = path.relative_to(folder).as_posix() + ("/" if is_dir else "")
                decided = spec.check_file(name).include
                if decided is not None:
                    return decided
            if folder == self._root:
                break
            folder = folder.parent
        return False


def walk_files(root: Root, base: Path) -> Iterator[Path]:
    """Files under ``base`` that grep should read.

    Skips VCS and dependency folders, what the ``.gitignore`` files list, and links that lead
    outside the root (unless the root allows it): a link must not let grep read what ``read``
    would refuse.
    """
    ignores = _GitIgnores(root.path)
    for folder, dirs, files in os.walk(base):
        here = Path(folder)
        dirs[:] = [
            name
            for name in sorted(dirs)
            if name not in SKIPPED_FOLDERS and not ignores.ignored(here / name, is_dir=True)
        ]
        for name in sorted(files):
            path = here / name
            if ignores.ignored(path, is_dir=False):
                continue
            if root.allow_outside or path.resolve().is_relative_to(root.path):
                yield path


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
            pattern: A Python regular expression.
            path: A file or folder to search, relative to the working directory.
            glob: Only files whose name matches this pattern (like "*.py").
            output_mode: "files" (names of matching files), "content" (matching lines with
                file and line number) or "count" (matches per file).
            limit: How many result lines to return at most.
        """
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"pattern is not a valid regular expression: {exc}") from None
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
