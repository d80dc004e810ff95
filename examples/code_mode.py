"""Code Mode, end to end, with no model and no API key: the program a model might write.

A program fans out over a small project's files, writes one summary (a tool that is not known
to be safe, so it runs alone), and returns a result. The run's audit trail lands in the session
log as bookkeeping events while the model's messages stay unchanged. A second program shows what
the model gets back when a run fails halfway: which calls already happened.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from pathlib import Path

from toolnexus import Session, Tool, ToolHints, tool
from toolnexus.codemode import PermissionPolicy, run_program
from toolnexus.codemode.runtimes import MontyRuntime

PROJECT = {
    "README.md": "# demo\nA tiny project.\n",
    "app.py": "print('hello')\n",
    "util.py": "def add(a, b):\n    return a + b\n",
}
START = time.perf_counter()
TIMELINE: list[str] = []


def mark(event: str) -> None:
    TIMELINE.append(f"{(time.perf_counter() - START) * 1000:7.1f} ms  {event}")


def make_tools(root: Path) -> list[Tool]:
    """Tools over one directory. Plain functions: toolnexus runs them in worker threads."""

    @tool(hints=ToolHints(read_only=True))
    def list_files() -> list[str]:
        """List the project's files."""
        return sorted(p.name for p in root.iterdir())

    @tool(hints=ToolHints(read_only=True))
    def read_file(path: str) -> str:
        """Read one file of the project.

        Args:
            path: The file name.
        """
        mark(f"read {path} starts")
        time.sleep(0.05)  # a slow disk: the reads overlap
        mark(f"read {path} ends")
        return (root / path).read_text(encoding="utf-8")

    @tool
    def write_file(path: str, text: str) -> str:
        """Write a file (not known to be safe: it runs alone)."""
        mark(f"write {path}")
        (root / path).write_text(text, encoding="utf-8")
        return f"wrote {len(text)} characters"

    @tool
    def delete_file(path: str) -> str:
        """Delete a file."""
        (root / path).unlink()
        return "deleted"

    return [list_files, read_file, write_file, delete_file]


PROGRAM = """\
import asyncio
names = await tools.list_files({})
texts = await asyncio.gather(*[tools.read_file({"path": n}) for n in names])
lines = {n: len(t.splitlines()) for n, t in zip(names, texts)}
print("line counts:", lines)
summary = "\\n".join(f"{n}: {c} lines" for n, c in lines.items())
await tools.write_file({"path": "SUMMARY.txt", "text": summary})
{"files": len(names), "lines": sum(lines.values())}
"""

FAILING = """\
await tools.write_file({"path": "notes.txt", "text": "draft"})
await tools["delete_file"]({"path": "app.py"})
"""


async def main() -> None:
    runtime = MontyRuntime()
    session = Session()
    session.append("user_message", {"content": "Summarise the project."})
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name, text in PROJECT.items():
            (root / name).write_text(text, encoding="utf-8")
        tools = make_tools(root)
        policy = PermissionPolicy(deny=["delete_file"])
        try:
            out = await run_program(
                PROGRAM, tools, runtime=runtime, session=session, call_id="call_1", policy=policy
            )
            print("run_code output:", json.dumps(out))
            print("\ntimeline:")
            print("\n".join(TIMELINE))
            print("\naudit trail (bookkeeping events, not model messages):")
            for event in session.events:
                if event.type == "tool_call":
                    print(f"  {event.data['id']:16} {event.data['mode']:9} {event.data['name']}")
            print("model messages:", session.messages())
            failed = await run_program(FAILING, tools, runtime=runtime, policy=policy)
            print("\na run that fails halfway:", json.dumps(failed, indent=2))
        finally:
            await runtime.aclose()


if __name__ == "__main__":
    asyncio.run(main())
