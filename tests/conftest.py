"""Shared fixtures."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from fake_provider import FakeProvider
from helpers import Probe, RuntimeFactory
from toolnexus.codemode.runtimes import CodeRuntime, MontyRuntime, V8Runtime


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
