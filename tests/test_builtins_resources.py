"""Resource keys on the built-in tools: real files, the real scheduler.

``builtin_tools(root, resource_keys=True)``: edits of different files overlap, calls on one file
(however it is spelled: ``..``, ``./``, a symlink) run one at a time in emitted order, a search
reads its whole folder, ``apply_patch`` writes every path its patch names, ``bash`` writes
everything. Each tool is wrapped to count calls in flight; the counts, not durations, are
asserted.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from toolnexus import Resources, Tool, ToolCall, run_batch
from toolnexus.scheduling import Scheduler
from toolnexus.session import Session
from toolnexus.tools.builtins import builtin_tools


class InFlight:
    """Wraps tools so that each call is held briefly and counted while it runs."""

    def __init__(self, hold: float = 0.05) -> None:
        self.hold = hold
        self.now: set[str] = set()
        self.peak = 0
        self.together: list[set[str]] = []  # who was in flight whenever a call started
        self.starts: list[str] = []

    def wrap(self, tool: Tool) -> Tool:
        async def execute(args: dict[str, Any], ctx: Any) -> Any:
            label = f"{tool.name}:{args.get('path', args.get('command', ''))}:{len(self.starts)}"
            self.starts.append(label)
            self.now.add(label)
            self.together.append(set(self.now))
            self.peak = max(self.peak, len(self.now))
            try:
                await asyncio.sleep(self.hold)  # hold the call, so overlap (or its absence) shows
                return await tool.invoke(args, ctx)
            finally:
                self.now.discard(label)

        return dataclasses.replace(tool, execute=execute)


def kit(root: Path, watch: InFlight, *, resource_keys: bool = True) -> list[Tool]:
    return [watch.wrap(t) for t in builtin_tools(root, resource_keys=resource_keys)]


def call(n: int, name: str, **args: Any) -> ToolCall:
    return ToolCall(f"c{n}", name, json.dumps(args))


@pytest.fixture
def files(tmp_path: Path) -> Path:
    for name in ("a.py", "b.py", "c.py"):
        (tmp_path / name).write_text(f"{name} v0\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("app v0\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "readme.md").write_text("readme v0\n")
    return tmp_path


async def test_edits_of_different_files_overlap(files: Path) -> None:
    watch = InFlight()
    calls = [
        call(i, "edit", path=f"{name}", old_string="v0", new_string="v1")
        for i, name in enumerate(["a.py", "b.py", "c.py"])
    ]
    outcomes = await run_batch(calls, kit(files, watch))
    assert all(o.ok for o in outcomes), outcomes
    assert watch.peak == 3
    assert [(files / n).read_text() for n in ("a.py", "b.py", "c.py")] == [
        "a.py v1\n",
        "b.py v1\n",
        "c.py v1\n",
    ]


async def test_without_resource_keys_every_edit_runs_alone(files: Path) -> None:
    watch = InFlight()
    calls = [call(i, "edit", path=n, old_string="v0", new_string="v1") for i, n in enumerate("ab")]
    tools = kit(files, watch, resource_keys=False)
    assert all(t.resources is None for t in tools)
    await run_batch([*calls, call(9, "read", path="c.py"), call(10, "read", path="a.py")], tools)
    assert watch.peak == 2  # only the two reads at the end ran together
    assert all(len(group) == 1 for group in watch.together[:2])


async def test_one_file_under_three_spellings_is_one_resource(files: Path) -> None:
    (files / "link.py").symlink_to(files / "a.py")
    watch = InFlight()
    calls = [
        call(1, "edit", path="a.py", old_string="v0", new_string="v1"),
        call(2, "edit", path="src/../a.py", old_string="v1", new_string="v2"),
        call(3, "edit", path="link.py", old_string="v2", new_string="v3"),
        call(4, "edit", path=str(files / "b.py"), old_string="v0", new_string="v1"),
    ]
    outcomes = await run_batch(calls, kit(files, watch))
    assert all(o.ok for o in outcomes), outcomes  # each edit saw the one before it
    assert (files / "a.py").read_text() == "a.py v3\n"
    assert watch.starts[:2] == ["edit:a.py:0", f"edit:{files / 'b.py'}:1"]  # b overlaps
    assert watch.starts[2:] == ["edit:src/../a.py:2", "edit:link.py:3"]  # a's, in order
    assert all(len([x for x in g if "a.py" in x or "link" in x]) <= 1 for g in watch.together)


async def test_a_read_after_a_write_of_its_file_waits_and_sees_the_write(files: Path) -> None:
    watch = InFlight()
    calls = [
        call(1, "write", path="a.py", content="written\n"),
        call(2, "read", path="a.py"),
        call(3, "read", path="b.py"),
    ]
    outcomes = await run_batch(calls, kit(files, watch))
    assert "written" in outcomes[1].value
    assert watch.together[1] == {"write:a.py:0", "read:b.py:1"}  # b's read did not wait
    assert watch.starts[2] == "read:a.py:2"


async def test_a_search_reads_its_folder_and_apply_patch_writes_every_path(files: Path) -> None:
    patch = (
        "*** Begin Patch\n*** Update File: src/app.py\n@@\n-app v0\n+app v1\n"
        "*** Add File: docs/new.md\n+new\n*** End Patch\n"
    )
    watch = InFlight()
    calls = [
        call(1, "apply_patch", patch=patch),
        call(2, "grep", pattern="app v1", path="src"),  # waits: the patch writes src/app.py
        call(3, "glob", pattern="*.md", path="docs"),  # waits: the patch adds docs/new.md
        call(4, "edit", path="c.py", old_string="v0", new_string="v1"),  # overlaps
        call(5, "grep", pattern="v", path="."),  # the whole root: waits for every writer
    ]
    outcomes = await run_batch(calls, kit(files, watch))
    assert all(o.ok for o in outcomes), outcomes
    assert "app.py" in outcomes[1].value  # the search saw the patched file
    assert "new.md" in outcomes[2].value
    first = watch.together[1]
    assert len(first) == 2 and any(x.startswith("edit:c.py") for x in first)
    assert watch.starts[-1].startswith("grep:.:")


async def test_bash_writes_everything(files: Path) -> None:
    watch = InFlight()
    calls = [
        call(1, "read", path="a.py"),
        call(2, "bash", command="echo hi"),
        call(3, "edit", path="b.py", old_string="v0", new_string="v1"),
    ]
    await run_batch(calls, kit(files, watch))
    assert watch.peak == 1  # the read, then bash alone, then the edit


async def test_a_path_outside_the_root_declares_nothing_and_the_call_fails(
    files: Path, caplog: pytest.LogCaptureFixture
) -> None:
    watch = InFlight()
    tools = kit(files, watch)
    edit = next(t for t in tools if t.name == "edit")
    assert edit.resources is not None
    assert edit.resources({"path": "../../etc/passwd"}) is None  # no key from an escape
    assert edit.resources({"path": 7}) is None
    assert edit.resources({"path": "a.py"}) == Resources(writes=[str(files / "a.py")])
    outcomes = await run_batch(
        [call(1, "edit", path="../../etc/x", old_string="a", new_string="b")], tools
    )
    assert "outside the working directory" in outcomes[0].error["message"]
    patch_tool = next(t for t in tools if t.name == "apply_patch")
    assert patch_tool.resources is not None
    assert patch_tool.resources({"patch": "not a patch"}) is None
    escaping = "*** Begin Patch\n*** Add File: ../x\n+x\n*** End Patch\n"
    assert patch_tool.resources({"patch": escaping}) is None
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_declarations_are_in_the_session_log_and_a_wait_names_its_resource(
    files: Path,
) -> None:
    tools = builtin_tools(files, resource_keys=True)
    by_name = {t.name: t for t in tools}
    session = Session()
    async with Scheduler(session=session, call_id="run1", max_parallel=4) as lane:
        first = lane.submit(by_name["write"], {"path": "a.py", "content": "x"})
        second = lane.submit(by_name["read"], {"path": "./a.py"})
        await lane.wait(first)
        await lane.wait(second)
    events = [e.data for e in session.events if e.type == "tool_call"]
    key = str(files / "a.py")
    assert events[0]["resources"] == {"reads": [], "writes": [key]}
    assert events[1]["resources"] == {"reads": [key], "writes": []}
    assert events[1]["waited_for"] == {"seq": 1, "resource": key}
    assert "waited_for" not in events[0]


async def test_a_native_batch_logs_declared_resources_as_bookkeeping(files: Path) -> None:
    session = Session()
    tools = builtin_tools(files, resource_keys=True)
    calls = [call(1, "write", path="a.py", content="x"), call(2, "read", path="a.py")]
    await run_batch(calls, tools, session=session)
    logged = [e.data for e in session.events if e.type == "call_resources"]
    assert [e["id"] for e in logged] == ["c1", "c2"]
    assert logged[1]["waited_for"]["resource"] == str(files / "a.py")
    assert [m["role"] for m in session.messages()] == ["tool", "tool"]  # history untouched


async def test_a_code_mode_program_gets_the_same_rule(files: Path) -> None:
    """The sub-calls of a program go through the same lane: its edits of different files
    overlap, its two edits of one file run in the order it made them."""
    from toolnexus.codemode import run_program

    watch = InFlight(hold=0.3)  # long enough for the program to make all four calls
    program = """
