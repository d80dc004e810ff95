"""The report's page: ``report.html`` with ``report.css`` and ``report.js`` inlined.

The script reads the run from a ``<script type="application/json">`` element and draws it with
``textContent`` and attributes only: nothing from the run is ever parsed as markup. Rows are
virtualised (only the rows and the bars in view are in the document), and bars narrower than a
pixel in a crowded row are merged into one "N calls" mark, so ten thousand calls stay
responsive.
"""

from __future__ import annotations

import functools
from importlib import resources

__all__ = ["page"]


@functools.cache
def _parts() -> tuple[str, str]:
    here = resources.files("toolnexus.view")
    page = here.joinpath("report.html").read_text(encoding="utf-8")
    page = page.replace("{style}", here.joinpath("report.css").read_text(encoding="utf-8"))
    page = page.replace("{script}", here.joinpath("report.js").read_text(encoding="utf-8"))
    before, _, after = page.partition("{data}")
    return before, after


def page(data: str) -> str:
    """The page with ``data`` (JSON already made safe to sit in a script element) embedded."""
    before, after = _parts()
    return before + data + after
