"""`gpuherd --queue` in a real tmux pane on fake GPUs: the dashboard watches and launches."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpuherd.queue.jobs import JobState
from gpuherd.queue.liveness import same_process
from gpuherd.queue.store import QueueStore
from tests.e2e.tmux_pane import REPO, Pane
from tests.queue_helpers import GiB, Gpu, ledger_dir, write_script
from tests.recorded import wait_until

pytestmark = [
    pytest.mark.tmux,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

FAKE_DASHBOARD = REPO / "tests" / "monitor_fake.py"
FAKE_GPUS = REPO / "tests" / "queue_fake_gpus.py"
HOLD_JOB = "while [ -e hold ]; do sleep 0.05; done; echo held >> ran.txt"


def _env(state: Path, ledger: Path) -> dict[str, str]:
    return {**os.environ, "GPUHERD_STATE_DIR": str(state), "GPUHERD_LEDGER_DIR": str(ledger)}


def _start(pane: Pane, script: Path, state: Path, ledger: Path, *flags: str) -> None:
    argv = [
        "env",
        "-u",
        "COLUMNS",
        "-u",
        "LINES",
        f"GPUHERD_STATE_DIR={state}",
        f"GPUHERD_LEDGER_DIR={ledger}",
        sys.executable,
        str(FAKE_DASHBOARD),
        str(script),
        "--interval",
        "0.2",
        *flags,
    ]
    command = f"cd {shlex.quote(str(REPO))} && {shlex.join(argv)}; echo GPUHERD_EXIT=$?; sleep 30"
    pane.start(command, 160, 50)


def _add(state: Path, ledger: Path, cwd: Path, name: str, shell: str) -> None:
    out = subprocess.run(
        [
            sys.executable,
            str(FAKE_GPUS),
            "1",
            "queue",
            "add",
            "--name",
            name,
            "--vram",
            "1GiB",
            "--",
            "sh",
            "-c",
            shell,
        ],
        cwd=cwd,
        env=_env(state, ledger),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr


def _row(screen: str, name: str) -> list[str]:
    """The queue row of job `name`, split on blanks (`[]` while there is none)."""
    line = next(
        (
            line
            for line in screen.splitlines()
            if f" {name} " in line
            and (
                "waiting" in line
                or "running" in line
                or "done" in line
                or "launching" in line
                or "failed" in line
            )
        ),
        "",
    )
    return line.strip("│ ").split()


def test_the_dashboard_launches_a_queued_job_and_its_row_turns_done(
    pane: Pane, tmp_path: Path
) -> None:
    script, state, ledger = tmp_path / "gpus.json", tmp_path / "state", ledger_dir(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    write_script(script, [Gpu("GPU-fake-0", total=80 * GiB, used=2 * GiB)])
    _add(state, ledger, work, "hello", "echo hello >> ran.txt")
    _start(pane, script, state, ledger, "--queue", "--settle", "0")
    screen = pane.wait_for(lambda s: "hello" in s and "done" in _row(s, "hello"), timeout_s=60)
    row = _row(screen, "hello")
    # Job 1 on GPU 0, needs 1 GiB, no peak (no process on the fake GPU), exit code 0 and how
    # long it ran, nothing to explain.
    assert row[:9] == ["1", "hello", "done", "0", "1", "GiB", "-", "0", "·"]
    assert re.fullmatch(r"\d+:\d\d", row[9]) and row[10:] == ["-"]
    assert (work / "ran.txt").read_text() == "hello\n"
    assert "1 done" in screen and "runner pid" in screen

    # A second runner of this user refuses while the dashboard runs the queue.
    second = subprocess.run(
        [sys.executable, "-m", "gpuherd", "queue", "run"],
        cwd=REPO,
        env=_env(state, ledger),
        capture_output=True,
        text=True,
        timeout=60,
    )
    holder = (state / "runner.lock").read_text().strip()
    assert second.returncode == 2
    assert second.stderr == (
        f"gpuherd: queue: another `gpuherd queue run` (pid {holder}) "
        f"already runs the queue in {state}; stop it first (one runner "
        "per user)\n"
    )

    # A job that runs on: q leaves the dashboard, the job keeps running and finishes.
    (work / "hold").touch()
    _add(state, ledger, work, "held", HOLD_JOB)
    pane.wait_for(lambda s: " held " in s and "running" in _row(s, "held"), timeout_s=60)
    pane.keys("q")
    screen = pane.wait_for(lambda s: "GPUHERD_EXIT=" in s, timeout_s=30)
    assert "GPUHERD_EXIT=0" in screen and "Traceback" not in screen
    assert "gpuherd: queue: runner stopped; 1 running job(s) keep running" in screen
    store = QueueStore.open(state)
    try:
        job = store.jobs([JobState.RUNNING])[0]
        assert job.spec.name == "held" and job.pid is not None
        assert same_process(job.pid, job.pid_start_time)
    finally:
        store.close()
    (work / "hold").unlink()
    wait_until(lambda: (work / "ran.txt").read_text() == "hello\nheld\n", timeout_s=30)


def test_without_a_queue_the_dashboard_is_unchanged_and_creates_none(
    pane: Pane, tmp_path: Path
) -> None:
    script, state, ledger = tmp_path / "gpus.json", tmp_path / "state", tmp_path / "ledger"
    write_script(script, [Gpu("GPU-fake-0", total=80 * GiB, used=2 * GiB)])
    _start(pane, script, state, ledger)
    screen = pane.wait_for(lambda s: "GPU-fake-0" in s and "Processes" in s, timeout_s=30)
    pane.wait_for(lambda s: "Processes" in s, timeout_s=2)  # a few more frames
    screen = pane.text()
    assert "Queue" not in screen and "JOB" not in screen and "no queue" not in screen
    pane.keys("q")
    screen = pane.wait_for(lambda s: "GPUHERD_EXIT=" in s, timeout_s=30)
    assert "GPUHERD_EXIT=0" in screen
    assert not state.exists() and not ledger.exists()
