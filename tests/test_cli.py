"""The ``toolnexus`` command: in-process through ``main()``, and once as a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fake_provider import FakeProvider, Turn
from toolnexus.cli import main
from toolnexus.codemode import render_sdk

ROOT = Path(__file__).parent.parent
EXAMPLE_TOOLS = f"{ROOT / 'examples' / 'tools.py'}:TOOLS"


def subprocess_toolnexus(
    *args: str, stdin: str = "", env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "toolnexus.cli", *args]
    full_env = {**os.environ, "COLUMNS": "120", **(env or {})}
    return subprocess.run(
        command,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env=full_env,
        check=False,
        cwd=cwd,
    )


@dataclass
class Done:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def toolnexus(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Any:
    """Run ``main(args)`` in this process; ``stdin`` lines answer ``input()``."""

    def run(*args: str, stdin: str = "", env: dict[str, str] | None = None) -> Done:
        for key, value in (env or {}).items():
            monkeypatch.setenv(key, value)
        lines = stdin.splitlines()

        def fake_input(prompt: str = "") -> str:
            if not lines:
                raise EOFError
            return lines.pop(0)

        monkeypatch.setattr("builtins.input", fake_input)
        capsys.readouterr()
        code = main(list(args))
        captured = capsys.readouterr()
        return Done(code, captured.out, captured.err)

    return run


def test_the_installed_entry_point_runs_the_quick_start_job(tmp_path: Path) -> None:
    report = tmp_path / "run.html"  # the Quick start writes run.html: the run as a timeline
    done = subprocess_toolnexus(
        "run-code",
        str(ROOT / "examples/programs/research.py"),
        "--tools",
        EXAMPLE_TOOLS,
        "--html",
        str(report),
    )
    assert done.returncode == 0, done.stderr
    assert "what ran together: [1]  ->  [2 3 4]  ->  [5]" in done.stdout
    assert done.stdout.rstrip().splitlines()[-1].startswith(f"report: {report}")
    assert "<html" in report.read_text(encoding="utf-8")
    assert done.stderr == ""


def test_run_code_runs_the_example_and_shows_what_ran_together(toolnexus: Any) -> None:
    done = toolnexus(
        "run-code", str(ROOT / "examples/programs/research.py"), "--tools", EXAMPLE_TOOLS
    )
    assert done.returncode == 0, done.stderr
    assert "what ran together: [1]  ->  [2 3 4]  ->  [5]" in done.stdout
    assert '"note": "saved note 1"' in done.stdout
    assert "log: found: audit, code-mode, sandbox" in done.stdout


def test_run_code_in_javascript(toolnexus: Any) -> None:
    done = toolnexus(
        "run-code", str(ROOT / "examples/programs/research.js"), "--tools", EXAMPLE_TOOLS
    )
    assert done.returncode == 0, done.stderr
    assert "what ran together: [1]  ->  [2 3 4]  ->  [5]" in done.stdout


def test_a_failing_program_exits_1_with_its_error_and_calls(toolnexus: Any, tmp_path: Path) -> None:
    program = tmp_path / "bad.py"
    program.write_text("await tools.read_doc({'name': 'nope'})\n")
    done = toolnexus("run-code", str(program), "--tools", EXAMPLE_TOOLS)
    assert done.returncode == 1
    assert "error (exception)" in done.stderr and "no document named 'nope'" in done.stderr
    assert '"status": "error"' in done.stderr and "error" not in done.stdout


def test_text_from_programs_and_tools_is_shown_literally(toolnexus: Any, tmp_path: Path) -> None:
    """Brackets in logs, arguments and errors are not rich markup (``[/x]`` once crashed)."""
    program = tmp_path / "brackets.py"
    program.write_text("print('[/oops] [bold]x')\nawait tools.read_doc({'name': '[/name]'})\n")
    done = toolnexus("run-code", str(program), "--tools", EXAMPLE_TOOLS)
    assert done.returncode == 1, done.stderr
    assert "log: [/oops] [bold]x" in done.stdout
    assert "no document named '[/name]'" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr


@pytest.mark.parametrize("value", ["0", "-3", "ten"])
def test_max_parallel_must_be_a_whole_number_of_at_least_one(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    program = str(ROOT / "examples/programs/research.py")
    assert main(["run-code", program, "--max-parallel", value, "--no-builtins"]) == 2
    err = capsys.readouterr().err
    assert "argument --max-parallel: must be" in err and len(err.strip().splitlines()) == 1


def test_a_bad_endpoint_option_is_a_usage_error(toolnexus: Any) -> None:
    done = toolnexus(
        "chat", "--base-url", "localhost:8000", "--model", "m", "--no-builtins",
        env={"OPENAI_API_KEY": "k"},
    )  # fmt: skip
    assert done.returncode == 2
    assert "base_url must be an http(s) URL, got 'localhost:8000'" in done.stderr


def test_broken_user_files_are_one_line_errors(toolnexus: Any, tmp_path: Path) -> None:
    (tmp_path / "latin1.py").write_bytes(b"print('caf\xe9')\n")
    (tmp_path / "raises.py").write_text("import json\n\nraise ValueError('boom')\n")
    (tmp_path / "factory.py").write_text("def TOOLS():\n    return 1 / 0\n")
    cases = [
        (["run-code", str(tmp_path / "latin1.py")], "latin1.py is not UTF-8 text"),
        (
            ["sdk", "--tools", f"{tmp_path / 'raises.py'}:TOOLS"],
            f"raises.py failed: ValueError: boom (at {tmp_path / 'raises.py'}:3)",
        ),
        (
            ["sdk", "--tools", f"{tmp_path / 'factory.py'}:TOOLS"],
            "factory.py:TOOLS failed: ZeroDivisionError: division by zero",
        ),
    ]
    for args, message in cases:
        done = toolnexus(*args, "--no-builtins")
        assert done.returncode == 2, done.stderr
        assert message in done.stderr
        assert done.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run-code", "missing.py"], "no program file missing.py"),
        (
            ["run-code", "examples/programs/research.py", "--tools", "nocolon"],
            "--tools must look like",
        ),
        (
            ["run-code", "examples/programs/research.py", "--tools", "no_such_module:X"],
            "cannot import",
        ),
        (
            ["sdk", "--tools", f"{ROOT / 'examples' / 'tools.py'}:MISSING"],
            "has no attribute 'MISSING'",
        ),
        (["sdk", "--tools", f"/{'long' * 40}/tools.py:TOOLS"], f"no file /{'long' * 40}/tools.py"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(
    toolnexus: Any, args: list[str], message: str
) -> None:
    done = toolnexus(*args)
    assert done.returncode == 2
    assert message in done.stderr
    assert done.stderr.count("\n") == 1, "a usage error is one line, whatever its length"
    assert "Traceback" not in done.stderr


def test_sdk_prints_what_the_model_would_see(toolnexus: Any) -> None:
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import tools as example_tools  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    for language in ("python", "typescript"):
        done = toolnexus("sdk", "--language", language, "--tools", EXAMPLE_TOOLS, "--no-builtins")
        assert done.returncode == 0
        assert done.stdout == render_sdk(language, example_tools.TOOLS) + "\n"


def test_chat_streams_text_and_shows_tool_calls(toolnexus: Any, provider: FakeProvider) -> None:
    provider.script(
        Turn(text="Searching [/x].", calls=[("c1", "search_docs", {"query": "[/q] sandbox"})]),
        Turn(text="It runs in Monty."),
    )
    done = toolnexus(
        "chat",
        "--base-url",
        provider.url + "/v1",
        "--model",
        "m",
        "--code-mode",
        "native",
        "--tools",
        EXAMPLE_TOOLS,
        stdin="where do programs run?\n",
        env={"OPENAI_API_KEY": "k"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Searching [/x]." in done.stdout and "It runs in Monty." in done.stdout
    assert "[/q] sandbox" in done.stdout
    assert "→ search_docs" in done.stdout and "✓ search_docs" in done.stdout
    assert provider.requests[0]["messages"][-1] == {
        "role": "user",
        "content": "where do programs run?",
    }


def test_the_builtins_and_mcp_servers_are_offered_by_default(
    toolnexus: Any, tmp_path: Path
) -> None:
    import json

    config = tmp_path / "mcp.json"
    server = str(ROOT / "tests" / "mcp_server.py")
    config.write_text(
        json.dumps({"mcpServers": {"demo": {"command": sys.executable, "args": [server]}}})
    )
    done = toolnexus("sdk", "--full", "--mcp", str(config))
    assert done.returncode == 0
    for name in (
        "async def read(",
        "async def bash(",
        "async def apply_patch(",
        "async def demo_lookup(",
    ):
        assert name in done.stdout
    shown = toolnexus("sdk", "--mcp", str(config))  # past the threshold: the index
    assert shown.returncode == 0 and "search_tools(" in shown.stdout
    assert "demo_lookup(" in shown.stdout and "async def demo_lookup(" not in shown.stdout
    missing = toolnexus("sdk", "--mcp", str(tmp_path / "nope.json"))
    assert missing.returncode == 2 and "--mcp: cannot read" in missing.stderr


def test_chat_asks_before_a_call_that_changes_the_machine(
    toolnexus: Any, provider: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    provider.script(
        Turn(calls=[("c1", "write", {"path": "a.txt", "content": "x"})]),
        Turn(text="refused, fine"),
        Turn(calls=[("c2", "write", {"path": "b.txt", "content": "y"})]),
        Turn(text="written"),
    )
    base = ["chat", "--base-url", provider.url + "/v1", "--model", "m", "--code-mode", "native"]
    done = toolnexus(*base, stdin="write a\nn\n", env={"OPENAI_API_KEY": "k"})
    assert done.returncode == 0 and "allow write" in done.stdout and "? [y/N]" in done.stdout
    assert not (tmp_path / "a.txt").exists()
    done = toolnexus(*base, stdin="write b\ny\n", env={"OPENAI_API_KEY": "k"})
    assert (tmp_path / "b.txt").read_text() == "y"


def test_the_timeline_shows_which_call_and_file_a_waiting_call_waited_for(
    toolnexus: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text("v0\n")
    # a slow formatter that declares the file it rewrites, so the wait cannot be missed
    (tmp_path / "slow.py").write_text(
        "import time\n"
        "from pathlib import Path\n"
        "from toolnexus import Resources, tool\n\n"
        "@tool(resources=lambda args: Resources(writes=[str(Path(args['path']).resolve())]))\n"
        "def format_file(path: str) -> str:\n"
        '    """Format a file (slowly)."""\n'
        "    time.sleep(0.3)\n"
        "    return path\n\n"
        "TOOLS = [format_file]\n"
    )
    program = tmp_path / "edits.py"
    program.write_text(
        "import asyncio\n"
        "await asyncio.gather(\n"
        '    tools.format_file({"path": "a.py"}),\n'
        '    tools.edit({"path": "b.py", "old_string": "v0", "new_string": "v1"}),\n'
        '    tools.edit({"path": "a.py", "old_string": "v0", "new_string": "v1"}),\n'
        ")\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")
    tools = f"{tmp_path / 'slow.py'}:TOOLS"
    done = toolnexus("run-code", str(program), "--resource-keys", "--tools", tools)
    assert done.returncode == 0, done.stderr
    assert "waited for" in done.stdout
    assert "#1 (a.py)" in done.stdout  # the edit of a.py waited for the formatter, on a.py
    assert "what ran together: [1 2" in done.stdout  # the formatter and the edit of b.py
    assert (tmp_path / "a.py").read_text() == "v1\n"

    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text("v0\n")
    done = toolnexus("run-code", str(program), "--tools", tools)  # without keys
    assert "what ran together: [1]  ->  [2]  ->  [3]" in done.stdout  # each runs alone
    # each edit (unsafe: it writes everything) waited for the first call still uncommitted
    assert done.stdout.count("#1 (everything)") == 2


def _tripwire(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A folder to run in, and a PATH on which the command ``a`` (what TestModel's ``bash``
    call runs) leaves a mark outside that folder."""
    work, bin_dir, mark = tmp_path / "work", tmp_path / "bin", tmp_path / "bash-ran"
    work.mkdir()
    bin_dir.mkdir()
    script = bin_dir / "a"
    script.write_text(f"#!/bin/sh\ntouch {mark}\n")
    script.chmod(0o755)
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    python_path = os.pathsep.join(str(Path(p).resolve()) for p in paths if p)  # cwd moves
    return work, {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": python_path}


@pytest.mark.parametrize(
    "command",
    [
        ("run-code", "--model", "test", "--tools", EXAMPLE_TOOLS),
        ("run-code", "--model", "test", "--language", "javascript", "--tools", EXAMPLE_TOOLS),
        ("chat", "--model", "test", "--tools", EXAMPLE_TOOLS),
        ("chat", "--model", "test", "--code-mode", "native", "--tools", EXAMPLE_TOOLS),
    ],
)
def test_the_offline_test_model_runs_nothing_that_changes_this_machine(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    work, env = _tripwire(tmp_path)
    done = subprocess_toolnexus(*command, stdin="go\n", env=env, cwd=work)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "search_docs" in done.stdout  # the user's tools were called
    assert list(work.iterdir()) == []  # no file "a" (write), nothing else
    assert not (tmp_path / "bash-ran").exists()  # bash -c a never ran


def test_run_code_with_the_test_model_calls_bash_and_write_when_asked(tmp_path: Path) -> None:
    work, env = _tripwire(tmp_path)
    done = subprocess_toolnexus(
        "run-code", "--model", "test", "--yes", "--tools", EXAMPLE_TOOLS, env=env, cwd=work
    )
    assert done.returncode == 0, done.stderr
    assert (work / "a").read_text() == "a" and (tmp_path / "bash-ran").exists()
