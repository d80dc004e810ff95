"""Shared fixtures."""

from __future__ import annotations

import pytest

from helpers import Probe


@pytest.fixture
def probe() -> Probe:
    """A fresh probe for the test (see ``helpers.Probe``)."""
    return Probe()
