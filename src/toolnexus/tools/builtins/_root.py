"""The directory the built-in file tools work under, and the one check every path goes through."""

from __future__ import annotations

import os
from pathlib import Path

from toolnexus.errors import ConfigurationError

__all__ = ["Root"]


class Root:
    """A working directory; paths are resolved against it and must stay inside it.

    ``..``, absolute paths and symlinks are resolved first (``Path.resolve``), so a link that
    points outside the root is caught like any other escape. ``allow_outside`` lifts the check
    (for trusted, local use).
    """

    def __init__(self, root: str | os.PathLike[str], *, allow_outside: bool = False) -> None:
        path = Path(root).expanduser()
        if not path.is_dir():
            raise ConfigurationError(
                f"the tools' root must be an existing directory, got {str(root)!r}."
            )
        self.path = path.resolve()
        self.allow_outside = allow_outside

    def resolve(self, name: str | None) -> Path:
        """``name`` (relative to the root, or absolute) as a checked absolute path.

        Raises:
            ValueError: the path leaves the root (the message says how to stay inside).
        """
        raw = Path(name) if name else Path(".")
        candidate = (raw if raw.is_absolute() else self.path / raw).resolve()
        if not self.allow_outside and not candidate.is_relative_to(self.path):
            raise ValueError(
                f"path {name!r} is outside the working directory {self.path}; use a path inside it"
            )
        return candidate

    def show(self, path: Path) -> str:
        """``path`` as the model should see it: relative to the root when inside it."""
        try:
            return str(path.relative_to(self.path)) or "."
        except ValueError:
            return str(path)
