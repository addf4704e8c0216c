"""The live dashboard in a real tmux pane while a real engine stops and starts again."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
import time
from collections.abc import Iterator

import pytest

from tests.docker_env import IMAGE, PrivateEngine, docker
from tests.e2e.tmux_pane import REPO, Pane

pytestmark = [
    pytest.mark.docker,
    pytest.mark.tmux,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

NAME = "gpuherd-test-p"  # fits the NAME column


@pytest.fixture
def pane() -> Iterator[Pane]:
    pane = Pane(f"gpuherd-containers-{time.monotonic_ns()}")
    yield pane
    pane.tmux("kill-server")


def containers_line(screen: str) -> str:
    """The containers panel's top border, or '' when the panel is not on screen."""
    return next((line for line in screen.splitlines() if "Containers (" in line), "")


def test_the_panel_marks_a_stopped_engine_and_recovers_when_it_is_back(
    pane: Pane, private_engine: PrivateEngine
) -> None:
    env = private_engine.env
    docker(
        "run",
        "-d",
        "--restart",
        "always",
        "--network",
        "none",
        "--stop-timeout",
        "1",
        "--memory",
        "64m",
        "--name",
        NAME,
        IMAGE,
        "sleep",
        "3600",
        env=env,
    )
    argv = [sys.executable, "-m", "gpuherd", "--interval", "0.5"]
    environ = f"DOCKER_HOST={shlex.quote(env['DOCKER_HOST'])} TZ=UTC"
    pane.start(
        f"cd {shlex.quote(str(REPO))} && env {environ} {shlex.join(argv)}; "
        "echo GPUHERD_EXIT=$?; sleep 30",
        160,
        50,
    )
    # The container's row, its memory limit read from the engine, and no error mark.
    screen = pane.wait_for(lambda s: re.search(rf"{NAME}\s.*/ 64\.0 MiB", s) is not None, 60)
    assert "Containers (1)" in containers_line(screen)
    assert "not running" not in screen

    private_engine.stop()
    down = f"the container engine at {env['DOCKER_HOST']} is not running"
    screen = pane.wait_for(lambda s: "not running" in s, 60)
    # The mark is on the panel's bottom border (tmux may cut the long line at the pane edge).
    marked = [line for line in screen.splitlines() if "the container engine at" in line]
    assert marked and marked[0].startswith("╰"), screen
    assert down[:60] in screen.replace("\n", "")
    assert "Traceback" not in screen and "GPUHERD_EXIT" not in screen

    private_engine.start()
    # --restart always: the engine starts the container again and the dashboard reads it.
    screen = pane.wait_for(
        lambda s: (
            "not running" not in s and re.search(rf"{NAME}\s+(\S+\s+)?running", s) is not None
        ),
        90,
    )
    assert "Containers (1)" in containers_line(screen)
    assert "GPUHERD_EXIT" not in screen
    pane.keys("q")
    pane.wait_for(lambda s: "GPUHERD_EXIT=0" in s, 30)
    assert os.environ.get("DOCKER_HOST") != env["DOCKER_HOST"]  # the machine's engine untouched
