"""`gpuherd demo` and `gpuherd --demo` in a real tmux pane: the bundled H200 session plays."""

from __future__ import annotations

import re
import shlex
import shutil
import sys

import pytest

from tests.e2e.tmux_pane import REPO, Pane

pytestmark = [
    pytest.mark.tmux,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


def command_row(screen: str) -> str | None:
    """The tasks panel's row of the recorded command's own output."""
    return next((line for line in screen.splitlines() if re.match(r"│\s*command\s", line)), None)


@pytest.mark.parametrize(
    "argv", [["demo", "--speed", "4"], ["--demo", "--speed", "4"]], ids=["subcommand", "flag"]
)
def test_the_demo_plays_the_bundled_session(pane: Pane, argv: list[str]) -> None:
    # The test environment pins COLUMNS for formatted output; the pane has its own size.
    command = shlex.join(
        ["env", "-u", "COLUMNS", "-u", "LINES", sys.executable, "-m", "gpuherd", *argv]
    )
    pane.start(f"cd {shlex.quote(str(REPO))} && {command}; echo GPUHERD_EXIT=$?; sleep 30", 160, 50)
    # The recorded training: one H200 on host "vm", the Lightning job holding 7.0 GiB.
    screen = pane.wait_for(
        lambda s: "train_lightning.py --epochs 8" in s and "7.0 GiB" in s, timeout_s=30
    )
    header = screen.splitlines()[0]
    assert "DEMO" in header and "vm" in header and "driver 580.159.04" in header
    assert "NVIDIA H200" in screen and "/ 140.4 GiB" in screen
    assert "1148" in screen and "root" in screen
    screen = pane.wait_for(lambda s: "Tasks (2)" in s and "version_0/metrics.csv" in s)
    assert "command" in screen
    # Epoch 1 of 8: the command's bar counts the epoch's batches, so its time left is no ETA
    # of the run (it once showed `ETA 0:00`, the end of the epoch's validation bar).
    screen = pane.wait_for(lambda s: command_row(s) is not None and "ep 1" in command_row(s))
    assert re.search(r"\b\d+:\d\d\b", command_row(screen) or "") is None, screen
    pane.keys("q")
    screen = pane.wait_for(lambda s: "GPUHERD_EXIT=" in s)
    assert "GPUHERD_EXIT=0" in screen and "Traceback" not in screen
