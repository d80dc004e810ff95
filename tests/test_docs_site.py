"""The documentation site builds with ``mkdocs build --strict``: guide pages plus an API reference
generated from the docstrings, where a broken link or cross-reference fails the build."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MKDOCS = [sys.executable, "-m", "mkdocs", "build", "--strict"]


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [*MKDOCS, "-f", str(config), "-d", str(site)],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        check=False,
    )


def copy_of_the_site(tmp_path: Path) -> Path:
    """The repository's docs and config in a scratch directory, pointing at the real sources."""
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    config = (ROOT / "mkdocs.yml").read_text().replace("paths: [src]", f"paths: [{ROOT / 'src'}]")
    (tmp_path / "mkdocs.yml").write_text(config)
    return tmp_path / "mkdocs.yml"


@pytest.mark.timeout(240)
def test_the_site_builds_strictly_with_the_reference_of_every_public_name(tmp_path: Path) -> None:
    result = build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert result.returncode == 0, result.stderr
    tools_page = (tmp_path / "site" / "reference" / "tools" / "index.html").read_text()
    client_page = (tmp_path / "site" / "reference" / "client" / "index.html").read_text()
    for anchor in ("toolnexus.tools.Tool", "toolnexus.tools.tool", "toolnexus.tools.ToolHints"):
        assert f'id="{anchor}"' in tools_page
    assert 'id="toolnexus.client.Client.run_sync"' in client_page
    # a docstring cross-reference became a link to the object it names
    assert 'href="../scheduling/#toolnexus.scheduling.Outcome"' in tools_page


@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    "broken",
    [
        "See [`Nothing`][toolnexus.tools.NoSuchThing].",  # a cross-reference to no object
        "See [the guide](no-such-page.md).",  # a link to no page
    ],
)
def test_a_broken_reference_fails_the_build(tmp_path: Path, broken: str) -> None:
    config = copy_of_the_site(tmp_path)
    page = tmp_path / "docs" / "reference" / "tools.md"
    page.write_text(page.read_text() + "\n" + broken + "\n")
    result = build(config, tmp_path / "site")
    assert result.returncode != 0
    assert "NoSuchThing" in result.stderr or "no-such-page.md" in result.stderr
