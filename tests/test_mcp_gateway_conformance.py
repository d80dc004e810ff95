"""The official MCP conformance suite's 32 server scenarios against the gateway.

``@modelcontextprotocol/conformance`` 0.1.16 (``conformance server --url ... --scenario X``)
runs each scenario against (a) our upstream fixture server alone (``mcp_conformance_server.py``),
(b) ``toolnexus mcp serve --mode both`` in front of it, (c) ``--mode code`` in front of it, all
over streamable HTTP on 127.0.0.1. The suite's fixtures expect their tools and prompts under
their own names, so the upstream is configured with ``"prefix": false``.

Every scenario the upstream passes alone must pass through the gateway in ``--mode both``; in
``--mode code`` the scenarios that apply (those that call no upstream tool: the gateway offers
``run_code`` only) must pass. The last test prints the table of scenario results per mode.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import free_port, listening
from npm_tools import install, node, package

HERE = Path(__file__).parent
SCENARIOS = [
    "server-initialize",
    "logging-set-level",
    "ping",
    "completion-complete",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-with-logging",
    "tools-call-error",
    "tools-call-with-progress",
    "tools-call-sampling",
    "tools-call-elicitation",
    "json-schema-2020-12",
    "elicitation-sep1034-defaults",
    "server-sse-polling",
    "server-sse-multiple-streams",
    "elicitation-sep1330-enums",
    "resources-list",
    "resources-read-text",
    "resources-read-binary",
    "resources-templates-read",
    "resources-subscribe",
    "resources-unsubscribe",
    "prompts-list",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-embedded-resource",
    "prompts-get-with-image",
    "dns-rebinding-protection",
]
CALLS_AN_UPSTREAM_TOOL = {
    s
    for s in SCENARIOS
    if s.startswith(("tools-call-", "elicitation-"))
    or s in ("json-schema-2020-12", "server-sse-polling")
}
"""Scenarios that call (or list) an upstream tool by its name: they do not apply to
``--mode code``, whose only tools are the gateway's own (``run_code``)."""
MODES = ("upstream", "both", "code")
RESULTS: dict[tuple[str, str], str] = {}


@pytest.fixture(scope="module")
def suite() -> Path:
    folder, why = install()
    if why is not None:
        pytest.skip(f"the conformance suite could not be installed: {why}")
    return folder


def _start(command: list[str], port: int) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if not listening(port, process, seconds=60):
        process.kill()
        pytest.fail(f"{command[1:3]} did not start: {process.communicate()[1][-2000:]!r}")
    return process


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    if process.stderr is not None:
        process.stderr.close()


@pytest.fixture(scope="module")
def urls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The upstream fixture server and the gateway in both modes in front of it."""
    folder = tmp_path_factory.mktemp("conformance")
    started = []
    try:
        port = free_port()
        started.append(
            _start([sys.executable, str(HERE / "mcp_conformance_server.py"), str(port)], port)
        )
        upstream = f"http://127.0.0.1:{port}/mcp"
        config = folder / "gateway.json"
        config.write_text(json.dumps({"mcpServers": {"fx": {"url": upstream, "prefix": False}}}))
        found = {"upstream": upstream}
        for mode in ("both", "code"):
            port = free_port()
            serve = ["mcp", "serve", "--config", str(config), "--transport", "http"]
            command = [sys.executable, "-m", "toolnexus.cli", *serve, "--port", str(port)]
            started.append(_start([*command, "--mode", mode], port))
            found[mode] = f"http://127.0.0.1:{port}/mcp"
        yield found
    finally:
        for process in started:
            _stop(process)


def run_scenario(suite: Path, url: str, scenario: str, where: Path) -> tuple[str, str]:
    """``(verdict, summary)``: the suite's verdict on ``scenario`` against ``url``, from its
    own ``Passed: x/y, n failed, w warnings`` line: ``"pass"`` (no check failed, no warning),
    ``"warn"`` (no check failed, but the suite warned: a SHOULD not met) or ``"FAIL"``."""
    cli = package(suite, "@modelcontextprotocol/conformance") / "dist" / "index.js"
    done = subprocess.run(
        [str(node(suite)), str(cli), "server", "--url", url, "--scenario", scenario],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=where,
        check=False,
    )
    output = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)
    verdict = re.search(r"Passed: (\d+)/(\d+), (\d+) failed, (\d+) warnings", output)
    if verdict is None:
        return "FAIL", f"no verdict (exit {done.returncode}): {output[-1500:]}"
    failed, warned = int(verdict.group(3)), int(verdict.group(4))
    notes = [
        line.strip()
        for line in output.splitlines()
        if "FAILURE" in line or "WARNING" in line or "Error" in line
    ]
    summary = verdict.group(0) + ("\n" + "\n".join(notes[:10]) if notes else "")
    return ("FAIL" if failed else "warn" if warned else "pass"), summary


def _judge(suite: Path, urls: dict[str, str], mode: str, scenario: str, where: Path) -> str:
    key = (mode, scenario)
    if key not in RESULTS:
        verdict, summary = run_scenario(suite, urls[mode], scenario, where)
        RESULTS[key] = verdict
        RESULTS[(f"{mode}:why", scenario)] = summary
    return RESULTS[key]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_upstream_fixture_passes_alone(
    scenario: str, suite: Path, urls: dict[str, str], tmp_path: Path
) -> None:
    verdict = _judge(suite, urls, "upstream", scenario, tmp_path)
    assert verdict != "FAIL", RESULTS[("upstream:why", scenario)]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_a_scenario_passes_through_the_gateway_in_both_mode(
    scenario: str, suite: Path, urls: dict[str, str], tmp_path: Path
) -> None:
    alone = _judge(suite, urls, "upstream", scenario, tmp_path)
    if alone == "FAIL":
        pytest.skip("the upstream fixture does not pass it alone")
    verdict = _judge(suite, urls, "both", scenario, tmp_path)
    assert verdict != "FAIL", RESULTS[("both:why", scenario)]
    if alone == "pass":  # what the upstream meets alone, the gateway meets too
        assert verdict == "pass", RESULTS[("both:why", scenario)]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s not in CALLS_AN_UPSTREAM_TOOL])
def test_a_scenario_that_applies_passes_through_the_gateway_in_code_mode(
    scenario: str, suite: Path, urls: dict[str, str], tmp_path: Path
) -> None:
    verdict = _judge(suite, urls, "code", scenario, tmp_path)
    assert verdict == "pass", RESULTS[("code:why", scenario)]


@pytest.mark.timeout(900)
def test_the_scenario_table(
    suite: Path, urls: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every scenario in every mode (those not run yet are run now), printed as a table."""
    rows = []
    for scenario in SCENARIOS:
        cells = []
        for mode in MODES:
            if mode == "code" and scenario in CALLS_AN_UPSTREAM_TOOL:
                cells.append("n/a")
                continue
            verdict = _judge(suite, urls, mode, scenario, tmp_path)
            cells.append(verdict)
        rows.append((scenario, *cells))
    width = max(len(s) for s in SCENARIOS)
    lines = [f"{'scenario':<{width}}  {'upstream':<9} {'both':<9} code", "-" * (width + 34)]
    lines += [f"{s:<{width}}  {u:<9} {b:<9} {c}" for s, u, b, c in rows]
    for mode in MODES:
        column = [row[1 + MODES.index(mode)] for row in rows]
        lines.append(
            f"{mode}: {column.count('pass')} of {len(SCENARIOS)} pass, {column.count('warn')} "
            f"warn (no check failed, a SHOULD not met), {column.count('n/a')} n/a, "
            f"{column.count('FAIL')} FAIL"
        )
    warned = [(m, s) for m in MODES for s in SCENARIOS if RESULTS.get((m, s)) == "warn"]
    lines += [f"warn {m} {s}: {RESULTS[(f'{m}:why', s)]}" for m, s in warned]
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    both_failures = [s for s, u, b, _ in rows if u != "FAIL" and b == "FAIL"]
    assert not both_failures, both_failures
