"""Shared fixtures: a deterministic environment for every test."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _quiet_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # Terminal colour and width leak into formatted output; pin them.
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TZ", "UTC")


@pytest.fixture
def utc_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Local time is UTC for the test: logs stamp local time without a zone, so parsed times
    do not depend on the machine. `time.tzset()` makes the C library read `TZ` again."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def pytest_report_header(config: pytest.Config) -> str:
    return f"gpuherd tests, cwd={os.path.basename(os.getcwd())}"
