"""Training-log tasks in a real tmux pane: a replayed session, a followed log, a recording."""

from __future__ import annotations

import csv
import json
import shlex
import shutil
import sys
from pathlib import Path

import pytest

from tests.e2e.tmux_pane import REPO, Pane

TASKS = REPO / "tests" / "data" / "sessions" / "tasks"

pytestmark = [
    pytest.mark.tmux,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


def start(pane: Pane, *args: str, width: int = 160, height: int = 50) -> None:
    # The test environment pins COLUMNS for formatted output; the pane has its own size.
    argv = ["env", "-u", "COLUMNS", "-u", "LINES", sys.executable, "-m", "gpuherd", *args]
    command = f"cd {shlex.quote(str(REPO))} && {shlex.join(argv)}; echo GPUHERD_EXIT=$?; sleep 30"
    pane.start(command, width, height)


def test_replay_shows_the_recorded_tasks_and_their_detail(pane: Pane) -> None:
    start(pane, "--replay", str(TASKS), "--speed", "4")
    screen = pane.wait_for(
        lambda s: "Tasks (2)" in s and "acc 0.7731" in s and s.count("NaN") >= 2, timeout_s=30
    )
    row = next(line for line in screen.splitlines() if "command" in line and "acc" in line)
    assert "step 300" in row and "11.5 it/s" in row
    detr = next(line for line in screen.splitlines() if "detr/train.log" in line)
    assert detr.count("NaN") == 2  # the loss cell and the health badge
    pane.keys("t", "Enter")
    pane.wait_for(
        lambda s: (
            "loss over steps" in s
            and "validation over steps" in s
            and "val/acc" in s
            and "0.7731" in s
            and "NVIDIA H100 80GB" in s
        )
    )
    pane.keys("Escape")
    pane.wait_for(lambda s: "Tasks (2)" in s)
    pane.keys("q")
    screen = pane.wait_for(lambda s: "GPUHERD_EXIT=" in s)
    assert "GPUHERD_EXIT=0" in screen and "Traceback" not in screen


def test_a_followed_log_updates_its_row_as_lines_are_written(pane: Pane, tmp_path: Path) -> None:
    log = tmp_path / "run" / "train.log"
    start(pane, "--log", str(log), "--log", str(tmp_path))
    screen = pane.wait_for(lambda s: "Tasks (2)" in s and "waiting" in s)
    assert "directory" in screen  # a directory given as a log: its row says why
    log.parent.mkdir()
    with log.open("w") as f:
        f.write("step=10 loss=2.3100 lr=0.001\n")
    pane.wait_for(lambda s: "2.31" in s and "step 10" in s)
    with log.open("a") as f:
        f.write("step=20 loss=nan lr=0.001\n")
    screen = pane.wait_for(lambda s: "step 20" in s and "NaN" in s)
    pane.keys("q")
    screen = pane.wait_for(lambda s: "GPUHERD_EXIT=" in s)
    assert "GPUHERD_EXIT=0" in screen and "Traceback" not in screen


def test_tui_record_records_the_command_and_returns_its_exit_code(
    pane: Pane, tmp_path: Path
) -> None:
    session = tmp_path / "session"
    script = (
        "import time\nfor i in range(1, 6):\n    print(f'step={i} loss={1.0 / i:.3f}', "
        "flush=True)\n    time.sleep(0.2)\nraise SystemExit(4)\n"
    )
    start(pane, "--tui", "--record", str(session), "--", sys.executable, "-c", script)
    screen = pane.wait_for(lambda s: "recording saved in" in s, timeout_s=30)
    assert "command" in screen and "step 5" in screen
    pane.keys("q")
    screen = pane.wait_for(lambda s: "GPUHERD_EXIT=" in s)
    assert "GPUHERD_EXIT=4" in screen and "Traceback" not in screen
    meta = json.loads((session / "meta.json").read_text())
    assert meta["exit_code"] == 4 and meta["ended_at"] is not None
    assert (session / "summary.json").is_file()
    assert "train/loss" in (session / "metrics.csv").read_text()


def test_tui_record_follows_eight_logs_written_at_100_lines_per_second(
    pane: Pane, tmp_path: Path
) -> None:
    # Eight logs in four directories, written while their tails start: with collectors run as
    # thread workers only four logs showed on 2 cores and the session never closed; placing
    # watches while events arrived could freeze the dashboard.
    logs = [tmp_path / "runs" / f"run{d}" / f"rank{i}.log" for d in range(4) for i in range(2)]
    for log in logs:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("step=0 loss=1.0\n")
    script = (
        "import sys, time\n"
        "files = [open(p, 'a') for p in sys.argv[1:]]\n"
        "start = time.monotonic()\n"
        "for n in range(1, 201):\n"
        "    for f in files:\n"
        "        f.write(f'step={n} loss={1 / n:.5f}\\n'); f.flush()\n"
        "    time.sleep(max(0, start + n / 100 - time.monotonic()))\n"
        "print('step=1 loss=0.5', flush=True)\n"
    )
    session = tmp_path / "session"
    start(
        pane,
        "--tui",
        "--record",
        str(session),
        "--log",
        str(tmp_path / "runs" / "*" / "*.log"),
        "--",
        sys.executable,
        "-c",
        script,
        *map(str, logs),
    )
    screen = pane.wait_for(lambda s: "recording saved in" in s, timeout_s=60)
    assert "Tasks (9)" in screen
    pane.keys("q")
    screen = pane.wait_for(lambda s: "GPUHERD_EXIT=" in s, timeout_s=30)
    assert "GPUHERD_EXIT=0" in screen and "Traceback" not in screen
    with (session / "metrics.csv").open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["metric"] in ("loss", "train/loss")]
    steps: dict[str, set[int]] = {}
    for row in rows:
        steps.setdefault(row["task"], set()).add(int(row["step"]))
    assert steps == {"command": {1}, **{str(log): set(range(201)) for log in logs}}
