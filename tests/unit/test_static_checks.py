"""The static checks configured in pyproject.toml run with the suite, so CI fails on them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _tool(name: str) -> str:
    path = Path(sys.executable).with_name(name)
    if not path.exists():
        pytest.fail(f"{name} is not installed next to {sys.executable}: install the [test] extra")
    return str(path)


def test_ruff_finds_nothing() -> None:
    out = subprocess.run(
        [_tool("ruff"), "check", "--no-cache", "."], cwd=REPO, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_code_is_as_ruff_format_writes_it() -> None:
    # One layout for everyone: a diff shows what changed, never how an editor wraps lines.
    out = subprocess.run(
        [_tool("ruff"), "format", "--check", "--no-cache", "."],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.slow
def test_mypy_finds_nothing() -> None:
    # The files mypy checks, and how strictly, are set in pyproject.toml.
    out = subprocess.run(
        [_tool("mypy"), "--no-incremental"], cwd=REPO, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr
