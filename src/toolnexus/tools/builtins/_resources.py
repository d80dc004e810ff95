"""Resource keys for the built-in tools (``builtin_tools(root, resource_keys=True)``).

Each file tool declares the resolved paths it reads or writes, so edits of different files
overlap while two calls on one file (spelled ``a.py``, ``./a.py``, through a symlink or through
another hard link) run one at a time, in order. A search reads everything under its folder.
``bash`` declares nothing, so it keeps its class: it may touch anything, so it writes everything.

Paths are resolved when a call is submitted. A call that writes everything (``bash``) may change
what a path names (``ln -s a.txt alias.txt``), so the scheduler drops a path declaration made
while such a call has not committed (the call keeps its class: ``write`` writes everything);
a patch that moves a symlink declares nothing for the same reason.
"""

from __future__ import annotations

import dataclasses
import os
import stat
from typing import Any

from toolnexus.errors import PatchError
from toolnexus.tools._resources import Resources, ResourcesFunction, resolving_paths
from toolnexus.tools._tool import Tool
from toolnexus.tools.builtins._patch import parse_patch
from toolnexus.tools.builtins._root import Root

__all__ = ["with_resource_keys"]


def _path_declaration(root: Root, *, writes: bool, default: str | None) -> ResourcesFunction:
    """Declares the resolved ``path`` argument, read or written."""

    def declare(args: dict[str, Any]) -> Resources | None:
        keys = _keys(root, args.get("path", default))
        if keys is None:
            return None  # the call will fail on its path; its safety class is the safe guess
        return Resources(writes=keys) if writes else Resources(reads=keys)

    return resolving_paths(declare)


def _patch_declaration(root: Root) -> ResourcesFunction:
    """Declares every path a patch adds, deletes, updates or moves to (parsed before it runs)."""

    def declare(args: dict[str, Any]) -> Resources | None:
        patch = args.get("patch")
        if not isinstance(patch, str):
            return None
        try:
            changes = parse_patch(patch)
        except PatchError:
            return None  # it will be refused as it is; nothing to order it by
        keys: list[str] = []
        for change in changes:
            if change.move_to is not None and _is_symlink(root, change.path):
                return None  # moving a link changes what its new name names: writes everything
            for name in (change.path, change.move_to):
                if name is not None:
                    found = _keys(root, name)
                    if found is None:
                        return None
                    keys += found
        return Resources(writes=keys)

    return resolving_paths(declare)


def _keys(root: Root, name: object) -> list[str] | None:
    """The resolved path of ``name`` as a key, and its inode's key when the file has other hard
    links (so every name of one file shares a key); ``None`` when it is no usable path."""
    if not isinstance(name, str):
        return None
    try:
        path = root.resolve(name)
    except (ValueError, OSError):
        return None
    keys = [str(path)]
    try:
        info = os.stat(path)
    except OSError:
        return keys  # not there yet (a file to create): its path is all there is
    if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
        keys.append(f"inode:{info.st_dev}:{info.st_ino}")
    return keys


def _is_symlink(root: Root, name: str) -> bool:
    raw = os.path.join(root.path, name)
    return os.path.islink(raw.rstrip("/"))


def with_resource_keys(tools: list[Tool], root: Root) -> list[Tool]:
    """``tools`` with the file tools' declarations set; the others as they are."""
    reads_path = _path_declaration(root, writes=False, default=None)
    reads_folder = _path_declaration(root, writes=False, default=".")
    writes_path = _path_declaration(root, writes=True, default=None)
    declarations = {
        "read": reads_path,
        "grep": reads_folder,
        "glob": reads_folder,
        "write": writes_path,
        "edit": writes_path,
        "notebook_edit": writes_path,
        "apply_patch": _patch_declaration(root),
    }
    return [
        dataclasses.replace(t, resources=declarations[t.name]) if t.name in declarations else t
        for t in tools
    ]
