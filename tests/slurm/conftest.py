"""Fixtures of the tests on the machine's real Slurm: the node, jobs cancelled afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.slurm_env import SlurmJobs, in_ci, slurm_problem


@pytest.fixture(autouse=True)
def _slurm_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests here read the machine's Slurm (tests/conftest.py turns it off elsewhere)."""
    monkeypatch.delenv("GPUHERD_SLURM", raising=False)


@pytest.fixture(scope="session")
def slurm_node() -> None:
    """Passes once this node answers in Slurm; fails under CI=true, skips elsewhere."""
    problem = slurm_problem()
    if problem is not None:
        if in_ci():
            pytest.fail(f"CI needs a Slurm for the slurm tests: {problem}", pytrace=False)
        pytest.skip(problem)


@pytest.fixture
def slurm_jobs(slurm_node: None, tmp_path: Path) -> Iterator[SlurmJobs]:
    """Submits real jobs; every one is cancelled after the test."""
    jobs = SlurmJobs(tmp_path)
    yield jobs
    jobs.cancel_all()
