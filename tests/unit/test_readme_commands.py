"""The README's two commands: `.ci/run` runs its test command verbatim; what it installs keeps
the suite's test groups."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def readme_section_commands(title: str) -> list[str]:
    """The `sh` code blocks' lines of the README's section `title`."""
    text = (ROOT / "README.md").read_text()
    section = text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    return [line for block in blocks for line in block.splitlines() if line.strip()]


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    [command] = readme_section_commands("Install and test")
    ci_lines = [
        line
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert ci_lines[-1] == command
    assert command.endswith("python -m pytest")


def test_the_readme_commands_install_from_this_checkout() -> None:
    [start] = readme_section_commands("Install and run")
    [test] = readme_section_commands("Install and test")
    assert "pip install -q ." in start and start.endswith(".venv/bin/gpuherd")
    assert "-e '.[test]'" in test


@pytest.mark.xdist_group("readme")
def test_the_workers_apply_the_suites_groups(request: pytest.FixtureRequest) -> None:
    # Under pytest 9.2, pytest-xdist 3.8 applied no `xdist_group`: the Docker, Slurm, GPU and
    # clock-bound tests ran side by side (the `[test]` extra keeps pytest below 9).
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        pytest.skip("checks pytest-xdist's groups: run with workers (`-n 2`)")
    assert request.node.nodeid.endswith("@readme")
