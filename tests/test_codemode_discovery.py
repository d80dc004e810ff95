"""Code Mode at many tools: the index in ``run_code``'s description, and ``search_tools`` /
``describe_tool`` inside programs, in both runtimes, through ``create_client``, the gateway and
``toolnexus sdk``."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import types

from test_mcp_gateway import gateway, run_code
from toolnexus import Session, Tool, ToolHints, create_client
from toolnexus.codemode import (
    DEFAULT_SDK_THRESHOLD,
    RUN_CODE_BASE_DESCRIPTION,
    PermissionPolicy,
    ToolIndex,
    denied_message,
    render_sdk,
    run_code_tool,
    run_program,
)
from toolnexus.codemode._discovery import MAX_INDEX_BYTES
from toolnexus.codemode.runtimes import MontyRuntime, V8Runtime
from toolnexus.errors import ConfigurationError
from toolnexus.scheduling import ToolCall
from toolnexus.testing import ScriptedModel

TOPICS = ("weather", "stocks", "sports", "news", "traffic")
TARGET = "weather_zone_forecast"
"""A tool deep in its group: the description's index at this size does not name it."""

RAN: list[dict[str, Any]] = []


def _make(topic: str, i: int) -> Tool:
    name = TARGET if (topic, i) == ("weather", 417) else f"{topic}_report_item_{i}"
    description = (
        "Forecast the weather of one city for the coming days. Returns a short text."
        if name == TARGET
        else f"The {topic} report number {i}. Returns a text."
    )

    def execute(args: dict[str, Any]) -> str:
        RAN.append({"name": name, **args})
        return f"{name}: sunny in {args['city']} for {args.get('days', 1)} days"

    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"],
    }
    return Tool(name, description, schema, execute=execute, hints=ToolHints(read_only=True))


def many_tools() -> list[Tool]:
    """600 tools in five groups, ``TARGET`` among them."""
    return [_make(t, i) for t in TOPICS for i in range(420 if t == "weather" else 45)]


def runtime_for(language: str) -> Any:
    return MontyRuntime() if language == "python" else V8Runtime()


FIND_PY = """
hits = await search_tools("forecast weather city", limit=3)
name = hits[0]["name"]
doc = await describe_tool(name)
text = await tools[name]({"city": "Oslo", "days": 3})
{"name": name, "typed": "days" in doc and "city" in doc, "text": text}
"""

FIND_JS = """
const hits = await search_tools("forecast weather city", 3);
const name = hits[0].name;
const doc = await describe_tool(name);
const text = await tools[name]({ city: "Oslo", days: 3 });
return { name, typed: doc.includes("days") && doc.includes("city"), text };
"""

FOUND = {
    "name": TARGET,
    "typed": True,
    "text": f"{TARGET}: sunny in Oslo for 3 days",
}


@pytest.mark.parametrize("language", ["python", "javascript"])
async def test_a_program_finds_describes_and_calls_a_tool_it_was_not_shown(language: str) -> None:
    tools = many_tools()
    runtime = runtime_for(language)
    description = run_code_tool(tools, runtime=runtime).description
    assert TARGET not in description  # not shown: found from inside the program
    assert len(description.encode()) <= 10 * 1024
    code = FIND_PY if language == "python" else FIND_JS
    model = ScriptedModel(
        [[ToolCall("c1", "run_code", {"code": code, "description": "Find a forecast."})], "ok"]
    )
    session = Session()
    client = create_client(model=model, code_mode="code", runtime=runtime)
    try:
        result = await client.run("Forecast for Oslo?", tools=tools, session=session)
    finally:
        await runtime.aclose()
    assert result.status == "done"
    output = json.loads(result.tool_calls[0].output)
    assert output["result"] == FOUND
    types_logged = [e.type for e in session.events]
    assert "tool_search" in types_logged and "tool_describe" in types_logged
    search = next(e.data for e in session.events if e.type == "tool_search")
    assert search["query"] == "forecast weather city" and search["found"][0] == TARGET
    assert search["id"] == "c1"
    # bookkeeping only: the model's history has the run_code call and its result, no lookups
    calls = [e.data["name"] for e in session.events if e.type == "tool_call"]
    assert calls == [TARGET]  # the lookups are not tool calls
    roles = [m["role"] for m in session.messages()]
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert [m["role"] for m in model.requests[1]] == ["user", "assistant", "tool"]


async def test_a_wrong_argument_to_a_tool_never_described_is_refused_before_the_run() -> None:
    tools = many_tools()
    RAN.clear()
    code = f'await tools.{TARGET}({{"city": 42}})'
    out = await run_program(code, tools, runtime=MontyRuntime())
    assert out["error"]["kind"] == "type_error"
    assert "nothing ran" in out["error"]["message"] and '"city"' in out["error"]["message"]
    assert RAN == []
    typed = await run_program('await search_tools(3, limit="x")', tools, runtime=MontyRuntime())
    assert typed["error"]["kind"] == "type_error"  # the host functions are typed too


