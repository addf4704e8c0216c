"""`record --tui` in a real tmux pane: `q` and Ctrl-C leave the viewer, the recording goes on."""

from __future__ import annotations

import csv
import json
import shlex
import shutil
import sys
from pathlib import Path

import pytest

from tests.e2e.tmux_pane import REPO, Pane, joined

pytestmark = [
    pytest.mark.tmux,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

TRAIN = """
import os, sys, time
for step in range(1, 6):
    print(f"step={step} loss={1.0 / step:.3f}", flush=True)
    time.sleep(0.1)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)
for step in range(6, 11):
    print(f"step={step} loss={1.0 / step:.3f}", flush=True)
sys.exit(4)
"""
FOREVER = """
import time
step = 0
while True:
    step += 1
    print(f"step={step} loss={1.0 / step:.3f}", flush=True)
    time.sleep(0.1)
"""


def start(pane: Pane, session: Path, script: str, *args: str, width: int, height: int) -> None:
    argv = [
        "env",
        "-u",
        "COLUMNS",
        "-u",
        "LINES",
        sys.executable,
        "-m",
        "gpuherd",
        "record",
        "--tui",
        str(session),
        "--peak-interval",
        "0",
        "--",
        sys.executable,
        "-c",
        script,
        *args,
    ]
    pane.start(
        f"cd {shlex.quote(str(REPO))} && {shlex.join(argv)}; echo GPUHERD_EXIT=$?; sleep 30",
        width,
        height,
    )


def steps(session: Path) -> list[int]:
    with (session / "metrics.csv").open(newline="") as f:
        return [int(r["step"]) for r in csv.DictReader(f) if r["metric"] in ("loss", "train/loss")]


@pytest.mark.parametrize(("width", "height"), [(160, 50), (120, 40), (80, 24)])
def test_q_leaves_the_viewer_and_the_command_is_recorded_to_its_end(
    pane: Pane, tmp_path: Path, width: int, height: int
) -> None:
    session, go = tmp_path / "session", tmp_path / "go"
    start(pane, session, TRAIN, str(go), width=width, height=height)
    screen = pane.wait_for(
        lambda s: "command" in s and "running" in s and "Stop command" in s, timeout_s=30
    )
    pane.keys("q")
    screen = pane.wait_for(lambda s: "kill -INT" in joined(s), timeout_s=20, unwrap=True)
    assert f"gpuherd: left the dashboard; still recording into {session}" in joined(screen)
    assert "GPUHERD_EXIT" not in screen  # still recording
    go.touch()  # the command goes on and ends by itself
    screen = pane.wait_for(lambda s: "GPUHERD_EXIT=" in s, timeout_s=30)
    assert "GPUHERD_EXIT=4" in screen and "Traceback" not in screen
    assert steps(session) == list(range(1, 11))
    meta = json.loads((session / "meta.json").read_text())
    assert meta["exit_code"] == 4 and meta["ended_at"] is not None


def test_ctrl_c_leaves_the_viewer_then_stops_the_command_without_a_traceback_finding(
    pane: Pane, tmp_path: Path
) -> None:
    session = tmp_path / "session"
    start(pane, session, FOREVER, width=120, height=40)
    pane.wait_for(lambda s: "command" in s and "running" in s, timeout_s=30)
    pane.keys("C-c")  # leaves the dashboard, as q does
    pane.wait_for(lambda s: "kill -INT" in joined(s), timeout_s=20, unwrap=True)
    pane.keys("C-c")  # now SIGINT to the command: Python prints its KeyboardInterrupt
    screen = pane.wait_for(lambda s: "GPUHERD_EXIT=" in s, timeout_s=30)
    assert "GPUHERD_EXIT=130" in screen
    assert "KeyboardInterrupt" in (session / "command.log").read_text()
    events = [json.loads(e) for e in (session / "events.jsonl").read_text().splitlines()]
    assert [e["finding"] for e in events if e["kind"] == "finding"] == []
    assert [(e["signal"], e["forwarded"]) for e in events if e["kind"] == "signal"] == [
        ("SIGINT", "SIGINT")
    ]
    assert json.loads((session / "meta.json").read_text())["exit_code"] == 130


@pytest.mark.parametrize(("width", "height"), [(140, 35), (80, 24)])
def test_k_asks_its_question_with_the_keys_that_answer_it_then_stops_the_command(
    pane: Pane, tmp_path: Path, width: int, height: int
) -> None:
    session = tmp_path / "session"
    start(pane, session, FOREVER, width=width, height=height)
    pane.wait_for(lambda s: "command" in s and "running" in s and "Stop command" in s, timeout_s=30)
    pane.keys("k")
    screen = pane.wait_for(lambda s: "Stop the command" in s, timeout_s=20)
    assert "Stop the command" in screen  # the dialog's title
    asked = pane.wait_for(lambda s: "y yes" in s and "Esc no" in s, timeout_s=10)
    assert "Stop the recorded command?" in joined(asked) and "SIGTERM" in joined(asked)
    assert "gpuherd --demo" not in joined(asked)  # a recording needs the GPU, not the demo
    pane.keys("y")
    screen = pane.wait_for(lambda s: "stopped" in s, timeout_s=30)
    pane.keys("q")
    screen = pane.wait_for(lambda s: "GPUHERD_EXIT=" in s, timeout_s=30)
    assert "Traceback" not in screen
