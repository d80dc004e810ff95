"""Every Python example in the README and docs/ runs: each block on its own, in a fresh process
and a fresh folder, unless the line before it says ``<!-- continues -->`` (it then runs after
the block it continues, in the same process). A ``py`` block is an illustration that needs a
service the tests do not have; its first line must say so (``# needs ...``), and it is still
compiled (no top-level ``await``: it must paste into a file and run) with its names checked by
ruff's undefined-name rule (F821), after the blocks it continues."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"(?P<before>[^\n]*)\n```(?P<kind>python|py)\n(?P<code>.*?)```", re.DOTALL)
CONTINUES = "<!-- continues -->"


def _programs(page: Path) -> list[tuple[int, str]]:
    """(line of the first block, source) of each runnable group of blocks on ``page``."""
    text = page.read_text(encoding="utf-8")
    groups: list[tuple[int, str]] = []
    for match in BLOCK.finditer(text):
        if match["kind"] != "python":
            continue
        line = text.count("\n", 0, match.start("code"))
        if match["before"].strip() == CONTINUES:
            assert groups, f"{page.name}:{line}: a block marked as continuing has nothing before it"
            first, code = groups[-1]
            groups[-1] = (first, code + "\n" + match["code"])
        else:
            groups.append((line, match["code"]))
    return groups


CASES = [(page, line, code) for page in PAGES for line, code in _programs(page)]


def _illustrations(page: Path) -> list[tuple[int, str]]:
    """(line, source) of each ``py`` block on ``page``, after the blocks it continues."""
    text = page.read_text(encoding="utf-8")
    out: list[tuple[int, str]] = []
    previous = ""
    for match in BLOCK.finditer(text):
        line = text.count("\n", 0, match.start("code"))
        code = match["code"]
        if match["before"].strip() == CONTINUES:
            code = previous + "\n" + code
        if match["kind"] == "py":
            out.append((line, code))
        previous = code
    return out


ILLUSTRATED = [page for page in PAGES if _illustrations(page)]


def _ruff() -> list[str]:
    found = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if found is None:  # pragma: no cover - the test extra installs it
        pytest.skip("ruff is not installed (pip install -e '.[test]')")
    return [found]


@pytest.mark.parametrize("page", ILLUSTRATED, ids=[p.name for p in ILLUSTRATED])
def test_illustrations_compile_and_name_nothing_undefined(page: Path, tmp_path: Path) -> None:
    for line, code in _illustrations(page):
        try:
            compile(code, f"{page.name}:{line}", "exec")
        except SyntaxError as exc:
            pytest.fail(f"{page.name}, py block at line {line} does not compile: {exc}")
        (tmp_path / f"block_{line}.py").write_text(code, encoding="utf-8")
    done = subprocess.run(
        [*_ruff(), "check", "--isolated", "--select", "F821", "--output-format", "concise", "."],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, (
        f"{page.name} (block_LINE.py: the py block at LINE):\n{done.stdout}"
    )


def test_the_illustration_check_fails_on_an_undefined_name(tmp_path: Path) -> None:
    (tmp_path / "block.py").write_text("import asyncio\nasyncio.run(client.run('hi'))\n")
    done = subprocess.run(
        [*_ruff(), "check", "--isolated", "--select", "F821", "."],
        capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1 and "client" in done.stdout
    with pytest.raises(SyntaxError):
        compile("async with x() as y:\n    pass\n", "block", "exec")


@pytest.mark.parametrize(
    ("page", "line", "code"), CASES, ids=[f"{p.name}:{line}" for p, line, _ in CASES]
)
def test_every_example_runs_on_its_own(page: Path, line: int, code: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, f"{page.name}, block at line {line}:\n{done.stderr}"


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_illustrations_say_what_they_need(page: Path) -> None:
    for match in BLOCK.finditer(page.read_text(encoding="utf-8")):
        if match["kind"] == "py":
            assert match["code"].startswith("# needs "), (page.name, match["code"][:80])


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_links_point_at_files_that_exist(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" in target or target.startswith("mailto:"):
            continue
        assert (page.parent / target).exists(), (page.name, target)
    for named in re.findall(r"`((?:docs|examples|bench|tests|src)/[\w./-]+)`", text):
        assert (ROOT / named).exists(), (page.name, named)


def test_errors_page_lists_every_exception_class() -> None:
    import toolnexus.errors

    text = (ROOT / "docs" / "errors.md").read_text(encoding="utf-8")
    classes = [
        name
        for name in toolnexus.errors.__all__
        if isinstance(getattr(toolnexus.errors, name), type)
        and issubclass(getattr(toolnexus.errors, name), BaseException)
    ]
    assert len(classes) >= 8
    assert [name for name in classes if name not in text] == []
