"""Shared fixtures: a deterministic environment for every test."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _quiet_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # Terminal colour and width leak into formatted output; pin them.
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TZ", "UTC")


def pytest_report_header(config: pytest.Config) -> str:
    return f"gpuherd tests, cwd={os.path.basename(os.getcwd())}"
