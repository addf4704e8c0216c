"""The plain first frame in a real tmux pane: GPUs and processes first, then the dashboard."""

from __future__ import annotations

import getpass
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.live_fake_nvml import GPU_NAME
from tests.e2e.tmux_pane import REPO, Pane

pytestmark = [
    pytest.mark.tmux,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

ALT_SCREEN = "\x1b[?1049h"
ESCAPES = re.compile(r"\x1b\[[0-9;?<>=$]*[ -/]*[@-~]|\x1b[PX^_\]].*?(?:\x07|\x1b\\)|\x1b.")


@pytest.fixture
def gpu_process() -> Iterator[int]:
    """A real process of this user for the fake GPU to list (its user comes from /proc)."""
    child = subprocess.Popen(["sleep", "600"])
    yield child.pid
    child.kill()
    child.wait()


def test_gpus_and_processes_come_first_then_the_dashboard_with_nothing_left_after_q(
    pane: Pane, gpu_process: int, tmp_path: Path
) -> None:
    output = tmp_path / "pane.out"
    argv = [
        "env",
        "-u",
        "COLUMNS",
        "-u",
        "LINES",
        sys.executable,
        "-m",
        "tests.e2e.live_fake_nvml",
        str(gpu_process),
    ]
    pane.start(
        f"cd {shlex.quote(str(REPO))} && echo before-gpuherd && {shlex.join(argv)}; sleep 30",
        120,
        40,
        output=output,
    )
    user = re.escape(getpass.getuser()[:8])
    row = re.compile(rf"│\s+0\s+{gpu_process}\s+{user}\s+4\.0 GiB\s.*sleep 600")
    dashboard = pane.wait_for(lambda s: "/ Filter" in s and row.search(s) is not None)
    # The dashboard drew over every line of the plain frame (its GPU line reads `│   0 NAME`).
    assert f"│ ▶ 0 {GPU_NAME}" in dashboard and f"│   0 {GPU_NAME}" not in dashboard
    pane.keys("q")
    after = pane.wait_for(lambda s: GPU_NAME not in s)
    assert "before-gpuherd" in after
    assert "│" not in after and "PID" not in after and "VRAM" not in after

    stream = output.read_text(encoding="utf-8", errors="replace")
    assert stream.count(ALT_SCREEN) >= 2, "no plain frame before the dashboard's"
    plain = stream[
        stream.index(ALT_SCREEN) : stream.index(ALT_SCREEN, stream.index(ALT_SCREEN) + 1)
    ]
    lines = [ESCAPES.sub("", line) for line in re.split(r"\x1b\[\d+;1H", plain)]
    assert any(f"│   0 {GPU_NAME}" in line for line in lines), lines
    assert any("VRAM 5.0 / 80.0 GiB" in line and "UTIL  97%" in line for line in lines), lines
    assert any(row.search(line) for line in lines), lines
    assert stream.index("before-gpuherd") < stream.index(ALT_SCREEN)


def test_replay_has_no_plain_frame(pane: Pane, tmp_path: Path) -> None:
    output = tmp_path / "pane.out"
    argv = [
        "env",
        "-u",
        "COLUMNS",
        "-u",
        "LINES",
        sys.executable,
        "-m",
        "gpuherd",
        "replay",
        "tests/data/sessions/e2e",
    ]
    pane.start(
        f"cd {shlex.quote(str(REPO))} && {shlex.join(argv)}; sleep 30", 120, 40, output=output
    )
    pane.wait_for(lambda s: "/ Filter" in s)
    pane.keys("q")
    pane.wait_for(lambda s: "/ Filter" not in s)
    stream = output.read_text(encoding="utf-8", errors="replace")
    assert stream.count(ALT_SCREEN) == 1  # the dashboard's own, nothing before it
