"""A coordinator with two researchers and a writer, on any OpenAI-compatible endpoint.

    OPENAI_API_KEY=... python examples/research_team.py --base-url https://api.openai.com/v1 \\
        --model gpt-4o-mini "How do LLM agents run tool calls in parallel safely?"

(OpenRouter, vLLM, Ollama and llama.cpp servers work the same way; a local server that needs no
key takes ``--api-key none``.) The coordinator delegates with the ``task`` tool; its task calls
run at once, each in its own sub-agent, within the runtime's caps.
"""

from __future__ import annotations

import argparse
import asyncio

from toolnexus import create_client
from toolnexus.agents import AgentRuntime, Budget, agent

TEAM = [
    agent(
        "coordinator",
        instructions=(
            "You lead a small research team. Split the question into two angles, give each to a "
            "researcher with the task tool (both at once), then ask the writer for the final "
            "answer from their findings."
        ),
        team=["researcher", "writer"],
        budget=Budget(max_turns=6, max_tokens=60_000),
    ),
    agent("researcher", instructions="Research one angle of a question; answer in 5 bullets."),
    agent("writer", instructions="Write a clear, short answer from the findings you are given."),
]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("question")
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--api-key")
    args = parser.parse_args()
    client = create_client(
        base_url=args.base_url, model=args.model, api_key=args.api_key, code_mode="native"
    )
    runtime = AgentRuntime(TEAM, client=client, max_children=4, max_concurrent_turns=4)
    coordinator = runtime.spawn(runtime.root, "coordinator")
    runtime.wake(coordinator, args.question)
    result = await runtime.wait(coordinator)
    print(result.text)
    print(
        f"\n[{result.status}; {runtime.root.usage.input_tokens} input and "
        f"{runtime.root.usage.output_tokens} output tokens across the team]"
    )
    for event, handle_id in runtime.trace:
        print(f"  {event:9} {handle_id}")
    await runtime.close(coordinator)


if __name__ == "__main__":
    asyncio.run(main())
