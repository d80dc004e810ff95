"""Resource keys for the built-in tools (``builtin_tools(root, resource_keys=True)``).

Each file tool declares the resolved paths it reads or writes, so edits of different files
overlap while two calls on one file (spelled ``a.py``, ``./a.py`` or through a symlink) run one
at a time, in order. A search reads everything under its folder. ``bash`` declares nothing, so it
keeps its class: it may touch anything, so it writes everything.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from toolnexus.errors import PatchError
from toolnexus.tools._resources import Resources, ResourcesFunction
from toolnexus.tools._tool import Tool
from toolnexus.tools.builtins._patch import parse_patch
from toolnexus.tools.builtins._root import Root

__all__ = ["with_resource_keys"]


def _path_declaration(root: Root, *, writes: bool, default: str | None) -> ResourcesFunction:
    """Declares the resolved ``path`` argument, read or written."""

    def declare(args: dict[str, Any]) -> Resources | None:
        key = _key(root, args.get("path", default))
        if key is None:
            return None  # the call will fail on its path; its safety class is the safe guess
        return Resources(writes=[key]) if writes else Resources(reads=[key])

    return declare


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
        keys = []
        for change in changes:
            for name in (change.path, change.move_to):
                if name is not None:
                    key = _key(root, name)
                    if key is None:
                        return None
                    keys.append(key)
        return Resources(writes=keys)

    return declare


def _key(root: Root, name: object) -> str | None:
    """The resolved path of ``name`` as a key; ``None`` when it is no usable path."""
    if not isinstance(name, str):
        return None
    try:
        return str(root.resolve(name))
    except (ValueError, OSError):
        return None


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
