"""A real headless Chromium, driven over the DevTools protocol on a pipe (no extra packages).

``Browser.open(path)`` loads a page; ``evaluate`` runs an expression in it and returns its
value. Tests use it to read the DOM a report built, time how long it took, and screenshot it.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or (
    "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None
)
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-pipe",
]

needs_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="Debian's chromium is not installed (.ci/run installs it: apt-get install -y chromium)",
)


class Browser:
    """One Chromium process and one page in it."""

    def __init__(self, width: int = 1400, height: int = 800) -> None:
        assert CHROMIUM is not None
        self.profile = tempfile.TemporaryDirectory(prefix="tn-chromium-")
        to_child, self._write = os.pipe()
        self._read, from_child = os.pipe()

        def wire() -> None:  # the pipe protocol: the browser reads fd 3 and writes fd 4
            reading, writing = os.dup(to_child), os.dup(from_child)  # neither is 3 or 4 now
            os.dup2(reading, 3)
            os.dup2(writing, 4)

        self.process = subprocess.Popen(
            [CHROMIUM, *FLAGS, f"--user-data-dir={self.profile.name}", "about:blank"],
            preexec_fn=wire,  # dup2 only, before exec
            close_fds=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_child)
        os.close(from_child)
        self._buffer = b""
        self._next = 0
        self.events: list[dict[str, Any]] = []
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        self.send("Page.enable", session=True)
        self.send("Runtime.enable", session=True)
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=True,
        )

    def _message(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            chunk = os.read(self._read, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed its DevTools pipe")
            self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\0")
        message: dict[str, Any] = json.loads(raw)
        return message

    def send(
        self, method: str, params: dict[str, Any] | None = None, *, session: bool = False
    ) -> Any:
        self._next += 1
        request: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            request["sessionId"] = self.session
        os.write(self._write, json.dumps(request).encode() + b"\0")
        while True:
            message = self._message()
            if message.get("id") == self._next:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def wait_for(self, method: str) -> dict[str, Any]:
        for index, event in enumerate(self.events):
            if event.get("method") == method:
                return self.events.pop(index)
        while True:
            message = self._message()
            if message.get("method") == method:
                return message
            self.events.append(message)

    def open(self, path: Path) -> None:
        """Load ``path`` and wait for its load event."""
        self.events.clear()
        self.send("Page.navigate", {"url": path.resolve().as_uri()}, session=True)
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        result = self.send(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path) -> None:
        data = self.send("Page.captureScreenshot", {"format": "png"}, session=True)["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, OSError):
            self.send("Browser.close")
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._read)
        os.close(self._write)
        self.profile.cleanup()
