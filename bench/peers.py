"""The client loop's cost per tool call against its peers', measured side by side in one run.

Each framework runs the same agent: an in-process model (no network) asks for N no-op tool
calls in one response, the framework runs them and hands the results back, and the model's
second response ends the run. Printed: microseconds per call (medians of interleaved runs) for

* ``toolnexus``: ``client.run`` with ``toolnexus.testing.FunctionModel``; async no-op tool,
  calls capped at 10, results in emitted order, the session log written;
* ``smolagents``: ``ToolCallingAgent`` with a ``Model`` subclass; a sync no-op tool (its calls
  run in a thread pool, with no cap);
* ``pydantic-ai``: ``Agent`` with ``pydantic_ai.models.function.FunctionModel``; async no-op
  tool;
* the floor: ``asyncio.Semaphore(10)`` plus ``asyncio.gather`` over the same calls.

The peers are not dependencies of toolnexus: install them beside it to compare
(``pip install smolagents pydantic-ai-slim``); a framework that is not installed is reported as
such and skipped.

Run: ``python bench/peers.py [--calls 100] [--repeats 7]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

from toolnexus import ToolCall, ToolHints, create_client, tool
from toolnexus.testing import FunctionModel

Runner = Callable[[int], Awaitable[float]]


async def noop_function(n: int) -> int:
    """Return n."""
    return n


noop = tool(hints=ToolHints(read_only=True), name="noop")(noop_function)


async def toolnexus_run(count: int) -> float:
    calls = [ToolCall(f"c{i}", "noop", {"n": i}) for i in range(count)]

    def model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        return calls if messages[-1]["role"] == "user" else "done"

    client = create_client(model=FunctionModel(model), code_mode="native")
    started = time.perf_counter()
    result = await client.run("go", tools=[noop])
    elapsed = time.perf_counter() - started
    assert len(result.tool_calls) == count
    assert result.text == "done"
    return elapsed


async def floor_run(count: int) -> float:
    texts = [json.dumps({"n": i}) for i in range(count)]
    started = time.perf_counter()
    gate = asyncio.Semaphore(10)

    async def one(text: str) -> int:
        async with gate:
            return await noop_function(**json.loads(text))

    results = await asyncio.gather(*(one(t) for t in texts))
    elapsed = time.perf_counter() - started
    assert results == list(range(count))
    return elapsed


def smolagents_runner() -> Runner | str:
    try:
        import smolagents as smol
        from smolagents.models import ChatMessageToolCall, ChatMessageToolCallFunction
        from smolagents.monitoring import LogLevel
    except ImportError:
        return "not installed (pip install smolagents)"

    def smol_noop(n: int) -> int:
        """Return n.

        Args:
            n: A number.
        """
        return n

    with warnings.catch_warnings():  # it warns of a function defined in a function
        warnings.simplefilter("ignore")
        smol_tool = smol.tool(smol_noop)

    def call(index: int, name: str, arguments: dict[str, Any]) -> Any:
        function = ChatMessageToolCallFunction(name=name, arguments=arguments)
        return ChatMessageToolCall(function=function, id=f"c{index}", type="function")

    class Scripted(smol.Model):  # type: ignore[misc]
        def __init__(self, count: int) -> None:
            super().__init__(model_id="scripted")
            self.count = count
            self.asked = 0

        def generate(self, messages: Any, **kwargs: Any) -> Any:
            self.asked += 1
            if self.asked == 1:
                calls = [call(i, "smol_noop", {"n": i}) for i in range(self.count)]
            else:
                calls = [call(self.count, "final_answer", {"answer": "done"})]
            return smol.ChatMessage(role=smol.MessageRole.ASSISTANT, content="", tool_calls=calls)

    async def run(count: int) -> float:
        agent = smol.ToolCallingAgent(
            tools=[smol_tool],
            model=Scripted(count),
            max_steps=3,
            verbosity_level=LogLevel.OFF,
        )
        started = time.perf_counter()
        answer = await asyncio.to_thread(agent.run, "go")
        elapsed = time.perf_counter() - started
        assert answer == "done", answer
        return elapsed

    return run


def pydantic_ai_runner() -> Runner | str:
    try:
        from pydantic_ai import Agent
        from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
        from pydantic_ai.models.function import AgentInfo
        from pydantic_ai.models.function import FunctionModel as PydanticFunctionModel
    except ImportError:
        return "not installed (pip install pydantic-ai-slim)"

    async def run(count: int) -> float:
        def model(messages: list[Any], info: AgentInfo) -> ModelResponse:
            answered = any(isinstance(p, ToolReturnPart) for p in messages[-1].parts)
            if answered:
                return ModelResponse(parts=[TextPart("done")])
            parts = [ToolCallPart("noop", {"n": i}, tool_call_id=f"c{i}") for i in range(count)]
            return ModelResponse(parts=parts)

        agent = Agent(PydanticFunctionModel(model))

        @agent.tool_plain
        async def noop(n: int) -> int:
            """Return n."""
            return n

        started = time.perf_counter()
        result = await agent.run("go")
        elapsed = time.perf_counter() - started
        assert result.output == "done", result.output
        return elapsed

    return run


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    runners: dict[str, Runner | str] = {
        "floor: Semaphore(10)+gather": floor_run,
        "toolnexus client.run": toolnexus_run,
        "smolagents ToolCallingAgent": smolagents_runner(),
        "pydantic-ai Agent": pydantic_ai_runner(),
    }
    ready = {name: r for name, r in runners.items() if not isinstance(r, str)}
    for run in ready.values():  # warm up: imports, first-run caches
        await run(args.calls)
    samples: dict[str, list[float]] = {name: [] for name in ready}
    for _ in range(args.repeats):  # interleaved, so the machine's noise falls on all alike
        for name, run in ready.items():
            samples[name].append(await run(args.calls) / args.calls * 1e6)
    ours = statistics.median(samples["toolnexus client.run"])
    print(f"{args.calls} no-op calls in one model response, per call (medians of {args.repeats})")
    for name, runner in runners.items():
        if isinstance(runner, str):
            print(f"{name:30} {runner}")
            continue
        value = statistics.median(samples[name])
        print(f"{name:30} {value:8.2f} us   toolnexus / this {ours / value:5.2f}")


if __name__ == "__main__":
    asyncio.run(main())