def test_below_the_threshold_the_description_is_the_sdk_as_before() -> None:
    small = many_tools()[:3]
    described = run_code_tool(small, runtime=MontyRuntime()).description
    assert described == f"{RUN_CODE_BASE_DESCRIPTION}\n\n{render_sdk('python', small)}"
    assert len(render_sdk("python", small).encode()) <= DEFAULT_SDK_THRESHOLD
    forced = run_code_tool(small, runtime=MontyRuntime(), sdk_threshold=0).description
    assert "search_tools" in forced and "Index" in forced


def test_always_loaded_tools_are_declared_in_full_beside_the_index() -> None:
    tools = many_tools()
    described = run_code_tool(tools, runtime=MontyRuntime(), always_loaded=[TARGET]).description
    assert f"async def {TARGET}(self, args: WeatherZoneForecastArgs" in described
    js = run_code_tool(tools, runtime=V8Runtime(), always_loaded=[TARGET, "absent"]).description
    assert f'"{TARGET}"(args: {{ "city": string; "days"?: number }})' in js


def test_bad_threshold_and_always_loaded_are_refused_naming_the_option() -> None:
    with pytest.raises(ConfigurationError, match="sdk_threshold"):
        run_code_tool([], runtime=MontyRuntime(), sdk_threshold=-1)
    with pytest.raises(ConfigurationError, match="always_loaded"):
        run_code_tool([], runtime=MontyRuntime(), always_loaded="weather")
    with pytest.raises(ConfigurationError, match="sdk_threshold"):
        create_client(model=ScriptedModel(["x"]), sdk_threshold="6k")  # type: ignore[arg-type]


DESCRIBE = """
import hashlib, sys
sys.path.insert(0, {tests!r})
from test_codemode_discovery import many_tools
from toolnexus.codemode import run_code_tool
from toolnexus.codemode.runtimes import MontyRuntime, V8Runtime
for runtime in (MontyRuntime(), V8Runtime()):
    text = run_code_tool(many_tools(), runtime=runtime, always_loaded=["news_report_item_3"]).description
    print(hashlib.sha256(text.encode()).hexdigest())
"""


def test_the_description_is_byte_identical_across_runs_orders_and_processes() -> None:
    tools = many_tools()
    here = [
        hashlib.sha256(
            run_code_tool(
                list(reversed(tools)) if i else tools,
                runtime=runtime,
                always_loaded=["news_report_item_3"],
            ).description.encode()
        ).hexdigest()
        for runtime in (MontyRuntime(), V8Runtime())
        for i in (0, 1)
    ]
    assert here[0] == here[1] and here[2] == here[3] and here[0] != here[2]
    script = DESCRIBE.format(tests=str(Path(__file__).parent))
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        printed = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
        ).stdout.split()
        assert printed == [here[0], here[2]]


DENIED_PY = f"""
found = [h["name"] for h in await search_tools("forecast weather city", limit=50)]
try:
    await describe_tool("{TARGET}")
    described = "described"
except ToolError as e:
    described = str(e)
try:
    await tools["{TARGET}"]({{"city": "Oslo"}})
    called = "called"
except ToolError as e:
    called = str(e)
[("{TARGET}" in found), described, called]
"""

DENIED_JS = f"""
const found = (await search_tools("forecast weather city", 50)).map((h) => h.name);
let described, called;
try {{ await describe_tool("{TARGET}"); described = "described"; }} catch (e) {{ described = e.message; }}
try {{ await tools["{TARGET}"]({{ city: "Oslo" }}); called = "called"; }} catch (e) {{ called = e.message; }}
return [found.includes("{TARGET}"), described, called];
"""


@pytest.mark.parametrize("language", ["python", "javascript"])
async def test_a_denied_tool_is_found_by_neither_and_fails_as_a_stub(language: str) -> None:
    tools = many_tools()
    policy = PermissionPolicy(deny=[TARGET])
    runtime = runtime_for(language)
    try:
        description = run_code_tool(tools, runtime=runtime, policy=policy, sdk_threshold=0)
        assert TARGET not in description.description
        code = DENIED_PY if language == "python" else DENIED_JS
        out = await run_program(code, tools, runtime=runtime, policy=policy)
    finally:
        await runtime.aclose()
    assert out["result"] == [
        False,
        f"no tool named {TARGET}; search_tools(query) finds tools",
        denied_message(TARGET),
    ]


def test_search_is_deterministic_and_ranks_the_exact_name_first() -> None:
    def make(name: str, description: str) -> Tool:
        return Tool(name, description, {"type": "object"}, execute=lambda a: None)

    tools = [
        make("get_user_by_id", "Get a user by id. get user get user."),
        make("getUser", "Fetch one user."),
        make("get_user", "Return the user."),
        make("list_users", "List users."),
        make("delete_repo", "Delete a repository."),
    ]
    index = ToolIndex(tools)
    first = index.search("get_user", limit=5)
    assert first[0]["name"] == "get_user"
    assert "delete_repo" not in [h["name"] for h in first]
    assert all(ToolIndex(list(reversed(tools))).search("get_user", 5) == first for _ in range(3))
    assert index.search("getUser", 1)[0]["name"] == "getUser"  # camelCase split, exact first
    assert index.search("GETUSER", 1)[0]["name"] == "getUser"  # equal but for case next
    # ties go by name
    twins = ToolIndex([make("b_tool", "Same words."), make("a_tool", "Same words.")])
    assert [h["name"] for h in twins.search("same words")] == ["a_tool", "b_tool"]
    assert index.search("nothing matches this", 5) == []
    for bad in ({"query": 3}, {"query": "x", "limit": 0}, {"query": "x", "limit": True}):
        with pytest.raises(ValueError, match="search_tools"):
            index.search(bad["query"], bad.get("limit", 5))  # type: ignore[arg-type]


