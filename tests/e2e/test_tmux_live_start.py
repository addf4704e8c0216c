"""The live dashboard's first frame, in a real tmux pane, over a fake NVML (no GPU needed)."""

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

WIDTH, HEIGHT = 160, 50
ESCAPES = re.compile(r"\x1b\[[0-9;?<>=$]*[ -/]*[@-~]|\x1b[PX^_\]].*?(?:\x07|\x1b\\)|\x1b.")


@pytest.fixture
def gpu_process() -> Iterator[int]:
    """A real process of this user for the fake GPU to list (its user comes from /proc)."""
    child = subprocess.Popen(["sleep", "600"])
    yield child.pid
    child.kill()
    child.wait()


def first_frame(output: str) -> str:
    """The text of the first full frame: everything written up to its bottom line.

    The first frame paints every line of the terminal in order; later frames repaint only
    what changed, so text that shows up only in a later frame comes after this point.
    """
    bottom = output.find(f"\x1b[{HEIGHT};1H")
    assert bottom > 0, "the dashboard never drew a full frame"
    return ESCAPES.sub("", output[:bottom])


def test_the_first_frame_shows_the_gpu_and_its_process_with_user(
    pane: Pane, gpu_process: int, tmp_path: Path
) -> None:
    output = tmp_path / "pane.out"
    # The test environment pins COLUMNS for formatted output; the pane has its own size.
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
        f"cd {shlex.quote(str(REPO))} && {shlex.join(argv)}; sleep 30", WIDTH, HEIGHT, output=output
    )
    user = re.escape(getpass.getuser()[:8])
    row = re.compile(rf"│\s+0\s+{gpu_process}\s+{user}")
    pane.wait_for(lambda s: GPU_NAME in s and row.search(s) is not None)
    pane.keys("q")
    pane.wait_for(lambda s: GPU_NAME not in s)  # the dashboard has let go of the terminal
    first = first_frame(output.read_text(encoding="utf-8", errors="replace"))
    assert GPU_NAME in first and "╭─ Processes" in first
    # The process row with its user, GPU memory and command is in that same first frame,
    # not one or two frames later: the collectors ran while Textual was being imported, and
    # the table had its columns before its first paint.
    assert row.search(first), first[-3000:]
    line = next(line for line in first.splitlines() if row.search(line))
    assert "4.0 GiB" in line and "sleep 600" in line
