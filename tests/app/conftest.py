"""Fixtures that keep the dashboard tests deterministic."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def no_cursor_blink(monkeypatch: pytest.MonkeyPatch) -> None:
    # A blinking cursor makes a snapshot depend on when the frame was taken.
    from textual.widgets import Input

    monkeypatch.setattr(Input, "cursor_blink", False)


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # The header prints local time; pin the zone so the snapshots match anywhere.
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()