def test_the_index_stays_under_its_cap_at_a_thousand_tools() -> None:
    thousand = [_make(TOPICS[i % 5], i) for i in range(1000)]
    for runtime in (MontyRuntime(), V8Runtime()):
        description = run_code_tool(thousand, runtime=runtime).description
        assert len(description.encode()) <= 10 * 1024
    index_part = run_code_tool(thousand, runtime=MontyRuntime()).description
    assert "Index (group, then tools)" in index_part and "[weather] 200 tools" in index_part


MANY = """\
from toolnexus import Tool, ToolHints

def make(i):
    topic = ['weather', 'stocks', 'sports', 'news'][i % 4]
    name = 'weather_zone_forecast' if i == 401 else f'{topic}_report_{i}'
    def report(args):
        return f'{name} for {args.get("city")}'
    return Tool(name, f'The {topic} report number {i}.' if i != 401 else
                'Forecast the weather of a city.',
                {'type': 'object', 'properties': {'city': {'type': 'string'}},
                 'required': ['city']},
                execute=report, hints=ToolHints(read_only=True))

TOOLS = [make(i) for i in range(600)]
"""

GATEWAY_PY = """
hits = await search_tools("forecast weather city")
doc = await describe_tool(hits[0]["name"])
[hits[0]["name"], "city" in doc, await tools[hits[0]["name"]]({"city": "Oslo"})]
"""

GATEWAY_JS = """
const hits = await search_tools("forecast weather city");
const doc = await describe_tool(hits[0].name);
return [hits[0].name, doc.includes("city"), await tools[hits[0].name]({ city: "Oslo" })];
"""


@pytest.mark.parametrize("language", ["python", "javascript"])
async def test_the_gateway_offers_the_index_and_programs_find_tools(
    tmp_path: Path, language: str
) -> None:
    many = tmp_path / "many.py"
    many.write_text(MANY)
    config = tmp_path / "mcp.json"
    audit = tmp_path / "audit.jsonl"
    config.write_text(json.dumps({"mcpServers": {}, "toolnexus": {"language": language}}))
    async with gateway(config, "--tools", f"{many}:TOOLS", "--audit-log", str(audit)) as session:
        listed = {t.name: t for t in (await session.list_tools()).tools}
        code = GATEWAY_PY if language == "python" else GATEWAY_JS
        result = await run_code(session, code)
    description = listed["run_code"].description or ""
    assert "search_tools" in description and "weather_zone_forecast" not in description
    assert len(description.encode()) <= 10 * 1024
    assert isinstance(result, types.CallToolResult) and not result.is_error, result
    assert result.structured_content["result"] == [
        "weather_zone_forecast",
        True,
        "weather_zone_forecast for Oslo",
    ]
    logged = [json.loads(line)["type"] for line in audit.read_text().splitlines()]
    assert "tool_search" in logged and "tool_describe" in logged


def _cli(*args: str, cwd: Path) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-m", "toolnexus.cli", *args],
        capture_output=True,
        text=True,
        check=True,
        cwd=cwd,
        env=env,
    )
    return done.stdout


def test_toolnexus_sdk_prints_the_index_and_full_prints_everything(tmp_path: Path) -> None:
    many = tmp_path / "many.py"
    many.write_text(MANY)
    spec = ["--no-builtins", "--tools", f"{many}:TOOLS"]
    shown = _cli("sdk", *spec, cwd=tmp_path)
    full = _cli("sdk", "--full", *spec, cwd=tmp_path)
    assert "search_tools" in shown and len(shown.encode()) <= MAX_INDEX_BYTES + 2048
    assert "async def weather_zone_forecast" in full and "search_tools" not in full
    small = _cli("sdk", "--sdk-threshold", "100000000", *spec, "--language", "javascript",
                 cwd=tmp_path)  # fmt: skip
    assert '"weather_zone_forecast"(args: { "city": string })' in small


@pytest.mark.parametrize("language", ["python", "javascript"])
async def test_a_failed_runs_message_is_cut_in_bytes_with_a_byte_marker(language: str) -> None:
    runtime = runtime_for(language)
    code = (
        'raise ValueError("é" * 5000)'
        if language == "python"
        else 'throw new Error("é".repeat(5000))'
    )
    try:
        out = await run_program(code, [], runtime=runtime)
    finally:
        await runtime.aclose()
    message = out["error"]["message"]
    assert len(message.encode()) <= 4000  # bytes, not characters (4,000 "é" are 8,000 bytes)
    assert "bytes cut) …" in message and message.count("é") > 1000