import asyncio
await asyncio.gather(
    tools.edit({"path": "a.py", "old_string": "v0", "new_string": "v1"}),
    tools.edit({"path": "b.py", "old_string": "v0", "new_string": "v1"}),
    tools.edit({"path": "./a.py", "old_string": "v1", "new_string": "v2"}),
    tools.edit({"path": "c.py", "old_string": "v0", "new_string": "v1"}),
)
"""
    result = await run_program(program, kit(files, watch))
    assert "error" not in result, result
    assert (files / "a.py").read_text() == "a.py v2\n"
    assert watch.peak == 3  # a, b and c together; a's second edit after its first committed
    assert watch.starts[-1] == "edit:./a.py:3"


async def test_a_link_made_by_bash_earlier_in_the_batch_is_seen_by_later_paths(
    files: Path,
) -> None:
    # Keys resolved when the batch was submitted named alias.py before it existed, so the two
    # edits of one file ran together after bash, and the second did not see the first.
    watch = InFlight()
    calls = [
        call(1, "bash", command="ln -s a.py alias.py"),
        call(2, "edit", path="alias.py", old_string="v0", new_string="v1"),
        call(3, "edit", path="a.py", old_string="v1", new_string="v2"),
        call(4, "read", path="b.py"),
    ]
    outcomes = await run_batch(calls, kit(files, watch))
    assert all(o.ok for o in outcomes), outcomes  # each edit saw the one before it
    assert (files / "a.py").read_text() == "a.py v2\n"
    assert all(len([x for x in g if "a.py" in x]) <= 1 for g in watch.together)
    assert watch.starts[1:3] == ["edit:alias.py:1", "edit:a.py:2"]


async def test_hard_links_of_one_file_share_a_key(files: Path) -> None:
    (files / "hard.py").hardlink_to(files / "a.py")
    watch = InFlight()
    calls = [
        call(1, "edit", path="a.py", old_string="v0", new_string="v1"),
        call(2, "edit", path="hard.py", old_string="v1", new_string="v2"),
        call(3, "edit", path="b.py", old_string="v0", new_string="v1"),
    ]
    outcomes = await run_batch(calls, kit(files, watch))
    assert all(o.ok for o in outcomes), outcomes
    assert (files / "a.py").read_text() == "a.py v2\n"
    assert watch.together[1] == {"edit:a.py:0", "edit:b.py:1"}  # b overlaps, hard.py waits
    assert watch.starts[2] == "edit:hard.py:2"
    tools = {t.name: t for t in builtin_tools(files, resource_keys=True)}
    write = tools["write"].resources
    assert write is not None
    one, other = write({"path": "a.py"}), write({"path": "hard.py"})
    assert one is not None and other is not None
    assert one.writes & other.writes  # the inode's key
    single = write({"path": "c.py"})
    assert single == Resources(writes=[str(files / "c.py")])  # one name: its path only


async def test_a_patch_that_moves_a_symlink_declares_nothing(files: Path) -> None:
    (files / "link.py").symlink_to(files / "a.py")
    tools = {t.name: t for t in builtin_tools(files, resource_keys=True)}
    declare = tools["apply_patch"].resources
    assert declare is not None
    moving = (
        "*** Begin Patch\n*** Update File: {}\n*** Move to: moved.py\n@@\n-v0\n+v1\n*** End Patch\n"
    )
    assert declare({"patch": moving.format("link.py")}) is None  # writes everything
    declared = declare({"patch": moving.format("b.py")})
    assert declared == Resources(writes=[str(files / "b.py"), str(files / "moved.py")])
