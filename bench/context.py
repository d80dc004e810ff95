"""Context benchmark: what a model is sent at 14, 100 and ~1,000 tools, in native, code and both
modes. Prints figures side by side, each target marked met or missed; asserts nothing.

Tool sets:

* 14 tools: the official filesystem MCP server (npm ``@modelcontextprotocol/server-filesystem``)
  through ``mcp_servers``, when it is installed where the tests install it; else its
  ``tools/list`` as shipped in ``bench/fixtures/filesystem_tools.json`` (generated from the real
  package by ``bench/fixtures/make_filesystem_tools.py``), the calls answered by this script.
* 100 and 1,000 tools: operations of GitHub's REST API, from its official OpenAPI description
  (npm ``@octokit/openapi``), shipped as ``bench/fixtures/github_rest_tools.json.gz`` (made by
  ``bench/fixtures/make_github_tools.py``); each call answers a page of 30 records.

For each set and mode, on a scripted OpenAI-style endpoint (``tests/fake_provider.py``): the
bytes of the first request's ``tools``; the bytes of every request body of a scripted task
that needs 3 tools, found by search (``search_tools`` inside the program in code mode,
``tool_search`` in native mode with tiers); the model round trips. Then ``bench/agent.py``'s
task (20 reads, 3 writes), native against code.

Run: ``python bench/context.py``
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))  # the scripted endpoint
sys.path.insert(0, str(Path(__file__).parent))  # bench/agent.py
from fake_provider import FakeProvider, Turn
from toolnexus import Tool, ToolHints, create_client
from toolnexus.codemode import run_code_tool
from toolnexus.codemode.runtimes import MontyRuntime
from toolnexus.tools.mcp import mcp_servers

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures"
FILESYSTEM_BIN = (
    Path(tempfile.gettempdir())
    / "toolnexus-tests-npm/server-filesystem-2026.8.31/node_modules/.bin/mcp-server-filesystem"
)
GITHUB_TASK = ("repos_get", "issues_list_for_repo", "pulls_list")
GITHUB_QUERIES = ("get a repository", "list repository issues", "list pulls")
FS_QUERIES = ("directory listing", "read text file", "file info metadata")


# -- tool sets --------------------------------------------------------------------------------


def _page(name: str, args: dict[str, Any]) -> list[dict[str, Any]]:
    """What a GitHub list or get answers here: 30 records shaped like the API's."""
    return [
        {
            "id": 1000 + i,
            "node_id": f"MDQ6{name}{i:04d}",
            "name": f"{args.get('repo', 'item')}-{i}",
            "title": f"Record {i} of {name}",
            "state": "open" if i % 3 else "closed",
            "html_url": f"https://github.com/{args.get('owner', 'o')}/{args.get('repo', 'r')}/{i}",
            "user": {"login": f"user{i % 7}", "id": 500 + i % 7, "type": "User"},
            "created_at": f"2026-0{1 + i % 9}-1{i % 10}T12:00:00Z",
            "comments": i * 3 % 17,
        }
        for i in range(30)
    ]


def github_tools(count: int) -> list[Tool]:
    """``count`` GitHub operations: the task's three and others evenly spread over the API."""
    data = json.loads(gzip.decompress((FIXTURES / "github_rest_tools.json.gz").read_bytes()))
    defs = {d["name"]: d for d in data["tools"]}
    others = [n for n in sorted(defs) if n not in GITHUB_TASK]
    step = len(others) / (count - len(GITHUB_TASK))
    chosen = [*GITHUB_TASK, *(others[int(i * step)] for i in range(count - len(GITHUB_TASK)))]

    def make(d: dict[str, Any]) -> Tool:
        name = d["name"]
        read = d["method"] == "GET"
        return Tool(
            name,
            d["description"],
            d["inputSchema"],
            execute=lambda args: _page(name, args),
            hints=ToolHints(read_only=read),
            source="github",
        )

    return [make(defs[n]) for n in chosen]


def github_source() -> str:
    data = json.loads(gzip.decompress((FIXTURES / "github_rest_tools.json.gz").read_bytes()))
    return str(data["source"])


