"""``apply_patch``: the ``*** Begin Patch`` format, applied to every file or to none.

    *** Begin Patch
    *** Add File: docs/new.md
    +first line
    *** Update File: src/app.py
    *** Move to: src/main.py
    @@ def main():
     context line
    -removed line
    +added line
    *** Delete File: old.txt
    *** End Patch

An update's hunks are found in order, each after the previous one, by their context and removed
lines (exactly, then ignoring trailing whitespace). Everything is computed in memory first; files
are written only when every hunk of every file applied.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from toolnexus.errors import PatchError
from toolnexus.tools._decorator import tool
from toolnexus.tools._tool import Tool
from toolnexus.tools.builtins._files import WRITES
from toolnexus.tools.builtins._root import Root

__all__ = ["PatchError", "apply_patch_tool", "parse_patch"]


@dataclass
class FileChange:
    """One file's part of a patch."""

    kind: str  # "add", "update", "delete"
    path: str
    move_to: str | None = None
    added: list[str] = field(default_factory=list)  # for "add"
    hunks: list[list[str]] = field(default_factory=list)  # for "update": " ", "-", "+" lines


def parse_patch(text: str) -> list[FileChange]:
    """The file changes of ``text``, in order.

    Raises:
        PatchError: a malformed patch, naming the line.
    """
    lines = text.strip("\n").splitlines()
    if not lines or lines[0].strip() != "*** Begin Patch":
        raise PatchError("a patch starts with '*** Begin Patch'")
    if lines[-1].strip() != "*** End Patch":
        raise PatchError("a patch ends with '*** End Patch'")
    changes: list[FileChange] = []
    for number, line in enumerate(lines[1:-1], start=2):
        header = _header(line)
        if header is not None:
            kind, path = header
            if kind == "move":
                if not changes or changes[-1].kind != "update":
                    raise PatchError(f"line {number}: '*** Move to' must follow '*** Update File'")
                changes[-1].move_to = path
            else:
                changes.append(FileChange(kind, path))
            continue
        if not changes:
            raise PatchError(f"line {number}: expected a '*** Add/Update/Delete File' header")
        change = changes[-1]
        if line.strip() == "*** End of File":
            continue
        if change.kind == "add":
            if not line.startswith("+"):
                raise PatchError(f"line {number}: every line of an added file starts with '+'")
            change.added.append(line[1:])
        elif change.kind == "update":
            if line.startswith("@@"):
                change.hunks.append([])
            elif line[:1] in (" ", "-", "+") or line == "":
                if not change.hunks:
                    change.hunks.append([])
                change.hunks[-1].append(line if line else " ")
            else:
                raise PatchError(f"line {number}: a hunk line starts with ' ', '-' or '+'")
        else:
            raise PatchError(f"line {number}: a deleted file takes no lines")
    if not changes:
        raise PatchError("the patch changes no file")
    return changes


def _header(line: str) -> tuple[str, str] | None:
    for prefix, kind in (
        ("*** Add File: ", "add"),
        ("*** Update File: ", "update"),
        ("*** Delete File: ", "delete"),
        ("*** Move to: ", "move"),
    ):
        if line.startswith(prefix):
            return kind, line[len(prefix) :].strip()
    return None


def _find(lines: list[str], wanted: list[str], start: int) -> int:
    for normalise in (lambda s: s, str.rstrip):
        target = [normalise(w) for w in wanted]
        for i in range(start, len(lines) - len(wanted) + 1):
            if [normalise(x) for x in lines[i : i + len(wanted)]] == target:
                return i
    return -1


def _updated(path: str, text: str, hunks: list[list[str]]) -> str:
    lines = text.splitlines()
    position = 0
    for n, hunk in enumerate(hunks, start=1):
        old = [h[1:] for h in hunk if h[0] in (" ", "-")]
        new = [h[1:] for h in hunk if h[0] in (" ", "+")]
        at = _find(lines, old, position) if old else len(lines)
        if at < 0:
            raise PatchError(
                f"hunk {n} of {path} does not match the file (its context and '-' lines must "
                "appear in order); read the file and make the patch again"
            )
        lines[at : at + len(old)] = new
        position = at + len(new)
    return "\n".join(lines) + ("\n" if lines else "")


def apply_patch_tool(root: Root) -> Tool:
    """``apply_patch`` working under ``root``."""

    @tool(name="apply_patch", hints=WRITES)
    def apply_patch(patch: str) -> str:
        """Apply a patch in the '*** Begin Patch' format: add, update (with context hunks),
        delete and move files. All files change, or none.

        Args:
            patch: The whole patch, from '*** Begin Patch' to '*** End Patch'.
        """
        writes: dict[Path, str] = {}
        deletes: list[Path] = []
        summary: list[str] = []
        for change in parse_patch(patch):
            target = root.resolve(change.path)
            if change.kind == "add":
                if target.exists():
                    raise PatchError(f"{change.path} already exists; use '*** Update File'")
                writes[target] = "\n".join(change.added) + "\n"
                summary.append(f"A {change.path}")
            elif change.kind == "delete":
                if not target.is_file():
                    raise PatchError(f"cannot delete {change.path}: no such file")
                deletes.append(target)
                summary.append(f"D {change.path}")
            else:
                if not target.is_file():
                    raise PatchError(f"cannot update {change.path}: no such file")
                current = writes.get(target, target.read_text(encoding="utf-8"))
                new_text = _updated(change.path, current, change.hunks)
                if change.move_to:
                    destination = root.resolve(change.move_to)
                    writes[destination] = new_text
                    deletes.append(target)
                    summary.append(f"R {change.path} -> {change.move_to}")
                else:
                    writes[target] = new_text
                    summary.append(f"M {change.path}")
        for path, text in writes.items():  # every check passed: now change the files
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        for path in deletes:
            if path not in writes:
                path.unlink()
        return "\n".join(summary)

    return apply_patch
