"""Hostile input to the HTML report: results, model text, tool names and arguments holding
markup are shown as text in a real Chromium, never run or parsed."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from chromium import Browser, needs_chromium
from toolnexus import Session
from toolnexus.view import render
from view_run import HOSTILE, demo_run

pytestmark = needs_chromium


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    opened = Browser(width=1200, height=600)
    try:
        yield opened
    finally:
        opened.close()


ELEMENTS = "[...new Set([...document.querySelectorAll('*')].map(e => e.tagName))]"


def test_hostile_results_leave_no_trace(browser: Browser, tmp_path: Path) -> None:
    result, _ = asyncio.run(demo_run(hostile=True))
    # a hostile tool name and arguments as well (from a log someone else wrote)
    session = Session()
    for event in result.session.events:
        session._append_json(event.type, event.data)
    at = result.session.events[-1].time
    session.log_event(
        "call_timing",
        {"id": HOSTILE, "name": HOSTILE, "lane": 99, "seq": 1, "mode": "parallel",
         "admitted": at, "started": at, "finished": at + 0.01, "ok": False,
         "error": HOSTILE, "resources": {"reads": [HOSTILE], "writes": []}},
    )  # fmt: skip
    page = render(session)
    assert "<script>document.title" not in page and "</svg><svg" not in page
    path = tmp_path / "hostile.html"
    path.write_text(page, encoding="utf-8")
    clean = tmp_path / "clean.html"
    clean.write_text(render(asyncio.run(demo_run())[0].session), encoding="utf-8")
    browser.open(clean)
    expected_elements = browser.evaluate(ELEMENTS)
    browser.open(path)
    assert browser.evaluate("document.body.dataset.readyMs") is not None  # the report ran
    assert browser.evaluate("document.title") == "toolnexus run"
    assert browser.evaluate("document.querySelectorAll('marquee, img, a, iframe').length") == 0
    assert browser.evaluate("document.scripts.length") == 2  # the data and the report's own
    # every bar, opened: the hostile text is shown as text, and adds no element
    shown = browser.evaluate(
        """(() => { const out = [];
        const ids = [...document.querySelectorAll('.bar[data-id]')].map(b => b.dataset.id);
        for (const id of ids) {
          [...document.querySelectorAll('.bar[data-id]')].find(b => b.dataset.id === id).click();
          for (const b of document.querySelectorAll('#details button')) b.click();
          out.push(document.getElementById('details').textContent);
        }
        return out; })()"""
    )
    assert sum(HOSTILE in text for text in shown) >= 4  # results, errors, names, arguments
    assert browser.evaluate("document.title") == "toolnexus run"
    assert browser.evaluate("document.querySelectorAll('marquee, img, a, iframe').length") == 0
    assert browser.evaluate("document.scripts.length") == 2
    assert browser.evaluate("window.location.protocol") == "file:"
    # the same kinds of element as a clean report's (the details pane aside)
    assert set(browser.evaluate(ELEMENTS)) <= set(expected_elements) | {"H3", "PRE", "BUTTON"}