@contextlib.asynccontextmanager
async def filesystem_tools(root: Path) -> AsyncIterator[tuple[list[Tool], str]]:
    """The filesystem server's 14 tools over ``root``: live when installed, else the fixture."""
    if FILESYSTEM_BIN.exists() and shutil.which("node"):
        config = {"mcpServers": {"fs": {"command": str(FILESYSTEM_BIN), "args": [str(root)]}}}
        async with mcp_servers(config) as tools:
            yield list(tools), "the real server (npm @modelcontextprotocol/server-filesystem)"
        return
    data = json.loads((FIXTURES / "filesystem_tools.json").read_text())

    def make(d: dict[str, Any]) -> Tool:
        remote = d["name"]

        def answer(args: dict[str, Any]) -> str:
            path = Path(str(args.get("path", root)))
            if remote == "list_directory":
                return "\n".join(f"[FILE] {p.name}" for p in sorted(path.iterdir()))
            if remote in ("read_text_file", "read_file"):
                return path.read_text()
            if remote == "get_file_info":
                return f"size: {path.stat().st_size}\nisFile: {path.is_file()}"
            return f"{remote} is not answered by this fallback"

        return Tool(f"fs_{remote}", d.get("description", ""), d["inputSchema"], execute=answer)

    yield [make(d) for d in data["tools"]], "the fixture (bench/fixtures/filesystem_tools.json)"


# -- the scripted task ------------------------------------------------------------------------


def program(queries: tuple[str, ...], calls: list[str]) -> str:
    """Find three tools by search, call them, return a summary (not the results)."""
    return (
        "names = []\n"
        f"for query in {list(queries)!r}:\n"
        "    names.append((await search_tools(query, limit=1))[0]['name'])\n"
        f"results = [{', '.join(calls)}]\n"
        "{'tools': names, 'sizes': [len(str(r)) for r in results],\n"
        " 'first': [str(r)[:60] for r in results]}\n"
    )


def github_task() -> dict[str, Any]:
    args = [
        {"owner": "octocat", "repo": "hello-world"},
        {"owner": "octocat", "repo": "hello-world", "state": "open"},
        {"owner": "octocat", "repo": "hello-world", "state": "open"},
    ]
    calls = [f"await tools[names[{i}]]({a!r})" for i, a in enumerate(args)]
    return {"names": GITHUB_TASK, "args": args, "code": program(GITHUB_QUERIES, calls),
            "queries": GITHUB_QUERIES}  # fmt: skip


def fs_task(root: Path) -> dict[str, Any]:
    notes = str(root / "notes.txt")
    args = [{"path": str(root)}, {"path": notes}, {"path": notes}]
    calls = [f"await tools[names[{i}]]({a!r})" for i, a in enumerate(args)]
    names = ("fs_list_directory", "fs_read_text_file", "fs_get_file_info")
    return {"names": names, "args": args, "code": program(FS_QUERIES, calls), "queries": FS_QUERIES}


def script(mode: str, task: dict[str, Any], tiered: bool) -> list[Turn]:
    if mode in ("code", "both"):
        run = ("c1", "run_code", {"code": task["code"], "description": "Find and call 3 tools."})
        return [Turn(calls=[run]), Turn(text="done")]
    direct = list(zip(task["names"], task["args"], strict=True))
    if not tiered:
        calls = [(f"n{i}", name, args) for i, (name, args) in enumerate(direct)]
        return [Turn(calls=calls), Turn(text="done")]
    searches = [
        (f"s{i}", "tool_search", {"query": q, "limit": 3}) for i, q in enumerate(task["queries"])
    ]
    calls = [
        (f"n{i}", "call_tool", {"name": name, "arguments": args})
        for i, (name, args) in enumerate(direct)
    ]
    return [Turn(calls=searches), Turn(calls=calls), Turn(text="done")]


async def measure(
    provider: FakeProvider, tools: list[Tool], task: dict[str, Any], mode: str, tiered: bool
) -> dict[str, Any]:
    provider.script(*script(mode, task, tiered))
    first = len(provider.requests)
    client = create_client(
        base_url=provider.url + "/v1",
        model="bench",
        api_key="k",
        code_mode=mode,
        tool_tiers=tiered if mode == "native" else None,
    )
    result = await client.run("do the task", tools=tools)
    if result.status != "done" or any(r.is_error for r in result.tool_calls):
        raise RuntimeError(f"the scripted task failed ({mode}): {result.tool_calls}")
    if mode in ("code", "both"):
        found = json.loads(result.tool_calls[0].output)["result"]["tools"]
        if tuple(found) != tuple(task["names"]):
            raise RuntimeError(f"search_tools found {found}, not {task['names']}")
    bodies = provider.requests[first:]
    return {
        "tools": len(json.dumps(bodies[0].get("tools", [])).encode()),
        "sent": sum(len(json.dumps(b).encode()) for b in bodies),
        "turns": result.turns,
    }


