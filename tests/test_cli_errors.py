"""One line and the right exit code: every command's usage and config errors exit 2 with a
single line on stderr, bare commands print their help, a provider error names its root cause
(DNS, refused, TLS) without a traceback (``--debug`` shows it), and every missing extra says
``install toolnexus[<extra>]``."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from fake_provider import FakeProvider
from test_cli import EXAMPLE_TOOLS, ROOT, subprocess_toolnexus, toolnexus  # noqa: F401
from toolnexus import create_client
from toolnexus.cli import DESCRIPTION, _parser
from toolnexus.errors import MissingExtraError, ProviderError

PROGRAM = str(ROOT / "examples/programs/research.py")


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port  # closed again: nothing listens there


def _single_line(done: Any) -> str:
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("toolnexus: ") and "Traceback" not in done.stderr
    return str(lines[0])


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["run-code"], "needs a program FILE"),
        (["run-code", "nope.py"], "no program file nope.py"),
        (["run-code", PROGRAM, "--max-parallel", "0"], "argument --max-parallel"),
        (["run-code", PROGRAM, "--bogus"], "unrecognized arguments: --bogus"),
        (["sdk", "--language", "cobol"], "argument --language: invalid choice"),
        (["sdk", "--tools", "nomodule_here:TOOLS"], "--tools: cannot import nomodule_here"),
        (["chat"], "the following arguments are required: --model"),
        (["chat", "--model", "m"], "chat needs --base-url"),
        (["view"], "the following arguments are required: FILE"),
        (["view", "missing.jsonl"], "cannot read missing.jsonl"),
        (["mcp", "serve"], "the following arguments are required: --config"),
        (["mcp", "serve", "--config", "missing.json"], "--config: no config file missing.json"),
        (["nosuchcommand"], "invalid choice: 'nosuchcommand'"),
    ],
)
def test_every_commands_usage_error_exits_2_with_one_line(
    toolnexus: Any,  # noqa: F811
    args: list[str],
    said: str,
) -> None:
    done = toolnexus(*args)
    assert done.returncode == 2
    assert said in _single_line(done)


def test_bad_mcp_configs_exit_2_with_one_line(toolnexus: Any, tmp_path: Path) -> None:  # noqa: F811
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"mcpServers": {"x": {"command": 3}}}))
    for args in (
        ["sdk", "--no-builtins", "--mcp", str(bad)],
        ["mcp", "serve", "--config", str(bad)],
    ):
        done = toolnexus(*args)
        assert done.returncode == 2, done.stderr
        assert "command" in _single_line(done)
    notjson = tmp_path / "notjson.json"
    notjson.write_text("{")
    done = toolnexus("sdk", "--mcp", str(notjson))
    assert done.returncode == 2 and "--mcp: cannot read" in _single_line(done)


def test_bare_commands_print_their_help(toolnexus: Any) -> None:  # noqa: F811
    bare = toolnexus()
    assert bare.returncode == 2 and "run-code" in bare.stdout and "usage: toolnexus" in bare.stdout
    assert "required" not in bare.stdout + bare.stderr
    mcp = toolnexus("mcp")
    assert mcp.returncode == 2 and "serve" in mcp.stdout and "usage: toolnexus mcp" in mcp.stdout


def test_the_help_description_is_whole_sentences_without_markup(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        _parser().parse_args(["--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert " ".join(DESCRIPTION.split()) in shown and DESCRIPTION.endswith(".")
    assert "`" not in shown


def test_run_code_without_tools_says_how_to_give_them(toolnexus: Any, tmp_path: Path) -> None:  # noqa: F811
    program = tmp_path / "p.py"
    program.write_text("await tools.search_docs({'query': 'x'})\n")
    done = toolnexus("run-code", str(program), "--no-builtins")
    assert done.returncode == 1
    assert "error (type_error)" in done.stderr and "--tools FILE.py:TOOLS" in done.stderr
    with_tools = toolnexus("run-code", str(program), "--no-builtins", "--tools", EXAMPLE_TOOLS)
    assert with_tools.returncode == 0, with_tools.stderr


def test_program_errors_go_to_stderr_unwrapped_when_piped(tmp_path: Path) -> None:
    program = tmp_path / "p.py"
    long_message = "x" * 300
    program.write_text(f"raise ValueError({long_message!r})\n")
    done = subprocess_toolnexus("run-code", str(program), "--no-builtins", env={"COLUMNS": "80"})
    assert done.returncode == 1 and "error" not in done.stdout
    assert done.stderr.startswith("error (exception)")
    assert any(long_message in line for line in done.stderr.splitlines())  # not wrapped at 80


@pytest.mark.parametrize(
    ("url", "cause"),
    [
        ("http://nonexistent.invalid/v1", "the DNS lookup of nonexistent.invalid failed"),
        ("http://127.0.0.1:{port}/v1", "the connection to 127.0.0.1:{port} was refused"),
    ],
)
async def test_a_provider_error_names_its_root_cause_in_its_first_line(
    url: str, cause: str
) -> None:
    port = _closed_port()
    client = create_client(model="m", base_url=url.format(port=port), api_key="k", retries=0)
    with pytest.raises(ProviderError) as failed:
        await client.run("hi")
    first = str(failed.value).splitlines()[0]
    assert cause.format(port=port) in first and "Connection error" not in first


async def test_a_tls_failure_is_named(provider: FakeProvider) -> None:
    tls_url = provider.url.replace("http://", "https://") + "/v1"  # TLS to a plain HTTP server
    client = create_client(model="m", base_url=tls_url, api_key="k", retries=0)
    with pytest.raises(ProviderError, match="TLS failed"):
        await client.run("hi")


def test_the_cli_prints_the_cause_in_one_line_and_debug_shows_the_chain() -> None:
    port = _closed_port()
    url = f"http://127.0.0.1:{port}/v1"
    args = ["chat", "--base-url", url, "--model", "m", "--no-builtins", "--api-key", "k"]
    done = subprocess_toolnexus(*args, stdin="hi\n")
    assert done.returncode == 0  # the chat stayed open after the failed prompt, and ended
    assert "Traceback" not in done.stderr
    failed = [ln for ln in done.stderr.splitlines() if "this prompt failed" in ln]
    assert len(failed) == 1 and f"127.0.0.1:{port} was refused" in failed[0]
    run = subprocess_toolnexus("--debug", "run-code", "--model", "test", "--tools", "nomod:X")
    assert run.returncode == 2 and "Traceback" in run.stderr and "UsageError" in run.stderr


def test_chat_goes_on_after_a_failed_prompt(provider: FakeProvider, toolnexus: Any) -> None:  # noqa: F811
    from fake_provider import Turn

    provider.script(
        Turn(status=503), Turn(status=503), Turn(status=503), Turn(text="second answer")
    )
    done = toolnexus(
        "chat", "--base-url", provider.url + "/v1", "--model", "m", "--no-builtins",
        "--api-key", "k", stdin="first\nsecond\n",
    )  # fmt: skip
    assert done.returncode == 0
    assert "this prompt failed: the model at" in done.stderr and "HTTP 503" in done.stderr
    assert "second answer" in done.stdout


def test_chat_and_run_code_work_offline_with_the_test_model(toolnexus: Any) -> None:  # noqa: F811
    chat = toolnexus(
        "chat", "--model", "test", "--no-builtins", "--tools", EXAMPLE_TOOLS,
        "--code-mode", "native", stdin="go\n",
    )  # fmt: skip
    assert chat.returncode == 0, chat.stderr
    assert "→ search_docs" in chat.stdout and '"save_note": "saved note' in chat.stdout
    run = toolnexus("run-code", "--model", "test", "--no-builtins", "--tools", EXAMPLE_TOOLS)
    assert run.returncode == 0, run.stderr
    assert "program (written by TestModel)" in run.stdout and "what ran together" in run.stdout


@pytest.mark.parametrize(
    ("module", "blocked", "extra"),
    [
        ("toolnexus.temporal", "temporalio", "temporal"),
        ("toolnexus.mcp", "mcp", "mcp"),
    ],
)
def test_importing_without_the_extra_names_it(module: str, blocked: str, extra: str) -> None:
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules[{blocked!r}] = None  # as if the extra were not installed
        try:
            import {module}
        except ImportError as exc:
            print(type(exc).__name__, exc)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert f"MissingExtraError {module}" in done.stdout
    assert f"install toolnexus[{extra}]" in done.stdout, done.stdout + done.stderr


def test_every_missing_extra_says_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(MissingExtraError, match=r"install toolnexus\[anthropic\]"):
        create_client(model="anthropic:claude-sonnet-4-5", api_key="k")
    monkeypatch.setitem(sys.modules, "mcp", None)
    monkeypatch.delitem(sys.modules, "toolnexus.mcp", raising=False)
    from toolnexus.cli import main

    assert main(["mcp", "serve", "--config", "x.json"]) == 2
