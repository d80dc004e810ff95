"""The built-in tools under hostile arguments: nothing hangs, memory stays bounded, no path
leaves the root, no process outlives its kill, and webfetch is no way into the local network.
Real files, FIFOs, links, processes and HTTP servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import os
import threading
import tracemalloc
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from test_builtins import _alive, call
from toolnexus import Tool
from toolnexus.errors import ConfigurationError
from toolnexus.tools._threads import TOOL_THREADS
from toolnexus.tools.builtins import builtin_tools


@pytest.fixture
def tools(tmp_path: Path) -> dict[str, Tool]:
    return {t.name: t for t in builtin_tools(tmp_path)}


async def bounded(awaitable: Any, seconds: float = 20) -> Any:
    """The result, or a failure naming the hang (the old code spun or blocked forever here)."""
    return await asyncio.wait_for(awaitable, seconds)


def peak_memory_of(fn: Any) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# -- grep: a linear-time engine ------------------------------------------------------------------


@pytest.mark.parametrize("pattern", [r"(a+)+$", r"(a|aa)+$", r"(.*a){20}$", r"^(\w+\s?)*$"])
async def test_grep_finishes_on_patterns_that_backtrack_forever(
    tools: dict[str, Tool], tmp_path: Path, pattern: str
) -> None:
    (tmp_path / "bait.txt").write_text("a" * 30_000 + "!\n")
    assert await bounded(call(tools["grep"], pattern=pattern)) == f"no matches for {pattern!r}"


@pytest.mark.parametrize("pattern", [r"foo(?=bar)", r"(?<!x)y", r"(a)\1"])
async def test_grep_refuses_what_re2_cannot_run_with_a_clear_message(
    tools: dict[str, Tool], pattern: str, capfd: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ValueError, match=r"RE2.*lookarounds.*backreferences"):
        await call(tools["grep"], pattern=pattern)
    assert capfd.readouterr().err == ""  # the engine's own complaint is not printed


# -- read: regular files only, streamed ----------------------------------------------------------


async def test_read_refuses_a_fifo_instead_of_blocking(
    tools: dict[str, Tool], tmp_path: Path
) -> None:
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(ValueError, match="not a regular file"):
        await bounded(call(tools["read"], path="pipe"), 10)


async def test_read_refuses_devices(tmp_path: Path) -> None:
    tools = {t.name: t for t in builtin_tools(tmp_path, allow_outside_root=True)}
    with pytest.raises(ValueError, match="not a regular file"):
        await bounded(call(tools["read"], path="/dev/zero"), 10)


def test_reading_a_few_lines_of_a_large_file_allocates_little(tmp_path: Path) -> None:
    big = tmp_path / "big.log"
    line = b"x" * 99 + b"\n"
    with big.open("wb") as out:
        for _ in range(64):
            out.write(line * 10_000)  # 64 MB in all
    read = next(t for t in builtin_tools(tmp_path) if t.name == "read")
    result: list[str] = []
    peak = peak_memory_of(
        lambda: result.append(read.execute({"path": "big.log", "limit": 5}, None))
    )
    assert result[0].count("\n") == 5  # five lines and the note
    assert "(639995 more lines; read with offset=6)" in result[0]
    assert peak < 4 * 1024 * 1024


def test_one_huge_line_is_cut_without_being_held(tmp_path: Path) -> None:
    (tmp_path / "one.txt").write_bytes(b"y" * 30_000_000 + b"\nsecond\n")
    read = next(t for t in builtin_tools(tmp_path) if t.name == "read")
    result: list[str] = []
    peak = peak_memory_of(lambda: result.append(read.execute({"path": "one.txt"}, None)))
    first, second = result[0].split("\n")
    assert first.endswith("… (line cut)") and len(first) < 2100
    assert second == "     2\tsecond"
    assert peak < 4 * 1024 * 1024


# -- glob: never outside the root ----------------------------------------------------------------


async def test_glob_never_walks_through_a_link_out_of_the_root(
    tools: dict[str, Tool], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "inside.py").write_text("x")
    (tmp_path / "to_root").symlink_to("/")
    (tmp_path / "loop").symlink_to(tmp_path)
    visited: list[str] = []
    real_scandir = os.scandir

    def recording_scandir(path: Any) -> Any:
        visited.append(os.path.realpath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", recording_scandir)
    for pattern in ("**/*", "to_root/**/*", "to_root/*", "**/passwd"):
        found = await bounded(call(tools["glob"], pattern=pattern), 10)
        assert found.startswith("no files match") or found.split("\n") == ["inside.py"]
    inside = tmp_path.resolve()  # noqa: ASYNC240 - a test's own tmp folder
    assert visited and all(Path(p).is_relative_to(inside) for p in visited)
    assert await call(tools["glob"], pattern="**/*.py") == "inside.py"


# -- bash: bounded output, every descendant killed -----------------------------------------------


async def test_bash_keeps_head_and_tail_of_a_flood_without_holding_it(
    tools: dict[str, Tool],
) -> None:
    command = "echo FIRST; head -c 60000000 /dev/zero | tr '\\0' a; echo; echo LAST"
    tracemalloc.start()
    try:
        text = await bounded(call(tools["bash"], command=command), 60)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert text.startswith("FIRST") and text.rstrip().endswith("LAST")
    assert "bytes cut" in text and len(text) < 31_000
    assert peak < 8 * 1024 * 1024


async def test_a_background_shell_keeps_bounded_unread_output(tools: dict[str, Tool]) -> None:
    started = await call(
        tools["bash"],
        command="head -c 40000000 /dev/zero | tr '\\0' b; echo END",
        run_in_background=True,
    )
    shell_id = started.split()[1]
    tracemalloc.start()
    try:
        for _ in range(600):
            text = await call(tools["bash_output"], shell_id=shell_id)
            if "finished" in text:
                break
            await asyncio.sleep(0.05)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "finished (exit status 0)" in text
    assert peak < 8 * 1024 * 1024


SETSID_COMMANDS = {
    "setsid": "setsid sleep 300 & echo $! > {pids}; sleep 300",
    "setsid and a second fork": "setsid bash -c 'sleep 300 & echo $! >> {pids}; wait' & sleep 300",
    "nohup in a subshell": "( nohup setsid sleep 300 >/dev/null 2>&1 & echo $! > {pids} ); sleep 300",
}


def _pids(path: Path) -> list[int]:
    for _ in range(200):
        if path.exists() and path.read_text().strip():
            break
        threading.Event().wait(0.01)
    return [int(p) for p in path.read_text().split()]


async def _all_dead(pids: list[int]) -> bool:
    for _ in range(300):
        if not any(_alive(p) for p in pids):
            return True
        await asyncio.sleep(0.01)
    return False


@pytest.mark.parametrize("case", sorted(SETSID_COMMANDS))
async def test_a_timeout_kills_descendants_that_left_the_process_group(
    tools: dict[str, Tool], tmp_path: Path, case: str
) -> None:
    pid_file = tmp_path / "pids"
    command = SETSID_COMMANDS[case].format(pids=pid_file)
    with pytest.raises(TimeoutError, match="timeout"):
        await call(tools["bash"], command=command, timeout=1.5)
    pids = _pids(pid_file)
    assert pids and await _all_dead(pids)


async def test_kill_shell_kills_descendants_that_left_the_process_group(
    tools: dict[str, Tool], tmp_path: Path
) -> None:
    pid_file = tmp_path / "pids"
    started = await call(
        tools["bash"],
        command=f"setsid sleep 300 & echo $! > {pid_file}; sleep 300",
        run_in_background=True,
    )
    pids = await asyncio.to_thread(_pids, pid_file)
    assert all(_alive(p) for p in pids)
    await call(tools["kill_shell"], shell_id=started.split()[1])
    assert await _all_dead(pids)


# -- sync tools that hang do not starve the pool -------------------------------------------------


async def test_timed_out_sync_calls_do_not_starve_later_sync_tools(tmp_path: Path) -> None:
    release = threading.Event()
    started = threading.Semaphore(0)

    def hang(args: Any) -> None:
        started.release()
        release.wait(60)

    stuck = Tool("stuck", execute=hang, timeout=3)
    quick = Tool("quick", execute=lambda args: "fine")
    try:
        calls = [stuck.invoke({}) for _ in range(TOOL_THREADS.size + 6)]
        results = await asyncio.gather(*calls, return_exceptions=True)
        assert all(isinstance(r, TimeoutError) for r in results)
        running = sum(started.acquire(blocking=False) for _ in range(len(calls)))
        assert running >= TOOL_THREADS.size  # every thread of the pool was held...
        assert TOOL_THREADS.stuck == running
        assert await bounded(quick.invoke({}), 10) == "fine"  # ...and the pool still serves
        read = next(t for t in builtin_tools(tmp_path) if t.name == "glob")
        assert "no files" in await bounded(read.invoke({"pattern": "*"}), 10)
    finally:
        release.set()
    for _ in range(500):  # the stuck threads come back and leave the pool
        if TOOL_THREADS.stuck == 0:
            break
        await asyncio.sleep(0.01)
    assert TOOL_THREADS.stuck == 0


# -- webfetch: no way into the local network -----------------------------------------------------


class _Redirecting(BaseHTTPRequestHandler):
    target = ""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        if self.path == "/go" and self.target:
            self.send_response(302)
            self.send_header("location", self.target)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        body = b"secret internal page"
        self.send_response(200)
        self.send_header("content-type", "text/plain")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def servers() -> Iterator[tuple[str, str, list[str]]]:
    """A server on 127.0.0.1 whose /go redirects to one on 127.0.0.2; paths each was asked for."""
    asked: list[str] = []

    class Inner(_Redirecting):
        def do_GET(self) -> None:
            asked.append(self.path)
            super().do_GET()

    inner = ThreadingHTTPServer(("127.0.0.2", 0), Inner)
    inner_url = f"http://127.0.0.2:{inner.server_address[1]}"

    class Outer(_Redirecting):
        target = inner_url + "/admin"

    outer = ThreadingHTTPServer(("127.0.0.1", 0), Outer)
    for server in (inner, outer):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{outer.server_address[1]}", inner_url, asked
    for server in (inner, outer):
        server.shutdown()
        server.server_close()


NON_PUBLIC = [
    "http://127.0.0.1:9/",
    "http://localhost:9/",
    "http://169.254.169.254/latest/meta-data/",
    "http://10.0.0.1/",
    "http://192.168.1.1/",
    "http://[::1]:9/",
    "http://[::ffff:127.0.0.1]:9/",
    "http://0.0.0.0:9/",
    "http://100.64.0.1/",
]


@pytest.mark.parametrize("url", NON_PUBLIC)
async def test_webfetch_refuses_non_public_addresses_by_default(
    tools: dict[str, Tool], url: str
) -> None:
    with pytest.raises(PermissionError, match="allow_private_network"):
        await bounded(call(tools["webfetch"], url=url), 10)


async def test_webfetch_checks_every_redirect_hop(
    tmp_path: Path, servers: tuple[str, str, list[str]]
) -> None:
    outer, _, asked = servers
    only_outer = {t.name: t for t in builtin_tools(tmp_path, allow_private_network=["127.0.0.1"])}
    assert await call(only_outer["webfetch"], url=outer + "/page") == "secret internal page"
    with pytest.raises(PermissionError, match=r"127\.0\.0\.2"):
        await call(only_outer["webfetch"], url=outer + "/go")
    assert asked == []  # the inner server was never contacted
    everything = {t.name: t for t in builtin_tools(tmp_path, allow_private_network=True)}
    assert await call(everything["webfetch"], url=outer + "/go") == "secret internal page"
    assert asked == ["/admin"]


def test_allow_private_network_must_name_addresses(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="allow_private_network"):
        builtin_tools(tmp_path, allow_private_network=["not-an-address"])


def test_the_tool_pool_runs_as_many_jobs_as_its_size_whether_its_threads_are_new_or_idle() -> None:
    from toolnexus.tools._threads import ToolThreads

    pool = ToolThreads(size=4)
    for job in [pool.submit(lambda: None) for _ in range(4)]:  # four threads, then idle
        job.future.result(5)
    lock = threading.Lock()
    running = [0, 0]  # now, peak
    release = threading.Event()

    def work() -> None:
        with lock:
            running[0] += 1
            running[1] = max(running[1], running[0])
        release.wait(10)
        with lock:
            running[0] -= 1

    jobs = [pool.submit(work) for _ in range(10)]
    for _ in range(500):
        with lock:
            if running[0] == 4:
                break
        threading.Event().wait(0.01)
    threading.Event().wait(0.1)
    assert running == [4, 4]  # idle threads were woken, and no more than the size run
    release.set()
    for job in jobs:
        job.future.result(10)
    assert running[1] == 4


TRICKY_PATTERNS = [
    r"^import",
    r"os$",
    r"^$",
    r"\bfoo\b",
    r"a.b",
    r"[^x]+$",
    r"(?i)^FOO",
    r"x*",
    r"^\s+\S",
    r"\Afoo",
    r"bar\z",
    r"(?-m)^second",
    r"o\nb",
    r"^line\d$",
]
TRICKY_TEXT = "import os\nfoo\rsecond\x0bline1\x0cline22\n\nbar \u2028a\tb\r\nlast foo"


@pytest.mark.parametrize("pattern", TRICKY_PATTERNS)
async def test_the_whole_file_screen_never_changes_what_grep_finds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pattern: str
) -> None:
    """grep screens each file with one search before searching it line by line; the result
    must be exactly the line-by-line one, whatever the line separators and anchors."""
    from toolnexus.tools.builtins import _grep

    (tmp_path / "a.txt").write_text(TRICKY_TEXT, encoding="utf-8", newline="")
    grep = next(t for t in builtin_tools(tmp_path) if t.name == "grep")
    screened = await call(grep, pattern=pattern, output_mode="content")
    monkeypatch.setattr(_grep, "file_screen", lambda pattern: None)
    assert await call(grep, pattern=pattern, output_mode="content") == screened