def description_bytes(tools: list[Tool]) -> int:
    return len(run_code_tool(tools, runtime=MontyRuntime(type_check=False)).description.encode())


def make_folder(folder: str) -> Path:
    """The filesystem task's folder: 20 files and ``notes.txt``."""
    root = Path(folder).resolve()
    for i in range(20):
        (root / f"file{i:02d}.txt").write_text(f"line {i}\n" * 40)
    (root / "notes.txt").write_text("Notes: the first line.\n" + "more notes\n" * 200)
    return root


# -- report -----------------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


async def main() -> None:
    provider = FakeProvider().start()
    rows: list[tuple[str, str, dict[str, Any]]] = []
    descriptions: dict[str, int] = {}
    try:
        with tempfile.TemporaryDirectory() as folder:
            root = make_folder(folder)
            async with filesystem_tools(root) as (fs, origin):
                print(f"14 tools: {origin}")
                task = fs_task(root)
                descriptions["14"] = description_bytes(fs)
                for mode in ("native", "code", "both"):
                    rows.append(("14", mode, await measure(provider, fs, task, mode, False)))
        print(f"100 / 1,000 tools: {github_source()}")
        for count in (100, 900, 1000):
            tools = github_tools(count)
            descriptions[str(count)] = description_bytes(tools)
            if count == 900:
                continue
            task = github_task()
            rows.append(
                (str(count), "native", await measure(provider, tools, task, "native", False))
            )
            rows.append(
                (str(count), "native, tiered", await measure(provider, tools, task, "native", True))
            )
            for mode in ("code", "both"):
                rows.append((str(count), mode, await measure(provider, tools, task, mode, False)))
        import agent

        native = await agent.measure(provider, agent.native_script(), code_mode="native")
        code = await agent.measure(provider, agent.code_script(), code_mode="code")
    finally:
        provider.stop()

    print()
    print(f"{'tools':>6} {'mode':16} {'tools bytes':>12} {'vs native':>10} {'task bytes':>11} "
          f"{'vs native':>10} {'round trips':>12}")  # fmt: skip
    base: dict[str, dict[str, Any]] = {}
    for count, mode, m in rows:
        if mode == "native":
            base[count] = m
        b = base[count]
        print(f"{count:>6} {mode:16} {m['tools']:>12,} {m['tools'] / b['tools']:>9.1%} "
              f"{m['sent']:>11,} {m['sent'] / b['sent']:>9.1%} {m['turns']:>12}")  # fmt: skip
    print()
    print(
        "run_code description bytes: "
        + ", ".join(f"{k} tools {v:,}" for k, v in descriptions.items())
    )
    native14 = next(m for c, mode, m in rows if c == "14" and mode == "native")
    ratio14 = descriptions["14"] / native14["tools"]
    growth = (descriptions["1000"] - descriptions["900"]) / descriptions["900"]
    agent_saving = 1 - code[2] / native[2]
    code_turns = max(m["turns"] for c, mode, m in rows if mode == "code")
    print()
    print("targets:")
    shown = f"{descriptions['14']:,} / {native14['tools']:,}"
    print(f"  description <= 40 % of native tools bytes at 14 tools: {ratio14:.1%}"
          f" ({shown})  {verdict(ratio14 <= 0.40)}")  # fmt: skip
    print(f"  description <= 10 KB at 1,000 tools: {descriptions['1000']:,} bytes"
          f"  {verdict(descriptions['1000'] <= 10 * 1024)}")  # fmt: skip
    print(f"  growth < 2 % per 100 tools (900 -> 1,000): {growth:+.2%}  {verdict(growth < 0.02)}")
    print(f"  bench/agent.py task, >= 85 % fewer request bytes than native: {agent_saving:.1%}"
          f" ({code[2]:,} vs {native[2]:,})  {verdict(agent_saving >= 0.85)}")  # fmt: skip
    print(f"  <= 2 model round trips in code mode: {code_turns}  {verdict(code_turns <= 2)}")


if __name__ == "__main__":
    asyncio.run(main())
