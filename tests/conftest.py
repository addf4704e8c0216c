"""Shared fixtures: a deterministic environment for every test."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import FrozenInstanceError

import pytest

from parsers.model import LogMetric


def _assign_once(metric: LogMetric, name: str, value: object) -> None:
    """`LogMetric` is immutable by contract, not by a frozen dataclass (see its docstring): in
    tests, a field that is set already cannot be set again, wherever the code doing it is."""
    try:
        getattr(metric, name)
    except AttributeError:  # an empty slot: the constructor filling it
        object.__setattr__(metric, name, value)
        return
    raise FrozenInstanceError(f"cannot assign to field {name!r} of a LogMetric")


def _no_delete(metric: LogMetric, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r} of a LogMetric")


LogMetric.__setattr__ = _assign_once  # type: ignore[method-assign,assignment]
LogMetric.__delattr__ = _no_delete  # type: ignore[method-assign,assignment]


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


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes a test starts (append them): each is killed if still running, and reaped,
    when the test ends, whatever its outcome."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def pytest_report_header(config: pytest.Config) -> str:
    return f"gpuherd tests, cwd={os.path.basename(os.getcwd())}"
