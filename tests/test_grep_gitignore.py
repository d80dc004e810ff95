"""grep's ignore rules against git itself: random trees and ``.gitignore`` files, and the files
``walk_files`` keeps must be exactly the untracked files ``git ls-files`` reports."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolnexus.tools.builtins._grep import walk_files
from toolnexus.tools.builtins._root import Root

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

FOLDERS = ["", "src", "src/app", "docs", "build", "logs", "src/build"]
NAMES = ["a.py", "b.pyc", "keep.log", "x.log", "top.txt", "notes.md", "cache", "c.tmp"]
PATTERNS = [
    "*.log",
    "!keep.log",
    "build/",
    "/top.txt",
    "*.py[co]",
    "docs/*",
    "!docs/notes.md",
    "**/cache",
    "src/**/c.tmp",
    "app/",
    "/logs",
    "*.md",
    "!src/*.md",
]
# An isolated git: no user or system configuration (a global excludes file would change the
# answer), no prompts.
GIT_ENV = {
    **os.environ,
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_SYSTEM": os.devnull,
    "GIT_TERMINAL_PROMPT": "0",
}

files = st.lists(
    st.tuples(st.sampled_from(FOLDERS), st.sampled_from(NAMES)), min_size=1, max_size=25
)
ignores = st.dictionaries(
    st.sampled_from(["", "src", "docs", "src/app"]),
    st.lists(st.sampled_from(PATTERNS), min_size=1, max_size=4),
    max_size=3,
)


def _git_untracked(root: Path) -> set[str]:
    done = subprocess.run(
        ["git", "ls-files", "--others", "--exclude-standard", "-z"],
        cwd=root,
        env=GIT_ENV,
        capture_output=True,
        check=True,
    )
    listed = {p for p in done.stdout.decode().split("\0") if p}
    return {p for p in listed if not p.endswith(".gitignore")}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(files=files, ignores=ignores)
def test_grep_skips_exactly_what_git_ignores(
    files: list[tuple[str, str]], ignores: dict[str, list[str]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        subprocess.run(["git", "init", "-q", str(root)], env=GIT_ENV, check=True)
        for folder, name in files:
            path = root / folder / name
            if path.parent.is_file() or path.is_dir():
                continue  # a name already taken by a file or folder
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("x\n")
        for folder, patterns in ignores.items():
            if (root / folder).is_file():
                continue
            (root / folder).mkdir(parents=True, exist_ok=True)
            (root / folder / ".gitignore").write_text("\n".join(patterns) + "\n")
        walked = {
            p.relative_to(root).as_posix()
            for p in walk_files(Root(root), root)
            if p.name != ".gitignore"
        }
        assert walked == _git_untracked(root)
