"""Resource keys: which resources one call reads and writes, declared by its tool.

Without a declaration a call keeps its safety class (``tools/_safety.py``): a safe call reads
everything, an unsafe one writes everything. With one, the scheduler lets calls on disjoint
resources overlap, and runs calls that share a resource (one of them writing it) one at a time,
in the order the model emitted them. See ``docs/scheduling.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Resources", "ResourcesFunction", "overlaps"]


@dataclass(frozen=True, init=False)
class Resources:
    """What one call reads and writes, as keys (for files: resolved paths).

    Keys are compared as paths: a key covers itself and every key below it, so ``"/src"``
    overlaps ``"/src/app.py"`` (a search of a folder reads every file in it) and ``"db/users"``
    overlaps ``"db/users/42"``. A key both read and written counts as written.

    Example::

        Resources(reads=["/repo/a.py"])                         # read one file
        Resources(writes=["/repo/a.py", "/repo/b.py"])          # write two
        Resources()                                             # touches nothing shared

    Raises:
        TypeError: a key is not a non-empty string, or ``reads``/``writes`` is a bare string.
    """

    reads: frozenset[str] = field()
    writes: frozenset[str] = field()

    def __init__(self, reads: Iterable[str] = (), writes: Iterable[str] = ()) -> None:
        written = _keys(writes, "writes")
        object.__setattr__(self, "writes", written)
        object.__setattr__(self, "reads", _keys(reads, "reads") - written)

    def to_json(self) -> dict[str, list[str]]:
        """``{"reads": [...], "writes": [...]}``, keys sorted: for logs and other processes
        (``Resources(**data)`` reads it back)."""
        return {"reads": sorted(self.reads), "writes": sorted(self.writes)}


ResourcesFunction = Callable[[dict[str, Any]], Resources | None]
"""``resources(args) -> Resources | None``: a call's declaration from its arguments; ``None``
means "no declaration" (the call keeps its safety class)."""

_RESOLVES_PATHS = "_toolnexus_resolves_paths"


def resolving_paths(declare: ResourcesFunction) -> ResourcesFunction:
    """Mark ``declare`` as resolving its keys from the file system (symlinks, ``..``, inodes).

    Such keys are only as good as the moment they are resolved: a call that writes everything
    (``bash ln -s a.txt alias.txt``) may change what a path names. The scheduler therefore drops
    such a declaration when an earlier call that writes everything has not committed yet, and
    the call keeps its safety class (see `resolves_paths`).
    """
    setattr(declare, _RESOLVES_PATHS, True)
    return declare


def resolves_paths(declare: ResourcesFunction | None) -> bool:
    """Whether ``declare`` was marked with `resolving_paths`."""
    return getattr(declare, _RESOLVES_PATHS, False) is True


def _keys(keys: Iterable[str], what: str) -> frozenset[str]:
    if isinstance(keys, (str, bytes)):
        raise TypeError(f"Resources {what} must be a list of keys, not one string: [{keys!r}]")
    result = frozenset(keys)
    for key in result:
        if not isinstance(key, str) or not key:
            raise TypeError(f"Resources {what} keys must be non-empty strings, got {key!r}")
    return result


def overlaps(a: str, b: str) -> bool:
    """Whether keys ``a`` and ``b`` name a common resource: equal, or one below the other.

    Trailing slashes do not count (``"a/"`` is ``"a"``), and ``"/"`` is above every absolute key.
    """
    a, b = a.rstrip("/"), b.rstrip("/")
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")
