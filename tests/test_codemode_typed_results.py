"""Typed results in the Code Mode SDK, and a lean SDK.

A tool's result type comes from its ``@tool`` return annotation or its MCP ``outputSchema``, so
a program can chain calls without guessing the shape; the Python SDK is what Monty's type
checker checks a program against, so a misuse of a typed result is refused before anything runs.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any, TypedDict

import pytest
from pydantic import BaseModel

from toolnexus import ToolHints, tool
from toolnexus.codemode import render_sdk, run_code_tool, run_program
from toolnexus.tools.mcp import mcp_servers

sys.path.insert(0, str(Path(__file__).parent.parent / "bench"))


class Hit(TypedDict):
    path: str
    line: int


class User(BaseModel):
    name: str
    age: int | None = None


@dataclasses.dataclass
class Point:
    x: float
    y: float


def returning(annotation: Any) -> Any:
    def body() -> Any:
        """A tool."""

    body.__annotations__["return"] = annotation
    return tool(name="t")(body)


@pytest.mark.parametrize(
    ("annotation", "python", "typescript", "declared"),
    [
        (Hit, "-> TResult", '{ "line": number; "path": string }', '{"line": int, "path": str}'),
        (User, "-> TResult", '{ "age"?: number | null; "name": string }',
         '{"age": NotRequired[int | None], "name": str}'),
        (Point, "-> TResult", '{ "x": number; "y": number }', '{"x": float, "y": float}'),
        (list[int], "-> list[int]", "Array<number>", None),
        (dict[str, float], "-> dict[str, float]", "{ [key: string]: number }", None),
        (str, "-> str", "string", None),
        (int, "-> int", "number", None),
        (bool | None, "-> bool | None", "boolean | null", None),
        (Any, "-> Any", "unknown", None),
    ],
)  # fmt: skip
def test_a_return_annotation_types_the_result(
    annotation: Any, python: str, typescript: str, declared: str | None
) -> None:
    t = returning(annotation)
    sdk = render_sdk("python", [t])
    assert f"async def t(self, args: dict[str, Any] = ..., /) {python}: ..." in sdk
    if declared is not None:
        assert f'TResult = TypedDict("TResult", {declared})' in sdk
    assert f'"t"(args?: Record<string, never>): Promise<{typescript}>;' in render_sdk(
        "typescript", [t]
    )


@tool(hints=ToolHints(read_only=True))
def count(word: str) -> int:
    """How often a word occurs."""
    return len(word)


async def test_a_program_that_misuses_a_typed_result_fails_the_type_check() -> None:
    out = await run_program('(await tools.count({"word": "abc"})).upper()', [count])
    assert out["error"]["kind"] == "type_error"
    assert "upper" in out["error"]["message"] and "int" in out["error"]["message"]
    ok = await run_program('(await tools.count({"word": "abc"})) + 1', [count])
    assert ok["result"] == 4


async def test_an_mcp_output_schema_types_the_result_and_structured_content_is_the_value() -> None:
    server = str(Path(__file__).parent / "mcp_server.py")
    config = {"mcpServers": {"s": {"command": sys.executable, "args": [server]}}}
    async with mcp_servers(config) as found:
        named = {t.name: t for t in found}
        stats = named["s_stats"]
        assert stats.output_schema is not None
        sdk = render_sdk("python", [stats])
        assert "async def s_stats(self, args: SStatsArgs = ..., /) -> dict[str, int]: ..." in sdk
        assert "Promise<{ [key: string]: number }>" in render_sdk("typescript", [stats])
        out = await run_program('(await tools.s_stats({"reset": False}))["peak"] + 1', [stats])
    assert isinstance(out["result"], int)


def test_the_run_code_description_is_lean_and_byte_stable() -> None:
    import agent  # bench/agent.py: the two tools the benchmark offers

    description = run_code_tool([agent.read_record, agent.write_step]).description
    assert len(description.encode("utf-8")) < 1200
    again = run_code_tool([agent.write_step, agent.read_record]).description
    assert again == description  # the same tools in another order: the same bytes
    for words in ("asyncio.gather", "ToolError", "final expression", "calls"):
        assert words in description  # how to call, fan out, catch failures, return a result


def test_typed_results_type_check_with_deno(tmp_path: Path) -> None:
    """The TypeScript SDK with result types checks, and so does a program chaining them; a
    program misusing a result does not."""
    import subprocess

    from deno import find_deno_bin  # type: ignore[import-untyped]

    tools = [returning(t) for t in (Hit, User, list[int])]
    tools = [
        dataclasses.replace(t, name=n) for t, n in zip(tools, ("hit", "user", "ids"), strict=True)
    ]
    sdk = render_sdk("typescript", tools)
    good = "async function use() { const h = await tools.hit(); const u = await tools.user(); return h.line + (u.age ?? 0) + (await tools.ids())[0]; }\nexport { use };\n"
    bad = "async function use() { const h = await tools.hit(); return h.line.toUpperCase(); }\nexport { use };\n"

    def check(program: str) -> subprocess.CompletedProcess[str]:
        source = tmp_path / "sdk.ts"
        source.write_text(sdk + program)
        return subprocess.run(
            [find_deno_bin(), "check", "--no-config", "--no-remote", "--quiet", str(source)],
            capture_output=True, text=True, timeout=120, check=False,
            env={"NO_COLOR": "1", "DENO_DIR": str(tmp_path / "cache")},
        )  # fmt: skip

    ok = check(good)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    wrong = check(bad)
    assert wrong.returncode != 0 and "toUpperCase" in wrong.stdout + wrong.stderr
