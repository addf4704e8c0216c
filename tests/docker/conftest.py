"""Fixtures of the real-engine tests: the engine, the test image, containers removed afterwards.

Required in CI (`CI=true`): there a missing engine fails every test here. On a developer
machine they are skipped, and `-ra` prints the reason.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from tests.docker_env import (
    IMAGE,
    Containers,
    PrivateEngine,
    PrivatePodman,
    build_image,
    engine_problem,
    in_ci,
)


def _unusable(problem: str) -> None:
    if in_ci():
        pytest.fail(f"CI needs a Docker engine for the docker tests: {problem}", pytrace=False)
    pytest.skip(problem)


@pytest.fixture(scope="session")
def docker_engine() -> str:
    """The image name, once the machine's engine answers and holds the test image."""
    problem = engine_problem()
    if problem is not None:
        _unusable(problem)
    return build_image()


@pytest.fixture
def containers(docker_engine: str) -> Iterator[Containers]:
    """Starts containers on the machine's engine; all of them are removed after the test."""
    started = Containers(image=docker_engine)
    yield started
    started.remove_all()


@pytest.fixture
def private_engine(docker_engine: str) -> Iterator[PrivateEngine]:
    """A `dockerd` of the test's own, free to stop and start, with the test image."""
    if os.geteuid() != 0 or shutil.which("dockerd") is None:
        _unusable("a private dockerd needs root and the dockerd binary")
    engine = PrivateEngine()
    try:
        engine.start()
        build_image(IMAGE, engine.env)
        yield engine
    finally:
        engine.close()


@pytest.fixture
def private_podman() -> Iterator[PrivatePodman]:
    """podman's Docker-compatible API on a private socket; skipped without podman, even in CI
    (`.ci/run` installs Docker's engine only)."""
    if os.geteuid() != 0 or shutil.which("podman") is None:
        pytest.skip(
            "podman's API service needs root and the podman command (apt-get install podman)"
        )
    podman = PrivatePodman()
    try:
        podman.start()
        yield podman
    finally:
        podman.close()
