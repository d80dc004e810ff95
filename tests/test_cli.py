"""The ``toolnexus`` command, run as a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fake_provider import FakeProvider, Turn
from toolnexus.codemode import render_sdk

ROOT = Path(__file__).parent.parent
EXAMPLE_TOOLS = f"{ROOT / 'examples' / 'tools.py'}:TOOLS"


def toolnexus(
    *args: str, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "toolnexus.cli", *args]
    full_env = {**os.environ, "COLUMNS": "120", **(env or {})}
    return subprocess.run(
        command, input=stdin, capture_output=True, text=True, timeout=120, env=full_env, check=False
    )


def test_run_code_runs_the_example_and_shows_what_ran_together() -> None:
    done = toolnexus(
        "run-code", str(ROOT / "examples/programs/research.py"), "--tools", EXAMPLE_TOOLS
    )
    assert done.returncode == 0, done.stderr
    assert "what ran together: [1]  ->  [2 3 4]  ->  [5]" in done.stdout
    assert '"note": "saved note 1"' in done.stdout
    assert "log: found: audit, code-mode, sandbox" in done.stdout


def test_run_code_in_javascript() -> None:
    done = toolnexus(
        "run-code", str(ROOT / "examples/programs/research.js"), "--tools", EXAMPLE_TOOLS
    )
    assert done.returncode == 0, done.stderr
    assert "what ran together: [1]  ->  [2 3 4]  ->  [5]" in done.stdout


def test_a_failing_program_exits_1_with_its_error_and_calls(tmp_path: Path) -> None:
    program = tmp_path / "bad.py"
    program.write_text("await tools.read_doc({'name': 'nope'})\n")
    done = toolnexus("run-code", str(program), "--tools", EXAMPLE_TOOLS)
    assert done.returncode == 1
    assert "error (exception)" in done.stdout and "no document named 'nope'" in done.stdout
    assert '"status": "error"' in done.stdout


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
    ],
)
def test_usage_errors_are_one_line_and_exit_2(args: list[str], message: str) -> None:
    done = toolnexus(*args)
    assert done.returncode == 2
    assert message in done.stdout
    assert "Traceback" not in done.stdout + done.stderr


def test_sdk_prints_what_the_model_would_see() -> None:
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import tools as example_tools  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    for language in ("python", "typescript"):
        done = toolnexus("sdk", "--language", language, "--tools", EXAMPLE_TOOLS)
        assert done.returncode == 0
        assert done.stdout == render_sdk(language, example_tools.TOOLS) + "\n"


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    server = FakeProvider().start()
    yield server
    server.stop()


def test_chat_streams_text_and_shows_tool_calls(provider: FakeProvider) -> None:
    provider.script(
        Turn(text="Searching.", calls=[("c1", "search_docs", {"query": "sandbox"})]),
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
    assert "Searching." in done.stdout and "It runs in Monty." in done.stdout
    assert "→ search_docs" in done.stdout and "✓ search_docs" in done.stdout
    assert provider.requests[0]["messages"][-1] == {
        "role": "user",
        "content": "where do programs run?",
    }
