"""Built-in coding tools done so far (issue 5, in progress): real files, real processes."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from toolnexus.errors import ConfigurationError, ToolArgumentsError
from toolnexus.scheduling import concurrency_mode
from toolnexus.tools import Tool
from toolnexus.tools.builtins._files import MAX_LINE_CHARS, file_tools
from toolnexus.tools.builtins._grep import grep_tool
from toolnexus.tools.builtins._root import Root
from toolnexus.tools.builtins._session import session_tools
from toolnexus.tools.builtins._shell import Shells, shell_tools


@pytest.fixture
def root(tmp_path: Path) -> Root:
    return Root(tmp_path)


@pytest.fixture
def files(root: Root) -> dict[str, Tool]:
    return {t.name: t for t in [*file_tools(root), grep_tool(root)]}


async def call(t: Tool, **args: Any) -> Any:
    return await t.invoke(args)


async def test_write_read_edit_round_trip(files: dict[str, Tool], tmp_path: Path) -> None:
    assert await call(files["write"], path="src/a.txt", content="alpha\nbeta\nbeta\n") == (
        "wrote 16 bytes to src/a.txt"
    )
    assert (tmp_path / "src/a.txt").read_text() == "alpha\nbeta\nbeta\n"
    assert (
        await call(files["read"], path="src/a.txt") == "     1\talpha\n     2\tbeta\n     3\tbeta"
    )
    assert await call(files["read"], path="src/a.txt", offset=2, limit=1) == (
        "     2\tbeta\n… (1 more lines; read with offset=3)"
    )
    with pytest.raises(ValueError, match="occurs 2 times"):
        await call(files["edit"], path="src/a.txt", old_string="beta", new_string="b")
    await call(files["edit"], path="src/a.txt", old_string="alpha", new_string="a")
    await call(files["edit"], path="src/a.txt", old_string="beta", new_string="b", replace_all=True)
    assert (tmp_path / "src/a.txt").read_text() == "a\nb\nb\n"
    with pytest.raises(ValueError, match="was not found"):
        await call(files["edit"], path="src/a.txt", old_string="zzz", new_string="y")


async def test_read_refuses_what_it_cannot_read(files: dict[str, Tool], tmp_path: Path) -> None:
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01\x02")
    (tmp_path / "folder").mkdir()
    (tmp_path / "long.txt").write_text("x" * (MAX_LINE_CHARS + 10))
    with pytest.raises(ValueError, match="binary file"):
        await call(files["read"], path="blob.bin")
    with pytest.raises(IsADirectoryError, match="use glob"):
        await call(files["read"], path="folder")
    with pytest.raises(FileNotFoundError, match=r"no file nope\.txt"):
        await call(files["read"], path="nope.txt")
    assert (await call(files["read"], path="long.txt")).endswith("… (line cut)")
    with pytest.raises(ToolArgumentsError, match="offset"):
        await call(files["read"], path="long.txt", offset=0)


@pytest.mark.parametrize("escape", ["../outside.txt", "/etc/passwd", "link/secret.txt"])
async def test_paths_outside_the_root_are_refused(
    files: dict[str, Tool], tmp_path: Path, escape: str
) -> None:
    outside = tmp_path.parent / f"outside-{tmp_path.name}"
    outside.mkdir(exist_ok=True)
    (outside / "secret.txt").write_text("secret")
    (tmp_path / "link").symlink_to(outside)
    with pytest.raises(ValueError, match="outside the working directory"):
        await call(files["read"], path=escape)
    with pytest.raises(ValueError, match="outside the working directory"):
        await call(files["write"], path=escape, content="x")


async def test_outside_paths_are_allowed_when_the_caller_says_so(tmp_path: Path) -> None:
    outside = tmp_path.parent / f"elsewhere-{tmp_path.name}.txt"
    outside.write_text("hello")
    read = file_tools(Root(tmp_path, allow_outside=True))[0]
    assert "hello" in await call(read, path=str(outside))


def test_the_root_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="existing directory"):
        Root(tmp_path / "missing")


async def test_glob_newest_first_with_a_limit(files: dict[str, Tool], tmp_path: Path) -> None:
    for i, name in enumerate(["old.py", "mid.py", "new.py"]):
        (tmp_path / name).write_text("x")
        os.utime(tmp_path / name, (1000 + i, 1000 + i))
    assert await call(files["glob"], pattern="*.py") == "new.py\nmid.py\nold.py"
    assert (
        await call(files["glob"], pattern="*.py", limit=1)
        == "new.py\n… (2 more; narrow the pattern)"
    )
    assert "no files match" in await call(files["glob"], pattern="*.rs")


async def test_grep_modes_filters_and_ignores(files: dict[str, Tool], tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("import os\nx = 1\nimport sys\n")
    (tmp_path / "b.txt").write_text("import nothing\n")
    (tmp_path / "bin.dat").write_bytes(b"import\x00")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("import git\n")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "gen.py").write_text("import generated\n")
    (tmp_path / ".gitignore").write_text("build/\n")
    assert await call(files["grep"], pattern=r"^import") == "a.py\nb.txt"
    assert await call(files["grep"], pattern=r"^import", glob="*.py", output_mode="content") == (
        "a.py:1:import os\na.py:3:import sys"
    )
    assert await call(files["grep"], pattern=r"^import", output_mode="count") == "a.py: 2\nb.txt: 1"
    assert await call(files["grep"], pattern="import", output_mode="content", limit=1) == (
        "a.py:1:import os\n… (2 more results; narrow the pattern or raise limit)"
    )
    with pytest.raises(ValueError, match="not a valid regular expression"):
        await call(files["grep"], pattern="(")


async def test_grep_honours_nested_gitignores_as_git_does(
    files: dict[str, Tool], tmp_path: Path
) -> None:
    (tmp_path / ".gitignore").write_text("*.log\n")
    pkg = tmp_path / "pkg"
    (pkg / "gen").mkdir(parents=True)
    (pkg / ".gitignore").write_text("gen/\n!keep.log\n/local.txt\n")
    for name in ["top.log", "pkg/keep.log", "pkg/drop.log", "pkg/gen/out.py", "pkg/local.txt"]:
        (tmp_path / name).write_text("needle\n")
    (pkg / "gen" / "local.txt").mkdir()
    (pkg / "gen" / "local.txt" / "deep.txt").write_text("needle\n")
    (pkg / "sub").mkdir()
    (pkg / "sub" / "local.txt").write_text("needle\n")  # "/local.txt" is anchored to pkg/
    expected = "pkg/keep.log\npkg/sub/local.txt"
    assert await call(files["grep"], pattern="needle") == expected
    # Searching a subfolder still applies the .gitignore files above it.
    assert await call(files["grep"], pattern="needle", path="pkg") == expected


async def test_grep_does_not_follow_links_out_of_the_root(tmp_path: Path) -> None:
    inside, outside = tmp_path / "inside", tmp_path / "outside"
    inside.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("needle\n")
    (inside / "mine.txt").write_text("needle\n")
    (inside / "link.txt").symlink_to(outside / "secret.txt")
    (inside / "local_link.txt").symlink_to(inside / "mine.txt")
    fenced = grep_tool(Root(inside))
    assert await call(fenced, pattern="needle") == "local_link.txt\nmine.txt"
    trusting = grep_tool(Root(inside, allow_outside=True))
    assert await call(trusting, pattern="needle") == "link.txt\nlocal_link.txt\nmine.txt"


@pytest.fixture
async def shell(root: Root) -> Any:
    shells = Shells()
    yield {t.name: t for t in shell_tools(root, shells)}
    await shells.close()


async def test_bash_runs_in_the_root_and_reports_failures(
    shell: dict[str, Tool], root: Root
) -> None:
    assert (await call(shell["bash"], command="pwd")).strip() == str(root.path)
    out = await call(shell["bash"], command="echo oops >&2; exit 3")
    assert "oops" in out and "(exit status 3)" in out


async def test_bash_timeout_kills_the_whole_process_group(
    shell: dict[str, Tool], tmp_path: Path
) -> None:
    marker = tmp_path / "child.pid"
    with pytest.raises(TimeoutError, match="timeout"):
        await call(shell["bash"], command=f"sleep 30 & echo $! > {marker}; wait", timeout=0.5)
    child = int(await asyncio.to_thread(marker.read_text))
    for _ in range(500):  # SIGKILL is delivered at once, but the exit takes a moment
        if not _alive(child):
            break
        await asyncio.sleep(0.01)
    assert not _alive(child)  # the background child died with its group


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper counts as dead)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


async def test_background_shells(shell: dict[str, Tool]) -> None:
    started = await call(
        shell["bash"], command="echo one; sleep 0.2; echo two; sleep 30", run_in_background=True
    )
    shell_id = started.split()[1]
    seen = ""
    for _ in range(500):  # until both lines were printed, however slow the machine
        latest = await call(shell["bash_output"], shell_id=shell_id)
        seen += latest
        if "two" in seen:
            break
        await asyncio.sleep(0.02)
    assert seen.count("one") == 1 and "two" in seen  # each read returns only what is new
    assert "running" in latest
    assert await call(shell["kill_shell"], shell_id=shell_id) == f"killed {shell_id}"
    with pytest.raises(KeyError, match="no background shell 'shell_9'"):
        await call(shell["bash_output"], shell_id="shell_9")


async def test_bash_output_is_capped(shell: dict[str, Tool]) -> None:
    out = await call(shell["bash"], command="yes line | head -c 100000")
    assert "characters cut" in out and len(out) < 31_000


async def test_todowrite_and_question() -> None:
    todowrite, question = session_tools(None)
    shown = await call(
        todowrite,
        todos=[
            {"content": "plan", "status": "completed"},
            {"content": "build", "status": "in_progress"},
            {"content": "ship", "status": "pending"},
        ],
    )
    assert shown == "[x] plan\n[~] build\n[ ] ship"
    with pytest.raises(RuntimeError, match="question is not configured"):
        await call(question, questions=["Which file?"])

    async def answer(questions: list[str]) -> list[str]:
        return [f"answer to {q}" for q in questions]

    assert await call(session_tools(answer)[1], questions=["A?", "B?"]) == [
        "answer to A?",
        "answer to B?",
    ]


def test_safety_classes_are_the_documented_ones(root: Root) -> None:
    tools = {
        t.name: t
        for t in [
            *file_tools(root),
            grep_tool(root),
            *shell_tools(root, Shells()),
            *session_tools(None),
        ]
    }
    safe = {"read", "grep", "glob", "todowrite", "question", "bash_output"}
    for name, t in tools.items():
        expected = "parallel" if name in safe else "exclusive"
        assert concurrency_mode(t, {}) == expected, name


@pytest.fixture
def patch_tool(root: Root) -> Tool:
    from toolnexus.tools.builtins._patch import apply_patch_tool

    return apply_patch_tool(root)


async def test_apply_patch_adds_updates_moves_and_deletes(patch_tool: Tool, tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("def main():\n    print('hi')\n    return 0\n")
    (tmp_path / "old.txt").write_text("bye\n")
    (tmp_path / "keep.py").write_text("a = 1\nb = 2\n")
    patch = """*** Begin Patch
