"""The client against servers less forgiving than OpenAI's: a scripted endpoint that reproduces
what a real llama-cpp-python server does (see ``fake_provider.LLAMA_CPP``), plus retries,
timeouts, cut-off and endless streams, unknown usage, partial results, and the event loop
staying responsive while runs start. Real HTTP on 127.0.0.1, the official SDKs as clients."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Iterator
from typing import Any

import pytest

from fake_provider import LLAMA_CPP, VALIDATION_DUMP, FakeProvider, Turn
from test_client import client_for, run, tool_results
from toolnexus import ToolHints, tool
from toolnexus.client import create_client
from toolnexus.errors import ConfigurationError, ProviderError

STYLES = ["openai", "anthropic"]


@pytest.fixture
def llama() -> Iterator[FakeProvider]:
    server = FakeProvider(quirks=LLAMA_CPP).start()
    yield server
    server.stop()


side_effects: list[str] = []


@tool(hints=ToolHints(read_only=True))
def lookup(city: str) -> str:
    """Look up a city."""
    side_effects.append(city)
    return f"{city}: sunny"


@pytest.mark.parametrize("stream", [False, True])
async def test_a_multi_turn_tool_loop_works_against_a_llama_cpp_server(
    llama: FakeProvider, stream: bool
) -> None:
    """Turn 2 resends turn 1's tool-only assistant message: with content null it was a 500;
    streamed with tools it was an empty 200 (now asked again whole); without tool_choice the
    model never saw its tools."""
    llama.script(
        Turn(calls=[("c1", "lookup", {"city": "Oslo"})]),
        Turn(calls=[("c2", "lookup", {"city": "Rome"})]),
        Turn(text="Oslo and Rome are sunny."),
    )
    side_effects.clear()
    result = await run(client_for(llama, "openai"), "weather?", tools=[lookup], stream=stream)
    assert result.status == "done" and result.text == "Oslo and Rome are sunny."
    assert side_effects == ["Oslo", "Rome"]
    assert all(r["tool_choice"] == "auto" for r in llama.requests)
    for request in llama.requests:
        for message in request["messages"]:
            assert message.get("content") is not None
    assert str(result.usage) == "usage unknown (the server did not report it)"
    assert result.usage.total is None


async def test_history_with_null_content_is_sent_as_empty_text(llama: FakeProvider) -> None:
    llama.script(Turn(text="fine"))
    history = [
        {"role": "user", "content": "earlier"},
        {"role": "assistant", "content": None, "tool_calls": []},
    ]
    result = await client_for(llama, "openai").run("now", history=history)
    assert result.text == "fine"
    assert llama.requests[0]["messages"][1]["content"] == ""


@pytest.mark.parametrize("style", STYLES)
async def test_a_stream_that_stops_without_finishing_is_an_error_not_a_success(
    provider: FakeProvider, style: str
) -> None:
    provider.script(Turn(text="half an ans", cut=True))
    with pytest.raises(ProviderError, match="cut off"):
        await run(client_for(provider, style), "hi", stream=True)


@pytest.mark.parametrize("style", STYLES)
async def test_tool_choice_is_checked_and_applies_to_the_first_turn(
    provider: FakeProvider, style: str
) -> None:
    provider.script(Turn(calls=[("c1", "lookup", {"city": "Oslo"})]), Turn(text="done"))
    client = client_for(provider, style, tool_choice="lookup")
    result = await client.run("go", tools=[lookup])
    assert result.status == "done"
    first, second = (r.get("tool_choice") for r in provider.requests)
    if style == "openai":
        assert first == {"type": "function", "function": {"name": "lookup"}}
        assert second == "auto"
    else:
        assert first == {"type": "tool", "name": "lookup"}
        assert second is None
    with pytest.raises(ConfigurationError, match="tool_choice='ghost' cannot be honoured"):
        await client_for(provider, style, tool_choice="ghost").run("go", tools=[lookup])
    assert len(provider.requests) == 2  # refused before any request


async def test_tool_choice_every_turn_and_the_wire_words(provider: FakeProvider) -> None:
    provider.script(
        Turn(calls=[("c1", "lookup", {"city": "a"})]), Turn(calls=[("c2", "lookup", {"city": "b"})])
    )
    client = client_for(
        provider, "anthropic", tool_choice="required", tool_choice_every_turn=True, max_turns=2
    )
    result = await client.run("go", tools=[lookup])
    assert result.status == "incomplete"  # a required choice every turn: only max_turns ends it
    assert [r["tool_choice"] for r in provider.requests] == [{"type": "any"}] * 2
    with pytest.raises(ConfigurationError, match="request_params may not set 'tool_choice'"):
        client_for(provider, "openai", tool_choice="auto", request_params={"tool_choice": "none"})
    with pytest.raises(ConfigurationError, match="cannot be honoured"):
        await client_for(provider, "openai", tool_choice="required").run("go", tools=[])


@pytest.mark.parametrize("style", STYLES)
async def test_a_500_is_not_retried_and_is_one_line_with_the_detail_kept(
    provider: FakeProvider, style: str
) -> None:
    provider.script(Turn(status=500), Turn(text="never asked"))
    with pytest.raises(ProviderError) as info:
        await client_for(provider, style, retries=2).run("hi")
    assert len(provider.requests) == 1
    assert "\n" not in info.value.message and len(info.value.message) < 400
    assert "answered HTTP 500: scripted 500" in info.value.message
    assert info.value.detail and "scripted 500" in info.value.detail


async def test_a_validation_dump_becomes_one_line(llama: FakeProvider) -> None:
    history = [{"role": "assistant", "content": None}]
    llama.quirks = frozenset({"null_content_500"})
    client = client_for(llama, "openai")
    client._config.style.opening = lambda h, p: [*h, {"role": "user", "content": p}]  # type: ignore[method-assign]
    with pytest.raises(ProviderError) as info:
        await client.run("hi", history=history)
    assert len(info.value.message) < 400 and "\n" not in info.value.message
    assert info.value.detail is not None and VALIDATION_DUMP.splitlines()[0] in info.value.detail


@pytest.mark.parametrize("status", [429, 503, 529])
async def test_not_now_answers_are_retried(provider: FakeProvider, status: int) -> None:
    provider.script(Turn(status=status), Turn(text="hello"))
    result = await client_for(provider, "openai", retries=2).run("hi")
    assert result.text == "hello" and len(provider.requests) == 2


async def test_a_timeout_says_so_and_is_not_retried_on_a_single_slot_server(
    llama: FakeProvider,
) -> None:
    llama.script(Turn(text="slow", delay=1.5), Turn(text="fast"))
    client = client_for(llama, "openai", timeout=0.3, retries=2)
    started = time.monotonic()
    with pytest.raises(ProviderError, match=r"gave no answer within 0\.3 s") as info:
        await client.run("hi")
    assert info.value.status is None
    assert time.monotonic() - started < 1.2  # no retry queued behind the busy slot
    await asyncio.sleep(1.5)
    assert len(llama.requests) == 1


async def test_timeouts_are_retried_when_asked(provider: FakeProvider) -> None:
    provider.script(Turn(text="slow", delay=1.0), Turn(text="fast"))
    client = client_for(provider, "openai", timeout=0.3, retries=1, retry_timeouts=True)
    assert (await client.run("hi")).text == "fast"


async def test_a_runaway_stream_is_cut_off_at_the_turn_timeout(provider: FakeProvider) -> None:
    provider.script(Turn(endless=True))
    client = client_for(provider, "openai", turn_timeout=1.0)
    started = time.monotonic()
    with pytest.raises(ProviderError, match=r"did not finish its turn within 1 s"):
        await run(client, "hi", stream=True)
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("style", STYLES)
async def test_an_error_at_turn_two_carries_the_run_so_far(
    provider: FakeProvider, style: str
) -> None:
    provider.script(Turn(calls=[("c1", "lookup", {"city": "Oslo"})]), Turn(status=500))
    side_effects.clear()
    with pytest.raises(ProviderError) as info:
        await client_for(provider, style, retries=0).run("go", tools=[lookup])
    partial = info.value.partial
    assert partial is not None and partial.status == "error"
    assert side_effects == ["Oslo"]  # the tool ran, and the partial result says so
    assert [(r.name, r.output) for r in partial.tool_calls] == [("lookup", "Oslo: sunny")]
    assert dict(tool_results(partial, style)) == {"c1": "Oslo: sunny"}
    assert [e.type for e in partial.session.events][-1] == "turn_end"


async def test_a_failed_call_is_marked_for_the_model_in_the_openai_style(
    provider: FakeProvider,
) -> None:
    @tool(hints=ToolHints(read_only=True))
    def boom() -> str:
        """Fail."""
        raise RuntimeError("disk on fire")

    provider.script(
        Turn(calls=[("c1", "boom", {}), ("c2", "lookup", {"city": "x"})]), Turn(text="ok")
    )
    result = await client_for(provider, "openai").run("go", tools=[boom, lookup])
    assert dict(tool_results(result, "openai")) == {"c1": "Error: disk on fire", "c2": "x: sunny"}


async def test_runs_do_not_stall_the_event_loop(provider: FakeProvider) -> None:
    """Building an SDK client (TLS context, CA bundle) costs tens of milliseconds; runs must not
    spend that on the event loop, or every other run and tool in the process stalls."""
    import openai

    costs = []
    for _ in range(3):
        started = time.perf_counter()
        openai.AsyncOpenAI(base_url=provider.url, api_key="k")
        costs.append(time.perf_counter() - started)
    build = sorted(costs)[1]

    provider.router = lambda body: Turn(text="hi")
    options: dict[str, Any] = {"base_url": provider.url + "/v1", "model": "m", "api_key": "k"}
    options["code_mode"] = "native"  # the wire path alone: no Code Mode set-up per run
    async with create_client(**options) as warm:  # the SDK's first-use imports, once a process
        await warm.run("warm up")
    worst_gaps = []
    for _ in range(3):  # the least of three trials: a stray pause elsewhere is not the runs
        client = create_client(**options)  # a new client: it makes its own SDK client
        worst_gaps.append(await _longest_pause_during(client))
        await client.aclose()
    assert min(worst_gaps) < build, (worst_gaps, build)


async def _longest_pause_during(client: Any) -> float:
    """The longest the event loop went without serving a 1 ms ticker while 15 runs went."""
    gaps: list[float] = []
    stop = asyncio.Event()

    async def ticker() -> None:
        last = time.perf_counter()
        while not stop.is_set():
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    gc.collect()
    gc.disable()  # a collection pause is not what this measures
    try:
        ticking = asyncio.ensure_future(ticker())
        await asyncio.sleep(0.05)
        for _ in range(3):
            await asyncio.gather(*(client.run("hello") for _ in range(5)))
        stop.set()
        await ticking
    finally:
        gc.enable()
    return max(gaps)


async def test_the_re_ask_after_an_empty_stream_needs_no_retry(llama: FakeProvider) -> None:
    """llama-cpp-python closes the connection its empty stream came on a moment later; the
    re-ask reused that pooled connection and failed unless a retry was left."""
    llama.script(Turn(calls=[("c1", "lookup", {"city": "Oslo"})]), Turn(text="sunny"))
    client = create_client(
        base_url=llama.url + "/v1", model="m", api_key="none", retries=0, max_turns=2
    )
    result = await run(client, "weather?", tools=[lookup], stream=True)
    assert result.status == "done" and result.text == "sunny"


@pytest.mark.parametrize("style", ["openai", "anthropic"])
async def test_a_connection_lost_mid_answer_says_the_answer_was_cut_off(
    provider: FakeProvider, style: str
) -> None:
    provider.script(Turn(text="The weather in Oslo is", lost=True))
    client = client_for(provider, style)
    with pytest.raises(ProviderError, match=r"mid-stream.*'The weather in Oslo is'.*cut off"):
        await run(client, "weather?", stream=True)


async def test_a_500_after_a_forced_choice_names_the_choice(provider: FakeProvider) -> None:
    provider.script(Turn(status=500))
    client = client_for(provider, "openai", tool_choice="required")
    with pytest.raises(ProviderError, match=r"HTTP 500.*forced a tool choice.*'required'"):
        await client.run("weather?", tools=[lookup])


@pytest.mark.parametrize(("stream", "params"), [(False, {}), (True, {"max_tokens": 50})])
async def test_the_turn_timeout_says_what_was_stopped(
    provider: FakeProvider, stream: bool, params: dict[str, Any]
) -> None:
    provider.script(Turn(text="slow", delay=2))
    client = client_for(provider, "openai", turn_timeout=0.3, request_params=params)
    with pytest.raises(ProviderError, match="turn_timeout") as info:
        await run(client, "hi", stream=stream)
    message = info.value.message
    assert "cut off" not in message
    assert ("may still be generating" in message) is not stream
    assert ("set max_tokens" in message) is (not params)
