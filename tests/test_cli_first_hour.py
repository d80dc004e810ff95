"""The first hour with the ``toolnexus`` command and the library: versions, help, quiet logging,
time limits, Ctrl-C, syntax errors and a chat that survives its second prompt."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fake_provider import LLAMA_CPP, FakeProvider, Turn
from test_cli import EXAMPLE_TOOLS, ROOT, subprocess_toolnexus, toolnexus  # noqa: F401
from toolnexus import __version__
from toolnexus.cli import UsageError, _parser


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        _parser().parse_args(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"toolnexus {__version__}"


def _actions(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.Action]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                for inner, sub_action in _actions(sub):
                    yield f"{name} {inner}", sub_action
        else:
            yield ",".join(action.option_strings) or action.dest, action


def test_every_option_has_help() -> None:
    missing = [name for name, action in _actions(_parser()) if not action.help]
    assert missing == []


def test_a_raising_tool_prints_nothing_on_stderr_by_default(tmp_path: Path) -> None:
    script = tmp_path / "quiet.py"
    script.write_text(
        textwrap.dedent(
            """
            import asyncio
            from toolnexus import ToolCall, run_batch, tool

            @tool
            def boom() -> str:
                '''Fail.'''
                raise RuntimeError("disk on fire")

            out = asyncio.run(run_batch([ToolCall("1", "boom", {})], [boom]))
            print(out[0].error["message"])
            """
        )
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0 and done.stdout.strip() == "disk on fire"
    assert done.stderr == ""  # no traceback: a library configures no output


def test_verbose_shows_tool_failures_with_their_traceback(tmp_path: Path) -> None:
    program = tmp_path / "p.py"
    program.write_text(
        "try:\n    await tools.search_docs({'query': 'x', 'fail': True})\nexcept ToolError:\n    1\n"
    )
    tools = tmp_path / "t.py"
    tools.write_text(
        textwrap.dedent(
            """
            from toolnexus import ToolHints, tool

            @tool(hints=ToolHints(read_only=True))
            def search_docs(query: str, fail: bool = False) -> str:
                '''Search.'''
                if fail:
                    raise RuntimeError("index is gone")
                return query
            TOOLS = [search_docs]
            """
        )
    )
    quiet = subprocess_toolnexus(
        "run-code", str(program), "--no-builtins", "--tools", f"{tools}:TOOLS"
    )
    assert quiet.returncode == 0 and "Traceback" not in quiet.stderr
    loud = subprocess_toolnexus(
        "-vv", "run-code", str(program), "--no-builtins", "--tools", f"{tools}:TOOLS"
    )
    assert loud.returncode == 0
    assert "index is gone" in loud.stderr and "Traceback" in loud.stderr


def test_run_code_timeout_bounds_the_program(toolnexus: Any, tmp_path: Path) -> None:  # noqa: F811
    program = tmp_path / "slow.py"
    program.write_text("while True:\n    pass\n")
    started = time.monotonic()
    done = toolnexus("run-code", str(program), "--no-builtins", "--timeout", "1")
    assert done.returncode == 1
    assert "error (timeout)" in done.stderr and "1 s" in done.stderr
    assert time.monotonic() - started < 15
    bad = toolnexus("run-code", str(program), "--timeout", "-3")
    assert bad.returncode == 2 and "argument --timeout" in bad.stderr


def test_a_syntax_error_is_reported_as_one_with_its_position(
    toolnexus: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    program = tmp_path / "broken.py"
    program.write_text("x = 1\nresult = (x +\nprint(result)\n")
    done = toolnexus("run-code", str(program), "--no-builtins")
    assert done.returncode == 1
    assert "SyntaxError" in done.stderr and "line 2" in done.stderr
    assert "type-check" not in done.stderr and "invalid-syntax" not in done.stderr


def test_the_calls_list_after_a_failure_is_labelled(toolnexus: Any, tmp_path: Path) -> None:  # noqa: F811
    program = tmp_path / "fails.py"
    program.write_text("await tools.search_docs({'query': 'a'})\nraise ValueError('late')\n")
    done = toolnexus("run-code", str(program), "--no-builtins", "--tools", EXAMPLE_TOOLS)
    assert done.returncode == 1
    assert "tool calls the program started, and how each ended:" in done.stderr


def test_ctrl_c_says_which_calls_had_started_and_finished(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    tools = tmp_path / "slow_tools.py"
    tools.write_text(
        textwrap.dedent(
            f"""
            import asyncio, pathlib
            from toolnexus import ToolHints, tool

            @tool(hints=ToolHints(read_only=True))
            async def quick(n: int) -> int:
                '''Quick.'''
                return n

            @tool(hints=ToolHints(read_only=True))
            async def slow(n: int) -> int:
                '''Slow.'''
                pathlib.Path({str(marker)!r}).write_text("x")
                await asyncio.sleep(60)
                return n
            TOOLS = [quick, slow]
            """
        )
    )
    program = tmp_path / "p.py"
    program.write_text("await tools.quick({'n': 1})\nawait tools.slow({'n': 2})\n")
    command = [sys.executable, "-m", "toolnexus.cli", "run-code", str(program), "--no-builtins"]
    command += ["--tools", f"{tools}:TOOLS"]
    child = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "120"},
    )
    try:
        for _ in range(600):
            if marker.exists():
                break
            time.sleep(0.05)
        assert marker.exists(), "the slow call never started"
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=30)
    finally:
        child.kill()
    assert child.returncode == 130
    assert "interrupted: 2 tool calls had started, 1 had finished" in out
    assert "#1 quick" in out and "finished" in out and "#2 slow" in out and "running" in out
    assert "Traceback" not in err


@pytest.fixture
def llama() -> Iterator[FakeProvider]:
    server = FakeProvider(quirks=LLAMA_CPP).start()
    yield server
    server.stop()


def test_chat_survives_its_second_prompt_on_a_llama_cpp_server(
    toolnexus: Any,  # noqa: F811
    llama: FakeProvider,
) -> None:
    llama.script(
        Turn(calls=[("c1", "search_docs", {"query": "sandbox"})]),
        Turn(text="It runs in Monty."),
        Turn(text="Yes, also V8."),
    )
    done = toolnexus(
        "chat",
        "--base-url",
        llama.url + "/v1",
        "--model",
        "m",
        "--code-mode",
        "native",
        "--no-builtins",
        "--tools",
        EXAMPLE_TOOLS,
        "--max-tokens",
        "64",
        "--param",
        "temperature=0.2",
        "--param",
        'stop=["END"]',
        "--turn-timeout",
        "30",
        stdin="where do programs run?\nanything else?\n",
        env={"OPENAI_API_KEY": "k"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "It runs in Monty." in done.stdout and "Yes, also V8." in done.stdout
    last = llama.requests[-1]
    assert last["max_tokens"] == 64 and last["temperature"] == 0.2 and last["stop"] == ["END"]
    assert all(m.get("content") is not None for m in last["messages"])


def test_bad_chat_numbers_are_usage_errors(toolnexus: Any) -> None:  # noqa: F811
    for option, value in (
        ("--max-tokens", "0"),
        ("--turn-timeout", "soon"),
        ("--param", "novalue"),
    ):
        with pytest.raises(UsageError, match=option):
            _parser().parse_args(
                ["chat", "--base-url", "http://x/v1", "--model", "m", option, value]
            )


def test_the_docs_install_this_project_not_a_namesake() -> None:
    """``pip install toolnexus`` would fetch an unrelated PyPI project: no install command in
    the README's and docs' code, or in the library's own messages, names it; the README says
    once, clearly, how to install from the clone."""
    import re

    namesake = re.compile(r"pip install [-\w ]*['\"]?toolnexus")
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for block in re.findall(r"```.*?```", page.read_text(encoding="utf-8"), re.DOTALL):
            assert not namesake.search(block), (page, block[:200])
    for module in sorted((ROOT / "src").rglob("*.py")):
        assert not namesake.search(module.read_text(encoding="utf-8")), module
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme.count("not on PyPI") == 1 and "pip install -e '.[openai]'" in readme


def test_run_code_with_an_unreachable_mcp_server_lists_it_and_runs(
    toolnexus: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    import json
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens there once the probe is closed
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"dead": {"url": f"http://127.0.0.1:{port}/mcp"}}}))
    program = tmp_path / "p.py"
    program.write_text("1 + 1\n")
    done = toolnexus("run-code", str(program), "--no-builtins", "--mcp", str(config))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "MCP server 'dead' is left out" in done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1


def test_chat_says_when_a_run_ends_incomplete_and_takes_max_turns_and_tool_choice(
    toolnexus: Any,  # noqa: F811
    llama: FakeProvider,
) -> None:
    llama.script(
        Turn(calls=[("c1", "search_docs", {"query": "a"})]),
        Turn(calls=[("c2", "search_docs", {"query": "b"})]),
        Turn(text="fine"),
    )
    done = toolnexus(
        "chat",
        "--base-url",
        llama.url + "/v1",
        "--model",
        "m",
        "--code-mode",
        "native",
        "--no-builtins",
        "--tools",
        EXAMPLE_TOOLS,
        "--max-turns",
        "2",
        "--tool-choice",
        "required",
        stdin="look it up\nand now?\n",
        env={"OPENAI_API_KEY": "k"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the run ended incomplete: the turn limit (2 model turns, --max-turns)" in done.stdout
    choices = [r["tool_choice"] for r in llama.requests]  # (an empty stream is re-asked)
    assert choices[0] == "required" and choices[-1] == "required"
    assert choices.count("required") == 2 and set(choices) == {"required", "auto"}
    assert "fine" in done.stdout


def test_chat_refuses_a_tool_choice_the_run_does_not_offer(
    toolnexus: Any,  # noqa: F811
    llama: FakeProvider,
) -> None:
    done = toolnexus(
        "chat",
        "--base-url",
        llama.url + "/v1",
        "--model",
        "m",
        "--no-builtins",
        "--tools",
        EXAMPLE_TOOLS,
        "--code-mode",
        "native",
        "--tool-choice",
        "forecast",
        stdin="hi\n",
        env={"OPENAI_API_KEY": "k"},
    )
    assert done.returncode == 2  # the command line's fault: not a failed turn to go on from
    assert "tool_choice='forecast' cannot be honoured" in done.stderr
    assert "Traceback" not in done.stderr and not llama.requests
