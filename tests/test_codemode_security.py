"""Programs that try to escape or exhaust the sandbox: each is contained, clearly, and the next
run on the same runtime succeeds. Nothing reaches the host: the probes below check the host's
file system and environment were not touched."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from toolnexus.codemode import run_program
from toolnexus.codemode.runtimes import MontyRuntime, V8Runtime

SECRET = "toolnexus-test-secret-value"

PYTHON_ESCAPES = [
    "import os\nos.environ['TOOLNEXUS_TEST_SECRET']",
    "import os\nos.getenv('TOOLNEXUS_TEST_SECRET')",
    "import os\nos.system('touch {marker}')",
    "import subprocess\nsubprocess.run(['touch', '{marker}'])",
    "import socket\nsocket.socket().connect(('127.0.0.1', 9))",
    "import ctypes\nctypes.CDLL(None)",
    "open('{marker}', 'w').write('x')",
    "open('/etc/passwd').read()",
    "().__class__.__bases__[0].__subclasses__()",
    "(lambda: 0).__globals__",
    "getattr(getattr(print, '__self__'), '__import__')('os')",
    "eval(\"__import__('os').system('touch {marker}')\")",
    "exec(\"import os\\nos.system('touch {marker}')\")",
    "import sys\nsys.modules['os'].system('touch {marker}')",
    "__import__('os').system('touch {marker}')",
    "import pathlib\npathlib.Path('{marker}').write_text('x')",
]

JS_ESCAPES = [
    "return Deno.env.get('TOOLNEXUS_TEST_SECRET')",
    "return process.env.TOOLNEXUS_TEST_SECRET",
    "return require('fs').writeFileSync('{marker}', 'x')",
    "return globalThis.Deno.writeTextFileSync('{marker}', 'x')",
    "return await fetch('http://127.0.0.1:9/')",
    "return await import('https://example.com/x.js')",
    "return await import('npm:left-pad')",
    "return await import('node:fs')",
    "return await import('file:///etc/passwd')",
    "const c = (async () => {}).constructor; return await c('return Deno.readTextFileSync(\"/etc/passwd\")')()",
    "return new Function('return this')().Deno.env.toObject()",
    "return await new Promise((r, j) => { const w = new Worker('data:text/javascript,postMessage(1)', {type: 'module'}); w.onmessage = r; w.onerror = j })",
    "return Deno.run({cmd: ['touch', '{marker}']})",
    "return WebAssembly.compile(new Uint8Array([0]))",
]


@pytest.fixture(autouse=True)
def secret_in_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLNEXUS_TEST_SECRET", SECRET)


def _assert_contained(out: dict[str, object], marker: Path) -> None:
    assert SECRET not in repr(out)
    assert not marker.exists()
    if "error" in out:
        error = out["error"]
        assert isinstance(error, dict)
        assert error["kind"] in {"exception", "type_error", "abort", "invalid_output"}
        assert error["message"]
    else:  # nothing escaped, and nothing dangerous came back
        assert "result" in out


ESCAPES = [("python", e) for e in PYTHON_ESCAPES] + [("javascript", e) for e in JS_ESCAPES]


@pytest.mark.parametrize(("language", "escape"), ESCAPES)
async def test_escapes_are_contained(language: str, escape: str, tmp_path: Path) -> None:
    marker = tmp_path / "escaped"
    # Monty's type check would refuse most attempts before they run: let each one really run.
    runtime = MontyRuntime(timeout=5, type_check=False) if language == "python" else V8Runtime()
    try:
        out = await run_program(escape.replace("{marker}", str(marker)), [], runtime=runtime)
        _assert_contained(out, marker)
        again = "1 + 1" if language == "python" else "return 1 + 1"
        assert await run_program(again, [], runtime=runtime) == {"result": 2, "logs": []}
    finally:
        await runtime.aclose()


async def test_a_js_program_cannot_start_a_worker() -> None:
    runtime = V8Runtime(timeout=5)
    try:
        code = "const w = new Worker('data:text/javascript,1', {type: 'module'}); return 1"
        out = await run_program(code, [], runtime=runtime)
        assert out["error"]["kind"] == "exception"
        assert "Worker is not defined" in out["error"]["message"]
    finally:
        await runtime.aclose()


async def test_the_deno_child_gets_no_environment(tmp_path: Path) -> None:
    runtime = V8Runtime(timeout=5)
    try:
        child = await asyncio.to_thread(runtime._start)
        await child.attach()
        environ_file = Path(f"/proc/{child.process.pid}/environ")
        environ = (await asyncio.to_thread(environ_file.read_bytes)).split(b"\0")
        child.detach()
        await asyncio.to_thread(child.finish)
        assert not any(SECRET.encode() in entry for entry in environ)
        assert all(
            entry.split(b"=")[0] in {b"DENO_DIR", b"NO_COLOR", b"DENO_NO_UPDATE_CHECK", b""}
            for entry in environ
        )
    finally:
        await runtime.aclose()


def test_secret_is_really_in_the_host_environment() -> None:
    # guards the tests above: they would pass vacuously if the variable were not set
    assert os.environ["TOOLNEXUS_TEST_SECRET"] == SECRET
