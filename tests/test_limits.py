"""max_tool_concurrency: explicit > environment > 10, with fall-back."""

from __future__ import annotations

import logging

import pytest

from toolnexus.scheduling import max_tool_concurrency

ENV = "TOOLNEXUS_MAX_TOOL_CONCURRENCY"


def test_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert max_tool_concurrency() == 10


def test_explicit_beats_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "7")
    assert max_tool_concurrency() == 7
    assert max_tool_concurrency(4) == 4
    assert max_tool_concurrency("3") == 3


@pytest.mark.parametrize("bad", [0, -2, "abc", "", " ", True, 2.5, "4.0", "-1", "٣"])
def test_bad_explicit_values_fall_back_to_the_environment(
    bad: object, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(ENV, "6")
    with caplog.at_level(logging.WARNING, logger="toolnexus.scheduling"):
        assert max_tool_concurrency(bad) == 6  # type: ignore[arg-type]
    assert "not a positive integer" in caplog.text


@pytest.mark.parametrize("bad", ["0", "-5", "ten", "1e3"])
def test_bad_environment_values_fall_back_to_the_default(
    bad: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(ENV, bad)
    with caplog.at_level(logging.WARNING, logger="toolnexus.scheduling"):
        assert max_tool_concurrency() == 10
        assert max_tool_concurrency(0) == 10
    assert ENV in caplog.text


def test_blank_environment_is_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "  ")
    assert max_tool_concurrency() == 10
    monkeypatch.setenv(ENV, " 12 ")
    assert max_tool_concurrency() == 12
