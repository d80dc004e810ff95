"""Property: a program's sub-calls obey the scheduling rule, whatever the workload.

Random fan-outs of safe and unsafe calls (random durations, random failures) through the real
Monty sandbox and run_program: results come back in the program's order, an unsafe call never
has company, calls begin in submission order, and the cap is never exceeded.
"""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import Probe
from toolnexus.codemode import run_program
from toolnexus.codemode.runtimes import MontyRuntime

CALL = st.tuples(st.booleans(), st.integers(0, 4), st.booleans())  # safe?, steps, fails?


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(CALL, min_size=1, max_size=12), st.integers(1, 4))
def test_sub_calls_follow_the_rule(calls: list[tuple[bool, int, bool]], cap: int) -> None:
    probe = Probe()
    tools = [probe.tool("read"), probe.tool("write", read_only=False)]
    parts = []
    for i, (safe, steps, fails) in enumerate(calls):
        args = {"id": f"c{i}", "steps": steps, **({"fail": f"boom {i}"} if fails else {})}
        parts.append(f"tools.{'read' if safe else 'write'}({args!r})")
    code = (
        "import asyncio\n"
        "async def one(call):\n"
        "    try:\n"
        "        return await call\n"
        "    except ToolError as e:\n"
        "        return 'error: ' + str(e)\n"
        f"await asyncio.gather(*[one(c) for c in [{', '.join(parts)}]])"
    )

    async def scenario() -> dict[str, object]:
        runtime = MontyRuntime(timeout=20)
        try:
            return await run_program(code, tools, runtime=runtime, max_parallel=cap)
        finally:
            await runtime.aclose()

    out = asyncio.run(scenario())
    expected = [f"error: boom {i}" if fails else f"c{i}" for i, (_, _, fails) in enumerate(calls)]
    assert out == {"result": expected, "logs": []}
    assert probe.overlaps == []
    assert probe.starts() == [f"c{i}" for i in range(len(calls))]
    assert probe.peak <= cap