*** Add File: docs/new.md
+# New
+text
*** Update File: app.py
@@ def main():
 def main():
-    print('hi')
+    print('hello')
     return 0
*** Update File: keep.py
*** Move to: moved.py
 a = 1
-b = 2
+b = 3
*** Delete File: old.txt
*** End Patch"""
    summary = await call(patch_tool, patch=patch)
    assert summary == "A docs/new.md\nM app.py\nR keep.py -> moved.py\nD old.txt"
    assert (tmp_path / "docs/new.md").read_text() == "# New\ntext\n"
    assert (tmp_path / "app.py").read_text() == "def main():\n    print('hello')\n    return 0\n"
    assert (tmp_path / "moved.py").read_text() == "a = 1\nb = 3\n"
    assert not (tmp_path / "keep.py").exists() and not (tmp_path / "old.txt").exists()


async def test_apply_patch_is_all_or_nothing(patch_tool: Tool, tmp_path: Path) -> None:
    (tmp_path / "one.txt").write_text("x\n")
    (tmp_path / "two.txt").write_text("y\n")
    patch = """*** Begin Patch
*** Update File: one.txt
-x
+X
*** Update File: two.txt
-not there
+Z
*** End Patch"""
    with pytest.raises(ValueError, match=r"hunk 1 of two\.txt does not match"):
        await call(patch_tool, patch=patch)
    assert (tmp_path / "one.txt").read_text() == "x\n"  # the first file was not written


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ("*** Update File: a\n*** End Patch", "starts with"),
        ("*** Begin Patch\n*** Add File: a\n+x", "ends with"),
        ("*** Begin Patch\n*** End Patch", "changes no file"),
        ("*** Begin Patch\n*** Add File: a\nx\n*** End Patch", "starts with '\\+'"),
        ("*** Begin Patch\n*** Move to: b\n*** End Patch", "must follow"),
        ("*** Begin Patch\n*** Delete File: missing.txt\n*** End Patch", "no such file"),
    ],
)
async def test_apply_patch_errors_are_clear(patch_tool: Tool, patch: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        await call(patch_tool, patch=patch)


async def test_notebook_edit_replaces_inserts_and_deletes(root: Root, tmp_path: Path) -> None:
    import nbformat

    from toolnexus.tools.builtins._notebook import notebook_tool

    notebook = nbformat.v4.new_notebook()
    code = nbformat.v4.new_code_cell("print(1)")
    code.outputs = [nbformat.v4.new_output("stream", text="1\n")]
    notebook.cells = [nbformat.v4.new_markdown_cell("# Title"), code]
    path = tmp_path / "nb.ipynb"
    nbformat.write(notebook, str(path))
    edit = notebook_tool(root)
    await call(edit, path="nb.ipynb", cell_index=1, new_source="print(2)")
    await call(
        edit,
        path="nb.ipynb",
        cell_index=1,
        new_source="## Section",
        cell_type="markdown",
        edit_mode="insert",
    )
    assert (await call(edit, path="nb.ipynb", cell_index=0, edit_mode="delete")) == (
        "deleted cell 0 of nb.ipynb (now 2 cells)"
    )
    cells = nbformat.read(str(path), as_version=4).cells
    assert [(c.cell_type, c.source) for c in cells] == [
        ("markdown", "## Section"),
        ("code", "print(2)"),
    ]
    assert cells[1].outputs == []  # stale outputs are dropped with the old source
    with pytest.raises(IndexError, match="out of range"):
        await call(edit, path="nb.ipynb", cell_index=5, new_source="x")
    with pytest.raises(ValueError, match="needs cell_type"):
        await call(edit, path="nb.ipynb", cell_index=0, new_source="x", edit_mode="insert")
    with pytest.raises(ValueError, match="not a notebook"):
        await call(edit, path="nb.txt", cell_index=0)


@pytest.fixture
def web_server() -> Any:
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    pages = {
        "/page": (
            "text/html",
            b"<html><body><h1>Hello</h1><p>A <b>bold</b> claim.</p><script>x()</script></body></html>",
        ),
        "/plain": ("text/plain", b"just text"),
        "/image": ("image/png", b"\x89PNG"),
        "/huge": ("text/plain", b"x" * 3_000_000),
        "/search": (
            "application/json",
            json.dumps(
                {
                    "results": [
                        {
                            "title": "Toolnexus",
                            "url": "https://example.test/t",
                            "content": "runs tool calls",
                        },
                        {"title": "Other", "url": "https://example.test/o", "content": "something"},
                    ]
                }
            ).encode(),
        ),
    }

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            kind, body = pages.get(self.path.split("?")[0], ("text/plain", b""))
            self.send_response(200 if self.path.split("?")[0] in pages else 404)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


async def test_webfetch_converts_html_and_enforces_limits(web_server: str) -> None:
    from toolnexus.tools.builtins._web import web_tools

    webfetch = web_tools(None, allow_private_network=True)[0]
    page = await call(webfetch, url=web_server + "/page")
    assert "# Hello" in page and "**bold**" in page and "x()" not in page
    assert await call(webfetch, url=web_server + "/plain") == "just text"
    with pytest.raises(ValueError, match="not text"):
        await call(webfetch, url=web_server + "/image")
    with pytest.raises(ValueError, match="larger than"):
        await call(webfetch, url=web_server + "/huge")
    with pytest.raises(RuntimeError, match="HTTP 404"):
        await call(webfetch, url=web_server + "/missing")
    with pytest.raises(ValueError, match="http"):
        await call(webfetch, url="file:///etc/passwd")


async def test_websearch_backends(web_server: str) -> None:
    from toolnexus.tools.builtins._web import web_tools

    with pytest.raises(RuntimeError, match="websearch is not configured"):
        await call(web_tools(None)[1], query="x")
    searxng = await call(web_tools(web_server)[1], query="toolnexus", limit=1)
    assert searxng == "1. Toolnexus\n   https://example.test/t\n   runs tool calls"

    def backend(query: str, limit: int) -> list[dict[str, Any]]:
        return [{"title": f"{query} {i}", "url": f"u{i}", "snippet": ""} for i in range(5)]

    assert (await call(web_tools(backend)[1], query="q", limit=2)).count("\n\n") == 1


def test_builtin_tools_are_the_fourteen_with_their_safety_classes(tmp_path: Path) -> None:
    from toolnexus.tools.builtins import builtin_tools

    tools = builtin_tools(tmp_path)
    safe = ["read", "grep", "glob", "webfetch", "websearch", "question", "todowrite", "bash_output"]
    unsafe = ["bash", "write", "edit", "apply_patch", "notebook_edit", "kill_shell"]
    assert [t.name for t in tools] == safe + unsafe
    for t in tools:
        assert concurrency_mode(t, {}) == ("parallel" if t.name in safe else "exclusive"), t.name
        assert t.description and all(
            "description" in p for p in t.input_schema.get("properties", {}).values()
        ), t.name
    with pytest.raises(ConfigurationError):
        builtin_tools(tmp_path / "missing")
